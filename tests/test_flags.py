"""Flags: typed help, the fields each experiment reads, --print_config,
--only_check_args, flagfiles."""

import dataclasses

import pytest

import experiments
from src.config import Config
from tests.helpers import ROOT, run_py, run_py_forked

@pytest.mark.parametrize('name', experiments.EXPERIMENTS)
def test_an_experiments_flags_are_its_config_classs_fields(name):
  """The flags an experiment accepts are its config class's fields, less
  the shared ones it fixes (`fixed`, each a shared field); a name
  two experiments declare takes the same syntax in both."""
  experiment = experiments.load(name)
  config = type(experiment.defaults)
  assert isinstance(experiment.defaults, Config)
  assert type(experiment.quick) is config
  shared = {f.name for f in dataclasses.fields(Config)}
  assert set(config.fixed) <= shared, set(config.fixed) - shared
  own = [f.name for f in dataclasses.fields(config)
         if f.metadata['parse'] is not None and f.name not in config.fixed]
  assert config.flags() == tuple(own)
  every = experiments.flag_fields()
  for field in dataclasses.fields(config):
    if field.name in config.flags():
      assert field.metadata['syntax'] == every[field.name].metadata['syntax']


def test_all_reads_the_union_of_its_parts():
  parts = experiments.load('all').parts
  union = set().union(*(experiments.load(p).fields for p in parts))
  assert set(experiments.load('all').fields) == union | {'parts'}  # its own
  assert 'vocab' in union and 'vocab' not in experiments.load('distance').fields


def test_help_is_the_users_and_lists_every_flag():
  proc = run_py('--help')
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.startswith('Searchlight: why attention replaced '
                                'recurrence')
  text = ' '.join(proc.stdout.split())
  assert '--lengths: sequence lengths L' in text
  assert '[a comma list of distinct integers >= 3]' in text
  assert '[a finite number > 0]' in text
  import run
  from src import config as config_lib, launch
  for name in (*launch.RUN_FLAGS, *experiments.flag_fields(), 'print_config',
               'only_check_args', 'flagfile'):
    assert f'--{name}:' in text, name
  assert 'intentionally' not in text  # no developer notes


def test_print_config_shows_the_chrono_horizon(tmp_path):
  default, given = run_py_forked([
      ['--exp=distance', '--print_config', f'--workdir={tmp_path}/run'],
      ['--exp=distance', '--print_config', '--chrono_horizon=200',
       f'--workdir={tmp_path}/run']])
  rows = lambda proc: {line.split()[0]: line.split()[1:] for line in
                       proc.stdout.splitlines() if line.startswith('  ')}
  assert rows(default)['chrono_horizon'] == ['0', 'default']
  assert rows(given)['chrono_horizon'] == ['200', 'flag']
  assert 'chrono_horizon' in experiments.load('all').fields
  assert not list(tmp_path.iterdir())  # nothing written


def test_print_config_says_where_each_value_came_from(tmp_path):
  flagfile = 'configs/tpu_distance.flags'
  proc, quick = run_py_forked([
      [f'--flagfile={flagfile}', '--steps=1000', '--print_config',
       f'--workdir={tmp_path}/run', f'--checkpoint_dir={tmp_path}/c'],
      ['--exp=attention', '--quick', '--print_config',
       f'--workdir={tmp_path}/run']])
  assert proc.returncode == 0, proc.stderr
  rows = {line.split()[0]: line.split(None, 2)[1:] for line in
          proc.stdout.splitlines() if line.startswith('  ') and
          len(line.split()) >= 3}
  assert rows['steps'] == ['1000', 'flag']
  assert rows['seeds'] == ['64', f'flagfile {flagfile}']
  assert rows['lengths'] == ['10,20,50,100,200,500', f'flagfile {flagfile}']
  assert rows['learning_rate'] == ['0.003', 'default']
  refused, = [l for l in proc.stdout.splitlines() if 'refused if given' in l]
  assert 'vocab' not in rows and ' vocab,' in refused and ' heads,' in refused
  rows = {line.split()[0]: line.split()[1:] for line in
          quick.stdout.splitlines() if line.startswith('  ')}
  assert rows['seeds'] == [str(experiments.load('attention').quick.seeds),
                           'quick']
  assert rows['quick'] == ['True', 'flag']
  assert rows['lengths'] == ['20', 'default']
  assert not list(tmp_path.iterdir())  # nothing written


def test_only_check_args_checks_and_writes_nothing(tmp_path):
  args = [f'--workdir={tmp_path}/run', f'--checkpoint_dir={tmp_path}/c',
          '--only_check_args']
  proc, part, valid = run_py_forked([
      ['--lengths=2', *args], ['--exp=all', '--vocab=8', '--seeds=2', *args],
      ['--exp=all', '--vocab=40', '--seeds=2', *args]])
  assert proc.returncode == 2
  assert proc.stderr.startswith('error: --lengths: expected comma-separated')
  # A part's own check (recall's 8 pairs need 17 tokens) is run too.
  assert part.returncode == 2 and part.stderr.startswith('error: --vocab: ')
  assert len(part.stderr.strip().splitlines()) == 1
  proc = valid
  assert proc.returncode == 0, proc.stderr
  assert 'the flags are valid' in proc.stdout
  # The parts, their groups and an estimated time.
  assert 'gives_way' in proc.stdout and 'estimated: about' in proc.stdout
  assert not list(tmp_path.iterdir())


def test_every_flagfile_in_configs_is_valid(tmp_path):
  """Each shipped flagfile passes every check a run makes before writing
  when planned for 80 GiB devices (--memory_gib=80), a group too large
  for one at once trained in slices (Zoology's largest cells); on this
  host's own memory the accelerator-scale ones may fail only its memory
  check, in one line."""
  flagfiles = sorted((ROOT / 'configs').glob('*.flags'))
  assert len(flagfiles) >= 5
  args = lambda f: [f'--flagfile={f}', '--only_check_args',
                    f'--workdir={tmp_path}/run', f'--checkpoint_dir={tmp_path}/c']
  procs = run_py_forked([args(f) + ['--memory_gib=80'] for f in flagfiles]
                        + [args(f) for f in flagfiles])
  planned, here = procs[:len(flagfiles)], procs[len(flagfiles):]
  for f, proc in zip(flagfiles, planned):
    assert proc.returncode == 0, (f, proc.stderr)
    if '--exp=all' not in f.read_text():  # each part plans its own
      assert 'memory: the largest group needs about ' in proc.stdout, f
  assert any('at a time' in p.stdout for p in planned)  # some are sliced
  for f, proc in zip(flagfiles, here):
    assert proc.returncode == 0 or (
        proc.returncode == 2 and 'GiB available' in proc.stderr
        and len(proc.stderr.strip().splitlines()) == 1), (f, proc.stderr)
  assert not list(tmp_path.iterdir())  # nothing written
