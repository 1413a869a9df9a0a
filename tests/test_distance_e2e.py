"""`python run.py --exp=distance` end to end on a tiny sweep."""

import importlib.metadata
import json
import platform
import socket
import subprocess

import numpy as np
import pytest

from experiments import distance
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
  assert list(rows[0]) == distance.COLUMNS
  assert [(r['model'], int(r['length']), int(r['seed'])) for r in rows] == [
      (m, L, s) for m in ('attention', 'rnn') for L in (3, 6) for s in (0, 1)]
  for r in rows:
    assert 0.0 <= float(r['accuracy']) <= 1.0
    assert int(r['steps']) == 40 and r['diverged'] == '0'
    assert float(r['wall_s']) > float(r['compile_s']) > 0


def test_summary_recomputed_from_csv(tiny_run):
  root, _ = tiny_run
  rows = read_csv(root / 'run' / 'results.csv')
  summary = json.loads((root / 'run' / 'summary.json').read_text())
  for model in ('attention', 'rnn'):
    mean = {L: np.mean([float(r['accuracy']) for r in rows
                        if r['model'] == model and int(r['length']) == L])
            for L in (3, 6)}
    expected = None
    for L in (3, 6):
      if mean[L] < 0.95:
        break
      expected = L
    assert summary['critical_distance'][model] == expected
    for g in summary['groups']:
      if g['model'] == model:
        assert g['mean_accuracy'] == pytest.approx(mean[g['length']])
        assert g['ci95'][0] <= g['mean_accuracy'] <= g['ci95'][1]
  assert {c['verdict'] for c in summary['claims']} <= {
      'held', 'did not hold', 'partly', 'untested'}


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


def test_tensorboard_reads_back(tiny_run):
  root, _ = tiny_run
  acc, loss = scalars(root / 'run' / 'tb' / 'attention_L003', 'train/loss')
  assert [s for s, _ in loss] == list(range(1, 41))  # every step, once
  assert all(np.isfinite(v) for _, v in loss)
  assert loss[-1][1] < loss[0][1]  # it learned
  _, test_acc = scalars(root / 'run' / 'tb' / 'attention_L003',
                        'test/accuracy')
  assert len(test_acc) == 1
  assert '_hparams_/session_start_info' in acc.PluginTagToContent('hparams')
  summary_acc, _ = scalars(root / 'run' / 'tb' / 'summary', None)
  assert 'figures/distance' in summary_acc.Tags()['images']
  assert summary_acc.Tags()['tensors'] or summary_acc.Tags().get('text')


def test_figure_and_table(tiny_run):
  root, proc = tiny_run
  png = (root / 'run' / 'distance.png').read_bytes()
  assert png[:8] == b'\x89PNG\r\n\x1a\n' and len(png) > 10_000
  assert 'Mean test accuracy by length' in proc.stdout
  assert 'critical' in proc.stdout
