"""A run owns its workdir and its checkpoints: it never trains on, reports
from, or deletes another run's, and a full disk leaves every file whole."""

import errno
import json
import os
import shutil

import pytest

from src import analysis, launch, record, rundir, storage
from src.config import Config, ConfigError
from tests.helpers import ROOT, read_csv, run_py, run_script

TINY = ['--seeds=2', '--steps=40', '--chunk_steps=20', '--checkpoint_every=20',
        '--batch_size=16', '--eval_examples=64']
TIMING = ('wall_s', 'compile_s')


def values(path):
  """results.csv without the timing columns."""
  return [{k: v for k, v in r.items() if k not in TIMING}
          for r in read_csv(path)]


def tree(folder):
  """Every file under `folder` with its bytes."""
  return {p.relative_to(folder): p.read_bytes()
          for p in sorted(folder.rglob('*')) if p.is_file()}


def trained_groups(workdir):
  return {r['group'] for r in read_csv(workdir / 'curves.csv')}


def test_the_newcomers_sequence_keeps_every_run_its_own(tmp_path):
  """The default run, the same command with a flag changed (refused), then
  with a new --workdir (its own checkpoints: every group trained), then
  --overwrite on it: its own checkpoints replaced, the first run's all
  still there."""
  first = ['--exp=distance', '--models=attention,lstm_chrono',
           '--lengths=5', *TINY]
  changed = ['--exp=distance', '--lengths=5,20',
             '--models=attention,lstm_chrono', *TINY]
  proc = run_py(*first, cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  runs, ckpt = tmp_path / 'runs', tmp_path / 'checkpoints'
  assert 'checkpoints checkpoints/distance' in proc.stdout
  before = tree(ckpt / 'distance')

  proc = run_py(*changed, cwd=tmp_path)
  assert proc.returncode == 2
  assert proc.stderr.startswith('error: --workdir: runs/distance holds a run '
                                'with different settings (lengths: [5] '
                                'there, [5, 20] now)')

  proc = run_py(*changed, '--workdir=runs/d2', cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'checkpoints checkpoints/d2' in proc.stdout
  assert 'resuming' not in proc.stdout
  groups = {'attention_L005', 'attention_L020', 'lstm_chrono_L005',
            'lstm_chrono_L020'}
  assert trained_groups(runs / 'd2') == groups  # none borrowed
  assert {p.name for p in (ckpt / 'd2').iterdir() if p.is_dir()} == groups
  # Chrono's horizon is the longest length: 5 in the first run, 20 here,
  # so its L=5 group is another model; attention's is the same recipe.
  old, new = (read_csv(runs / w / 'results.csv') for w in ('distance', 'd2'))
  row = lambda rows, m: [{k: v for k, v in r.items() if k not in TIMING}
                         for r in rows if (r['model'], r['length']) == (m, '5')]
  assert row(old, 'lstm_chrono') != row(new, 'lstm_chrono')
  assert row(old, 'attention') == row(new, 'attention')
  recipe = json.loads((ckpt / 'd2/lstm_chrono_L005/recipe.json').read_text())
  assert recipe['model_kwargs']['chrono_horizon'] == 20

  # --overwrite replaces d2 (here with one model: settings may change) and
  # its checkpoints, never the first run's.
  proc = run_py('--exp=distance', '--lengths=5,20', '--models=attention',
                *TINY, '--workdir=runs/d2', '--overwrite', cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  kept = {'attention_L005', 'attention_L020'}
  assert trained_groups(runs / 'd2') == kept
  assert {p.name for p in (ckpt / 'd2').iterdir() if p.is_dir()} == kept
  assert tree(ckpt / 'distance') == before
  expected = analysis.load_run(runs / 'distance').results
  # The group d2 would have clobbered, had it borrowed (the same name, another
  # recipe), still loads as the first run trained it (the bytes are checked
  # above for every group).
  seed = analysis.load_seed(runs / 'distance', 'lstm_chrono_L005', 1,
                            checkpoint_dir=ckpt / 'distance')
  assert seed.step == 40
  assert seed.evaluate()['accuracy'] == expected[
      (expected.model == 'lstm_chrono') & (expected.length == 5)
      & (expected.seed == 1)].accuracy.item()


def test_a_checkpoint_folder_of_another_run_is_refused(tmp_path):
  args = ['--exp=distance', '--models=rnn', '--lengths=5', *TINY]
  proc = run_py(*args, f'--workdir={tmp_path}/a', f'--checkpoint_dir={tmp_path}/c')
  assert proc.returncode == 0, proc.stderr[-3000:]
  owner = json.loads((tmp_path / 'c/owner.json').read_text())
  assert owner['workdir'] == str(tmp_path / 'a') and owner['exp'] == 'distance'
  assert owner['config']['lengths'] == [5]
  for extra in ([], ['--overwrite']):
    proc = run_py(*args, f'--workdir={tmp_path}/b',
                  f'--checkpoint_dir={tmp_path}/c', *extra)
    assert proc.returncode == 2
    assert proc.stderr == (
        f'error: --checkpoint_dir: {tmp_path}/c belongs to the run in '
        f'{tmp_path}/a, not to this one ({tmp_path}/b); pass another '
        '--checkpoint_dir, or none (the default follows --workdir: '
        f'{tmp_path}/b/checkpoints)\n')
    assert not (tmp_path / 'b').exists()  # nothing written
  assert (tmp_path / 'c/rnn_L005/40').is_dir()


def test_a_folder_from_before_ownership_records_works_for_its_own_run(
    tmp_path):
  """A checkpoint folder without owner.json is its run's when the workdir's
  config.json names it (and then records it); any other run is refused."""
  args = ['--exp=distance', '--models=rnn', '--lengths=5', *TINY]
  a, c = f'--workdir={tmp_path}/a', f'--checkpoint_dir={tmp_path}/c'
  proc = run_py(*args, a, c)
  assert proc.returncode == 0, proc.stderr[-3000:]
  results = (tmp_path / 'a/results.csv').read_text()
  (tmp_path / 'c/owner.json').unlink()
  (tmp_path / 'c/rnn_L005/recipe.json').unlink()
  proc = run_py(*args, a, c)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert (tmp_path / 'a/results.csv').read_text() == results  # not redone
  assert rundir.owner(tmp_path / 'c') == str(tmp_path / 'a')
  (tmp_path / 'c/owner.json').unlink()
  proc = run_py(*args, f'--workdir={tmp_path}/b', c)
  assert proc.returncode == 2
  assert proc.stderr.startswith(f'error: --checkpoint_dir: {tmp_path}/c holds '
                                'files that no record ties to this run')


def test_a_checkpoint_trained_from_another_recipe_is_never_restored(tmp_path):
  """The workdir gone, its checkpoints kept: a run with chrono's horizon
  changed is refused before anything is written, naming the setting."""
  args = ['--exp=distance', '--models=lstm_chrono', '--lengths=5', *TINY,
          f'--workdir={tmp_path}/run', f'--checkpoint_dir={tmp_path}/c']
  proc = run_py(*args, '--chrono_horizon=10')
  assert proc.returncode == 0, proc.stderr[-3000:]
  shutil.rmtree(tmp_path / 'run')
  proc = run_py(*args, '--chrono_horizon=20')
  assert proc.returncode == 2
  assert proc.stderr == (
      f'error: --checkpoint_dir: {tmp_path}/c/lstm_chrono_L005 holds '
      'checkpoints built from another recipe (model_kwargs.chrono_horizon: '
      '10 there, 20 now); --overwrite discards them, or pass another '
      '--checkpoint_dir\n')
  assert not (tmp_path / 'run').exists()
  # The runner's own check, where a group starts (and records its recipe).
  folder = tmp_path / 'c/lstm_chrono_L005'
  recipe = json.loads((folder / 'recipe.json').read_text())
  rundir.claim_group(folder, recipe)
  with pytest.raises(ConfigError, match='num_seeds: 2 there, 3 now'):
    rundir.claim_group(folder, {**recipe, 'num_seeds': 3})
  # Same horizon: it resumes from them (nothing left to train).
  proc = run_py(*args, '--chrono_horizon=10')
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert read_csv(tmp_path / 'run/curves.csv') == []


def test_load_seed_refuses_checkpoints_of_another_recipe(tmp_path):
  args = ['--exp=distance', '--models=rnn', '--lengths=5', *TINY,
          f'--workdir={tmp_path}/run', f'--checkpoint_dir={tmp_path}/c']
  proc = run_py(*args)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert analysis.load_seed(tmp_path / 'run', 'rnn_L005', 0).step == 40
  path = tmp_path / 'c/rnn_L005/recipe.json'
  recipe = json.loads(path.read_text())
  path.write_text(json.dumps({**recipe, 'batch_size': 8}))
  with pytest.raises(analysis.NotFound, match='batch_size: 8 there, 16 now'):
    analysis.load_seed(tmp_path / 'run', 'rnn_L005', 0)


def test_overwrite_discards_only_what_is_this_runs(tmp_path):
  config = Config(exp='distance')
  run_a, ckpt_a = tmp_path / 'a', tmp_path / 'ca'
  with rundir.RunDir(run_a, ckpt_a).open(config, overwrite=False, extra={}):
    (ckpt_a / 'rnn_L005').mkdir()
  # Another run's checkpoint folder inside this run's: refused.
  other = ckpt_a / 'elsewhere'
  with rundir.RunDir(tmp_path / 'b', other).open(config, overwrite=False,
                                                 extra={}):
    pass
  with pytest.raises(ConfigError, match=rf'--overwrite: {ckpt_a} holds '
                     rf'{other}, which belongs to the run in {tmp_path}/b'):
    rundir.check(run_a, ckpt_a, config, overwrite=True)
  with pytest.raises(ConfigError, match='belongs to the run in'):
    rundir.RunDir(run_a, ckpt_a).open(config, overwrite=True, extra={})
  assert (ckpt_a / 'rnn_L005').is_dir() and other.is_dir()
  shutil.rmtree(other)
  # A folder that is not a run's is never cleared.
  (tmp_path / 'notes').mkdir()
  (tmp_path / 'notes/plan.txt').write_text('mine')
  with pytest.raises(ConfigError, match=r'--overwrite: .*notes is not a '
                     r"run's folder"):
    rundir.check(tmp_path / 'notes', tmp_path / 'cn', config, overwrite=True)
  # Its own: the workdir and its checkpoints cleared, nothing else.
  rundir.check(run_a, ckpt_a, config, overwrite=True)
  with rundir.RunDir(run_a, ckpt_a).open(config, overwrite=True, extra={}):
    pass
  assert sorted(p.name for p in ckpt_a.iterdir()) == ['owner.json']
  assert (tmp_path / 'notes/plan.txt').read_text() == 'mine'
  assert (tmp_path / 'b/config.json').exists()


def test_the_default_checkpoint_folder_follows_the_workdir(monkeypatch,
                                                           tmp_path):
  monkeypatch.chdir(tmp_path)
  default = lambda w: os.fspath(rundir.default_checkpoint_dir(w))
  assert default('runs/distance') == 'checkpoints/distance'
  assert default('./runs/a/b') == 'checkpoints/a/b'
  assert default(f'{tmp_path}/runs/d2') == 'checkpoints/d2'
  assert default('/data/r1') == '/data/r1/checkpoints'
  assert default('elsewhere/r1') == 'elsewhere/r1/checkpoints'
  assert default('gs://bucket/runs/d') == 'gs://bucket/runs/d/checkpoints'
  assert len({default(w) for w in ('runs/a', 'runs/b', 'runs/a/b', 'x',
                                   'runs', 'runs/x/checkpoints')}) == 6


def test_a_repository_moved_whole_keeps_its_runs(tmp_path):
  config = Config(exp='distance')
  old = tmp_path / 'old'
  with rundir.RunDir(old / 'runs/d', old / 'checkpoints/d').open(
      config, overwrite=False, extra={}):
    pass
  os.rename(old, tmp_path / 'new')
  new = tmp_path / 'new'
  assert rundir.owner(new / 'checkpoints/d') == str(new / 'runs/d')
  rundir.check(new / 'runs/d', new / 'checkpoints/d', config, False)


# -- a full disk -------------------------------------------------------------------

@pytest.fixture(scope='module')
def reference(tmp_path_factory):
  root = tmp_path_factory.mktemp('reference')
  proc = run_py(*FULL_DISK_ARGS, f'--workdir={root}/run',
                f'--checkpoint_dir={root}/c')
  assert proc.returncode == 0, proc.stderr[-3000:]
  return root / 'run'


FULL_DISK_ARGS = ['--exp=distance', '--models=attention,rnn', '--lengths=5',
                  *TINY]


@pytest.mark.parametrize('where', ['config.json:1', 'results.csv:3',
                                   'curves.csv:4', 'groups.json:2',
                                   'summary.json:1'])
def test_a_full_disk_stops_in_one_line_and_leaves_every_file_whole(
    reference, tmp_path, where):
  """results.csv:3 is the second group's rows (after the header and the
  first group's); a write fails half-way through, as on a full disk."""
  paths = [f'--workdir={tmp_path}/run', f'--checkpoint_dir={tmp_path}/c']
  proc = run_script(ROOT / 'tests/full_disk_run.py', *FULL_DISK_ARGS, *paths,
                    env={'SEARCHLIGHT_FULL_DISK_AT': where})
  assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
  name = where.split(':')[0]
  line, = proc.stderr.strip().splitlines()[-1:]
  assert line.startswith(f'error: no space left on device, writing '
                         f'{tmp_path}/run/{name}'), proc.stderr
  assert 'Traceback' not in proc.stderr
  run = tmp_path / 'run'
  assert not list(run.rglob('*.tmp'))
  for file in ('config.json', 'summary.json', 'groups.json'):
    if (run / file).exists():
      json.loads((run / file).read_text())  # whole
  for file in ('results.csv', 'curves.csv'):
    if (run / file).exists():
      text = (run / file).read_text()
      assert text.endswith('\n')
      rows = read_csv(run / file)
      full = read_csv(reference / file)
      assert all(None not in r.values() for r in rows)
      strip = lambda rs: [{k: v for k, v in r.items() if k not in TIMING}
                          for r in rs]
      assert strip(rows) == strip(full[:len(rows)])
  proc = run_py(*FULL_DISK_ARGS, *paths)  # space again: it resumes
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert values(run / 'results.csv') == values(reference / 'results.csv')
  assert json.loads((run / 'summary.json').read_text())['claims'] == \
      json.loads((reference / 'summary.json').read_text())['claims']


def test_a_full_disk_names_the_file_whatever_the_writer(tmp_path):
  """TensorBoard's event files and orbax's (tensorstore's) errors name no
  file or name it in their text: the line names it all the same."""
  writer = record.tb_writer(tmp_path / 'tb')

  class Full:
    def write(self, data):
      raise OSError(errno.ENOSPC, 'No space left on device')

    flush = close = lambda self: None

  writer.file_writer.event_writer._ev_writer._py_recordio_writer._writer = \
      Full()
  with pytest.raises(OSError) as e:
    writer.add_scalar('x', 1.0, 1)
  assert storage.out_of_space(e.value)
  assert str(tmp_path / 'tb') in launch.out_of_space_line(e.value)
  text = ('RESOURCE_EXHAUSTED: Error writing local file "/d/c/rnn_L005/'
          '20.orbax-checkpoint-tmp/state/_sharding": Failed to write 6869 '
          "bytes to file 21: No space left on device [os_error_code='28']")
  assert storage.out_of_space(ValueError(text))
  assert launch.out_of_space_line(ValueError(text)).startswith(
      'error: no space left on device, writing /d/c/rnn_L005/20.orbax-'
      'checkpoint-tmp/state/_sharding; ')
  assert not storage.out_of_space(ValueError('shapes differ'))
