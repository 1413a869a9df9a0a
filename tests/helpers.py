"""Shared by the end-to-end tests: run `run.py` as a user would."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A tiny distance sweep: a few seconds of training per group on a CPU.
TINY = ['--models=attention,rnn', '--lengths=3,6', '--seeds=2', '--steps=40',
        '--chunk_steps=10', '--checkpoint_every=20', '--batch_size=16',
        '--eval_examples=64']


def cached(args) -> list:
  """`args` with the session's compilation cache (tests/conftest.py), unless
  they name one."""
  cache = os.environ.get('SEARCHLIGHT_TEST_COMPILATION_CACHE')
  if cache is None or any(str(a).startswith('--compilation_cache_dir')
                          for a in args):
    return list(args)
  return [*args, f'--compilation_cache_dir={cache}']


# Variables read only when a run reaches them, not when a module is imported:
# a process forked after the imports sees them as a fresh one would.
READ_AT_RUN_TIME = ('SEARCHLIGHT_FAULT_KILL_AT', 'SEARCHLIGHT_FAULT_KILL_TREE',
                    'SEARCHLIGHT_FULL_DISK_AT', 'SEARCHLIGHT_RUN',
                    'SEARCHLIGHT_OUT', 'SEARCHLIGHT_SEED')
# Read at import, with the value the server imported under (it draws with
# Agg, as every run does).
AS_IMPORTED = {'MPLBACKEND': 'Agg'}


def child_env(env=None) -> dict:
  """The environment of every process a test starts: this one's, on the
  CPU, with `env` on top."""
  return {**os.environ, 'JAX_PLATFORMS': 'cpu', **(env or {})}


def _forkable(env) -> dict | None:
  """The variables to set in a forked child for `env`, or None when `env`
  changes one that is read at import (the case must start afresh)."""
  server = child_env()
  changed = {k: v for k, v in (env or {}).items()
             if server.get(k, AS_IMPORTED.get(k)) != v}
  return (changed if all(k in READ_AT_RUN_TIME for k in changed)
          else None)


def run_py(*args, env=None, timeout=300, cwd=None, session=False,
           **kwargs):
  """`python run.py ARGS` as a user runs it, in `cwd` (default the
  repository's root), in a session of its own if asked (so that a fault
  may SIGKILL its whole process group): exit status, stdout, stderr. The
  process is forked from this test process's server (`forked_run.py
  --serve`, the imports paid once), unless `env` sets a variable read at
  import (JAX's among them) or `kwargs` are given: then it is started
  afresh."""
  return _run(None, cached(args), env, timeout, cwd=cwd, session=session,
              **kwargs)


def run_script(script, *args, env=None, timeout=300, cwd=None,
               session=False):
  """`python SCRIPT ARGS` (a script that imports run.py or src), forked
  or started afresh as `run_py` is. ARGS, when given, are run.py's flags,
  and get the session's compilation cache."""
  return _run(script, cached(args) if args else [], env, timeout, cwd=cwd,
              session=session)


def run_py_alone(*args, env=None, timeout=300, **kwargs):
  """`python run.py ARGS` in a process started afresh."""
  return _fresh(ROOT / 'run.py', cached(args), env, timeout, **kwargs)


def _run(script, args, env, timeout, cwd=None, session=False, **kwargs):
  forked_env = _forkable(env)
  if forked_env is None or kwargs:
    return _fresh(script or ROOT / 'run.py', args, env, timeout, cwd=cwd,
                  start_new_session=session, **kwargs)
  case = {'args': [str(a) for a in args], 'env': forked_env,
          'session': session}
  if cwd is not None:
    case['cwd'] = str(cwd)
  if script is not None:
    case['script'] = str(script)
  return _server().run(case, timeout)


def _fresh(script, args, env, timeout, cwd=None, **kwargs):
  return subprocess.run([sys.executable, str(script), *map(str, args)],
                        capture_output=True, text=True, cwd=cwd or ROOT,
                        env=child_env(env), timeout=timeout, **kwargs)


class _ForkServer:
  """tests/forked_run.py --serve: one JSON line per case each way."""

  def __init__(self):
    self.proc = subprocess.Popen(
        [sys.executable, str(ROOT / 'tests' / 'forked_run.py'), '--serve'],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
        env=child_env())

  def run(self, case, timeout):
    import select
    args = case['args']
    self.proc.stdin.write(json.dumps(case) + '\n')
    self.proc.stdin.flush()
    ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
    if not ready:  # a case that hangs: no answer will come
      self.close()
      raise subprocess.TimeoutExpired(args, timeout)
    line = self.proc.stdout.readline()
    assert line, f'the fork server died (exit {self.proc.wait()})'
    return subprocess.CompletedProcess(args, **json.loads(line))

  def close(self):
    global _SERVER
    _SERVER = None
    self.proc.kill()
    self.proc.wait()


_SERVER = None


def _server() -> _ForkServer:
  global _SERVER
  if _SERVER is None or _SERVER.proc.poll() is not None:
    _SERVER = _ForkServer()
    import atexit
    atexit.register(lambda s=_SERVER: s.proc.poll() is None and s.close())
  return _SERVER


def run_py_forked(cases, *, timeout=300):
  """`run_py(*args)` for every argument list in `cases`, each a process
  forked from one that imported run.py once (tests/forked_run.py): the same
  exit status, stdout and stderr, without paying the imports per case."""
  import tempfile
  with tempfile.TemporaryDirectory() as folder:
    cases_json, out_json = Path(folder) / 'cases.json', Path(folder) / 'out.json'
    cases_json.write_text(json.dumps([cached(args) for args in cases]))
    proc = subprocess.run(
        [sys.executable, str(ROOT / 'tests' / 'forked_run.py'),
         str(cases_json), str(out_json)], capture_output=True, text=True,
        cwd=ROOT, env=child_env(), timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [subprocess.CompletedProcess(args, **r) for args, r in
            zip(cases, json.loads(out_json.read_text()))]


def sigterm_while_training(args, events, cwd=ROOT):
  """`python run.py ARGS` started afresh in a session of its own, sent
  SIGTERM once the TensorBoard folder `events` holds a file and a second
  of training has passed: (the finished process, its stdout, its stderr,
  seconds from the signal to its exit). Whatever fails, nothing is left
  running."""
  import contextlib
  import signal
  import time
  proc = subprocess.Popen([sys.executable, str(ROOT / 'run.py'), *args],
                          cwd=cwd, env=child_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True,
                          start_new_session=True)
  try:
    deadline = time.time() + 120
    while not (events.exists() and any(events.iterdir())):
      assert time.time() < deadline and proc.poll() is None
      time.sleep(0.2)
    time.sleep(1.0)  # well into training
    sent = time.time()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    return proc, out, err, time.time() - sent
  finally:
    with contextlib.suppress(ProcessLookupError):
      os.killpg(proc.pid, signal.SIGKILL)


def run_ok(root, exp, *args):
  """`run.py --exp=EXP ARGS` into root/run (checkpoints root/ckpt), which
  must succeed; returns (run folder, results.csv rows, summary.json)."""
  proc = run_py(f'--exp={exp}', f'--workdir={root}/run',
                f'--checkpoint_dir={root}/ckpt', *args)
  assert proc.returncode == 0, proc.stderr[-3000:]
  run = Path(root) / 'run'
  return (run, read_csv(run / 'results.csv'),
          json.loads((run / 'summary.json').read_text()))


def read_csv(path):
  with open(path, newline='') as f:
    return list(csv.DictReader(f))


def scalars(logdir, tag):
  """Events as TensorBoard itself reads them (honours purge_step): the
  accumulator for tags and plugin content, and the tag's (step, value)s as
  TensorBoard's server loads them (scalars written as tensors included)."""
  from tensorboard.backend.event_processing import event_accumulator
  from tensorboard.backend.event_processing import plugin_event_accumulator
  from tensorboard.util import tensor_util
  acc = event_accumulator.EventAccumulator(
      str(logdir), size_guidance={event_accumulator.SCALARS: 0,
                                  event_accumulator.IMAGES: 0})
  acc.Reload()
  if not tag:
    return acc, []
  served = plugin_event_accumulator.EventAccumulator(
      str(logdir), tensor_size_guidance={'scalars': 0})
  served.Reload()
  return acc, [(e.step, float(tensor_util.make_ndarray(e.tensor_proto)))
               for e in served.Tensors(tag)]


def png_pixels(path):
  """A PNG read back as an array (height x width x channels, in [0, 1])."""
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  return plt.imread(str(path))


def assert_figure(path, min_size=(250, 400)):
  """A figure that exists, has the size of a real plot, and is not blank."""
  pixels = png_pixels(path)
  assert pixels.shape[0] >= min_size[0] and pixels.shape[1] >= min_size[1], \
      pixels.shape
  assert pixels[..., :3].std() > 0.05, f'{path} looks blank'


def fit(ens, state, start: int, *, steps: int, chunk_steps: int,
        on_chunk=None):
  """Trains `ens` from `start` to `steps` in the chunks the runner's loop
  trains, with no run folder (no checkpoints, no logs); returns the final
  state. `on_chunk(step, metrics)` sees each chunk's metrics."""
  from src import evaluation, train
  for num_steps in train.chunks(start, steps, chunk_steps):
    state, metrics = ens.train_chunk(state, start, num_steps)
    start += num_steps
    state, metrics = evaluation.after_chunk(ens, state, metrics, start)
    if on_chunk is not None:
      on_chunk(start, metrics)
  return state
