"""Workdirs and checkpoints in a bucket: gs:// paths stay gs:// paths.

No bucket is reachable here, so the writers run against an in-memory
stand-in registered as fsspec's `gcs` protocol (what epath uses for gs://),
which, like Cloud Storage, cannot append to an object.
"""

import ast
import importlib
import importlib.util
import dataclasses
import json

import fsspec
import numpy as np
import pytest
from etils import epath
from fsspec.implementations.memory import MemoryFileSystem

from src import record, rundir, storage
from src.config import Config, ConfigError
from tests.helpers import ROOT, run_py

BUCKET = 'gs://searchlight-fake'


class FakeBucket(MemoryFileSystem):
  protocol = ('gs', 'gcs')
  store, pseudo_dirs = {}, ['']  # apart from fsspec's own memory://

  @classmethod
  def _strip_protocol(cls, path):
    for prefix in ('gs://', 'gcs://'):
      if str(path).startswith(prefix):
        path = str(path)[len(prefix):]
    return super()._strip_protocol(path)

  def _open(self, path, mode='rb', **kwargs):
    assert 'a' not in mode, 'objects cannot be appended to'
    kwargs.pop('finalize_on_close', None)
    return super()._open(path, mode, **kwargs)


@pytest.fixture
def bucket(monkeypatch, tmp_path):
  """gs:// served by FakeBucket; the test runs in an empty local folder."""
  fsspec.register_implementation('gcs', FakeBucket, clobber=True)
  epath.backend.fsspec_backend._get_filesystem.cache_clear()
  FakeBucket.store.clear()
  FakeBucket.pseudo_dirs[:] = ['']
  monkeypatch.chdir(tmp_path)
  yield FakeBucket()
  importlib.import_module('fsspec.registry')._registry.pop('gcs', None)
  epath.backend.fsspec_backend._get_filesystem.cache_clear()
  assert not list(tmp_path.iterdir()), 'a gs:// path was written locally'


def test_a_run_writes_every_file_into_the_bucket(bucket):
  workdir, ckpt = f'{BUCKET}/runs/d', f'{BUCKET}/ckpt/d'
  config = Config(exp='distance', steps=7)
  rundir.check(storage.path(workdir), storage.path(ckpt), config, False)
  with rundir.RunDir(workdir, ckpt).open(config, overwrite=False,
                                         extra={}) as run:
    assert str(run.path) == workdir and str(run.checkpoint_dir) == ckpt
    results = record.ResultsCsv(run.path / 'results.csv', ['a', 'b'],
                                write=True)
    results.append([{'a': 1, 'b': 0.5}])
    results.append([{'a': 2, 'b': True}])
    record.write_json(run.path / 'summary.json', {'x': np.float32(1.5)})
    plt = record.pyplot()
    fig, _ = plt.subplots()
    writer = record.tb_writer(run.path / 'tb' / 'g')
    record.save_figure(fig, run.path / 'f.png', writer)
    writer.add_scalar('train/loss', 0.25, 1)
    writer.close()
  assert json.loads(bucket.cat(f'{workdir}/config.json'))['config'][
      'steps'] == 7
  assert bucket.cat(f'{workdir}/results.csv').decode().splitlines() == [
      'a,b', '1,0.5', '2,1']
  assert record.ResultsCsv(f'{workdir}/results.csv', ['a', 'b'],
                           write=True).rows[1] == {'a': '2', 'b': '1'}
  assert json.loads(bucket.cat(f'{workdir}/summary.json')) == {'x': 1.5}
  assert bucket.cat(f'{workdir}/f.png')[:4] == b'\x89PNG'
  events, = bucket.glob(f'{workdir}/tb/g/events.out.tfevents.*')
  assert b'train/loss' in bucket.cat(events)
  assert bucket.isdir(ckpt)
  # The same workdir with other settings is refused, as on a disk.
  with pytest.raises(ConfigError, match='steps: 7 there, 8 now'):
    rundir.check(storage.path(workdir), storage.path(ckpt),
                 Config(exp='distance', steps=8), False)


