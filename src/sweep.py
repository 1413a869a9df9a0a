"""A group's training as a run records it: checkpoints and resume, the
progress line, TensorBoard and curves.csv. The runner (`src/experiment.py`)
calls `Sweep.train` for every group it does not skip.

TensorBoard layout, one run per group and one per seed under it:
  tb/<group>/            seed-mean train/loss, train/accuracy (every step),
                         test/accuracy (every chunk, then the final test),
                         test/solved_fraction; the group's HParams session
  tb/<group>/seed_<s>/   the same curves for seed s alone
  tb/summary/            the run's HParams experiment (discrete domains for
                         every categorical hparam), config text, figures
"""

import dataclasses
import os
import signal
import time
from typing import Callable

import numpy as np

from src import checkpoint as checkpoint_lib
from src import distributed
from src import models as models_lib
from src import record
from src import stats
from src import train as train_lib

CURVE_COLUMNS = ['group', 'model', 'length', 'seed', 'step', 'train_loss',
                 'train_accuracy', 'test_accuracy']
# The HParams metrics of every training group (seed means at the end).
HPARAM_METRICS = ('test/accuracy', 'test/solved_fraction')


@dataclasses.dataclass
class GroupRun:
  """A trained group: final state, what it cost, and its open writers."""
  state: dict
  writer: object  # the group's TensorBoard writer (None on other processes)
  seed_writers: list
  num_seeds: int
  wall_s: float
  compile_s: float
  resumed_from: int

  def close(self, step: int, test_accuracy=None) -> None:
    """Logs the final test accuracy of every seed at `step`, if given (the
    seed runs, the group's mean and solved fraction: its HParams metrics),
    and closes the group's writers (nothing to do on other processes)."""
    if self.writer is None:
      return
    if test_accuracy is not None:
      acc = np.asarray(test_accuracy, float)[:self.num_seeds]
      for s, w in enumerate(self.seed_writers):
        w.add_scalar('test/accuracy', acc[s], step)
      self.writer.add_scalar('test/accuracy', float(np.mean(acc)), step)
      self.writer.add_scalar(
          'test/solved_fraction',
          stats.solved_fraction(acc)['fraction'], step)
    for w in self.seed_writers:
      w.close()
    self.writer.close()


