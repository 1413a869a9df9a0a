"""XLA's deterministic GPU ops: on before the backend starts wherever a GPU
may be used, off with --nondeterministic, recorded in config.json. The GPU
is faked: a PJRT plugin module (jax_plugins.xla_cuda_fake) that JAX imports
and initialises as its backends start, and that writes down the XLA_FLAGS
it finds then."""

import json

from src import determinism
from tests.helpers import TINY, run_py_alone

FAKE_PLUGIN = '''
import os

def initialize():  # called by JAX as its backends start
  with open(os.environ['FAKE_PLUGIN_SAW'], 'w') as f:
    f.write(os.environ.get('XLA_FLAGS', ''))
'''


def _fake_gpu(tmp_path):
  plugin = tmp_path / 'plugin' / 'jax_plugins' / 'xla_cuda_fake'
  plugin.mkdir(parents=True)
  (plugin / '__init__.py').write_text(FAKE_PLUGIN)
  return tmp_path / 'plugin'


def test_a_gpu_is_found_from_its_plugin_without_a_backend(tmp_path,
                                                          monkeypatch):
  assert not determinism.gpu_available({'JAX_PLATFORMS': 'cpu'})
  monkeypatch.syspath_prepend(str(_fake_gpu(tmp_path)))
  assert determinism.gpu_available({})
  assert determinism.gpu_available({'JAX_PLATFORMS': 'cuda,cpu'})
  assert not determinism.gpu_available({'JAX_PLATFORMS': 'cpu'})


def test_configure_adds_the_flag_once_and_respects_the_users(tmp_path,
                                                             monkeypatch):
  monkeypatch.syspath_prepend(str(_fake_gpu(tmp_path)))
  env = {'XLA_FLAGS': '--xla_backend_optimization_level=0'}
  record = determinism.configure(False, env)
  assert env['XLA_FLAGS'] == ('--xla_backend_optimization_level=0 '
                              '--xla_gpu_deterministic_ops=true')
  assert record['deterministic_ops'] is True and record['gpu_found']
  assert determinism.configure(False, env)['xla_flags'] == env['XLA_FLAGS']
  assert env['XLA_FLAGS'].count('deterministic') == 1
  off = {}
  assert determinism.configure(True, off)['deterministic_ops'] is False
  assert 'XLA_FLAGS' not in off
  users = {'XLA_FLAGS': '--xla_gpu_deterministic_ops=false'}
  assert determinism.configure(False, users)['deterministic_ops'] is False
  cpu = {'JAX_PLATFORMS': 'cpu'}
  assert determinism.configure(False, cpu)['deterministic_ops'] is None
  assert 'XLA_FLAGS' not in cpu


def test_a_run_sets_it_before_the_backend_starts_and_records_it(tmp_path):
  path = _fake_gpu(tmp_path)
  for name, extra, expected in (('on', [], True),
                                ('off', ['--nondeterministic'], False)):
    saw = tmp_path / f'saw_{name}'
    workdir = tmp_path / name
    done = run_py_alone(
        '--exp=distance', *TINY, '--models=rnn', '--lengths=3',
        '--steps=10', '--checkpoint_every=10', f'--workdir={workdir}',
        *extra, env={'PYTHONPATH': str(path), 'JAX_PLATFORMS': '',
                     'FAKE_PLUGIN_SAW': str(saw)})
    assert done.returncode == 0, done.stderr
    flags_at_start = saw.read_text()
    assert ('--xla_gpu_deterministic_ops=true' in flags_at_start) == expected
    record = json.loads((workdir / 'config.json').read_text())
    recorded = record['provenance']['determinism']
    assert recorded['gpu_found'] is True
    assert recorded['deterministic_ops'] is expected
    assert recorded['nondeterministic_flag'] is (not expected)
