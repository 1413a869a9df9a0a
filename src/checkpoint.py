"""Orbax checkpoints of one group's ensemble state, resume, and preemption.

A checkpoint holds the stacked params and optimizer state of every seed, the
divergence flags and the step; keys are derived from the config, so that is
all a resumed run needs to draw the same strings. Orbax writes into a
temporary folder and renames it when complete, so a half-written checkpoint is
never listed; a checksum saved beside the state catches one that was damaged
afterwards, and restore then moves it aside (`<step>.bad`, which orbax does
not list) and falls back to the previous good one. Nothing is deleted: an
unreadable checkpoint may be a storage hiccup or a code change, and renaming
it back restores it. The folder may be local or a bucket (`src/storage.py`).
"""

import os
import signal

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from absl import logging

from src import distributed
from src import storage


class Preempted(Exception):
  """Raised at a chunk boundary after a stop signal, once state is saved."""

  def __init__(self, signum: int, where: str):
    super().__init__(where)
    self.signum = signum
    self.where = where


class StopRequest:
  """SIGTERM (Cloud TPU maintenance, preemption) and SIGINT (Ctrl-C) ask the
  trainer to save and stop at the next chunk boundary; a second Ctrl-C stops
  at once."""

  def __init__(self):
    self.signum = None

  def install(self):
    for signum in (signal.SIGTERM, signal.SIGINT):
      signal.signal(signum, self._handle)

  def _handle(self, signum, frame):
    if self.signum == signal.SIGINT and signum == signal.SIGINT:
      raise KeyboardInterrupt
    self.signum = signum
    logging.warning('Signal %d: saving at the next chunk boundary.', signum)

  @property
  def requested(self) -> bool:
    return self.signum is not None


def fault_due(where: str) -> bool:
  """Tests: whether the run is to die at `where` (`group@step`, or `before
  PART` in --exp=all), as $SEARCHLIGHT_FAULT_KILL_AT or
  $SEARCHLIGHT_FAULT_KILL_TREE names it."""
  return where in (os.environ.get('SEARCHLIGHT_FAULT_KILL_AT'),
                   os.environ.get('SEARCHLIGHT_FAULT_KILL_TREE'))


def die(where: str) -> None:
  """Tests: SIGKILL, as a preempted machine dies: this process
  ($SEARCHLIGHT_FAULT_KILL_AT), or its whole process group
  ($SEARCHLIGHT_FAULT_KILL_TREE: --exp=all's parent and its part, for a run
  started in a session of its own)."""
  if os.environ.get('SEARCHLIGHT_FAULT_KILL_TREE') == where:
    os.killpg(os.getpgrp(), signal.SIGKILL)
  os.kill(os.getpid(), signal.SIGKILL)


def _fold(xp, leaves, bits):
  """A position-weighted sum of every leaf's bits (uint32, wrapping), in
  numpy or jax.numpy (`xp`), `bits` viewing a flat leaf as uint32."""
  total = xp.uint32(0)
  for leaf in leaves:
    flat = xp.ravel(leaf)
    if flat.dtype == xp.bool_:
      flat = flat.astype(xp.uint32)
    weights = xp.arange(flat.size, dtype=xp.uint32) * xp.uint32(
        2654435761) + xp.uint32(1)
    total = total * xp.uint32(31) + xp.sum(bits(flat) * weights,
                                           dtype=xp.uint32)
  return total


_device_checksum = jax.jit(lambda tree: _fold(
    jnp, jax.tree.leaves(tree),
    lambda flat: jax.lax.bitcast_convert_type(flat, jnp.uint32)))


def checksum(tree) -> int:
  """The state's checksum, the same wherever it is computed: on the host
  when this process holds every leaf (it compiles nothing; jitted, it would
  compile once per state's structure), else on the devices, where the state
  is spread over processes."""
  leaves = jax.tree.leaves(tree)
  if not all(getattr(x, 'is_fully_addressable', True) for x in leaves):
    return int(_device_checksum(tree))
  with np.errstate(over='ignore'):  # uint32 wraps by design
    return int(_fold(np, [np.asarray(x) for x in leaves],
                     lambda flat: flat.view(np.uint32)))


