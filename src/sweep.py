"""A group's training as a run records it: checkpoints and resume, the
progress line, TensorBoard and curves.csv. The runner (`src/runner.py`)
calls `Sweep.train` for every group it does not skip; `fit` runs its chunks
(the Python loop runs only between them: it logs, checkpoints and listens
for preemption there).

TensorBoard, two logdirs:
  tb/overview/           what to open first (few runs, every one ticked):
    <model>/             per model (a series of groups: `lstm`), the finding
                         against L, finding/accuracy and finding/solved
                         (the x axis is L, not a step; finding/solved_by_
                         model/<model> its solved line alone), its test accuracy
                         and solved fraction over training, one tag per
                         length (training/accuracy_L010, training/solved_L010)
    axis_0/, axis_1/     flat at 0 and at 1 in every finding chart, so that
                         each spans 0 to 1 on first open (AXIS_GUIDES)
    (the root run)       the figures, the verdicts (a markdown table) and
                         the config, as text
  tb/                    every group and seed:
    <group>/             seed-mean train/loss, train/accuracy (every step),
                         test/accuracy and test/solved_fraction (every
                         chunk, then the final test); the group's HParams
                         session
    <group>/seed_<s>/    the same curves for seed s alone
    With a grid of learning rates, each rate has these runs of its own under
    the group: tb/<group>/lr3e-03/ and tb/<group>/lr3e-03/seed_<s>/.
    summary/             the run's HParams experiment
Every scalar tag carries a display name and a description (`describe`).
"""

import dataclasses
import functools
import re
import signal
import time
from typing import Callable

import numpy as np

from src import checkpoint as checkpoint_lib
from src import distributed
from src import models as models_lib
from src import record
from src import rundir
from src import stats
from src import train as train_lib

CURVE_COLUMNS = ['group', 'model', 'length', 'seed', 'learning_rate', 'step',
                 'train_loss', 'train_accuracy', 'test_accuracy']
# Two runs of tb/overview beside the models', flat at 0 and at 1 at every
# length of the finding charts: TIME SERIES scales a chart to the 5th-95th
# percentile of its points ("Ignore outliers", on by default), which drops
# a lone lowest or highest point (a model at 0 solved, one at 1); with every
# length at 0 and at 1 twice over, each finding chart spans 0 to 1.
AXIS_GUIDES = {'axis_0': 0.0, 'axis_1': 1.0}
# The HParams metrics of every training group (seed means at the end).
HPARAM_METRICS = ('test/accuracy', 'test/solved_fraction')
OVERVIEW = 'overview'  # the logdir, under tb/, to open first


