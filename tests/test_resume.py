"""Nothing lost: kill, preemption, damaged checkpoints, locks, determinism."""

import fcntl
import json
import os
import shutil
import signal

import numpy as np
import pytest

from experiments import distance
from tests.helpers import read_csv, run_py, scalars, sigterm_while_training

# One length: two groups, each resumed, killed or damaged on its own.
FLAGS = ['--models=attention,rnn', '--lengths=6', '--seeds=2',
         '--steps=60', '--chunk_steps=10', '--checkpoint_every=20',
         '--batch_size=16', '--eval_examples=64']


def values(path):
  """results.csv without the timing columns, the only ones a rerun changes."""
  return [{k: v for k, v in row.items() if k not in distance.TIMING_COLUMNS}
          for row in read_csv(path)]


def finished(root):
  """The (model, length) groups with rows in root's results.csv."""
  path = root / 'run/results.csv'
  return ({(r['model'], r['length']) for r in read_csv(path)}
          if path.exists() else set())


def launch(root, *extra, env=None):
  return run_py('--exp=distance', f'--workdir={root}/run',
                f'--checkpoint_dir={root}/ckpt', *FLAGS, *extra, env=env)


@pytest.fixture(scope='module')
def reference(tmp_path_factory):
  root = tmp_path_factory.mktemp('reference')
  proc = launch(root)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return root


