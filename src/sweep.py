"""The skeleton every training experiment shares: its groups, the finished
ones skipped, the progress line, and what a group leaves behind while it
trains (checkpoints, TensorBoard, curves.csv).

An experiment lists its groups (`Group`: a model on a task at a length, with
its HParams), builds an `Ensemble` for each unfinished one and calls
`Sweep.train`; it owns its measurements, rows and claims.

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


@dataclasses.dataclass(frozen=True)
class Group:
  """One (model, task, length) group: all its seeds train in one program.

  name: its TensorBoard run and checkpoint folder (`lstm_L050`).
  hparams: its HParams session; `hparams_for` gives the usual ones.
  """
  name: str
  model: str
  length: int
  hparams: dict


def group(model: str, length: int, *, name: str | None = None,
          **extra) -> Group:
  """The group of `model` at `length`, its HParams from the registry."""
  return Group(name or f'{model}_L{length:03d}', model, length,
               hparams_for(model, length, **extra))


def hparams_for(model: str, length: int, **extra) -> dict:
  spec = models_lib.get(model)
  return {'model': model, 'family': spec.family.name,
          'architecture': spec.architecture,
          'initialisation': spec.init_name, 'length': length, **extra}


def ensemble(model: str, task: train_lib.Task, config, *,
             num_heads: int | None = None, num_layers: int | None = None,
             num_seeds: int | None = None, **kwargs) -> train_lib.Ensemble:
  """The ensemble of one group: `model` on `task` with the config's width,
  seeds and optimiser; heads, layers and seeds may be set per group."""
  model_kwargs = dict(
      vocab_size=task.vocab_size, length=task.length, d_model=config.d_model,
      num_classes=task.num_classes, num_heads=num_heads or config.num_heads,
      num_layers=num_layers or config.num_layers)
  ens = train_lib.Ensemble(
      lambda rngs: models_lib.make_model(model, **model_kwargs, rngs=rngs),
      task, num_seeds=num_seeds or config.seeds, seed=config.seed,
      batch_size=config.batch_size, learning_rate=config.learning_rate,
      **kwargs)
  # All it takes to build this ensemble again (src/analysis.py loads a
  # trained seed from it): kept in the run's groups.json.
  ens.recipe = {'model': model, 'model_kwargs': model_kwargs,
                'task': {'name': task.name, 'length': task.length,
                         **task.params},
                'num_seeds': ens.num_seeds, 'seed': config.seed,
                'batch_size': config.batch_size,
                'learning_rate': config.learning_rate}
  return ens


def print_claims(summary: dict) -> None:
  for c in summary['claims']:
    where = f' (L={c["length"]})' if 'length' in c else ''
    print(f'- {c["verdict"].upper()}{where}: {c["claim"]} ({c["measured"]})')


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

  def __init__(self, run_dir, config, groups: list[Group], *, stop,
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

  def _count(self, group: Group, upto: int, text: str) -> None:
    done = self._counted.get(group.name, 0)
    self._counted[group.name] = max(done, upto)
    self.progress.update(self.step_work[group.name] * max(upto - done, 0),
                         text)

  def skip(self, group: Group, steps: int | None = None) -> None:
    """A finished group (or budget): counted done, not redone."""
    self._count(group, steps or self.steps, f'{group.name} done')

  def train(self, group: Group, ensemble: train_lib.Ensemble, *,
            steps: int | None = None,
            on_chunk: Callable[[int, dict, object], None] | None = None
            ) -> GroupRun:
    """Resumes or starts `group`, trains it to `steps` (default
    `config.steps`), logs each chunk. Called again with more steps, it goes
    on from where the last call stopped (one run serves several budgets).

    `on_chunk(step, metrics, writer)` lets the experiment log more per chunk.
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
        on_chunk(step, metrics, writer)
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


# -- the memory task over several budgets (budget, gating) ----------------------

BUDGET_COLUMNS = ['model', 'family', 'length', 'seed', 'steps', 'accuracy',
                  'solved', 'loss', 'diverged', 'wall_s']


def memory_budgets(config, run_dir, *, stop) -> tuple[list, list]:
  """Every (model, length) group of the memory task, tested after each of
  `config.budgets` steps. There is no learning-rate schedule, so the model
  tested after 250 steps of a 4,000-step run is the one a 250-step run
  gives: one run per group serves every budget. Returns the rows of
  results.csv and of curves.csv."""
  budgets = sorted(config.budgets)
  results = record.ResultsCsv(run_dir.path / 'results.csv', BUDGET_COLUMNS)
  groups = [group(m, L) for m in config.models for L in config.lengths]
  sweeper = Sweep(run_dir, config, groups, stop=stop, steps=budgets[-1])
  for g in groups:
    ens = None
    for budget in budgets:
      if results.has(model=g.model, length=g.length, steps=budget):
        sweeper.skip(g, budget)
        continue
      if ens is None:
        task = train_lib.memory_task(g.length, config.num_filler)
        ens = ensemble(g.model, task, config)
      trained = sweeper.train(g, ens, steps=budget)
      start = time.perf_counter()
      test = ens.evaluate(trained.state['params'],
                               num_examples=config.eval_examples)
      diverged = ens.unpad(trained.state['diverged'])
      wall_s = trained.wall_s + time.perf_counter() - start
      trained.close(budget, test['accuracy'])
      family = models_lib.get(g.model).family.name
      results.append([dict(
          model=g.model, family=family, length=g.length, seed=s,
          steps=budget, accuracy=test['accuracy'][s],
          solved=stats.solved(test['accuracy'][s]), loss=test['loss'][s],
          diverged=diverged[s], wall_s=wall_s) for s in range(config.seeds)])
      sweeper.progress.say(
          f'{g.model:>12s} L={g.length:<4d} after {budget:>5d} steps: '
          f'accuracy {test["accuracy"].mean():.3f}, solved '
          f'{stats.solved_fraction(test["accuracy"])["k"]}/{config.seeds}')
  return results.rows, sweeper.curves.rows
