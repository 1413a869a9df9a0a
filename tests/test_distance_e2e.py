"""`python run.py --exp=distance` end to end on a tiny sweep."""

import importlib.metadata
import json
import platform
import socket
import subprocess

import numpy as np
import pytest

from experiments import distance
from src import members
from tests.helpers import ROOT, TINY, read_csv, run_py, scalars


@pytest.fixture(scope='module')
def tiny_run(tmp_path_factory):
  """The sweep's fields from a flagfile, as a researcher keeps a config."""
  root = tmp_path_factory.mktemp('distance')
  (root / 'tiny.flags').write_text('# tiny\n' + '\n'.join(TINY) + '\n')
  proc = run_py('--exp=distance', f'--workdir={root}/run',
                f'--checkpoint_dir={root}/ckpt',
                f'--flagfile={root}/tiny.flags')
  assert proc.returncode == 0, proc.stderr[-3000:]
  return root, proc


def test_results_csv(tiny_run):
  root, _ = tiny_run
  rows = read_csv(root / 'run' / 'results.csv')
  assert list(rows[0]) == distance.COLUMNS + [
      'learning_rate', 'selected', 'validation_accuracy']  # the runner's
  assert [(r['model'], int(r['length']), int(r['seed'])) for r in rows] == [
      (m, L, s) for m in ('attention', 'rnn') for L in (3, 6) for s in (0, 1)]
  for r in rows:
    assert 0.0 <= float(r['accuracy']) <= 1.0
    assert int(r['steps']) == 40 and r['diverged'] == '0'
    assert (r['learning_rate'], r['selected']) == ('0.003', '1')
    assert float(r['wall_s']) > float(r['compile_s']) > 0


def test_summary_recomputed_from_csv(tiny_run):
  root, _ = tiny_run
  rows = read_csv(root / 'run' / 'results.csv')
  summary = json.loads((root / 'run' / 'summary.json').read_text())
  for model in ('attention', 'rnn'):
    for seed in (0, 1):
      acc = {int(r['length']): float(r['accuracy']) for r in rows
             if r['model'] == model and int(r['seed']) == seed}
      expected = 0
      for L in (3, 6):
        if acc[L] < 0.95:
          break
        expected = L
      assert summary['critical_distance'][model]['per_seed'][seed] == expected
    for g in summary['groups']:
      if g['model'] == model:
        acc = [float(r['accuracy']) for r in rows
               if r['model'] == model and int(r['length']) == g['length']]
        assert g['accuracy_per_seed'] == acc
        assert g['mean_accuracy'] == pytest.approx(np.mean(acc))
        lo, hi = g['solved_ci95']
        assert lo <= g['solved_fraction'] <= hi
  for r in rows:
    assert r['solved'] == str(int(float(r['accuracy']) >= 0.95))
    assert r['family'] == ('attention' if r['model'] == 'attention'
                           else 'plain recurrent')
  for c in summary['claims']:
    assert c['verdict'] in ('held', 'did not hold', 'inconclusive') or \
        c['verdict'].startswith('inconclusive (underpowered: '), c
    assert c['test'] and c['note']


def test_config_json_records_provenance(tiny_run):
  root, _ = tiny_run
  config = json.loads((root / 'run' / 'config.json').read_text())
  assert config['config']['lengths'] == [3, 6]
  p = config['provenance']
  if (ROOT / '.git').exists():
    head = subprocess.run(['git', '-C', str(ROOT), 'rev-parse', 'HEAD'],
                          capture_output=True, text=True).stdout.strip()
    assert p['git']['commit'] == head and p['git']['dirty'] in (True, False)
  for name in ('jax', 'jaxlib', 'flax', 'optax', 'orbax-checkpoint', 'numpy',
               'scipy', 'tensorboardX'):
    assert p['versions'][name] == importlib.metadata.version(name)
  assert p['python'] == platform.python_version()
  assert p['hostname'] == socket.gethostname() and p['platform']
  assert p['devices'] and all('cpu' in d.lower() for d in p['devices'])
  assert p['environment']['JAX_PLATFORMS'] == 'cpu'
  flagfile = f'{root}/tiny.flags'
  assert p['flags']['steps'] == '40' and p['flags']['exp'] == 'distance'
  assert p['flag_sources']['steps'] == f'flagfile {flagfile}'
  assert p['flag_sources']['workdir'] == 'flag'
  assert p['flagfiles'] == {flagfile: (root / 'tiny.flags').read_text()}


def test_curves_csv(tiny_run):
  root, _ = tiny_run
  curves = read_csv(root / 'run' / 'curves.csv')
  assert list(curves[0]) == ['group', 'model', 'length', 'seed',
                             'learning_rate', 'step', 'train_loss',
                             'train_accuracy', 'test_accuracy']
  # One row per seed and chunk of 10 steps, every group.
  assert len(curves) == 2 * 2 * 2 * 4
  steps = [int(r['step']) for r in curves if r['group'] == 'rnn_L006'
           and r['seed'] == '1']
  assert steps == [10, 20, 30, 40]
  for r in curves:
    assert 0 <= float(r['test_accuracy']) <= 1


