"""Every bad flag: one line naming the flag, exit status 2, nothing written."""

import os

import pytest

from src import models
from tests.helpers import run_py, run_py_alone, run_py_forked

CASES = [
    (['--exp=nope'], '--exp', 'distance'),
    (['--models=lstm,no_such_model'], '--models', ','.join(models.names())),
    (['--models='], '--models', 'comma-separated'),
    (['--lengths='], '--lengths', 'comma-separated'),
    (['--lengths=10,abc'], '--lengths', 'integers >= 3'),
    (['--lengths=2,10'], '--lengths', 'integers >= 3'),
    (['--lengths=10,10'], '--lengths', 'distinct'),
    (['--seeds=0'], '--seeds', 'integer >= 1'),
    (['--steps=-5'], '--steps', 'integer >= 1'),
    (['--batch_size=1.5'], '--batch_size', 'integer >= 1'),
    (['--learning_rate=nan'], '--learning_rate', 'finite number > 0'),
    (['--learning_rate=inf'], '--learning_rate', 'finite number > 0'),
    (['--learning_rate=0'], '--learning_rate', 'finite number > 0'),
    (['--learning_rate=fast'], '--learning_rate', 'finite number > 0'),
    (['--num_heads=3'], '--num_heads', 'must divide --d_model=32'),
    (['--lengths=100000', '--eval_examples=100000'], '--lengths', 'GiB'),
    (['--cpu_devices=0'], '--cpu_devices', 'integer >= 1'),
    (['--chrono_horizon=2'], '--chrono_horizon', 'integer >= 3, or 0'),
    (['--chrono_horizon=1.5'], '--chrono_horizon', 'integer >= 3, or 0'),
    (['--chrono_horizon=-50'], '--chrono_horizon', 'integer >= 3, or 0'),
    (['--exp=cost', '--chrono_horizon=50'], '--chrono_horizon',
     '--exp=cost does not take it'),
    (['--exp=heads', '--lengths=16,32'], '--lengths', 'takes one length'),
    (['extra_positional'], 'unexpected arguments', 'flags look like'),
    (['--vocab=8'], '--vocab', '--exp=distance does not take it'),
    (['--exp=induction', '--induction_task=mqar'], '--induction_task',
     'induction, trigger_induction'),
    (['--exp=cost', '--seeds=3'], '--seeds', '--exp=cost does not take it'),
    (['--nosuch=1'], '--nosuch', 'unknown flag'),
    (['--decoys=1'], '--decoys', 'a number in [0, 1)'),
    (['--decoys=-0.1'], '--decoys', 'a number in [0, 1)'),
    (['--exp=cost', '--decoys=0.1'], '--decoys', '--exp=cost does not take it'),
    (['--only_check_args', '--steps=0'], '--steps', 'integer >= 1'),
    # A growth with L is no verdict on fewer points than its fit needs: one
    # length's slope is nan, two fit both decays exactly.
    (['--exp=cost', '--lengths=16'], '--lengths', 'at least three lengths'),
    (['--exp=cost', '--lengths=16,32'], '--lengths', 'at least three'),
    (['--exp=cost', '--lengths=2000,2500,3000', '--widths=32'], '--lengths',
     'no doubling'),
    (['--exp=gradient', '--lengths=4,8'], '--lengths', 'at least 3 lengths'),
    (['--exp=gradient', '--bridge_length=3'], '--bridge_length',
     'integer >= 4'),
    (['--only_check_args', '--exp=all', '--vocab=2'], '--vocab',
     'integer >= 3'),
]


@pytest.fixture(scope='module')
def refused(tmp_path_factory):
  """Every case run once, each as its own run.py process (forked after the
  imports: tests/forked_run.py): {args: (process, workdir, checkpoint dir)}."""
  root = tmp_path_factory.mktemp('refused')
  folders = [(root / f'{i}' / 'run', root / f'{i}' / 'ckpt')
             for i in range(len(CASES))]
  procs = run_py_forked([[*args, f'--workdir={w}', f'--checkpoint_dir={c}']
                         for (args, _, _), (w, c) in zip(CASES, folders)])
  return {tuple(case[0]): (proc, *folder)
          for case, proc, folder in zip(CASES, procs, folders)}


def test_a_forked_case_is_the_process_run_py_starts(tmp_path):
  """The forked runner changes nothing a case sees."""
  args = ['--lengths=10,abc', f'--workdir={tmp_path}/run',
          f'--checkpoint_dir={tmp_path}/ckpt']
  for case in (args, ['--help']):
    forked, = run_py_forked([case])
    alone = run_py_alone(*case)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        alone.returncode, alone.stdout, alone.stderr)


@pytest.mark.parametrize('args,flag,accepted', CASES,
                         ids=[' '.join(c[0]) for c in CASES])
def test_refused_cleanly(refused, args, flag, accepted):
  proc, workdir, ckpt = refused[tuple(args)]
  assert proc.returncode == 2, proc.stderr
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: '), proc.stderr
  assert flag in lines[0] and accepted in lines[0]
  assert 'Traceback' not in proc.stderr + proc.stdout
  assert not workdir.exists() and not ckpt.exists()


def test_workdir_that_is_a_file(tmp_path):
  (tmp_path / 'afile').write_text('x')
  proc = run_py(f'--workdir={tmp_path}/afile', f'--checkpoint_dir={tmp_path}/c')
  assert proc.returncode == 2
  assert proc.stderr.startswith('error: --workdir:') and 'is a file' in proc.stderr
  assert not (tmp_path / 'c').exists()


def test_workdir_not_writable(tmp_path):
  (tmp_path / 'afile').write_text('x')
  proc = run_py(f'--workdir={tmp_path}/afile/run',
                f'--checkpoint_dir={tmp_path}/c')
  assert proc.returncode == 2
  assert proc.stderr.startswith('error: --workdir:')
  assert 'not writable' in proc.stderr
  assert not (tmp_path / 'c').exists()


def test_workdir_where_no_folder_can_be_made(tmp_path):
  """/proc passes os.access's mode-bit check even where no folder can be
  made (as root, everywhere): the run and --only_check_args both refuse it."""
  for proc in run_py_forked([['--workdir=/proc/nope', *extra,
                              f'--checkpoint_dir={tmp_path}/c']
                             for extra in ([], ['--only_check_args'])]):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('error: --workdir:'), lines
    assert 'not writable' in lines[0]
    assert not (tmp_path / 'c').exists()
  assert not any(name.startswith('.searchlight-probe-')
                 for name in os.listdir(tmp_path))
