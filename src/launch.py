"""Launching a run: every check before anything is written, then the
backend, the compilation cache, the memory check, signals, the run folder,
and a peer process's failure. `run.py` defines the flags and calls these.

`Flags` is what this module needs of the command line: the run flags'
values, which ones were given, and the config field flags as text.
"""

import contextlib
import dataclasses
import os
import re
import sys

from src import config as config_lib
from src import determinism as determinism_lib
from src import models as models_lib
from src import provenance
from src import rundir
from src import storage

MAX_AUTO_CPU_DEVICES = 8  # past this, padding seeds outweigh the idle cores
# The run flags (run.py defines them); every other flag is a config field.
RUN_FLAGS = ('exp', 'workdir', 'checkpoint_dir', 'compilation_cache_dir',
             'coordinator_address', 'num_processes', 'process_id',
             'distributed', 'cpu_devices', 'quick', 'overwrite',
             'nondeterministic')


@dataclasses.dataclass
class Flags:
  values: dict  # every flag's value, run flags and field flags (text)
  present: set  # the flags given (command line or flagfile)
  fields: dict  # the config field flags given, as text
  sources: dict  # where each given flag came from: 'flag', 'flagfile PATH'
  flagfiles: dict  # each flagfile's text
  field_names: tuple = ()  # every config field flag (run.py's)

  def __getattr__(self, name):
    try:
      return self.values[name]
    except KeyError:
      raise AttributeError(name) from None


@dataclasses.dataclass
class Plan:
  """A run, checked from end to end; nothing written, no backend started."""
  experiment: object
  config: config_lib.Config
  parts: dict  # --exp=all: each part's config, as its own process parses it
  workdir: object
  checkpoint_dir: object
  num_cpu_devices: int | None


def fail(message: str) -> None:
  sys.stderr.write(f'error: {message}\n')
  sys.exit(2)


def defaults(experiment, quick: bool) -> config_lib.Config:
  return dataclasses.replace(experiment.quick if quick else
                             experiment.defaults, quick=quick)


def parse_for(experiment, raw: dict, quick: bool) -> config_lib.Config:
  """`experiment`'s config with its own field flags from `raw`."""
  own = type(experiment.defaults).flags()
  return config_lib.parse(
      defaults(experiment, quick), {k: v for k, v in raw.items() if k in own},
      models=models_lib.names(experiment.accepts),
      one_length=experiment.one_length, parts=experiment.part_names())


def resolve(flags: Flags, experiments, argv, *,
            check_paths: bool = True) -> Plan:
  """Every check before anything is written; raises ConfigError."""
  if len(argv) > 1:
    raise config_lib.ConfigError(
        f'unexpected arguments {argv[1:]}; flags look like --name=value')
  if flags.exp not in experiments.EXPERIMENTS:
    raise config_lib.ConfigError(
        f'--exp: unknown experiment {flags.exp!r}; expected one of '
        f'{", ".join(experiments.EXPERIMENTS)}')
  experiment = experiments.load(flags.exp)
  for name in flags.fields:
    if name not in experiment.fields:
      raise config_lib.ConfigError(
          f'--{name}: --exp={flags.exp} does not take it (its flags: '
          f'--{", --".join(experiment.fields)})')
  config = parse_for(experiment, flags.fields, flags.quick)
  # --exp=all: every part's config as its own process will parse it, its
  # own flags first, the user's on top.
  from src import experiment as experiment_lib  # deferred: it imports jax
  parts = ({name: parse_for(experiments.load(exp), {**own, **flags.fields},
                            flags.quick)
            for name, (exp, own) in experiment.part_fields(config).items()}
           if isinstance(experiment, experiment_lib.Composite) else {})
  workdir = storage.path(flags.workdir or f'runs/{flags.exp}')
  checkpoint_dir = (storage.path(flags.checkpoint_dir) if flags.checkpoint_dir
                    else rundir.default_checkpoint_dir(workdir))
  if check_paths:
    rundir.check(workdir, checkpoint_dir, config, flags.overwrite,
                 recipes=experiment_lib.recipes(experiment, config),
                 defaults=defaults(experiment, flags.quick))
    if not flags.overwrite:  # each part's stored run, as its process will
      for name, part in parts.items():
        rundir.check_settings(workdir / name, part, defaults(
            experiments.load(part.exp), flags.quick))
    if flags.compilation_cache_dir:
      rundir.check_writable('compilation_cache_dir',
                            storage.path(flags.compilation_cache_dir))
  check_distributed_flags(flags)
  return Plan(experiment, config, parts, workdir, checkpoint_dir,
              cpu_devices(flags))


