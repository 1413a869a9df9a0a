"""Searchlight: measure, claim by claim, why attention replaced recurrence.

  python run.py --exp=distance            # train, test, write runs/distance
  python run.py --exp=distance --print_config   # each field, and from where
  python run.py --flagfile=configs/tpu_distance.flags   # flags from a file
  tensorboard --logdir runs/distance      # watch it

This file is intentionally kept short: it defines the flags, checks them
before anything is written, and hands a config to one experiment.
"""

import dataclasses
import os
import re
import sys

from absl import app, flags, logging

import experiments
from experiments import EXPERIMENTS, load
from src import config as config_lib
from src import models as models_lib
from src import provenance
from src import rundir
from src import storage

FLAGS = flags.FLAGS
MAX_AUTO_CPU_DEVICES = 8  # past this, padding seeds outweigh the idle cores

flags.DEFINE_string('exp', 'distance',
                    f'experiment to run: one of {", ".join(EXPERIMENTS)}')
flags.DEFINE_string('workdir', None, 'output folder, local or gs://bucket/... '
                    '(default runs/<exp>)')
flags.DEFINE_string('checkpoint_dir', None, 'checkpoint folder, local or '
                    'gs://bucket/... (default checkpoints/<exp>)')
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
                     f'{MAX_AUTO_CPU_DEVICES}')
flags.DEFINE_bool('quick', False,
                  "the experiment's CPU-fast variant: a first look in a "
                  'fraction of the time')
flags.DEFINE_bool('overwrite', False,
                  'discard the run in --workdir and its checkpoints first')
flags.DEFINE_bool('print_config', False,
                  'print every config field the experiment reads, its value '
                  'and where it came from (default, quick, flag or flagfile), '
                  'then exit without writing anything')
_RUN_FLAGS = ('exp', 'workdir', 'checkpoint_dir', 'compilation_cache_dir',
              'coordinator_address', 'num_processes', 'process_id',
              'distributed', 'cpu_devices', 'quick', 'overwrite')


class _FieldParser(flags.ArgumentParser):
  """A config field flag: --help shows its type; the text is kept for
  src/config.py, which parses it once the experiment (and so the models it
  accepts) is known, so every bad value gets the same one-line error."""

  def __init__(self, name: str):
    self.syntactic_help = config_lib.FLAG_SYNTAX[name]

  def parse(self, argument):
    return argument

  def flag_type(self) -> str:
    return 'string'


_FIELD_FLAGS = ('models', 'lengths', 'seeds', 'seed', 'steps', 'batch_size',
                'learning_rate', 'd_model', 'num_heads', 'num_layers',
                'heads', 'depths', 'vocab', 'budgets',
                'num_filler', 'eval_examples', 'chunk_steps',
                'checkpoint_every')
for _name in _FIELD_FLAGS:
  flags.DEFINE(
      _FieldParser(_name), _name, None,
      f'{config_lib.field_docs()[_name]} (default: the experiment\'s, as '
      '--print_config shows)', serializer=flags.ArgumentSerializer())


def fail(message: str) -> None:
  sys.stderr.write(f'error: {message}\n')
  sys.exit(2)


def given_fields() -> dict[str, str]:
  """The config field flags the user gave (command line or flagfile), as
  text."""
  return {name: FLAGS[name].value for name in _FIELD_FLAGS
          if FLAGS[name].value is not None}


def passthrough(part: str) -> list[str]:
  """The flags the user gave that part `part` of --exp=all reads."""
  names = tuple(n for n in _FIELD_FLAGS if n in load(part).FIELDS) + (
      'quick', 'compilation_cache_dir', 'cpu_devices', 'coordinator_address',
      'num_processes', 'process_id', 'distributed', 'verbosity')
  out = []
  for name in names:
    if FLAGS[name].present:
      value = FLAGS[name].value
      out.append(f'--{name}' if value is True else
                 f'--no{name}' if value is False else f'--{name}={value}')
  return out


