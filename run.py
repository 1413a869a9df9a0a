"""Searchlight: why attention replaced recurrence, measured claim by claim.

  python run.py --exp=distance          # train, test: runs/distance
  python run.py --exp=all               # every experiment, then REPORT.md
  python run.py --exp=distance --lengths=10,200 --workdir=runs/d2
                                        # a changed flag is a new run
  tensorboard --logdir runs/distance/tb/overview   # the finding, then
  tensorboard --logdir runs/distance/tb            # every group and seed

The same command again resumes where it stopped (a finished run is not
redone). --print_config shows every field and where it came from;
--only_check_args runs every check and writes nothing.
"""
# Kept short on purpose: the flags (the config fields of src/config.py's
# Config and of each experiment's own config class), a bad one refused in
# one line, then the run started (src/launch.py) and its training loop
# (src/runner.py's `train_and_evaluate`).

import dataclasses
import re
import sys
import textwrap

from absl import app, flags, logging

import experiments
from src import config as config_lib
from src import experiment
from src import launch

FLAGS = flags.FLAGS

flags.DEFINE_string('exp', 'distance', 'experiment to run: one of '
                    f'{", ".join(experiments.EXPERIMENTS)}')
flags.DEFINE_string('workdir', None, 'output folder, local or gs://bucket/... '
                    '(default runs/<exp>)')
flags.DEFINE_string('checkpoint_dir', None, 'checkpoint folder, local or '
                    'gs://bucket/..., owned by this run (default: follows '
                    '--workdir, runs/X -> checkpoints/X, else '
                    '<workdir>/checkpoints)')
flags.DEFINE_string('compilation_cache_dir', '.jax_cache',
                    'persistent XLA compilation cache, so a rerun does not '
                    'compile again; empty disables it')
flags.DEFINE_string('coordinator_address', None,
                    'multi-host: host:port of process 0 (with --num_processes '
                    'and --process_id)')
flags.DEFINE_integer('num_processes', None, 'multi-host: number of processes')
flags.DEFINE_integer('process_id', None, 'multi-host: this process, 0-based')
flags.DEFINE_bool('distributed', False,
                  'multi-host on Cloud TPU: JAX finds the coordinator itself')
flags.DEFINE_integer('cpu_devices', None,
                     'on a CPU host, how many JAX devices to make of it (the '
                     'seed axis is split over them, one program per core); '
                     'default: $JAX_NUM_CPU_DEVICES, else one per core, at most '
                     f'{launch.MAX_AUTO_CPU_DEVICES}')
flags.DEFINE_bool('nondeterministic', False,
                  "on a GPU, leave XLA's deterministic ops off: faster, but "
                  'two runs of the same flags may differ (default: on '
                  'wherever a GPU may be used; a CPU run is deterministic '
                  'either way)')
flags.DEFINE_bool('quick', False,
                  "the experiment's CPU-fast variant: a first look in a "
                  'fraction of the time')
flags.DEFINE_bool('overwrite', False,
                  'discard the run in --workdir and the checkpoint folder it '
                  'owns first (never another run\'s: refused)')
flags.DEFINE_bool('print_config', False,
                  'print every config field the experiment reads, its value '
                  'and where it came from (default, quick, flag or flagfile), '
                  'then exit without writing anything')


class _FieldParser(flags.ArgumentParser):
  """A config field flag: --help shows what it takes; the text is kept for
  src/config.py, which parses it once the experiment (and so the models it
  accepts) is known, so every bad value gets the same one-line error."""

  def __init__(self, field):
    self.syntactic_help = field.metadata['syntax']

  def parse(self, argument):
    return argument

  def flag_type(self) -> str:
    return 'string'


DEFAULT_NOTE = " (default: the experiment's, as --print_config shows)"
FIELDS = experiments.flag_fields()  # {name: field}, every experiment's
for _name, _field in FIELDS.items():
  flags.DEFINE(_FieldParser(_field), _name, None,
               f'{_field.metadata["doc"]}{DEFAULT_NOTE}',
               serializer=flags.ArgumentSerializer())


def command_line(argv: list[str]) -> launch.Flags:
  """The parsed flags as src/launch.py reads them."""
  sources, files = {}, {}  # where each given flag came from; flagfile texts
  for token in argv[1:]:
    if token == '--':
      break
    if not token.startswith('-'):
      continue
    if _flag_name(token) == 'flagfile' and '=' in token:
      path = token.split('=', 1)[1]
      try:
        files[path] = open(path).read()
      except OSError:
        continue  # absl has already refused it
      for inner in FLAGS.read_flags_from_files([argv[0], token])[1:]:
        sources[_flag_name(inner)] = f'flagfile {path}'
    else:
      sources[_flag_name(token)] = 'flag'
  present = {name for name in FLAGS if FLAGS[name].present}
  return launch.Flags(
      values=FLAGS.flag_values_dict(), present=present,
      fields={name: FLAGS[name].value for name in FIELDS
              if FLAGS[name].value is not None},
      sources=sources, flagfiles=files, field_names=tuple(FIELDS))