class Sweep:
  """The groups of one experiment, trained one after another.

  `curves.csv` gets one row per seed and chunk: the chunk's mean training
  loss and accuracy, and the test accuracy on fresh strings at its end.
  """

  def __init__(self, run_dir, config, groups: list, *, stop,
               steps: int | None = None, step_work: dict | None = None):
    """`steps`: what every group trains to (default `config.steps`);
    `step_work`: the relative cost of one step per group name (default from
    the registry), for the ETA."""
    self.run_dir, self.config, self.stop = run_dir, config, stop
    self.groups = list(groups)
    self.steps = steps or config.steps
    self.step_work = step_work or {
        g.name: models_lib.get(g.model).step_work(g.length)
        for g in self.groups}
    self.progress = record.Progress(sum(self.step_work[g.name] * self.steps
                                        for g in self.groups))
    self._counted = {}  # steps of each group already in the progress bar
    self.curves = record.ResultsCsv(run_dir.path / 'curves.csv',
                                    CURVE_COLUMNS)
    if run_dir.is_writer and not (run_dir.path / 'tb' / 'summary').exists():
      record.write_hparams_experiment(
          run_dir.path / 'tb' / 'summary', [g.hparams for g in self.groups],
          HPARAM_METRICS)

  def _count(self, group, upto: int, text: str) -> None:
    done = self._counted.get(group.name, 0)
    self._counted[group.name] = max(done, upto)
    self.progress.update(self.step_work[group.name] * max(upto - done, 0),
                         text)

  def skip(self, group, steps: int | None = None) -> None:
    """A finished group (or budget): counted done, not redone."""
    self._count(group, steps or self.steps, f'{group.name} done')

  def train(self, group, ensemble: train_lib.Ensemble, *,
            steps: int | None = None,
            on_chunk: Callable[[int, dict, object, list], None] | None = None
            ) -> GroupRun:
    """Resumes or starts `group`, trains it to `steps` (default
    `config.steps`), logs each chunk. Called again with more steps, it goes
    on from where the last call stopped (one run serves several budgets).

    `on_chunk(step, metrics, writer, seed_writers)` lets the runner log
    more per chunk (the writers are None and [] on other processes).
    """
    config, run = self.config, self.run_dir
    steps = steps or self.steps
    start_time = time.perf_counter()
    checkpoints = checkpoint_lib.GroupCheckpoints(run.checkpoint_dir /
                                                  group.name)
    start, state = train_lib.resume_or_init(ensemble, checkpoints)
    if start and start < steps:
      self.progress.say(f'{group.name}: resuming from step {start} '
                        f'(training to step {steps})')
    if start < steps:  # the chunks a kill left past the checkpoint
      self.curves.drop(lambda r: r['group'] == group.name
                       and int(r['step']) > start)
    num_seeds = ensemble.num_seeds
    writer, seed_writers = None, []
    if run.is_writer:
      record.update_json(run.path / 'groups.json', group.name,
                         getattr(ensemble, 'recipe', None))
      # Steps a killed run logged past its checkpoint (or, before the
      # first one, any) are hidden: TensorBoard shows each step once.
      purge = start + 1
      writer = record.tb_writer(run.path / 'tb' / group.name,
                                purge_step=purge)
      seed_writers = [record.tb_writer(run.path / 'tb' / group.name /
                                       f'seed_{s}', purge_step=purge)
                      for s in range(num_seeds)]
      if not start:
        record.write_hparams_session(writer, group.hparams)
    self._count(group, start, group.name)

    def log_chunk(step, metrics):
      metrics = distributed.to_host(metrics)
      loss_SxT = metrics['loss'][:num_seeds]
      acc_SxT = metrics['accuracy'][:num_seeds]
      num_steps = loss_SxT.shape[1]
      test_S = (metrics['test_accuracy'][:num_seeds]
                if 'test_accuracy' in metrics else None)
      if writer is not None:
        # Seed-mean curves; a diverged seed would swamp the mean.
        finite = np.isfinite(loss_SxT).all(axis=1)
        loss_T = loss_SxT[finite].mean(0) if finite.any() else loss_SxT.mean(0)
        for t in range(num_steps):
          s = step - num_steps + t + 1
          writer.add_scalar('train/loss', loss_T[t], s)
          writer.add_scalar('train/accuracy', acc_SxT[:, t].mean(), s)
          for i, w in enumerate(seed_writers):
            w.add_scalar('train/loss', loss_SxT[i, t], s)
            w.add_scalar('train/accuracy', acc_SxT[i, t], s)
        # The last chunk's point is the final test (GroupRun.close).
        if test_S is not None and step < steps:
          writer.add_scalar('test/accuracy', test_S.mean(), step)
          for i, w in enumerate(seed_writers):
            w.add_scalar('test/accuracy', test_S[i], step)
      self.curves.append([dict(
          group=group.name, model=group.model, length=group.length, seed=i,
          step=step, train_loss=loss_SxT[i].mean(),
          train_accuracy=acc_SxT[i].mean(),
          test_accuracy='' if test_S is None else test_S[i])
                          for i in range(num_seeds)])
      if on_chunk is not None:
        on_chunk(step, metrics, writer, seed_writers)
      if os.environ.get('SEARCHLIGHT_FAULT_KILL_AT') == f'{group.name}@{step}':
        if writer is not None:
          writer.flush()  # the events past the last checkpoint must be purged
          for w in seed_writers:
            w.flush()
        os.kill(os.getpid(), signal.SIGKILL)  # tests: die as a preempted VM
      self._count(group, step, f'{group.name} step {step}/{steps} '
                  f'loss {np.nanmean(loss_SxT[:, -1]):.3f}')

    try:
      state = train_lib.fit(
          ensemble, state, start, steps=steps,
          chunk_steps=config.chunk_steps, checkpoints=checkpoints,
          checkpoint_every=config.checkpoint_every, on_chunk=log_chunk,
          stop=self.stop, where=group.name)
    except BaseException:
      for w in ([writer] if writer is not None else []) + seed_writers:
        w.close()
      raise
    finally:
      checkpoints.close()
    return GroupRun(state, writer, seed_writers, num_seeds,
                    time.perf_counter() - start_time, ensemble.compile_s,
                    start)