def flag_sources(argv: list[str]) -> tuple[dict[str, str], dict[str, str]]:
  """Where each given flag came from ('flag', or 'flagfile PATH'; the last
  one given wins, as in absl), and the text of each flagfile."""
  sources, files = {}, {}
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
  return sources, files


def _flag_name(token: str) -> str:
  name = token.lstrip('-').split('=', 1)[0]
  if name not in FLAGS and name.startswith('no') and name[2:] in FLAGS:
    return name[2:]
  return name


def check_distributed_flags() -> None:
  given = [FLAGS[f].present for f in ('coordinator_address', 'num_processes',
                                      'process_id')]
  if any(given) and not all(given):
    raise config_lib.ConfigError(
        '--coordinator_address, --num_processes and --process_id: give all '
        'three (or --distributed on Cloud TPU), or none')
  if all(given):
    if FLAGS.distributed:
      raise config_lib.ConfigError(
          '--distributed: use it alone, or the three coordinator flags')
    if FLAGS.num_processes < 1 or not 0 <= FLAGS.process_id < FLAGS.num_processes:
      raise config_lib.ConfigError(
          f'--process_id: expected 0..{FLAGS.num_processes - 1} with '
          f'--num_processes={FLAGS.num_processes} >= 1, got {FLAGS.process_id}')


def cpu_devices() -> int | None:
  """JAX devices to make of the host CPU: each runs its share of the seeds
  on its own core. (Only the CPU backend; a TPU or GPU host's accelerators
  are the devices there.) None: $JAX_NUM_CPU_DEVICES decides (JAX reads it).
  """
  if FLAGS.cpu_devices is not None:
    if FLAGS.cpu_devices < 1:
      raise config_lib.ConfigError(
          f'--cpu_devices: expected an integer >= 1, got {FLAGS.cpu_devices}')
    return FLAGS.cpu_devices
  if os.environ.get('JAX_NUM_CPU_DEVICES'):
    return None
  cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') \
      else os.cpu_count()
  return max(1, min(cores or 1, MAX_AUTO_CPU_DEVICES))


@dataclasses.dataclass
class Plan:
  """A run, checked from end to end; nothing written, no backend started."""
  experiment: object
  config: config_lib.Config
  parts: dict  # --exp=all: each part's config, as its own process parses it
  workdir: object
  checkpoint_dir: object
  num_cpu_devices: int | None


def defaults(module) -> config_lib.Config:
  return dataclasses.replace(module.QUICK if FLAGS.quick else module.DEFAULTS,
                             quick=FLAGS.quick)


def resolve(argv: list[str], *, check_paths: bool = True) -> Plan:
  """Every check before anything is written; raises ConfigError."""
  if len(argv) > 1:
    raise config_lib.ConfigError(
        f'unexpected arguments {argv[1:]}; flags look like --name=value')
  if FLAGS.exp not in EXPERIMENTS:
    raise config_lib.ConfigError(
        f'--exp: unknown experiment {FLAGS.exp!r}; expected one of '
        f'{", ".join(EXPERIMENTS)}')
  experiment = load(FLAGS.exp)
  raw = given_fields()
  reads = experiments.fields(FLAGS.exp)
  for name in raw:
    if name not in reads:
      raise config_lib.ConfigError(
          f'--{name}: --exp={FLAGS.exp} does not read it (it reads '
          f'--{", --".join(reads)})')
  config = config_lib.parse(defaults(experiment), raw,
                            models=models_lib.names(experiment.accepts),
                            one_length=getattr(experiment, 'ONE_LENGTH',
                                               False))
  parts = {}
  for part in getattr(experiment, 'PARTS', ()):  # each must accept its flags
    module = load(part)
    parts[part] = config_lib.parse(
        defaults(module), {k: v for k, v in raw.items() if k in module.FIELDS},
        models=models_lib.names(module.accepts),
        one_length=getattr(module, 'ONE_LENGTH', False))
  workdir = storage.path(FLAGS.workdir or f'runs/{FLAGS.exp}')
  checkpoint_dir = storage.path(FLAGS.checkpoint_dir or
                                f'checkpoints/{FLAGS.exp}')
  if check_paths:
    rundir.check(workdir, checkpoint_dir, config, FLAGS.overwrite)
    if FLAGS.compilation_cache_dir:
      rundir.check_writable('compilation_cache_dir',
                            storage.path(FLAGS.compilation_cache_dir))
  check_distributed_flags()
  return Plan(experiment, config, parts, workdir, checkpoint_dir,
              cpu_devices())


