"""Searchlight: measure, claim by claim, why attention replaced recurrence.

  python run.py --exp=distance            # train, test, write runs/distance
  tensorboard --logdir runs/distance      # watch it

This file is intentionally kept short: it defines the flags, checks them
before anything is written, and hands a config to one experiment.
"""

import dataclasses
import os
import sys

from absl import app, flags, logging

import experiments
from experiments import EXPERIMENTS, load
from src import config as config_lib
from src import models as models_lib
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
# Config fields: text flags, parsed and validated by src/config.py, so every
# bad value gets the same one-line message.
_FIELD_FLAGS = ('models', 'lengths', 'seeds', 'seed', 'steps', 'batch_size',
                'learning_rate', 'd_model', 'num_heads', 'num_layers',
                'heads', 'depths', 'vocab', 'budgets',
                'num_filler', 'eval_examples', 'chunk_steps',
                'checkpoint_every')
for _name in _FIELD_FLAGS:
  flags.DEFINE_string(
      _name, None, f'{config_lib.field_docs()[_name]}; default: the '
      "experiment's (see README)")


def fail(message: str) -> None:
  sys.stderr.write(f'error: {message}\n')
  sys.exit(2)


def given_fields() -> dict[str, str]:
  """The config field flags the user gave, as text."""
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


def main(argv):
  if not FLAGS['verbosity'].present:
    logging.set_verbosity(logging.WARNING)  # orbax is chatty at INFO
  if len(argv) > 1:
    fail(f'unexpected arguments {argv[1:]}; flags look like --name=value')
  try:
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
    defaults = experiment.QUICK if FLAGS.quick else experiment.DEFAULTS
    config = config_lib.parse(
        dataclasses.replace(defaults, quick=FLAGS.quick), raw,
        models=models_lib.names(experiment.accepts))
    if FLAGS.exp == 'all':  # each part must accept the flags handed to it
      for part in experiment.PARTS:
        module = load(part)
        config_lib.parse(module.QUICK if FLAGS.quick else module.DEFAULTS,
                         {k: v for k, v in raw.items() if k in module.FIELDS},
                         models=models_lib.names(module.accepts))
    workdir = storage.path(FLAGS.workdir or f'runs/{FLAGS.exp}')
    checkpoint_dir = storage.path(FLAGS.checkpoint_dir or
                                  f'checkpoints/{FLAGS.exp}')
    rundir.check(workdir, checkpoint_dir, config, FLAGS.overwrite)
    if FLAGS.compilation_cache_dir:
      rundir.check_writable('compilation_cache_dir',
                            storage.path(FLAGS.compilation_cache_dir))
    check_distributed_flags()
    num_cpu_devices = cpu_devices()
  except config_lib.ConfigError as e:
    fail(str(e))

  import jax
  from src import checkpoint as checkpoint_lib
  from src import distributed
  if num_cpu_devices is not None:
    jax.config.update('jax_num_cpu_devices', num_cpu_devices)
  distributed.initialize(coordinator_address=FLAGS.coordinator_address,
                         num_processes=FLAGS.num_processes,
                         process_id=FLAGS.process_id, auto=FLAGS.distributed)
  if FLAGS.compilation_cache_dir:
    jax.config.update('jax_compilation_cache_dir', os.fspath(
        storage.absolute(FLAGS.compilation_cache_dir)))
    jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.2)
  try:
    config_lib.check_memory(config, getattr(
        experiment, 'estimate_bytes', config_lib.estimate_bytes))
  except config_lib.ConfigError as e:
    fail(str(e))
  devices = jax.devices()
  if distributed.is_writer():
    print(f'searchlight --exp={config.exp}: {len(devices)} '
          f'{devices[0].platform} device(s) in {jax.process_count()} '
          f'process(es), workdir {workdir}, checkpoints {checkpoint_dir}',
          flush=True)
  stop = checkpoint_lib.StopRequest()
  stop.install()
  import flax, optax, orbax.checkpoint
  extra = {'versions': {'jax': jax.__version__, 'flax': flax.__version__,
                        'optax': optax.__version__,
                        'orbax-checkpoint': orbax.checkpoint.__version__,
                        'python': sys.version.split()[0]},
           'devices': [str(d) for d in devices]}
  try:
    with rundir.RunDir(workdir, checkpoint_dir,
                       is_writer=distributed.is_writer()).open(
                           config, overwrite=FLAGS.overwrite,
                           extra=extra) as run_dir:
      distributed.sync('run_dir_open')  # process 0 has cleared or locked it
      if FLAGS.exp == 'all':
        experiment.run(config, run_dir, stop=stop, passthrough={
            part: passthrough(part) for part in experiment.PARTS})
      else:
        experiment.run(config, run_dir, stop=stop)
  except config_lib.ConfigError as e:
    fail(str(e))
  except checkpoint_lib.Preempted as e:
    print(f'\nStopped by signal {e.signum} at {e.where}; the state is saved. '
          'Run the same command again to resume.', flush=True)
    sys.exit(128 + e.signum)
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


if __name__ == '__main__':
  app.run(main)