def describe(config, *, final_examples: int | None = None,
             extra: dict | None = None):
  """tag -> (display name, description) for every scalar a training run
  writes: the shared curves, the overview, then `extra` ({tag regex: (display
  name, description)}, an experiment's own tags); any other tag gets a
  generic line. `final_examples`: the final test's strings (None: the
  experiment's own measurement)."""
  batch, chunk = config.batch_size, config.chunk_steps
  curve = train_lib.CURVE_EXAMPLES
  final = (f'the final test on {final_examples:,} fresh strings'
           if final_examples else "the experiment's final test")
  solved = (f'a seed solves when its test accuracy is >= {stats.SOLVED} '
            f'(on the chunk\'s {curve} strings; at the last point, {final})')
  step = (f'A step is one Adam update on {batch} fresh training strings; '
          f'a chunk is {chunk} steps.')
  who = 'In a group run, the mean over its seeds; in a seed run, that seed.'
  test = (f'Accuracy on fresh test strings: {curve} new strings at the end '
          f'of every chunk (drawn inside the compiled program), and at the '
          f'last step {final}, the value in results.csv.')
  fixed = {
      'train/loss': ('train loss', f'Cross-entropy of the answer on the '
                     f'step\'s {batch} training strings, every step. {who} '
                     '(A group\'s mean leaves out a seed that diverged.) '
                     + step),
      'train/accuracy': ('train accuracy', f'Fraction of the step\'s {batch} '
                         f'training strings answered right, every step. '
                         f'{who} {step}'),
      'test/accuracy': ('test accuracy', f'{test} {who} {step}'),
      'test/solved_fraction': ('solved fraction', f'Fraction of the group\'s '
                               f'{config.seeds} seeds that solve, every chunk: '
                               f'{solved}. Group runs only. {step}'),
  }
  patterns = [
      (r'training/accuracy_L0*(\d+)', lambda L: (
          f'test accuracy at L={L} over training',
          f'The model in the run name, at L={L}: the mean over its seeds of '
          f'{test} {step}')),
      (r'training/solved_L0*(\d+)', lambda L: (
          f'solved fraction at L={L} over training',
          f'The model in the run name, at L={L}: the fraction of its seeds '
          f'that solve, every chunk; {solved}. {step}')),
      (r'finding/solved_by_model/(.+)', lambda m: (
          f'{m}: fraction of seeds solved against L',
          f'{m} alone (its line in finding/solved, where another may hide '
          f'it): the fraction of its seeds that solve at each length '
          f'({final}; {solved}). The x axis is the length L, not a step.')),
      (r'finding/(accuracy|solved)', lambda what: (
          ('final test accuracy' if what == 'accuracy'
           else 'fraction of seeds solved') + ' against L',
          'The model in the run name: '
          + ('the mean final test accuracy over its seeds' if what ==
             'accuracy' else 'the fraction of its seeds that solve')
          + f' at each length ({final}; {solved}). The x axis is the length '
          'L, not a step.')),
  ]
  extra = [(re.compile(k), v) for k, v in (extra or {}).items()]

  def info(tag: str):
    if tag in fixed:
      return fixed[tag]
    for pattern, make in patterns:
      m = re.fullmatch(pattern, tag)
      if m:
        return make(*m.groups())
    for pattern, (display, description) in extra:
      if pattern.fullmatch(tag):
        return display, f'{description} {who}'
    return tag, (f'Measured by --exp={config.exp} (see its docstring). '
                 f'{who} {step}')
  return info


def series_of(group) -> str:
  """What a group is one length of: its name less the length (`lstm`)."""
  return re.sub(r'_L\d+$', '', group.name)


def rate_label(rate: float) -> str:
  """A learning rate in a run's or a folder's name: `lr3e-03`."""
  return f'lr{rate:.0e}'


@dataclasses.dataclass
class GroupRun:
  """A trained group: final state, what it cost, and its open writers, one
  set per learning rate of the grid (the members r * S .. r * S + S - 1)."""
  state: dict
  writers: list  # per rate, its TensorBoard writer ([] on other processes)
  seed_writers: list  # per rate, a writer per seed
  num_seeds: int
  wall_s: float
  compile_s: float
  resumed_from: int
  # overview(step, final accuracy per seed): the group's curves in the
  # overview, at the selected rate (None on other processes).
  overview: Callable | None = None

  def close(self, step: int, test_accuracy=None, selected: int = 0) -> None:
    """Logs the final test accuracy of every member at `step`, if given (the
    seed runs, each rate's mean and solved fraction: its HParams metrics,
    and the overview of the `selected` rate), and closes the group's
    writers (nothing to do on other processes)."""
    if not self.writers:
      return
    S = self.num_seeds
    if test_accuracy is not None:
      acc_M = np.asarray(test_accuracy, float)
      for r, (writer, seeds) in enumerate(zip(self.writers,
                                              self.seed_writers)):
        acc = acc_M[r * S:(r + 1) * S]
        for s, w in enumerate(seeds):
          w.add_scalar('test/accuracy', acc[s], step)
        writer.add_scalar('test/accuracy', float(np.mean(acc)), step)
        writer.add_scalar('test/solved_fraction',
                          stats.solved_fraction(acc)['fraction'], step)
      if self.overview is not None:
        self.overview(step, acc_M[selected * S:(selected + 1) * S], selected)
    for w in [w for seeds in self.seed_writers for w in seeds] + self.writers:
      w.close()


def session_name(group) -> str:
  """The group's HParams Trial ID, short enough for the table's 10em
  column: the name without the length's leading zeros."""
  return re.sub(r'_L0*(\d+)$', r' L\1', group.name)


