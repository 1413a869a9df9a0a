"""What a run records of its groups' training as it goes: TensorBoard,
curves.csv and the progress line. The training loop
(`runner.train_and_evaluate`) opens a `RunLog` for the run, a `GroupLog`
for each group it trains, and hands it each chunk's metrics.

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

import re

import numpy as np

from src import record
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



def session_name(group) -> str:
  """The group's HParams Trial ID, short enough for the table's 10em
  column: the name without the length's leading zeros."""
  return re.sub(r'_L0*(\d+)$', r' L\1', group.name)


class RunLog:
  """A run's records of training: its HParams experiment, the overview's
  runs, curves.csv (a row per seed and chunk: the chunk's mean training
  loss and accuracy, and the test accuracy on fresh strings at its end)
  and the progress line over every group."""

  def __init__(self, run_dir, config, groups: list, *, steps: int,
               step_work: dict, final_examples: int | None = None,
               tags: dict | None = None):
    """`steps`: what the groups train to; `step_work`: the relative cost of
    one step per group name, for the ETA; `final_examples`, `tags`: the
    final test's strings and the experiment's own tags, for the tags'
    descriptions (`describe`)."""
    self.run_dir, self.config = run_dir, config
    self.groups, self.steps, self.step_work = list(groups), steps, step_work
    self.progress = record.Progress(sum(step_work[g.name] * steps
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

  def count(self, group, upto: int, text: str, *,
            done_before: bool = False) -> None:
    """The progress line: `group` trained up to step `upto`."""
    done = self._counted.get(group.name, 0)
    self._counted[group.name] = max(done, upto)
    self.progress.update(self.step_work[group.name] * max(upto - done, 0),
                         text, done_before=done_before)

  def skip(self, group, steps: int | None = None) -> None:
    """A finished group (or budget): counted done, not redone."""
    self.count(group, steps or self.steps, f'{group.name} done',
               done_before=True)

  def open_group(self, group, ensemble, start: int, steps: int) -> 'GroupLog':
    """`group`, resumed at step `start` and training to `steps`: its
    TensorBoard runs (a writer per rate, one per seed under it), with the
    steps a killed run logged past its checkpoint hidden and its rows in
    curves.csv dropped."""
    run = self.run_dir
    if start and start < steps:
      self.progress.say(f'{group.name}: resuming from step {start} '
                        f'(training to step {steps})')
    if start < steps:  # the chunks a kill left past the checkpoint
      self.curves.drop(lambda r: r['group'] == group.name
                       and int(r['step']) > start)
    rates = ensemble.learning_rates
    log = GroupLog(self, group, ensemble.num_seeds, rates, steps)
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
        log.writers.append(writer)
        log.seed_writers.append([record.tb_writer(
            folder / f'seed_{s}', purge_step=purge, describe=self.describe)
                                 for s in range(ensemble.num_seeds)])
        if not start:
          name = session_name(group) + (f' {rate_label(rate)}'
                                        if len(rates) > 1 else '')
          record.write_hparams_session(
              writer, {**group.hparams, 'learning_rate': rate}, name)
    self.count(group, start, group.name, done_before=True)
    return log

  def overview(self, group, step: int, final_S: np.ndarray,
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


class GroupLog:
  """One group's TensorBoard runs while it trains, a set per learning rate
  of the grid (the members r * S .. r * S + S - 1): a writer for the seed
  means and one per seed (none on other processes)."""

  def __init__(self, run_log: RunLog, group, num_seeds: int, rates,
               steps: int):
    self.run_log, self.group, self.num_seeds = run_log, group, num_seeds
    self.rates, self.steps = list(rates), steps
    self.writers, self.seed_writers = [], []

  def chunk(self, step: int, metrics: dict) -> None:
    """A chunk ending at `step`: every step's loss and accuracy, the test
    accuracy at its end (the last chunk's point is the final test,
    `close`) and its rows in curves.csv. `metrics`: on the host."""
    group, S, rates = self.group, self.num_seeds, self.rates
    loss_MxT = metrics['loss'][:S * len(rates)]
    acc_MxT = metrics['accuracy'][:S * len(rates)]
    num_steps = loss_MxT.shape[1]
    test_M = (metrics['test_accuracy'][:S * len(rates)]
              if 'test_accuracy' in metrics else None)
    for r, writer in enumerate(self.writers):
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
        for i, w in enumerate(self.seed_writers[r]):
          w.add_scalars_at({'train/loss': loss_SxT[i, t],
                            'train/accuracy': acc_SxT[i, t]}, s)
      if test_M is not None and step < self.steps:
        test_S = test_M[rate]
        writer.add_scalar('test/accuracy', test_S.mean(), step)
        writer.add_scalar('test/solved_fraction',
                          stats.solved_fraction(test_S)['fraction'], step)
        for i, w in enumerate(self.seed_writers[r]):
          w.add_scalar('test/accuracy', test_S[i], step)
    self.run_log.curves.append([dict(
        group=group.name, model=group.model, length=group.length,
        seed=m % S, learning_rate=rates[m // S], step=step,
        train_loss=loss_MxT[m].mean(), train_accuracy=acc_MxT[m].mean(),
        test_accuracy='' if test_M is None else test_M[m])
                                for m in range(S * len(rates))])

  def counted(self, step: int, metrics: dict) -> None:
    """The progress line after the chunk ending at `step`."""
    loss = metrics['loss'][:self.num_seeds * len(self.rates)]
    self.run_log.count(self.group, step, f'{self.group.name} step {step}/'
                       f'{self.steps} loss {np.nanmean(loss[:, -1]):.3f}')

  def per_seed(self, r: int, values: dict | None, step: int) -> None:
    """Each tag's per-seed values at rate `r` in the seed runs, their mean
    in the group's."""
    if not self.writers or not values:
      return
    for tag, v in values.items():
      v = np.asarray(v, float)
      self.writers[r].add_scalar(tag, float(v.mean()), step)
      for s, w in enumerate(self.seed_writers[r][:len(v)]):
        w.add_scalar(tag, float(v[s]), step)

  def flush(self) -> None:
    for w in self._all():
      w.flush()

  def abort(self) -> None:
    """Closes the writers of a group that stopped mid-training."""
    for w in self._all():
      w.close()

  def close(self, step: int, test_accuracy, selected: int = 0) -> None:
    """The final test accuracy of every member at `step` (the seed runs,
    each rate's mean and solved fraction: its HParams metrics, and the
    overview of the `selected` rate); closes the writers."""
    if not self.writers:
      return
    S = self.num_seeds
    acc_M = np.asarray(test_accuracy, float)
    for r, (writer, seeds) in enumerate(zip(self.writers, self.seed_writers)):
      acc = acc_M[r * S:(r + 1) * S]
      for s, w in enumerate(seeds):
        w.add_scalar('test/accuracy', acc[s], step)
      writer.add_scalar('test/accuracy', float(np.mean(acc)), step)
      writer.add_scalar('test/solved_fraction',
                        stats.solved_fraction(acc)['fraction'], step)
    self.run_log.overview(self.group, step,
                          acc_M[selected * S:(selected + 1) * S], selected)
    self.abort()

  def _all(self):
    return [w for ws in self.seed_writers for w in ws] + self.writers