def _flag_name(token: str) -> str:
  name = token.lstrip('-').split('=', 1)[0]
  if name not in FLAGS and name.startswith('no') and name[2:] in FLAGS:
    return name[2:]
  return name


HELP = ('--help', '-h', '-?', '--helpshort', '--helpfull')
# absl's own flags, in our words.
OWN_WORDS = {
    'only_check_args': 'run every check a run makes before it writes (flags, '
                       'paths, buckets, memory), then exit 0, or 2 with the '
                       'one-line error; --exp=all also lists its parts, '
                       'their groups and an estimated time',
    'verbosity': 'absl logging level (default: warnings only)',
}


def usage() -> str:
  """What --help prints: what Searchlight is, then every flag a user sets:
  the run's, the shared config fields, each experiment's own fields under
  its name, and absl's --flagfile, --only_check_args and --verbosity."""
  lines = [__doc__.strip(), '', 'Flags (config fields default to the '
           "experiment's, as --print_config shows):"]
  first = ('exp', 'workdir', 'checkpoint_dir', 'quick', 'overwrite',
           'print_config', 'only_check_args', 'flagfile')
  last = ('compilation_cache_dir', 'nondeterministic', 'cpu_devices',
          'coordinator_address', 'num_processes', 'process_id',
          'distributed', 'verbosity')
  shared = config_lib.Config.flags()
  for name in first + shared + last:
    lines.append(_flag_help(name, FIELDS.get(name)))
  lines += ['', "Each experiment's own flags:"]
  for exp in experiments.EXPERIMENTS:
    config = type(experiments.load(exp).defaults)
    own = [f for f in dataclasses.fields(config)
           if f.name in config.flags() and f.name not in shared]
    for field in own:
      lines.append(_flag_help(field.name, field, f'--exp={exp}: '))
  return '\n'.join(lines)


def _flag_help(name: str, field=None, prefix: str = '') -> str:
  if name == 'flagfile':  # absl's own, read before the flags are
    text = 'read flags from a file, one per line (configs/ has some)'
  elif field is not None:
    text = f'{field.metadata["doc"]} [{field.metadata["syntax"]}]'
  else:
    text = OWN_WORDS.get(name, FLAGS[name].help)
  return textwrap.fill(f'{prefix}--{name}: {text}', 79, initial_indent='  ',
                       subsequent_indent='      ')


def parse_flags(argv: list[str]) -> list[str]:
  """absl's parsing, with a bad or unknown flag refused in one line (exit
  2), --help answered (exit 0), and --only_check_args running the checks a
  run makes."""
  if any(a in HELP for a in argv[1:]):
    print(usage())
    sys.exit(0)
  try:
    argv = FLAGS(argv)
  except flags.UnrecognizedFlagError as e:
    launch.fail(f'--{e.flagname}: unknown flag; `python run.py --help` lists '
                'them')
  except flags.Error as e:
    message = str(e).strip().splitlines()[0]
    match = re.match(r'flag --(\w+)=(.*?): ', message)
    if match and match.group(1) in FLAGS:
      name, value = match.groups()
      expected = FLAGS[name].parser.syntactic_help or 'a valid value'
      message = f'--{name}: expected {expected}, got {value!r}'
    launch.fail(message)
  if FLAGS.only_check_args:
    given = command_line(sys.argv)
    try:
      plan = launch.resolve(given, experiments, argv)
    except config_lib.ConfigError as e:
      launch.fail(str(e))
    launch.check_only(plan, given)
  return argv


def main(argv):
  if not FLAGS['verbosity'].present:
    logging.set_verbosity(logging.WARNING)  # orbax is chatty at INFO
  given = command_line(sys.argv)
  try:
    plan = launch.resolve(given, experiments, argv,
                          check_paths=not FLAGS.print_config)
  except config_lib.ConfigError as e:
    launch.fail(str(e))
  if FLAGS.print_config:
    launch.print_config(plan, given, experiments)
  elif isinstance(plan.experiment, experiment.Composite):
    launch.run_parent(plan, given)  # --exp=all: each part a process
  else:
    from src import runner  # after the flags: jax starts with XLA's flags
    with launch.started(plan, given) as run:
      runner.train_and_evaluate(plan.experiment, plan.config, run.run_dir,
                                stop=run.stop,
                                slice_members=run.slice_members)


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