class GroupCheckpoints:
  """Checkpoints of one group under `directory`, the last few kept.

  read_only: for looking at a finished run (`src/analysis.py`): nothing is
  created, and a damaged checkpoint is skipped where it lies, not moved.
  """

  def __init__(self, directory, *, max_to_keep: int = 3,
               read_only: bool = False):
    self.directory = storage.absolute(directory)
    self.read_only = read_only
    options = ocp.CheckpointManagerOptions(
        max_to_keep=max_to_keep, create=not read_only,
        enable_async_checkpointing=False)
    self.manager = ocp.CheckpointManager(self.directory, options=options,
                                         item_names=('state', 'meta'))

  def save(self, step: int, state) -> None:
    meta = {'step': int(step), 'checksum': checksum(state)}
    self.manager.save(step, force=True, args=ocp.args.Composite(
        state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)))

  def restore_latest(self, abstract_state):
    """Returns (step, state) of the newest good checkpoint, else (0, None).
    `abstract_state`: the state's shapes, or a function of the step giving
    them.

    A checkpoint that fails to load or whose checksum disagrees is reported
    and moved aside (left in place when read-only), and the one before it is
    tried.
    """
    for step in sorted(self.manager.all_steps(), reverse=True):
      reason = None
      try:
        abstract = (abstract_state(step) if callable(abstract_state)
                    else abstract_state)
        restored = self.manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract),
            meta=ocp.args.JsonRestore()))
        state, meta = restored['state'], restored['meta']
        if meta['step'] != step or checksum(state) != meta['checksum']:
          raise ValueError('checksum mismatch')
      except Exception as e:  # any damage: fall back, never a traceback
        reason = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
      if self.read_only:
        if reason is None:
          return step, state
        print(f'warning: checkpoint {self.directory}/{step} could not be '
              f'restored ({reason}); left in place; trying the previous '
              'one', flush=True)
        continue
      # Every process falls back together if any one failed to restore.
      if not distributed.any_process(reason is not None):
        return step, state
      reason = reason or 'another process could not restore it'
      aside = self.move_aside(step)
      logging.warning('Checkpoint %s/%d is damaged (%s); moved to %s; '
                      'falling back to the previous one.', self.directory,
                      step, reason, aside)
      print(f'warning: checkpoint {self.directory}/{step} is damaged '
            f'({reason}); moved aside to {aside}; falling back to the '
            'previous one', flush=True)
      self.manager.reload()
    return 0, None

  def steps(self) -> list[int]:
    """The steps saved (and not moved aside), oldest first."""
    return sorted(self.manager.all_steps())

  def saved_shapes(self, step: int):
    """The shapes of every leaf of the state saved at `step`, read from its
    metadata (the seed axis is padded to the saving run's devices)."""
    metadata = ocp.StandardCheckpointHandler().metadata(
        self.directory / str(step) / 'state')
    return jax.tree.map(lambda leaf: tuple(leaf.shape), metadata.tree)

  def saved_seeds(self, step: int) -> int | None:
    """The seed-axis size saved at `step` (None if it cannot be read: the
    restore then reports the damage)."""
    try:
      return jax.tree.leaves(self.saved_shapes(step),
                             is_leaf=lambda x: isinstance(x, tuple))[0][0]
    except Exception:  # pylint: disable=broad-except
      return None

  def move_aside(self, step: int):
    """Renames `<step>` to `<step>.bad` (or `.bad2`, ...), out of orbax's
    sight, so that the step can be saved again; returns the new path."""
    source = self.directory / str(step)
    for i in range(1, 1000):
      target = self.directory / f'{step}.bad{i if i > 1 else ""}'
      if not target.exists():
        break
    if jax.process_index() == 0:  # one process renames a shared folder
      source.rename(target)
    distributed.sync(f'move_aside_{self.directory}_{step}')
    return target

  def close(self) -> None:
    self.manager.close()


def restore(ensemble, checkpoints):
  """(step, state) of the latest good checkpoint, placed on `ensemble`'s
  seed axis, or (0, None). A checkpoint from a run on another number of
  devices restores too."""
  step, state = checkpoints.restore_latest(
      lambda step: ensemble.abstract_state(checkpoints.saved_seeds(step)))
  if state is None:
    return 0, None
  # Restored leaves may land on one device: place them on the seed axis.
  return step, ensemble.members.place(repad(ensemble, state))


def repad(ensemble, state):
  """A restored state with `ensemble`'s seed axis: the real seeds come
  first and are kept; padding seeds are cut, or drawn afresh (their results
  are dropped anyway: seed i's run depends only on (seed, i))."""
  n = jax.tree.leaves(state)[0].shape[0]
  padded = ensemble.members.padded
  if n == padded:
    return state
  host = jax.tree.map(
      lambda x: np.asarray(x if x.is_fully_addressable
                           else x.addressable_data(0)), state)
  if n > padded:
    return jax.tree.map(lambda x: x[:padded], host)
  fresh = [ensemble.init_one(key) for key in ensemble.init_keys[n:]]
  return jax.tree.map(lambda x, *f: np.concatenate([x, np.stack(f)]),
                      host, *fresh)


def resume_or_init(ensemble, checkpoints=None):
  """(start_step, state): the latest good checkpoint, else step 0."""
  if checkpoints is not None:
    step, state = restore(ensemble, checkpoints)
    if state is not None:
      return step, state
  return 0, ensemble.init()