def check_distributed_flags(flags: Flags) -> None:
  names = ('coordinator_address', 'num_processes', 'process_id')
  given = [name in flags.present for name in names]
  if any(given) and not all(given):
    raise config_lib.ConfigError(
        '--coordinator_address, --num_processes and --process_id: give all '
        'three (or --distributed on Cloud TPU), or none')
  if all(given):
    if flags.distributed:
      raise config_lib.ConfigError(
          '--distributed: use it alone, or the three coordinator flags')
    if flags.num_processes < 1 or not (0 <= flags.process_id
                                       < flags.num_processes):
      raise config_lib.ConfigError(
          f'--process_id: expected 0..{flags.num_processes - 1} with '
          f'--num_processes={flags.num_processes} >= 1, got '
          f'{flags.process_id}')


def cpu_devices(flags: Flags) -> int | None:
  """JAX devices to make of the host CPU: each runs its share of the seeds
  on its own core. (Only the CPU backend; a TPU or GPU host's accelerators
  are the devices there.) None: $JAX_NUM_CPU_DEVICES decides (JAX reads it).
  """
  if flags.cpu_devices is not None:
    if flags.cpu_devices < 1:
      raise config_lib.ConfigError(
          f'--cpu_devices: expected an integer >= 1, got {flags.cpu_devices}')
    return flags.cpu_devices
  if os.environ.get('JAX_NUM_CPU_DEVICES'):
    return None
  cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') \
      else os.cpu_count()
  return max(1, min(cores or 1, MAX_AUTO_CPU_DEVICES))


def print_config(plan: Plan, flags: Flags, experiments) -> None:
  """Each experiment's fields: value, and default, quick, flag or flagfile."""
  print(f'--exp={flags.exp}: workdir {plan.workdir}, checkpoints '
        f'{plan.checkpoint_dir}')
  for name, config in (plan.parts or {flags.exp: plan.config}).items():
    module = experiments.load(config.exp)
    base = defaults(module, config.quick)
    rows = [['quick', str(config.quick), flags.sources.get('quick',
                                                           'default')]]
    for field in module.fields:
      value = getattr(config, field)
      text = ','.join(map(str, value)) if isinstance(value, tuple) else str(
          value)
      if field in flags.fields:
        origin = flags.sources.get(field, 'flag')
      elif value != getattr(base, field):
        origin = 'the part\'s own (experiments/all.py)'
      elif config.quick and getattr(module.quick, field) != getattr(
          module.defaults, field):
        origin = 'quick'
      else:
        origin = 'default'
      rows.append([field, text, origin])
    title = (f'part {name}: --exp={config.exp}' if plan.parts
             else f'--exp={name}')
    print(f'\n{title} (experiments/{config.exp}.py: DEFAULTS, QUICK)')
    width = max(len(r[1]) for r in rows)
    for field, text, origin in rows:
      print(f'  {field:<17s} {text:<{width}s}  {origin}')
    others = [f for f in experiments.flag_fields() if f not in module.fields]
    if others and not plan.parts:
      print(f'  not flags of --exp={name} (refused if given): '
            f'{", ".join(others)}')


def check_only(plan: Plan, flags: Flags) -> None:
  """--only_check_args: the memory check too, where this process alone can
  judge it; exits 0 or 2."""
  try:
    memory = None
    if not plan.parts and not (flags.distributed
                               or flags.coordinator_address):
      import jax  # the memory check asks the backend
      if plan.num_cpu_devices is not None:
        jax.config.update('jax_num_cpu_devices', plan.num_cpu_devices)
      from src import members
      memory = config_lib.memory_plan(
          plan.config, plan.experiment.estimate_bytes, jax.device_count(),
          members.least_local(jax.devices()[0].platform))[1]
  except config_lib.ConfigError as e:
    fail(str(e))
  try:
    listed = work_table(plan)  # a part's own checks run here too
  except config_lib.ConfigError as e:
    fail(str(e))
  print(f'--exp={flags.exp}: the flags are valid; nothing was written')
  print(listed)
  if memory:
    print(memory)
  warn_power(plan)
  sys.exit(0)