def test_a_bucket_that_cannot_be_reached_is_refused_in_one_line(monkeypatch):
  class Silent:  # a bucket that never answers
    def exists(self):
      import time
      time.sleep(60)
  with pytest.raises(storage.Unreachable, match='no answer within 0.2 s'):
    storage.probe(Silent(), timeout_s=0.2)


def test_no_module_handling_run_paths_uses_pathlib():
  """pathlib.Path('gs://b/x') is the local path gs:/b/x: the modules that
  touch workdirs and checkpoints must not build paths with it (experiments
  may locate their own code with Path(__file__))."""
  files = [ROOT / 'run.py', *sorted((ROOT / 'src').rglob('*.py')),
           *sorted((ROOT / 'experiments').glob('*.py'))]
  offenders = []
  for file in files:
    for node in ast.walk(ast.parse(file.read_text())):
      if isinstance(node, ast.Call) and getattr(node.func, 'id', '') == 'Path':
        if not (node.args and getattr(node.args[0], 'id', '') == '__file__'):
          offenders.append(f'{file.name}:{node.lineno}')
  assert not offenders
  assert str(storage.path('gs://b/x') / 'y') == 'gs://b/x/y'
  assert str(storage.absolute('gs://b/x')) == 'gs://b/x'


@pytest.mark.parametrize('flag', ['workdir', 'checkpoint_dir'])
def test_unreachable_bucket_exits_2_naming_the_flag(tmp_path, flag):
  paths = {'workdir': f'{tmp_path}/run', 'checkpoint_dir': f'{tmp_path}/ckpt'}
  paths[flag] = 'gs://searchlight-unreachable/x'
  # A storage endpoint that refuses every connection, so the answer does
  # not depend on this machine's network or credentials.
  proc = run_py(*(f'--{k}={v}' for k, v in paths.items()), '--steps=5',
                env={'SEARCHLIGHT_STORAGE_TIMEOUT_S': '3',
                     'STORAGE_EMULATOR_HOST': 'http://127.0.0.1:9'})
  assert proc.returncode == 2, proc.stderr
  line, = proc.stderr.strip().splitlines()
  assert line.startswith(f'error: --{flag}: gs://searchlight-unreachable/x: ')
  if importlib.util.find_spec('gcsfs') is None:
    assert 'pip install -r requirements-gcs.txt' in line
  else:
    assert 'no answer within 3 s' in line or 'cannot be reached' in line
  assert not list(tmp_path.iterdir())  # nothing local, neither folder
  assert not (ROOT / 'gs:').exists()


def test_a_field_added_since_a_run_was_stored_does_not_stop_its_resume(
    tmp_path):
  """A run stored before a field existed (here: `bridge_length`) resumes:
  the missing field counts as the experiment's default; given another
  value, or a field the run had changed, it is refused."""
  from experiments.gradient import GradientConfig
  workdir, ckpt = storage.path(tmp_path / 'run'), storage.path(tmp_path / 'c')
  workdir.mkdir()
  defaults = GradientConfig(exp='gradient')
  stored = defaults.to_json()
  del stored['bridge_length']
  (workdir / rundir.CONFIG_FILE).write_text(json.dumps({'config': stored}))
  rundir.check(workdir, ckpt, defaults, False, defaults=defaults)
  # A shared field it fixes (`fixed`) is not compared: no flag changes it.
  rundir.check(workdir, ckpt, dataclasses.replace(defaults, decoys=0.5),
               False, defaults=defaults)
  with pytest.raises(ConfigError, match=r'bridge_length: absent there \(the '
                     r'default, 200\), 100 now'):
    rundir.check(workdir, ckpt, dataclasses.replace(defaults,
                                                    bridge_length=100),
                 False, defaults=defaults)
  with pytest.raises(ConfigError, match='steps: 1000 there, 8 now'):
    rundir.check(workdir, ckpt, dataclasses.replace(defaults, steps=8), False,
                 defaults=defaults)
  # A run stored by a newer layout is not read.
  (workdir / rundir.CONFIG_FILE).write_text(json.dumps(
      {'schema': rundir.SCHEMA_VERSION + 1, 'config': stored}))
  with pytest.raises(ConfigError, match='newer version'):
    rundir.check(workdir, ckpt, defaults, False)
