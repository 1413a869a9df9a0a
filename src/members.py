"""The member axis of a group's ensemble: every (learning rate, seed) pair,
rate-major (member r * S + s is seed s at rate r), padded so that every
device holds as many, sharded over the devices of every process, and run
in slices where a group's members do not fit a device at once. Host-side
layout only: the programs themselves are `src/train.py`'s (training) and
`src/evaluation.py`'s (tests).
"""

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

from src import distributed

SEED_AXIS = 'seeds'
# The fewest members a device holds: a `vmap` over one member compiles
# differently from one over several, so an accelerator holds at least two; a
# CPU device loops over its members (`Members.each`), a loop of one member
# computing as a loop of many, so it holds one (no padding member to train).
MIN_LOCAL_SEEDS = 2
MIN_LOCAL_SEEDS_CPU = 1


def seed_mesh(devices=None) -> jax.sharding.Mesh:
  """A 1-D mesh, the seed axis: over every device of every process, or over
  `devices`."""
  if devices is not None:
    return jax.sharding.Mesh(np.array(devices), (SEED_AXIS,),
                             axis_types=(jax.sharding.AxisType.Auto,))
  return jax.make_mesh((jax.device_count(),), (SEED_AXIS,),
                       axis_types=(jax.sharding.AxisType.Auto,))


def on_cpu(mesh) -> bool:
  """Whether `mesh`'s devices are CPU devices, where a device runs its
  members one after another (`lax.map`) rather than side by side (`vmap`):
  XLA:CPU runs a matmul batched over members slower than the same matmuls
  one member at a time (measured in docs/ENGINEERING.md), while an
  accelerator fills its cores with the batch."""
  return mesh.devices.flat[0].platform == 'cpu'


def least_local(platform: str) -> int:
  """The fewest members each device of `platform` holds."""
  return MIN_LOCAL_SEEDS_CPU if platform == 'cpu' else MIN_LOCAL_SEEDS


def padded_seeds(num_seeds: int, num_devices: int, min_local: int) -> int:
  """Seeds per device times devices: every device holds the same number, at
  least `min_local`, so every seed's arithmetic is the same whatever the
  ensemble size (the padding seeds are dropped from the results)."""
  return max(min_local, -(-num_seeds // num_devices)) * num_devices


def member_seeds(num_seeds: int, num_rates: int, padded: int) -> np.ndarray:
  """The seed index of each member: member r * num_seeds + s is seed s at
  rate r; a padding member past them gets an index of its own (its results
  are dropped)."""
  real = num_seeds * num_rates
  return np.concatenate([np.tile(np.arange(num_seeds), num_rates),
                         np.arange(real, padded)]).astype(np.int32)


class Members:
  """`num_seeds` seeds at each of `learning_rates` on `mesh`'s seed axis.

  `padded` members in all (the real ones first); a group whose members do
  not fit a device at once (`slice_members`: at most so many at a time)
  runs its programs on one slice of `slice_size` members after another,
  each member's arithmetic as in one program (each device holds as many
  members of a slice, at least `min_local_seeds`, by default
  `least_local` of its platform); the state stays whole.
  """

  def __init__(self, num_seeds: int, learning_rates, mesh=None, *,
               min_local_seeds: int | None = None,
               slice_members: int | None = None):
    self.learning_rates = tuple(
        float(r) for r in np.atleast_1d(np.asarray(learning_rates, float)))
    self.num_seeds = num_seeds
    self.num_members = num_seeds * len(self.learning_rates)
    self.mesh = mesh or seed_mesh()
    if min_local_seeds is None:
      min_local_seeds = least_local(self.mesh.devices.flat[0].platform)
    self.padded = padded_seeds(self.num_members, self.mesh.size,
                               min_local_seeds)
    self.slice_size = self.padded
    if slice_members and slice_members < self.padded:
      self.slice_size = max(min_local_seeds,
                            slice_members // self.mesh.size) * self.mesh.size
      self.padded = -(-self.padded // self.slice_size) * self.slice_size
    self.slices = self.padded // self.slice_size
    self.sharding = NamedSharding(self.mesh, P(SEED_AXIS))
    self.seed_index = member_seeds(num_seeds, len(self.learning_rates),
                                   self.padded)

  @property
  def on_cpu(self) -> bool:
    """Whether the members train on CPU devices (`on_cpu`)."""
    return on_cpu(self.mesh)

  def each(self, fn, *members, shared=()):
    """fn(*member_args, *shared) for every member of a device's block:
    `members` have the member axis first, `shared` are the same for all;
    one after another on a CPU, side by side on an accelerator
    (`on_cpu`)."""
    if self.on_cpu:
      return jax.lax.map(lambda m: fn(*m, *shared), members)
    return jax.vmap(lambda *m: fn(*m, *shared))(*members)

  def rates(self) -> np.ndarray:
    """Each member's learning rate (a padding member: the first rate)."""
    rates = np.full(self.padded, self.learning_rates[0], np.float32)
    rates[:self.num_members] = np.repeat(self.learning_rates, self.num_seeds)
    return rates

  def place(self, tree):
    """Puts member-stacked leaves on the seed axis of every device of every
    process; leaves already spread over processes stay where they are."""
    def put(x):
      if isinstance(x, jax.Array) and not x.is_fully_addressable:
        return x
      host = np.asarray(x)
      return jax.make_array_from_callback(host.shape, self.sharding,
                                          lambda index: host[index])
    return jax.tree.map(put, tree)

  def per_slice(self, *trees):
    """The shapes (and shardings) of `trees`' first slice of members: what
    a program runs on (`by_slice`)."""
    n = self.slice_size
    return tuple(jax.tree.map(lambda x: jax.ShapeDtypeStruct(
        (n,) + tuple(x.shape[1:]), x.dtype, sharding=self.sharding), t)
                 for t in trees)

  def by_slice(self, run: Callable, *trees):
    """run(*trees) on one slice of the member axis after another, the
    outputs joined back on that axis (at once where one slice holds every
    member)."""
    if self.slices == 1:
      return run(*trees)
    n = self.slice_size
    part = lambda x, k: jax.device_put(x[k * n:(k + 1) * n], self.sharding)
    outs = [run(*(jax.tree.map(lambda x: part(x, k), t) for t in trees))
            for k in range(self.slices)]
    return jax.tree.map(lambda *xs: jax.device_put(
        jnp.concatenate(xs), self.sharding), *outs)

  def unpad(self, tree: Any) -> Any:
    """Drops the padding members from a member-stacked pytree (on the
    host)."""
    return jax.tree.map(lambda x: x[:self.num_members],
                        distributed.to_host(tree))

  def at_rate(self, tree: Any, rate_index: int) -> Any:
    """The members of rate `rate_index`, one per seed, from an unpadded
    member-stacked pytree (on the host)."""
    S = self.num_seeds
    return jax.tree.map(lambda x: np.asarray(x)[rate_index * S:
                                                (rate_index + 1) * S], tree)

  def rate_first(self, params, rate_index: int):
    """`params` with rate `rate_index`'s members moved to the front (members
    0..S-1 are then its seeds); the shape, and so every compiled program,
    stays the same."""
    if not rate_index:
      return params
    shift = rate_index * self.num_seeds
    roll = jax.jit(lambda t: jax.tree.map(
        lambda x: jnp.roll(x, -shift, axis=0), t),
                   out_shardings=self.sharding)
    return roll(params)