# Seconds per unit of `Group.work` x steps x members, and per group (its
# initialisation, checkpoints and writers), on the CPU of docs/REPORT.md's
# full run, fitted on its headline part's groups as they ran
# (docs/ENGINEERING.md): what the estimate below adds up.
SECONDS_PER_WORK, SECONDS_PER_GROUP = 4.0e-8, 1.6


def estimate_seconds(group, config) -> float:
  """A group's training time at the reference speed: its work over its
  longest budget and every member, and its fixed cost."""
  steps = max(group.budgets or (config.steps,))
  return (group.work * steps * config.members * SECONDS_PER_WORK
          + SECONDS_PER_GROUP)


def work_table(plan: Plan) -> str:
  """What the run will train: each part (or the experiment), its groups,
  seeds and rates, and an estimated time at the reference speed."""
  from src import experiment  # deferred: it imports jax
  configs = plan.parts or {plan.config.exp: plan.config}
  rows, total = [], 0.0
  import experiments  # pylint: disable=import-outside-toplevel
  for name, config in configs.items():
    module = experiments.load(config.exp)
    if isinstance(module, experiment.Cells):
      rows.append([name, config.exp, f'{len(module.cells(config))} cells',
                   '', ''])
      continue
    groups = [experiment.with_settings(g, config)
              for g in module.groups(config)]
    seconds = sum(estimate_seconds(g, config) for g in groups)
    total += seconds
    rows.append([name, config.exp, f'{len(groups)} groups',
                 f'{config.seeds} x {len(config.rates)}',
                 f'{seconds / 60:.0f} min' if seconds >= 30 else '<1 min'])
  from src import record
  return (record.table(rows, ['part' if plan.parts else 'exp', 'experiment',
                              'trains', 'seeds x rates', 'estimated'])
          + f'\nestimated: about {total / 60:.0f} minutes of training at the '
          'speed of the CPU docs/REPORT.md ran on (cells, and compiles, not '
          'counted)')


def warn_power(plan: Plan) -> None:
  """The power plan of the experiment, or of each part (a line per family
  and kind of claim)."""
  import experiments  # pylint: disable=import-outside-toplevel
  from src import experiment
  configs = plan.parts or {plan.config.exp: plan.config}
  for name, config in configs.items():
    module = (experiments.load(config.exp) if plan.parts
              else plan.experiment)
    warning = experiment.power_warning(module, config)
    if warning:
      print('\n'.join(f'{name}: {line}' for line in warning.splitlines())
            if plan.parts else warning, flush=True)


def run_provenance(flags: Flags, devices=None, process_count=None,
                   determinism=None) -> dict:
  return provenance.collect(
      flags={name: flags.values[name]
             for name in RUN_FLAGS + flags.field_names},
      flag_sources=flags.sources, flagfiles=flags.flagfiles, devices=devices,
      process_count=process_count, determinism=determinism)


def use_compilation_cache(folder) -> None:
  """JAX's persistent compilation cache in `folder`, keeping every program,
  however quick to compile: the initialisers and the stacking run op by op,
  dozens of small programs a process would compile afresh each time."""
  import jax
  jax.config.update('jax_compilation_cache_dir', os.fspath(folder))
  jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)


@dataclasses.dataclass
class Started:
  """What the training loop needs of a started run: its folder, the stop
  request that signals set, and the memory plan's slice of a group."""
  run_dir: rundir.RunDir
  stop: object
  slice_members: int | None