def print_config(plan: Plan) -> None:
  """Each experiment's fields: value, and default, quick, flag or flagfile."""
  sources, _ = flag_sources(sys.argv)
  given = given_fields()
  print(f'--exp={FLAGS.exp}: workdir {plan.workdir}, checkpoints '
        f'{plan.checkpoint_dir}')
  for name, config in (plan.parts or {FLAGS.exp: plan.config}).items():
    module = load(name)
    rows = [['quick', str(config.quick), sources.get('quick', 'default')]]
    for field in module.FIELDS:
      value = getattr(config, field)
      text = ','.join(map(str, value)) if isinstance(value, tuple) else str(
          value)
      if field in given:
        origin = sources.get(field, 'flag')
      elif config.quick and getattr(module.QUICK, field) != getattr(
          module.DEFAULTS, field):
        origin = 'quick'
      else:
        origin = 'default'
      rows.append([field, text, origin])
    print(f'\n--exp={name} (experiments/{name}.py: DEFAULTS, QUICK)')
    width = max(len(r[1]) for r in rows)
    for field, text, origin in rows:
      print(f'  {field:<17s} {text:<{width}s}  {origin}')
    unread = [f for f in experiments.fields('all') if f not in module.FIELDS]
    if unread and not plan.parts:
      print(f'  not read by --exp={name} (refused if given): '
            f'{", ".join(unread)}')


def check_only(argv: list[str]) -> None:
  """--only_check_args: every check a run makes before writing, memory
  included where this process alone can judge it; exits 0 or 2."""
  try:
    plan = resolve(argv)
    if not plan.parts and not (FLAGS.distributed or FLAGS.coordinator_address):
      import jax  # the memory check asks the backend
      if plan.num_cpu_devices is not None:
        jax.config.update('jax_num_cpu_devices', plan.num_cpu_devices)
      config_lib.check_memory(plan.config, getattr(
          plan.experiment, 'estimate_bytes', config_lib.estimate_bytes))
  except config_lib.ConfigError as e:
    fail(str(e))
  print(f'--exp={FLAGS.exp}: the flags are valid; nothing was written')
  sys.exit(0)


def parse_flags(argv: list[str]) -> list[str]:
  """absl's parsing, with a bad or unknown flag refused in one line (exit
  2), and --only_check_args running the checks a run makes."""
  try:
    argv = FLAGS(argv)
  except flags.UnrecognizedFlagError as e:
    fail(f'--{e.flagname}: unknown flag; `python run.py --help` lists them')
  except flags.Error as e:
    message = str(e).strip().splitlines()[0]
    match = re.match(r'flag --(\w+)=(.*?): ', message)
    if match and match.group(1) in FLAGS:
      name, value = match.groups()
      expected = FLAGS[name].parser.syntactic_help or 'a valid value'
      message = f'--{name}: expected {expected}, got {value!r}'
    fail(message)
  if FLAGS.only_check_args:
    check_only(argv)
  return argv


def run_provenance(devices=None, process_count=None) -> dict:
  sources, files = flag_sources(sys.argv)
  return provenance.collect(
      flags={name: FLAGS[name].value for name in _RUN_FLAGS + _FIELD_FLAGS},
      flag_sources=sources, flagfiles=files, devices=devices,
      process_count=process_count)


def main(argv):
  if not FLAGS['verbosity'].present:
    logging.set_verbosity(logging.WARNING)  # orbax is chatty at INFO
  try:
    plan = resolve(argv, check_paths=not FLAGS.print_config)
  except config_lib.ConfigError as e:
    fail(str(e))
  if FLAGS.print_config:
    print_config(plan)
  elif plan.parts:
    run_parts(plan)
  else:
    run_one(plan)


