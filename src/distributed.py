"""Several processes (hosts), one program: JAX's own distributed runtime.

Every process runs the same sweep; the seed axis spans the devices of all of
them. Process 0 alone writes the run's files; every process saves its share
of each checkpoint, as orbax expects. Outside these helpers the code does not
care how many processes there are.
"""

import jax
import numpy as np
from jax.experimental import multihost_utils

HEARTBEAT_TIMEOUT_S = 30  # a dead worker stops the others within about this


def initialize(*, coordinator_address: str | None, num_processes: int | None,
               process_id: int | None, auto: bool) -> None:
  """Starts `jax.distributed` before any other JAX call, when asked to.

  `auto`: Cloud TPU (and other managed clusters), where JAX finds the
  coordinator itself. Otherwise the three flags name it.
  """
  if not (auto or coordinator_address):
    return
  # Cross-process collectives on the CPU backend go through gloo (no effect
  # on TPU or GPU backends).
  jax.config.update('jax_cpu_collectives_implementation', 'gloo')
  kwargs = dict(heartbeat_timeout_seconds=HEARTBEAT_TIMEOUT_S,
                initialization_timeout=120)
  if auto:
    jax.distributed.initialize(**kwargs)
  else:
    jax.distributed.initialize(coordinator_address=coordinator_address,
                               num_processes=num_processes,
                               process_id=process_id, **kwargs)


def process_index_without_backend(*, process_id: int | None,
                                  auto: bool) -> int:
  """This process's index as `initialize` would make it, without starting
  a backend (so `--exp=all`'s parent leaves the accelerator to its parts):
  `--process_id` when given; on a managed cluster (`auto`), what
  jax.distributed's own cluster detection says; else 0."""
  if process_id is not None or not auto:
    return process_id or 0
  from jax._src import clusters  # what jax.distributed.initialize() asks
  for env in clusters.ClusterEnv._cluster_types:
    if not env.opt_in_only_method and env.is_env_present():
      return env.get_process_id()
  # A Cloud TPU host: the detection above needs a started TPU backend, so ask
  # the host's metadata (worker number) the way it does.
  return clusters.GceTpuCluster.get_process_id()


def is_writer() -> bool:
  return jax.process_index() == 0


def to_host(tree):
  """A pytree of (possibly sharded across processes) arrays as numpy, the
  whole of every array on every process."""
  if jax.process_count() == 1:
    return jax.tree.map(np.asarray, jax.device_get(tree))
  return jax.tree.map(
      lambda x: np.asarray(multihost_utils.process_allgather(x, tiled=True))
      if isinstance(x, jax.Array) and not x.is_fully_addressable
      else np.asarray(x), tree)


def agree(value: bool) -> bool:
  """Process 0's answer, on every process (what is finished, say)."""
  if jax.process_count() == 1:
    return value
  return bool(multihost_utils.broadcast_one_to_all(np.asarray(value)))


def any_process(value: bool) -> bool:
  """True on every process if it is true on any (a stop signal, say)."""
  if jax.process_count() == 1:
    return value
  return bool(np.any(multihost_utils.process_allgather(np.asarray(value))))


def sync(name: str) -> None:
  if jax.process_count() > 1:
    multihost_utils.sync_global_devices(name)