def test_sigkill_mid_group_resumes_to_identical_results(reference, tmp_path):
  """Also the determinism check: two processes, the same values."""
  # Die after step 50 of the first group: its last checkpoint is step 40,
  # and TensorBoard already holds events for steps 41..50.
  proc = launch(tmp_path, env={'SEARCHLIGHT_FAULT_KILL_AT': 'attention_L006@50'})
  assert proc.returncode == -signal.SIGKILL
  assert finished(tmp_path) == set()
  assert sorted(os.listdir(tmp_path / 'ckpt/attention_L006')) == [
      '20', '40', 'recipe.json']

  proc = launch(tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'attention_L006: resuming from step 40' in proc.stdout
  assert values(tmp_path / 'run/results.csv') == values(
      reference / 'run/results.csv')
  # TensorBoard shows every step once: the redone steps replace the old ones.
  _, loss = scalars(tmp_path / 'run/tb/attention_L006', 'train/loss')
  assert [s for s, _ in loss] == list(range(1, 61))
  _, ref_loss = scalars(reference / 'run/tb/attention_L006', 'train/loss')
  np.testing.assert_array_equal([v for _, v in loss], [v for _, v in ref_loss])


def test_finished_run_is_not_redone(reference):
  before = (reference / 'run/results.csv').read_text()
  proc = launch(reference)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'resuming' not in proc.stdout
  assert (reference / 'run/results.csv').read_text() == before
  _, loss = scalars(reference / 'run/tb/rnn_L006', 'train/loss')
  assert [s for s, _ in loss] == list(range(1, 61))


def test_damaged_latest_checkpoint_falls_back(reference, tmp_path):
  proc = launch(tmp_path, env={'SEARCHLIGHT_FAULT_KILL_AT': 'rnn_L006@50'})
  assert proc.returncode == -signal.SIGKILL
  assert finished(tmp_path) == {('attention', '6')}  # the group before: kept
  latest = tmp_path / 'ckpt/rnn_L006/40'
  data = [p for p in latest.rglob('*') if p.is_file() and 'state' in p.parts
          and p.stat().st_size > 200]
  assert data
  for p in data:  # garble the array data
    raw = bytearray(p.read_bytes())
    raw[len(raw) // 2: len(raw) // 2 + 64] = os.urandom(64)
    p.write_bytes(bytes(raw))
  garbled = {p.relative_to(latest): p.read_bytes() for p in data}
  proc = launch(tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'checkpoint' in proc.stdout and 'damaged' in proc.stdout
  assert 'resuming from step 20' in proc.stdout
  # Moved aside, not deleted: the damaged bytes are all still there.
  aside = tmp_path / 'ckpt/rnn_L006/40.bad'
  assert f'moved aside to {aside}' in proc.stdout
  assert {p: (aside / p).read_bytes() for p in garbled} == garbled
  assert 'Traceback' not in proc.stdout + proc.stderr
  assert values(tmp_path / 'run/results.csv') == values(
      reference / 'run/results.csv')


def test_sigterm_saves_and_exits_within_seconds(tmp_path):
  proc, out, err, seconds = sigterm_while_training(
      ['--exp=distance', f'--workdir={tmp_path}/run',
       f'--checkpoint_dir={tmp_path}/ckpt', '--models=rnn', '--lengths=6',
       '--seeds=2', '--steps=1000000', '--chunk_steps=50',
       '--checkpoint_every=1000000', '--batch_size=16'],
      tmp_path / 'run/tb/rnn_L006')
  assert seconds < 15
  assert proc.returncode == 128 + signal.SIGTERM, err
  assert 'Run the same command again to resume' in out
  assert 'Traceback' not in out + err
  saved = [int(p.name) for p in (tmp_path / 'ckpt/rnn_L006').iterdir()
           if p.name.isdigit()]
  assert len(saved) == 1 and saved[0] > 0 and saved[0] % 50 == 0


def test_lock_refuses_a_second_process(reference):
  with open(reference / 'run/.lock', 'a+') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    proc = launch(reference)
  assert proc.returncode == 2
  assert proc.stderr.startswith('error: --workdir:') and 'in use' in proc.stderr


def test_different_config_refused_then_overwrite(reference, tmp_path):
  before = (reference / 'run/results.csv').read_text()
  proc = run_py('--exp=distance', f'--workdir={reference}/run',
                f'--checkpoint_dir={reference}/ckpt', *FLAGS, '--steps=61',
                '--seeds=3')
  assert proc.returncode == 2
  line, = proc.stderr.strip().splitlines()
  assert 'steps: 60 there, 61 now' in line and 'seeds: 2 there, 3 now' in line
  assert '--overwrite' in line
  assert (reference / 'run/results.csv').read_text() == before
  # A field that does not change results (chunking) may differ on resume.
  proc = launch(reference, '--checkpoint_every=30')
  assert proc.returncode == 0, proc.stderr[-2000:]
  # --overwrite discards the old run and its checkpoints.
  shutil.copytree(reference / 'run', tmp_path / 'run')
  shutil.copytree(reference / 'ckpt', tmp_path / 'ckpt')
  proc = run_py('--exp=distance', f'--workdir={tmp_path}/run',
                f'--checkpoint_dir={tmp_path}/ckpt', '--models=rnn',
                '--lengths=3', '--seeds=1', '--steps=10', '--chunk_steps=10',
                '--eval_examples=8', '--overwrite')
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert len(read_csv(tmp_path / 'run/results.csv')) == 1
  assert sorted(os.listdir(tmp_path / 'ckpt')) == ['owner.json', 'rnn_L003']
  assert json.loads((tmp_path / 'run/config.json').read_text())[
      'config']['steps'] == 10


def test_resume_on_another_number_of_devices(reference, tmp_path):
  """Killed on 4 devices (2 seeds padded to 4, one a device), resumed on 1
  (2 members): the checkpoint's padding is cut (`checkpoint.repad`), the
  group resumes from its checkpoint, and attention's rows equal the
  uninterrupted run's (attention is bitwise the same on any device count)."""
  # Attention alone: the rnn groups after it would add nothing to the check.
  proc = launch(tmp_path, '--cpu_devices=4', '--models=attention',
                env={'SEARCHLIGHT_FAULT_KILL_AT': 'attention_L006@50'})
  assert proc.returncode == -signal.SIGKILL
  proc = launch(tmp_path, '--cpu_devices=1', '--models=attention')
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert '1 cpu device(s)' in proc.stdout
  assert 'attention_L006: resuming from step 40' in proc.stdout
  assert 'damaged' not in proc.stdout
  attention = lambda rows: [r for r in rows if r['model'] == 'attention']
  assert attention(values(tmp_path / 'run/results.csv')) == attention(
      values(reference / 'run/results.csv'))


def test_checksum_is_the_same_on_the_host_and_on_the_devices():
  """A checkpoint's checksum is computed on the host where this process
  holds the whole state (nothing to compile), on the devices where it does
  not: both must give the same number, and any changed bit another."""
  import jax
  import jax.numpy as jnp
  from src import checkpoint
  from src import members
  rng = np.random.default_rng(0)
  tree = {'w': jnp.asarray(rng.normal(size=(4, 7, 3)), jnp.float32),
          'count': jnp.arange(5, dtype=jnp.int32) * 977,
          'diverged': jnp.array([True, False, True]),
          'flag': jnp.zeros((), bool)}
  host = checkpoint.checksum(tree)
  assert host == int(checkpoint._device_checksum(tree))
  spread = jax.device_put(tree['w'], jax.sharding.NamedSharding(
      members.seed_mesh(), jax.sharding.PartitionSpec(members.SEED_AXIS)))
  assert checkpoint.checksum({'w': spread}) == int(
      checkpoint._device_checksum({'w': tree['w']}))
  flipped = np.asarray(tree['w']).copy()
  flipped.view(np.uint32)[1, 2, 0] ^= 1
  assert checkpoint.checksum({**tree, 'w': jnp.asarray(flipped)}) != host


def test_a_run_stored_before_a_field_existed_resumes(reference, tmp_path):
  """The reference run as a version without `num_filler` would have stored
  it: the same command resumes it (nothing to redo); another value of the
  field is refused in one line."""
  shutil.copytree(reference / 'run', tmp_path / 'run')
  shutil.copytree(reference / 'ckpt', tmp_path / 'ckpt')
  path = tmp_path / 'run/config.json'
  meta = json.loads(path.read_text())
  del meta['config']['num_filler'], meta['schema']
  path.write_text(json.dumps(meta))
  before = (tmp_path / 'run/results.csv').read_text()
  proc = launch(tmp_path)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert (tmp_path / 'run/results.csv').read_text() == before
  proc = launch(tmp_path, '--num_filler=4')
  assert proc.returncode == 2
  assert 'num_filler: absent there (the default, 8), 4 now' in proc.stderr
