"""Seeds sharded over devices and processes give the same results, bit for
bit: 1 device, 4 devices, 2 processes of 2 devices.

(Two divisions used to differ in the last bit between 1-device and
multi-device programs, Adam's bias correction and softmax's backward pass:
XLA rewrote them into reciprocal multiplies in one and not the other. Both
now multiply by explicit reciprocals. The GRU differed in the last bit
while a CPU device ran its seeds side by side, XLA:CPU picking its
weight-gradient dot kernel by their number; one after another, as a CPU
device now runs them, it is the same too.)
"""

import socket
import subprocess
import sys

import pytest

from tests.helpers import ROOT, run_py
from tests.test_resume import values

FLAGS = ['--exp=distance', '--models=attention,gru', '--lengths=4', '--seeds=3',
         '--steps=30', '--chunk_steps=10', '--checkpoint_every=20',
         '--batch_size=16', '--eval_examples=64']


def single_process(tmp_path, devices):
  proc = run_py(*FLAGS, f'--workdir={tmp_path}/d{devices}',
                f'--checkpoint_dir={tmp_path}/d{devices}_ckpt',
                f'--cpu_devices={devices}')
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert f'{devices} cpu device(s) in 1 process(es)' in proc.stdout
  return values(tmp_path / f'd{devices}/results.csv')


@pytest.fixture(scope='module')
def four(tmp_path_factory):
  """The results of one process with four devices (both tests compare with
  it)."""
  return single_process(tmp_path_factory.mktemp('four'), 4)


def test_four_devices_equal_one(tmp_path, four):
  assert len(four) == 2 * 3  # two models, 3 seeds: the padding dropped
  assert four == single_process(tmp_path, 1)


def free_port():
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def test_two_processes_equal_one(tmp_path, four):
  port = free_port()
  env = dict(__import__('os').environ, JAX_PLATFORMS='cpu',
             JAX_NUM_CPU_DEVICES='2')
  procs = [subprocess.Popen(
      [sys.executable, str(ROOT / 'run.py'), *FLAGS,
       f'--workdir={tmp_path}/two', f'--checkpoint_dir={tmp_path}/two_ckpt',
       f'--coordinator_address=127.0.0.1:{port}', '--num_processes=2',
       f'--process_id={i}'], cwd=ROOT, env=env, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True) for i in range(2)]
  outs = [p.communicate(timeout=300) for p in procs]
  for p, (out, err) in zip(procs, outs):
    assert p.returncode == 0, err[-3000:]
  assert '4 cpu device(s) in 2 process(es)' in outs[0][0]
  assert 'searchlight' not in outs[1][0]  # process 1 stays quiet
  # The same partitioned program as one process with four devices: bitwise.
  assert values(tmp_path / 'two/results.csv') == four


def test_a_dead_worker_stops_the_others(tmp_path):
  import os
  import signal
  import time
  port = free_port()
  env = dict(os.environ, JAX_PLATFORMS='cpu', JAX_NUM_CPU_DEVICES='1')
  procs = [subprocess.Popen(
      [sys.executable, str(ROOT / 'run.py'), '--exp=distance', '--models=rnn',
       '--lengths=6', '--seeds=2', '--steps=1000000', '--chunk_steps=50',
       '--checkpoint_every=1000000', '--batch_size=16',
       f'--workdir={tmp_path}/run', f'--checkpoint_dir={tmp_path}/ckpt',
       f'--coordinator_address=127.0.0.1:{port}', '--num_processes=2',
       f'--process_id={i}'], cwd=ROOT, env=env, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True) for i in range(2)]
  events = tmp_path / 'run/tb/rnn_L006'
  deadline = time.time() + 120
  while not (events.exists() and any(events.iterdir())):
    assert time.time() < deadline and procs[0].poll() is None
    time.sleep(0.2)
  time.sleep(1.0)
  procs[1].send_signal(signal.SIGKILL)
  killed = time.time()
  _, err = procs[0].communicate(timeout=120)
  procs[1].communicate()
  assert time.time() - killed < 60  # bounded: no hang
  assert procs[0].returncode not in (0, None)
  assert 'error: process 0: a peer process failed' in err