def run_one(plan: Plan) -> None:
  import jax
  from src import checkpoint as checkpoint_lib
  from src import distributed
  if plan.num_cpu_devices is not None:
    jax.config.update('jax_num_cpu_devices', plan.num_cpu_devices)
  distributed.initialize(coordinator_address=FLAGS.coordinator_address,
                         num_processes=FLAGS.num_processes,
                         process_id=FLAGS.process_id, auto=FLAGS.distributed)
  if FLAGS.compilation_cache_dir:
    jax.config.update('jax_compilation_cache_dir', os.fspath(
        storage.absolute(FLAGS.compilation_cache_dir)))
    jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.2)
  try:
    config_lib.check_memory(plan.config, getattr(
        plan.experiment, 'estimate_bytes', config_lib.estimate_bytes))
  except config_lib.ConfigError as e:
    fail(str(e))
  devices = jax.devices()
  if distributed.is_writer():
    print(f'searchlight --exp={plan.config.exp}: {len(devices)} '
          f'{devices[0].platform} device(s) in {jax.process_count()} '
          f'process(es), workdir {plan.workdir}, checkpoints '
          f'{plan.checkpoint_dir}', flush=True)
  stop = checkpoint_lib.StopRequest()
  stop.install()
  extra = {'provenance': run_provenance(devices, jax.process_count())}
  try:
    with rundir.RunDir(plan.workdir, plan.checkpoint_dir,
                       is_writer=distributed.is_writer()).open(
                           plan.config, overwrite=FLAGS.overwrite,
                           extra=extra) as run_dir:
      distributed.sync('run_dir_open')  # process 0 has cleared or locked it
      plan.experiment.run(plan.config, run_dir, stop=stop)
  except config_lib.ConfigError as e:
    fail(str(e))
  except checkpoint_lib.Preempted as e:
    preempted(e)
  except Exception as e:  # pylint: disable=broad-except
    if jax.process_count() == 1:
      raise
    # A peer died mid-collective: say so and leave at once (the orderly
    # shutdown would wait for the dead peer's heartbeat).
    sys.stderr.write(f'error: process {jax.process_index()}: a peer process '
                     f'failed ({str(e).splitlines()[0][:200]}); checkpoints up '
                     'to the last one are kept: rerun on every worker to '
                     'resume\n')
    sys.stderr.flush()
    os._exit(1)


def run_parts(plan: Plan) -> None:
  """--exp=all: each part runs as its own `run.py` process. This one never
  starts a JAX backend (nor jax.distributed), so each part finds the
  accelerator free and starts its own."""
  from src import checkpoint as checkpoint_lib  # imports jax; starts nothing
  from src import distributed
  writer = distributed.process_index_without_backend(
      process_id=FLAGS.process_id, auto=FLAGS.distributed) == 0
  if writer:
    print(f'searchlight --exp={plan.config.exp}: {len(plan.parts)} parts, '
          'each its own process and backend; workdir '
          f'{plan.workdir}, checkpoints {plan.checkpoint_dir}', flush=True)
  stop = checkpoint_lib.StopRequest()
  stop.install()
  try:
    with rundir.RunDir(plan.workdir, plan.checkpoint_dir,
                       is_writer=writer).open(
                           plan.config, overwrite=FLAGS.overwrite,
                           extra={'provenance': run_provenance()}) as run_dir:
      plan.experiment.run(plan.config, run_dir, stop=stop, passthrough={
          part: passthrough(part) for part in plan.parts})
  except config_lib.ConfigError as e:
    fail(str(e))
  except checkpoint_lib.Preempted as e:
    preempted(e)
  except RuntimeError as e:  # a part failed; its own output says why
    sys.stderr.write(f'error: {e}\n')
    sys.exit(1)


def preempted(e) -> None:
  print(f'\nStopped by signal {e.signum} at {e.where}; the state is saved. '
        'Run the same command again to resume.', flush=True)
  sys.exit(128 + e.signum)


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