@contextlib.contextmanager
def started(plan: Plan, flags: Flags):
  """Starts the backend (and jax.distributed), the compilation cache, the
  memory plan, the signals and the run folder, and yields them (`Started`)
  to the training loop; a bad setting, a preemption, a full disk or a
  peer's failure then ends the process in one line."""
  # Before the backend starts: XLA reads XLA_FLAGS once, as it starts.
  determinism = determinism_lib.configure(flags.nondeterministic)
  import jax
  from src import checkpoint as checkpoint_lib
  from src import distributed
  from src import members
  if plan.num_cpu_devices is not None:
    jax.config.update('jax_num_cpu_devices', plan.num_cpu_devices)
  distributed.initialize(coordinator_address=flags.coordinator_address,
                         num_processes=flags.num_processes,
                         process_id=flags.process_id, auto=flags.distributed)
  if flags.compilation_cache_dir:
    use_compilation_cache(storage.absolute(flags.compilation_cache_dir))
  devices = jax.devices()
  try:
    slice_members, memory = config_lib.memory_plan(
        plan.config, plan.experiment.estimate_bytes, len(devices),
        members.least_local(devices[0].platform))
  except config_lib.ConfigError as e:
    fail(str(e))
  if distributed.is_writer():
    print(f'searchlight --exp={plan.config.exp}: {len(devices)} '
          f'{devices[0].platform} device(s) in {jax.process_count()} '
          f'process(es), workdir {plan.workdir}, checkpoints '
          f'{plan.checkpoint_dir}', flush=True)
    warn_power(plan)
    if slice_members:
      print(memory, flush=True)
  stop = checkpoint_lib.StopRequest()
  stop.install()
  extra = {'provenance': run_provenance(flags, devices, jax.process_count(),
                                        determinism)}
  try:
    with rundir.RunDir(plan.workdir, plan.checkpoint_dir,
                       is_writer=distributed.is_writer()).open(
                           plan.config, overwrite=flags.overwrite,
                           extra=extra) as run_dir:
      distributed.sync('run_dir_open')  # process 0 has cleared or locked it
      yield Started(run_dir, stop, slice_members)
  except config_lib.ConfigError as e:
    fail(str(e))
  except checkpoint_lib.Preempted as e:
    preempted(e)
  except Exception as e:  # pylint: disable=broad-except
    if storage.out_of_space(e):
      out_of_space(e)
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


def run_parent(plan: Plan, flags: Flags) -> None:
  """An experiment made of parts (--exp=all): this process never starts a
  JAX backend (nor jax.distributed), so each part, its own process, finds
  the accelerator free and starts its own."""
  from src import checkpoint as checkpoint_lib  # imports jax; starts nothing
  from src import distributed
  writer = distributed.process_index_without_backend(
      process_id=flags.process_id, auto=flags.distributed) == 0
  if writer:
    print(f'searchlight --exp={plan.config.exp}: {len(plan.parts)} parts, '
          'each its own process and backend; workdir '
          f'{plan.workdir}, checkpoints {plan.checkpoint_dir}', flush=True)
  stop = checkpoint_lib.StopRequest()
  stop.install()
  try:
    with rundir.RunDir(plan.workdir, plan.checkpoint_dir,
                       is_writer=writer).open(
                           plan.config, overwrite=flags.overwrite,
                           extra={'provenance': run_provenance(flags)}
                       ) as run_dir:
      plan.experiment.run(plan.config, run_dir, stop=stop, flags=flags)
  except config_lib.ConfigError as e:
    fail(str(e))
  except checkpoint_lib.Preempted as e:
    preempted(e)
  except RuntimeError as e:  # a part failed; its own output says why
    sys.stderr.write(f'error: {e}\n')
    sys.exit(1)
  except OSError as e:
    if not storage.out_of_space(e):
      raise
    out_of_space(e)


def out_of_space_line(e: BaseException) -> str:
  """What a full disk (`e`) tells the user: the path it was writing."""
  quoted = re.search(r'"(/[^"]+|gs://[^"]+)"', str(e))  # tensorstore's text
  where = (getattr(e, 'filename', None) or (quoted and quoted.group(1))
           or str(e).strip().splitlines()[0][:200])
  return (f'error: no space left on device, writing {where}; the run is '
          'kept up to its last checkpoint: free some space and run the same '
          'command again to resume')


def out_of_space(e: BaseException) -> None:
  """A full disk: one line naming the path, exit status 1. Every file is
  whole (written whole, or appended row by row and cut back to the last
  row), so the same command resumes once there is space."""
  sys.stderr.write(out_of_space_line(e) + '\n')
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(1)  # the writers' buffers would fail again at exit


def preempted(e) -> None:
  print(f'\nStopped by signal {e.signum} at {e.where}; the state is saved. '
        'Run the same command again to resume.', flush=True)
  sys.exit(128 + e.signum)