def test_tensorboard_reads_back(tiny_run):
  """Per-seed runs, a test curve, and one HParams experiment for the run."""
  root, _ = tiny_run
  tb = root / 'run' / 'tb'
  acc, loss = scalars(tb / 'attention_L003', 'train/loss')
  assert [s for s, _ in loss] == list(range(1, 41))  # every step, once
  assert all(np.isfinite(v) for _, v in loss)
  assert loss[-1][1] < loss[0][1]  # it learned
  rows = read_csv(root / 'run' / 'results.csv')
  for seed in (0, 1):
    _, seed_loss = scalars(tb / 'attention_L003' / f'seed_{seed}',
                           'train/loss')
    assert [s for s, _ in seed_loss] == list(range(1, 41))
    _, test = scalars(tb / 'attention_L003' / f'seed_{seed}',
                      'test/accuracy')
    # The curve every chunk; its last point is the seed's final test.
    assert [s for s, _ in test] == [10, 20, 30, 40]
    final, = [float(r['accuracy']) for r in rows if r['model'] == 'attention'
              and r['length'] == '3' and int(r['seed']) == seed]
    assert test[-1][1] == pytest.approx(final)
  _, solved = scalars(tb / 'attention_L003', 'test/solved_fraction')
  assert [s for s, _ in solved] == [10, 20, 30, 40]  # a curve, every chunk
  assert '_hparams_/session_start_info' in acc.PluginTagToContent('hparams')
  overview_acc, _ = scalars(tb / 'overview', None)
  assert 'figures/distance' in overview_acc.Tags()['images']
  summary_acc, _ = scalars(tb / 'summary', None)
  from tensorboard.plugins.hparams import metadata
  content = summary_acc.PluginTagToContent('hparams')
  experiment = metadata.parse_experiment_plugin_data(
      content[metadata.EXPERIMENT_TAG])
  domains = {h.name: [v for v in h.domain_discrete.values]
             for h in experiment.hparam_infos}
  assert [v.string_value for v in domains['model']] == ['attention', 'rnn']
  # Integers as strings: the table prints every number to 5 digits.
  assert [v.string_value for v in domains['length']] == ['3', '6']
  assert {m.name.tag for m in experiment.metric_infos} == {
      'test/accuracy', 'test/solved_fraction'}
  # No group writes an experiment of its own (the dashboard would pick one).
  assert metadata.EXPERIMENT_TAG not in acc.PluginTagToContent('hparams')


def test_figure_and_table(tiny_run):
  root, proc = tiny_run
  from tests.helpers import png_pixels
  pixels = png_pixels(root / 'run' / 'distance.png')
  assert pixels.shape[0] > 300 and pixels.shape[1] > 500
  assert pixels.std() > 0.05  # not blank
  assert 'Mean test accuracy and seeds solved' in proc.stdout
  assert 'critical' in proc.stdout


def test_decoys_are_a_task_of_their_own(tmp_path):
  """--decoys: the groups train on the variant (their recipe says so) and
  every claim names it."""
  proc = run_py('--exp=distance', f'--workdir={tmp_path}/run',
                f'--checkpoint_dir={tmp_path}/ckpt', '--models=attention',
                '--lengths=5', '--seeds=2', '--steps=20', '--chunk_steps=10',
                '--batch_size=16', '--eval_examples=64', '--decoys=0.25')
  assert proc.returncode == 0, proc.stderr[-3000:]
  recipes = json.loads((tmp_path / 'run' / 'groups.json').read_text())
  assert {r['task']['decoys'] for r in recipes.values()} == {0.25}
  summary = json.loads((tmp_path / 'run' / 'summary.json').read_text())
  assert summary['claims'] and all(c['decoys'] == 0.25
                                   for c in summary['claims'])
  assert '(decoys=0.25)' in proc.stdout


def test_a_group_that_does_not_fit_trains_in_slices_to_the_same_rows(
    tmp_path):
  """With --memory_gib so small that 6 seeds do not fit at once, each group
  trains 4 members at a time (two slices on two devices): the plan says
  so, and every row is the one of the run that fits (the final test's mean
  loss to its last bit); a budget under one slice is refused in one line."""
  from src import config as config_lib
  args = ['--exp=distance', *[a for a in TINY if not a.startswith(
      ('--seeds', '--models', '--lengths'))], '--seeds=6', '--models=rnn',
          '--lengths=6']
  config = distance.EXPERIMENT.defaults.__class__(**{
      **distance.EXPERIMENT.defaults.__dict__, 'models': ('rnn',),
      'lengths': (6,), 'seeds': 6, 'batch_size': 16, 'eval_examples': 64})
  per_member = config_lib.estimate_bytes(config) / config.members
  gib = 4.5 * per_member / 0.8 / 2 / 2**30  # 4 members on 2 devices
  runs = {}
  for name, extra in (('whole', []), ('sliced', [f'--memory_gib={gib!r}'])):
    proc = run_py(*args, *extra, '--cpu_devices=2',
                  f'--workdir={tmp_path}/{name}',
                  f'--checkpoint_dir={tmp_path}/c_{name}')
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs[name] = (proc, read_csv(tmp_path / name / 'results.csv'))
  assert 'its 6 members train 4 at a time, 2 slices' in runs['sliced'][0].stdout
  timing = ('wall_s', 'compile_s', 'loss')
  strip = lambda rows: [{k: v for k, v in r.items() if k not in timing}
                        for r in rows]
  assert strip(runs['whole'][1]) == strip(runs['sliced'][1])
  np.testing.assert_allclose([float(r['loss']) for r in runs['whole'][1]],
                             [float(r['loss']) for r in runs['sliced'][1]],
                             rtol=2e-7)
  proc = run_py(*args, f'--memory_gib={gib / 4!r}', '--cpu_devices=2',
                f'--workdir={tmp_path}/small')
  least = 2 * members.least_local('cpu')  # a slice's fewest, on 2 devices
  assert (proc.returncode == 2
          and f'even {least} of its members' in proc.stderr)
  assert len(proc.stderr.strip().splitlines()) == 1
  assert not (tmp_path / 'small').exists()