class Sweep:
  """The groups of one experiment, trained one after another.

  `curves.csv` gets one row per seed and chunk: the chunk's mean training
  loss and accuracy, and the test accuracy on fresh strings at its end.
  """

  def __init__(self, run_dir, config, groups: list, *, stop,
               steps: int | None = None, step_work: dict | None = None,
               final_examples: int | None = None, tags: dict | None = None):
    """`steps`: what every group trains to (default `config.steps`);
    `step_work`: the relative cost of one step per group name (default from
    the registry), for the ETA; `final_examples`, `tags`: the final test's
    strings and the experiment's own tags, for the tags' descriptions
    (`describe`)."""
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
    self.describe = describe(config, final_examples=final_examples,
                             extra=tags)
    lengths = {series_of(g): set() for g in self.groups}
    for g in self.groups:
      lengths[series_of(g)].add(g.length)
    # The finding against L, where some model has several lengths.
    self.final_by_length = any(len(v) > 1 for v in lengths.values())
    if run_dir.is_writer:  # a rerun writes them again: the latest is shown
      writer = record.tb_writer(run_dir.path / 'tb' / 'summary',
                                filename_suffix='.hparams')
      record.write_hparams_experiment(
          writer, [{**g.hparams, 'learning_rate': rate} for g in self.groups
                   for rate in config.rates],
          {m: self.describe(m) for m in HPARAM_METRICS})
      writer.close()
      # A chart colours a run by its place in TensorBoard's run list (by
      # first event, colours in turn): the overview's runs start here, one
      # after another, so the lines of a chart differ in colour.
      series = list(dict.fromkeys(series_of(g) for g in self.groups))
      if self.final_by_length:  # first: drawn under the models' lines
        self._axis_guides(series, sorted({g.length for g in self.groups}))
      for run in series:
        record.tb_writer(run_dir.path / 'tb' / OVERVIEW / run,
                         filename_suffix='.start').close()

  def _axis_guides(self, series, lengths) -> None:
    """AXIS_GUIDES in every finding chart, at every length (written again,
    not twice, by a rerun)."""
    tags = ['finding/accuracy', 'finding/solved'] + [
        f'finding/solved_by_model/{s}' for s in series]
    for run, value in AXIS_GUIDES.items():
      folder = self.run_dir.path / 'tb' / OVERVIEW / run
      for old in folder.glob('*.guide') if folder.exists() else []:
        old.unlink()
      writer = record.tb_writer(folder, describe=self.describe,
                                filename_suffix='.guide')
      for tag in tags:
        for L in lengths:
          writer.add_scalar(tag, value, L)
      writer.close()

  def _count(self, group, upto: int, text: str, *,
             done_before: bool = False) -> None:
    done = self._counted.get(group.name, 0)
    self._counted[group.name] = max(done, upto)
    self.progress.update(self.step_work[group.name] * max(upto - done, 0),
                         text, done_before=done_before)

  def skip(self, group, steps: int | None = None) -> None:
    """A finished group (or budget): counted done, not redone."""
    self._count(group, steps or self.steps, f'{group.name} done',
                done_before=True)

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
    folder = run.checkpoint_dir / group.name
    if getattr(ensemble, 'recipe', None) is not None:  # never another's
      rundir.claim_group(folder, ensemble.recipe, run.path,
                         is_writer=run.is_writer)
    checkpoints = checkpoint_lib.GroupCheckpoints(folder)
    start, state = resume_or_init(ensemble, checkpoints)
    if start and start < steps:
      self.progress.say(f'{group.name}: resuming from step {start} '
                        f'(training to step {steps})')
    if start < steps:  # the chunks a kill left past the checkpoint
      self.curves.drop(lambda r: r['group'] == group.name
                       and int(r['step']) > start)
    S, rates = ensemble.num_seeds, ensemble.learning_rates
    writers, seed_writers = [], []
    if run.is_writer:
      record.update_json(run.path / 'groups.json', group.name,
                         getattr(ensemble, 'recipe', None))
      # Steps a killed run logged past its checkpoint (or, before the
      # first one, any) are hidden: TensorBoard shows each step once.
      purge = start + 1
      for rate in rates:
        folder = run.path / 'tb' / group.name
        folder = folder / rate_label(rate) if len(rates) > 1 else folder
        writer = record.tb_writer(folder, purge_step=purge,
                                  describe=self.describe)
        writers.append(writer)
        seed_writers.append([record.tb_writer(
            folder / f'seed_{s}', purge_step=purge, describe=self.describe)
                             for s in range(S)])
        if not start:
          name = session_name(group) + (f' {rate_label(rate)}'
                                        if len(rates) > 1 else '')
          record.write_hparams_session(
              writer, {**group.hparams, 'learning_rate': rate}, name)
    self._count(group, start, group.name, done_before=True)

    def log_chunk(step, metrics):
      metrics = distributed.to_host(metrics)
      loss_MxT = metrics['loss'][:S * len(rates)]
      acc_MxT = metrics['accuracy'][:S * len(rates)]
      num_steps = loss_MxT.shape[1]
      test_M = (metrics['test_accuracy'][:S * len(rates)]
                if 'test_accuracy' in metrics else None)
      for r, writer in enumerate(writers):
        rate = slice(r * S, (r + 1) * S)
        loss_SxT, acc_SxT = loss_MxT[rate], acc_MxT[rate]
        # Seed-mean curves; a diverged seed would swamp the mean.
        finite = np.isfinite(loss_SxT).all(axis=1)
        loss_T = loss_SxT[finite].mean(0) if finite.any() else loss_SxT.mean(0)
        acc_T = acc_SxT.mean(0)
        for t in range(num_steps):
          s = step - num_steps + t + 1
          writer.add_scalars_at({'train/loss': loss_T[t],
                                 'train/accuracy': acc_T[t]}, s)
          for i, w in enumerate(seed_writers[r]):
            w.add_scalars_at({'train/loss': loss_SxT[i, t],
                              'train/accuracy': acc_SxT[i, t]}, s)
        # The last chunk's point is the final test (GroupRun.close).
        if test_M is not None and step < steps:
          test_S = test_M[rate]
          writer.add_scalar('test/accuracy', test_S.mean(), step)
          writer.add_scalar('test/solved_fraction',
                            stats.solved_fraction(test_S)['fraction'], step)
          for i, w in enumerate(seed_writers[r]):
            w.add_scalar('test/accuracy', test_S[i], step)
      self.curves.append([dict(
          group=group.name, model=group.model, length=group.length,
          seed=m % S, learning_rate=rates[m // S], step=step,
          train_loss=loss_MxT[m].mean(), train_accuracy=acc_MxT[m].mean(),
          test_accuracy='' if test_M is None else test_M[m])
                          for m in range(S * len(rates))])
      if on_chunk is not None:
        on_chunk(step, metrics, writers, seed_writers)
      if checkpoint_lib.fault_due(f'{group.name}@{step}'):
        for w in writers + [w for ws in seed_writers for w in ws]:
          w.flush()  # the events past the last checkpoint must be purged
        checkpoint_lib.die(f'{group.name}@{step}')
      self._count(group, step, f'{group.name} step {step}/{steps} '
                  f'loss {np.nanmean(loss_MxT[:, -1]):.3f}')

    try:
      state = fit(
          ensemble, state, start, steps=steps,
          chunk_steps=config.chunk_steps, checkpoints=checkpoints,
          checkpoint_every=config.checkpoint_every, on_chunk=log_chunk,
          stop=self.stop, where=group.name)
    except BaseException:
      for w in writers + [w for ws in seed_writers for w in ws]:
        w.close()
      raise
    finally:
      checkpoints.close()
    overview = (functools.partial(self._overview, group)
                if writers else None)
    return GroupRun(state, writers, seed_writers, S,
                    time.perf_counter() - start_time, ensemble.compile_s,
                    start, overview)

  def _overview(self, group, step: int, final_S: np.ndarray,
                selected: int = 0) -> None:
    """The group in tb/overview/<model>: its seed-mean test accuracy and
    solved fraction at every chunk since the last budget, from curves.csv
    (so a resumed group's are whole), and the final test at `step`; where
    the models have several lengths, the finding at step L. Its own event
    file, written again (not twice) if a kill makes the group close again.
    With a grid of rates, the `selected` rate's."""
    since = max([b for b in group.budgets if b < step], default=0)
    curve, rate = {}, self.config.rates[selected]
    for r in self.curves.rows:
      if (r['group'] == group.name and r['test_accuracy'] != ''
          and float(r['learning_rate'] or rate) == rate
          and since < int(r['step']) < step):
        curve.setdefault(int(r['step']), {})[int(r['seed'])] = float(
            r['test_accuracy'])
    points = [(s, np.array([v[i] for i in sorted(v)]))
              for s, v in sorted(curve.items())] + [(step, final_S)]
    series = series_of(group)
    folder = self.run_dir.path / 'tb' / OVERVIEW / series
    suffix = f'.{group.name}.{step}'
    for old in folder.glob(f'*{suffix}') if folder.exists() else []:
      old.unlink()
    writer = record.tb_writer(folder, describe=self.describe,
                              filename_suffix=suffix)
    L = f'L{group.length:03d}'
    for s, acc_S in points:
      writer.add_scalar(f'training/accuracy_{L}', acc_S.mean(), s)
      writer.add_scalar(f'training/solved_{L}',
                        stats.solved_fraction(acc_S)['fraction'], s)
    if self.final_by_length and (not group.budgets
                                 or step == max(group.budgets)):
      writer.add_scalar('finding/accuracy', final_S.mean(), group.length)
      solved = stats.solved_fraction(final_S)['fraction']
      writer.add_scalar('finding/solved', solved, group.length)
      # Lines that coincide (two models solved everywhere) hide each other
      # in a shared chart: each model's finding also has a card of its own.
      writer.add_scalar(f'finding/solved_by_model/{series}', solved,
                        group.length)
    writer.close()


# -- the chunks of one group: resume, train, checkpoint, stop ------------------

def restore(ensemble: train_lib.Ensemble, checkpoints):
  """(step, state) of the latest good checkpoint, placed on this run's seed
  axis, or (0, None). A checkpoint from a run on another number of devices
  restores too."""
  step, state = checkpoints.restore_latest(
      lambda step: ensemble.abstract_state(checkpoints.saved_seeds(step)))
  if state is None:
    return 0, None
  # Restored leaves may land on one device: place them on the seed axis.
  return step, ensemble.place(ensemble.repad(state))


def resume_or_init(ensemble: train_lib.Ensemble, checkpoints=None):
  """Returns (start_step, state): the latest good checkpoint, else step 0."""
  if checkpoints is not None:
    step, state = restore(ensemble, checkpoints)
    if state is not None:
      return step, state
  return 0, ensemble.init()


def chunks(start_step: int, steps: int, chunk_steps: int) -> list[int]:
  """The steps of each chunk `fit` trains from `start_step` to `steps`."""
  return [min(chunk_steps, steps - step)
          for step in range(start_step, steps, chunk_steps)]


def fit(ensemble: train_lib.Ensemble, state, start_step: int, *, steps: int,
        chunk_steps: int, checkpoints=None, checkpoint_every: int = 0,
        on_chunk: Callable[[int, dict], None] | None = None, stop=None,
        where: str = ''):
  """Trains from `start_step` to `steps` in chunks; returns the final state.

  `on_chunk(step, metrics_SxT)` sees each chunk's per-step metrics after the
  next chunk is already dispatched, so the device never waits on the host.
  Checkpoints are saved every `checkpoint_every` steps (at chunk boundaries)
  and at the end; on a stop request the state is saved and `Preempted` raised.
  """
  step, last_saved, pending = start_step, start_step, None

  def log_pending():
    nonlocal pending
    if pending is not None and on_chunk is not None:
      on_chunk(*pending)
    pending = None

  for num_steps in chunks(start_step, steps, chunk_steps):
    state, metrics = ensemble.train_chunk(state, step, num_steps)
    step += num_steps
    log_pending()
    pending = (step, metrics)
    # Every process stops at the same boundary, whichever got the signal.
    stopping = stop is not None and distributed.any_process(stop.requested)
    due = checkpoint_every and step - last_saved >= checkpoint_every
    if checkpoints is not None and (due or stopping or step == steps):
      # Log up to the step saved first: a resume starts after it, and must
      # find everything before it already written.
      log_pending()
      checkpoints.save(step, state)
      last_saved = step
    if stopping:
      log_pending()
      raise checkpoint_lib.Preempted(stop.signum or signal.SIGTERM,
                                     f'{where} step {step}')
  log_pending()
  return state
