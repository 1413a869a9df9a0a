"""Training one group of a sweep with everything a run needs around it:
resume from its checkpoint, TensorBoard curves, progress, preemption.

An experiment owns its list of groups and its rows; for each unfinished group
it builds an `Ensemble` and calls `train_group`.
"""

import dataclasses
import functools
import os
import signal
import time
from typing import Callable

import numpy as np

from src import checkpoint as checkpoint_lib
from src import distributed
from src import models as models_lib
from src import record
from src import train as train_lib


@dataclasses.dataclass
class GroupRun:
  """A trained group: final state and what it cost."""
  state: dict
  writer: object  # the group's TensorBoard writer (None on other processes)
  wall_s: float
  compile_s: float
  resumed_from: int

  def close(self, step: int, test_accuracy=None) -> None:
    """Logs the seeds' mean test accuracy at `step`, if given, and closes the
    group's TensorBoard writer (nothing to do on other processes)."""
    if self.writer is None:
      return
    if test_accuracy is not None:
      self.writer.add_scalar('test/accuracy', float(np.mean(test_accuracy)),
                             step)
    self.writer.close()


def ensemble(model: str, task: train_lib.Task, config, *,
             num_heads: int | None = None, num_layers: int | None = None,
             num_seeds: int | None = None, **kwargs) -> train_lib.Ensemble:
  """The ensemble of one group: `model` on `task` with the config's width,
  seeds and optimiser; heads, layers and seeds may be set per group."""
  factory = functools.partial(
      models_lib.make_model, model, vocab_size=task.vocab_size,
      length=task.length, d_model=config.d_model,
      num_classes=task.num_classes,
      num_heads=num_heads or config.num_heads,
      num_layers=num_layers or config.num_layers)
  return train_lib.Ensemble(
      factory, task, num_seeds=num_seeds or config.seeds, seed=config.seed,
      batch_size=config.batch_size, learning_rate=config.learning_rate,
      **kwargs)


def print_claims(summary: dict) -> None:
  for c in summary['claims']:
    where = f' (L={c["length"]})' if 'length' in c else ''
    print(f'- {c["verdict"].upper()}{where}: {c["claim"]} ({c["measured"]})')


def group_work(steps: int, length: int, model: str) -> float:
  """Relative cost of a group, for the ETA (the registry says how a model's
  step grows with the length)."""
  return steps * models_lib.get(model).step_work(length)


def train_group(run, name: str, ensemble: train_lib.Ensemble, config, *,
                progress: record.Progress, work: float,
                stop: checkpoint_lib.StopRequest | None,
                on_chunk: Callable[[int, dict, object], None] | None = None,
                steps: int | None = None) -> GroupRun:
  """Resumes or starts `name`, trains it to `steps` (default
  `config.steps`), logs each chunk. Called again with more steps, it goes on
  from where the last call stopped.

  `on_chunk(step, metrics, writer)` lets the experiment log more per chunk.
  """
  steps = steps or config.steps
  start_time = time.perf_counter()
  checkpoints = checkpoint_lib.GroupCheckpoints(run.checkpoint_dir / name)
  start, state = train_lib.resume_or_init(ensemble, checkpoints)
  if start:
    progress.say(f'{name}: resuming from step {start}')
  writer = None
  if run.is_writer:
    writer = record.tb_writer(run.path / 'tb' / name,
                              purge_step=start + 1 if start else None)
  progress.update(work * start / steps, name)

  def log_chunk(step, metrics):
    metrics = distributed.to_host(metrics)
    loss_SxT = metrics['loss'][:ensemble.num_seeds]
    acc_SxT = metrics['accuracy'][:ensemble.num_seeds]
    num_steps = loss_SxT.shape[1]
    if writer is not None:
      # Seed-mean curves at every step; diverged seeds would swamp the mean.
      finite = np.isfinite(loss_SxT).all(axis=1)
      loss_T = loss_SxT[finite].mean(0) if finite.any() else loss_SxT.mean(0)
      for t in range(num_steps):
        s = step - num_steps + t + 1
        writer.add_scalar('train/loss', loss_T[t], s)
        writer.add_scalar('train/accuracy', acc_SxT[:, t].mean(), s)
    if on_chunk is not None:
      on_chunk(step, metrics, writer)
    if os.environ.get('SEARCHLIGHT_FAULT_KILL_AT') == f'{name}@{step}':
      if writer is not None:
        writer.flush()  # the events past the last checkpoint must be purged
      os.kill(os.getpid(), signal.SIGKILL)  # tests: die as a preempted VM does
    progress.update(work * num_steps / steps,
                    f'{name} step {step}/{steps} '
                    f'loss {np.nanmean(loss_SxT[:, -1]):.3f}')

  try:
    state = train_lib.fit(
        ensemble, state, start, steps=steps,
        chunk_steps=config.chunk_steps, checkpoints=checkpoints,
        checkpoint_every=config.checkpoint_every, on_chunk=log_chunk,
        stop=stop, where=name)
  except BaseException:
    if writer is not None:
      writer.close()
    raise
  finally:
    checkpoints.close()
  return GroupRun(state, writer, time.perf_counter() - start_time,
                  ensemble.compile_s, start)
