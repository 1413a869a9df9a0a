"""The runner every experiment shares: an experiment says what it measures,
the runner does the rest.

An experiment (`experiments/<name>.py`) is an `Experiment` subclass (or a
`Cells` one, for a measurement that trains nothing: cost, throughput), its
instance the module's EXPERIMENT. It says its name and REPORT.md section,
its config (an instance of its config class, whose fields are its flags,
and the CPU-fast variant), its groups (`group(...)`, below), what it
measures of a trained group, its rows and its claims; the methods the base
class gives (measure, on_chunk, rows, ...) are its defaults. The runner calls only those methods, so a reader can follow
every call from `run` into the experiment.

The runner, in one place and in this order: skips what is finished (a group
whose rows are in results.csv is never redone), builds each ensemble from
the group's recipe (the one `analysis.load_seed` rebuilds from), trains
(`sweep.Sweep`: checkpoints, TensorBoard, curves.csv), measures and times,
writes every probe value into one long table (measurements.csv: the probe at
step 0 where the experiment asks, every chunk, the end), drops the padding
seeds, logs per-seed values and seed means, closes the group's TensorBoard
metrics before its rows (a group with rows is never redone, so its metrics
must be there first), writes the rows, shows progress, then summarizes,
publishes (summary.json, the figures, the config in TensorBoard), and
prints the table and the claims.
"""

import abc
import concurrent.futures
import contextlib
import dataclasses
import io
import time
from typing import Callable

import numpy as np

from src import checkpoint as checkpoint_lib
from src import claims as claims_lib
from src import models as models_lib
from src import record
from src import rundir
from src import storage
from src import sweep
from src import tasks as tasks_lib
from src import train as train_lib
from src import config as config_lib
from src.config import Config


@dataclasses.dataclass(frozen=True)
class Group:
  """One group: a model on a task at a length; all its seeds train in one
  program.

  name: its TensorBoard run and checkpoint folder (`lstm_L050`).
  hparams: its HParams session.
  task, task_params: `tasks.make_task(task, length, **task_params)`.
  key: the results.csv columns that identify its rows.
  budgets: the steps after which it is measured (each a row set; empty:
    once, after `config.steps`).
  probe, probe_examples: measured inside the compiled program at the end of
    every chunk (`train.Ensemble`), handed to the experiment's `on_chunk`.
  work_scale: its step's cost relative to its model's at its length (`work`,
    for the ETA).
  """
  name: str
  model: str
  length: int
  hparams: dict
  task: str = 'memory'
  task_params: dict = dataclasses.field(default_factory=dict)
  key: dict = dataclasses.field(default_factory=dict)
  budgets: tuple[int, ...] = ()
  probe: Callable | None = None
  probe_examples: int = 512
  work_scale: float = 1.0

  @property
  def work(self) -> float:
    """The relative cost of one step, for the ETA (asked when the backend
    runs: a recurrence's chunking depends on it)."""
    return self.work_scale * models_lib.get(self.model).step_work(self.length)

  def model_kwargs(self) -> dict:
    """Width, heads and layers set per group (in its hparams) override the
    config's; a group may tie its read-out to the embeddings."""
    return {k: self.hparams[k] for k in ('d_model', 'num_heads', 'num_layers',
                                         'tied_head') if k in self.hparams}


def group(model: str, length: int, *, name: str | None = None,
          task: str = 'memory', task_params: dict | None = None,
          key: dict | None = None, budgets=(), probe=None,
          probe_examples: int = 512, work_scale: float = 1.0,
          **extra) -> Group:
  """The group of `model` at `length`: its HParams from the registry (and
  `extra`, which may set d_model, num_heads and num_layers; the runner adds
  the run's `model_settings`); its rows found by model and length (and
  `extra`) unless `key` says otherwise."""
  hparams = hparams_for(model, length, **extra)
  return Group(
      name or f'{model}_L{length:03d}', model, length, hparams, task,
      dict(task_params or {}),
      dict(key if key is not None else dict(model=model, length=length,
                                            **extra)),
      tuple(sorted(budgets)), probe, probe_examples, work_scale)


def hparams_for(model: str, length: int, **extra) -> dict:
  """A group's HParams. What `model` implies is named model_*, so that it
  sorts after `length` and `model`: TensorBoard shows the first five hparams
  that differ, by name."""
  spec = models_lib.get(model)
  return {'model': model, 'model_family': spec.family.name,
          'model_architecture': spec.architecture,
          'model_init': spec.init_name, 'length': length, **extra}


def model_settings(model: str, config) -> dict:
  """The run's settings that only some models take, as build keywords (and
  HParams): a chrono model's T_max, the same at every length."""
  if models_lib.get(model).takes_horizon:
    return {'chrono_horizon': config.horizon}
  return {}


def with_settings(group: Group, config) -> Group:
  """`group` with `model_settings` in its HParams, as its recipe builds it."""
  return dataclasses.replace(group, hparams={
      **group.hparams, **model_settings(group.model, config)})


def recipe(group: Group, config) -> dict:
  """All it takes to build a group's ensemble again: kept in the run's
  groups.json, read back by `train.build` here and in `analysis`."""
  task = tasks_lib.make_task(group.task, group.length, **group.task_params)
  overrides = group.model_kwargs()
  return {'model': group.model,
          'model_kwargs': dict(
              vocab_size=task.vocab_size, length=task.length,
              d_model=overrides.get('d_model', config.d_model),
              num_classes=task.num_classes,
              num_heads=overrides.get('num_heads', config.num_heads),
              num_layers=overrides.get('num_layers', config.num_layers),
              **model_settings(group.model, config),
              **({'tied_head': True} if overrides.get('tied_head') else {})),
          'task': {'name': task.name, 'length': task.length, **task.params},
          'num_seeds': config.seeds, 'seed': config.seed,
          'batch_size': config.batch_size,
          'learning_rates': list(config.rates), **training_options(config)}


def training_options(config) -> dict:
  """The recipe's optimiser, fixed training set and early stop, where they
  are not the defaults (a default recipe stays what it was)."""
  out = {}
  if (config.optimizer, config.weight_decay, config.schedule) != (
      'adam', 0.0, 'constant'):
    out['optimizer'] = {'name': config.optimizer,
                        'weight_decay': config.weight_decay,
                        'schedule': config.schedule,
                        'decay_steps': config.steps}
  if config.train_strings:
    out['train_strings'] = config.train_strings
  if config.early_stop:
    out['early_stop'] = config.early_stop
  return out


def recipes(experiment, config) -> dict:
  """{group name: recipe} of every group `experiment` trains ({} for one
  that trains none): what each group's checkpoints must have been built
  from to be restored (`rundir.check_recipe`)."""
  return {g.name: recipe(g, config) for g in (
      with_settings(g, config) for g in experiment.groups(config))}


def build(group: Group, config, **kwargs) -> train_lib.Ensemble:
  """The ensemble of one group, its recipe attached."""
  r = recipe(group, config)
  ensemble = train_lib.build(r, probe=group.probe,
                             probe_examples=group.probe_examples,
                             eval_examples=config.eval_examples, **kwargs)
  ensemble.recipe = r
  return ensemble


@dataclasses.dataclass(frozen=True)
class Timing:
  """What a trained group cost, and its state, for its rows."""
  steps: int  # the budget it was measured after
  wall_s: float  # training (this process) and measuring
  compile_s: float
  num_params: int
  diverged: np.ndarray  # per seed: a non-finite loss at some step


# -- what an experiment is -------------------------------------------------------

MEASUREMENT_COLUMNS = ['group', 'model', 'length', 'seed', 'learning_rate',
                       'step', 'key', 'value']


class Measurements:
  """measurements.csv as an experiment's claims read it: every probe value,
  per seed, at every step it was taken (step 0 included where asked), in
  long form."""

  def __init__(self, rows):
    self.rows = list(rows)

  def values(self, key: str, *, step: int, **match) -> list[float]:
    """Per seed (in seed order), `key` at `step` in the rows matching
    `match` (group=..., model=..., length=...)."""
    by_seed = {int(r['seed']): float(r['value']) for r in self.rows
               if r['key'] == key and int(r['step']) == step
               and all(str(r[k]) == str(v) for k, v in match.items())}
    return [by_seed[s] for s in sorted(by_seed)]

  def steps(self, key: str, **match) -> list[int]:
    return sorted({int(r['step']) for r in self.rows if r['key'] == key
                   and all(str(r[k]) == str(v) for k, v in match.items())})


@dataclasses.dataclass
class Measured:
  """What the runner hands an experiment's summarize and figure beside its
  results.csv rows (each at the groups' selected rates)."""
  curves: list = dataclasses.field(default_factory=list)  # curves.csv
  tables: dict = dataclasses.field(default_factory=dict)  # its other CSVs
  kept: dict = dataclasses.field(default_factory=dict)  # keep's, per group
  context: dict = dataclasses.field(default_factory=dict)  # a Cells'
  measurements: Measurements = dataclasses.field(
      default_factory=lambda: Measurements([]))
  learning_rates: dict = dataclasses.field(default_factory=dict)


class Experiment(abc.ABC):
  """One `--exp`: what it measures and claims. Required: `name`, `defaults`
  (an instance of its config class), `quick`, and `summarize`; the rest
  have defaults here: a group per model and length on the memory task with
  `probe`, results.csv rows of the final test per seed, no figure."""
  name: str = ''
  section: str = ''  # its REPORT.md section
  figure_file: str = ''  # its figure, in the workdir
  defaults: Config  # its config, and the CPU-fast variant (--quick)
  quick: Config
  columns: list = ['model', 'length', 'seed', 'steps', 'accuracy', 'loss']
  tables: dict = {}  # more CSV files {name: columns}; rows returns them
  tags: dict = {}  # {tag regex: (display name, description)} it logs
  one_length = False  # its summary is of one length
  probe: Callable | None = None  # measured every chunk (and at the end)
  probe_examples = 512
  probe_at_start = False  # also before the first step (step 0)
  final_test = True  # `measure` is the final test on fresh strings
  keeps = False  # `keep` gives its figure something of each group
  parts: tuple[str, ...] = ()  # a Composite's experiments

  @property
  def fields(self) -> tuple[str, ...]:
    """The config field flags it accepts: its config class's."""
    return type(self.defaults).flags()

  def accepts(self, spec) -> bool:
    """Which registered models --models takes."""
    return True

  def groups(self, config) -> list:
    # The class's function itself (a plain function or a staticmethod), not
    # a method bound to the experiment.
    probe = type(self).probe
    return [group(m, L, task_params={'num_filler': config.num_filler},
                  probe=probe, probe_examples=self.probe_examples)
            for m in config.models for L in config.lengths]

  def measure(self, group, ensemble, params, config) -> dict:
    """Per-seed measurements of a trained group: 'accuracy' its test
    accuracy (per seed, or per seed and class)."""
    return ensemble.evaluate(params, num_examples=config.eval_examples)

  def on_chunk(self, group, config, step, probe, writer) -> dict | None:
    """After every chunk, the probe's per-seed values: {tag: per-seed
    values} to log (default: the probe's scalars, as they are)."""
    if probe is None:
      return None
    return {k: v for k, v in probe.items() if np.ndim(v) == 1}

  def final_scalars(self, group, config, final) -> dict:
    """{tag: per-seed values} to log at the end ({tag: (step, values)})."""
    return {}

  def rows(self, group, final, config, timing):
    """results.csv rows (or {file: rows} with `tables`) of a measured
    group: one per seed, its final test."""
    return [dict(model=group.model, length=group.length, seed=s,
                 steps=timing.steps, accuracy=final['accuracy'][s],
                 loss=final['loss'][s]) for s in range(config.seeds)]

  def line(self, group, final, config, timing) -> str:
    acc = np.asarray(final['accuracy'], float).reshape(config.seeds, -1)
    return (f'{group.name}: accuracy {acc.mean():.3f} (seeds '
            + ' '.join(f'{a:.2f}' for a in acc.mean(1)) + f'), '
            f'{timing.wall_s:.1f} s')

  def keep(self, group, ensemble, params, config):
    """What `figure` needs of a group (`keeps`), from its final state."""
    return None

  @abc.abstractmethod
  def summarize(self, config, rows: list[dict], data: Measured) -> dict:
    """Aggregates and claims (`claims.Claim`): summary.json."""

  def figure(self, config, summary, rows, data: Measured, folder,
             writer) -> None:
    """Its figures, saved in `folder` and logged to `writer`."""

  def print_table(self, config, summary) -> None:
    """The table printed at the end."""

  def planned_claims(self, config) -> list:
    """Its claims on placeholder data of the run's shape: the power plan."""
    return []

  def estimate_bytes(self, config) -> int:
    return config_lib.estimate_bytes(config)

  def part_names(self) -> tuple[str, ...] | None:
    """What --parts accepts (a Composite's parts); None: not read."""
    return None


class Cells(Experiment):
  """A measurement that trains nothing (cost, throughput): cells, each
  measured once, with a context made before them and `after` them."""
  final_test = False

  @abc.abstractmethod
  def cells(self, config) -> list:
    """The `Cell`s to measure."""

  @abc.abstractmethod
  def measure_cell(self, cell, config, context) -> list[dict]:
    """results.csv rows of one cell."""

  def context(self, config) -> dict:
    return {}

  def after(self, config, rows, context, progress) -> dict:
    """More context, once every cell is measured."""
    return {}

  def after_work(self, config) -> float:
    """`after`'s share of the ETA."""
    return 0

  def cell_line(self, cell, rows) -> str | None:
    return None

  def groups(self, config) -> list:
    return []


class Composite(Experiment):
  """An experiment made of parts, each run as its own process
  (`--exp=all`)."""

  @abc.abstractmethod
  def run(self, config, run_dir, *, stop=None, flags=None) -> dict:
    """Runs every part and writes what they make together."""

  def summarize(self, config, rows, data) -> dict:
    return {}

  def groups(self, config) -> list:
    return []


def power_plan(module, config) -> list[dict]:
  """The power of every claim the run will judge (`claims.plan`), from the
  experiment's claims built on placeholder data of the run's shape
  (`module.planned_claims(config)`): the same constructors as the real ones,
  so the plan cannot drift from the claims."""
  return claims_lib.plan(module.planned_claims(config))


def power_warning(module, config) -> str | None:
  """The power plan, one line per family and kind, as the run starts; a
  warning where a family cannot reach `POWER_WANTED` at its declared effect
  (and `underpowered` where no outcome of its seeds could clear alpha).
  None when there is no claim to plan."""
  rows = power_plan(module, config)
  if not rows:
    return None
  lines = []
  for r in rows:
    weak = r['power'] < claims_lib.POWER_WANTED
    lines.append(
        f'{"warning: low power: " if weak else "power: "}"{r["family"]}" '
        f'({r["kind"]}, {r["seeds"]} seeds, family of {r["family_size"]}): '
        f'{r["power"]:.0%} at {r["effect"]}'
        + (f' ({r["why"]})' if r['why'] else ''))
  return '\n'.join(lines)


# -- the runner -------------------------------------------------------------------

def run(module, config, run_dir, *, stop=None) -> dict:
  """Runs experiment `module` into `run_dir`; returns its summary."""
  if isinstance(module, Cells):
    return _run_cells(module, config, run_dir, stop)
  tables = {name: record.ResultsCsv(run_dir.path / name, with_rates(cols))
            for name, cols in module.tables.items()}
  results = record.ResultsCsv(run_dir.path / 'results.csv',
                              with_rates(module.columns))
  measurements = record.ResultsCsv(run_dir.path / 'measurements.csv',
                                   MEASUREMENT_COLUMNS)
  groups = [with_settings(g, config) for g in module.groups(config)]
  steps = max(max(g.budgets or (config.steps,)) for g in groups)
  sweeper = sweep.Sweep(
      run_dir, config, groups, stop=stop, steps=steps,
      step_work={g.name: g.work for g in groups},
      final_examples=config.eval_examples if module.final_test else None,
      tags=module.tags)
  kept = {}
  todo = {g.name: [b for b in (g.budgets or (config.steps,)) if not
                   results.has(**g.key, **({'steps': b} if g.budgets
                                           else {}))] for g in groups}
  ahead = _CompileAhead(module, config)
  queue = [g for g in groups if todo[g.name]]
  if not queue:
    sweeper.progress.say(f'nothing to do: {len(groups)} groups already '
                         'finished (their rows are in results.csv); below, '
                         'the summary of what they recorded')
  if queue:  # the first compiles while the main thread initialises it
    ahead.prepare(queue[0], todo[queue[0].name])
  try:
    for g in groups:
      ensemble, params = None, None
      for budget in g.budgets or (config.steps,):
        if budget not in todo[g.name]:
          sweeper.skip(g, budget)
          continue
        if ensemble is None:
          ensemble = ahead.take(g)
          after = queue.index(g) + 1
          if after < len(queue):  # its programs compile while g trains
            ahead.prepare(queue[after], todo[queue[after].name])
        params = _train_and_record(module, config, g, ensemble, budget,
                                   sweeper, results, tables, measurements)
      if module.keeps:
        ensemble = ensemble or build(g, config)
        if params is None:
          params = _restore_params(ensemble, run_dir.checkpoint_dir / g.name,
                                   run_dir.path)
          rate = selected_rate(g, results.rows)
          if params is not None and rate is not None:
            params = ensemble.rate_first(params,
                                         config.rates.index(float(rate)))
        if params is not None:
          kept[g.name] = module.keep(g, ensemble, params, config)
  finally:
    ahead.close()
  rates = {g.name: selected_rate(g, results.rows) for g in groups}
  chosen = lambda rows: [r for r in rows if r.get('selected') != '0']
  at_selected = lambda table: [
      c for c in table if c.get('learning_rate', '') in ('', rates.get(
          c['group']))]
  data = Measured(curves=at_selected(sweeper.curves.rows),
                  tables={k: chosen(t.rows) for k, t in tables.items()},
                  kept=kept,
                  measurements=Measurements(at_selected(measurements.rows)),
                  learning_rates=_rate_summary(config, groups, results.rows))
  everything = Measured(curves=sweeper.curves.rows,
                        tables={k: t.rows for k, t in tables.items()},
                        measurements=Measurements(measurements.rows))
  return finish(module, config, run_dir, chosen(results.rows), data,
                by_rate=verdicts_by_rate(module, config, results.rows,
                                         everything))


class _CompileAhead:
  """Builds the next group's ensemble and compiles its training and test
  programs in a thread while the group before it initialises and trains.
  XLA compiles a program on about one core: a small group's training
  leaves the other core idle, and on an accelerator the host is idle while
  it trains."""

  def __init__(self, module, config):
    self.config = config
    # The final test's strings, where the runner tests (and validates) with
    # `evaluate`; an experiment's own `measure` has programs of its own.
    self.eval_examples = config.eval_examples if module.final_test else None
    self._pool = concurrent.futures.ThreadPoolExecutor(
        1, thread_name_prefix='compile_ahead')
    self._built = {}

  def prepare(self, group, budgets) -> None:
    """Builds `group`'s ensemble (here) and compiles the chunks that
    training it to each of `budgets` runs (in the thread)."""
    ensemble = self._built[group.name] = build(group, self.config)
    done = [b for b in (group.budgets or ()) if b < min(budgets)]
    sizes, start = set(), max(done, default=0)
    for budget in budgets:
      sizes.update(train_lib.chunks(start, budget, self.config.chunk_steps))
      start = budget
    self._pool.submit(ensemble.compile_ahead, sorted(sizes),
                      self.eval_examples)

  def take(self, group):
    """`group`'s ensemble, which `prepare` built."""
    return self._built.pop(group.name)

  def close(self) -> None:
    self._pool.shutdown(wait=False, cancel_futures=True)


def verdicts_by_rate(module, config, rows, data: Measured) -> dict:
  """With a grid of rates, {rate: [(claim, setting, verdict)]}: each claim
  judged again on every rate's rows alone (its curves, tables and
  measurements too), Holm within its family at that rate, as if the run
  had trained that rate only. The summary's verdicts stay the selected
  rates'; these show whether one depends on the rate. {} with one rate."""
  if len(config.rates) < 2:
    return {}
  out = {}
  for rate in config.rates:
    at = lambda table: [r for r in table
                        if float(r.get('learning_rate') or 'nan') == rate]
    mine = Measured(curves=at(data.curves),
                    tables={n: at(t) for n, t in data.tables.items()},
                    measurements=Measurements(at(data.measurements.rows)))
    summary = module.summarize(config, at(rows), mine)
    out[f'{rate:g}'] = [(c['claim'], claim_setting(c), c['verdict'])
                        for c in judged(summary.get('claims', []))]
  return out


def judged(claims: list) -> list[dict]:
  """An experiment's claims (`claims.Claim`) judged (Holm within each
  family) and as summary.json holds them."""
  return [c.to_json() for c in claims_lib.judge(claims)]


def with_rate_verdicts(claims, by_rate) -> list[dict]:
  """Each claim with `by_rate`: its verdict at each rate of the grid alone,
  found by its text (and its setting where the text repeats), the setting
  named where that rate judged it elsewhere (a wall's L* is the data's).
  Where they differ, `measured` names them: the verdict depends on the
  rate, and the report shows it at each one."""
  out = []
  for c in claims:
    setting, verdicts = claim_setting(c), {}
    for rate, judged in by_rate.items():
      same = [j for j in judged if j[0] == c['claim']]
      if len(same) > 1:
        same = [j for j in same if j[1] == setting]
      if len(same) == 1:
        _, where, verdict = same[0]
        verdicts[rate] = verdict + (where if where != setting else '')
    if verdicts:
      c = {**c, 'by_rate': verdicts}
      if len(set(verdicts.values())) > 1:
        c['measured'] += '; verdict at each rate alone: ' + ', '.join(
            f'{rate} {v}' for rate, v in verdicts.items())
    out.append(c)
  return out


# The runner's columns in results.csv (and an experiment's other tables):
# each row's learning rate, whether it is its group's selected rate, and the
# validation accuracy of its seed at that rate (empty with a single rate).
RATE_COLUMNS = ('learning_rate', 'selected', 'validation_accuracy')


def with_rates(columns) -> list[str]:
  return list(columns) + [c for c in RATE_COLUMNS if c not in columns]


def _matches(g: Group, row: dict) -> bool:
  return all(row[k] == str(v) for k, v in g.key.items())


def selected_rate(g: Group, rows) -> str | None:
  """The learning rate (as results.csv writes it) selected for group `g`
  at its largest budget; None before it has rows."""
  picks = [r for r in rows if _matches(g, r) and r.get('selected') != '0']
  if not picks:
    return None
  return max(picks, key=lambda r: int(r.get('steps') or 0))['learning_rate']


def _rate_summary(config, groups, rows) -> dict:
  """Per group (and budget), the rate selected and every rate's mean
  validation accuracy: the tuning, in summary.json."""
  if len(config.rates) < 2:
    return {'grid': list(config.rates), 'rule': 'one rate: no selection'}
  out = {'grid': list(config.rates),
         'rule': 'per group (and budget): the rate with the best mean '
                 'validation accuracy over the seeds, on fresh strings '
                 'disjoint from training, test and curve strings; ties: the '
                 'smaller rate', 'selected': {}}
  for g in groups:
    for budget in g.budgets or (None,):
      mine = [r for r in rows if _matches(g, r) and (
          budget is None or r.get('steps') == str(budget))]
      if not mine:
        continue
      by_rate = {}
      for r in mine:
        if r.get('validation_accuracy', '') != '':
          by_rate.setdefault(float(r['learning_rate']), {})[r['seed']] = \
              float(r['validation_accuracy'])
      pick = next(float(r['learning_rate']) for r in mine
                  if r.get('selected') == '1')
      name = g.name if budget is None else f'{g.name}@{budget}'
      out['selected'][name] = {
          'learning_rate': pick,
          'validation_accuracy': {f'{k:g}': float(np.mean(list(v.values())))
                                  for k, v in sorted(by_rate.items())}}
  return out


def select_rate(validation_accuracy, num_seeds: int) -> int:
  """The index of the rate with the best mean validation accuracy over the
  seeds (ties: the first, the smallest rate of a sorted grid)."""
  acc = np.asarray(validation_accuracy, float).reshape(-1, num_seeds)
  return int(np.argmax(np.nan_to_num(acc, nan=-1.0).mean(axis=1)))


def measurement_rows(g: Group, rates, step: int, values: dict) -> list[dict]:
  """measurements.csv rows of per-member `values` ({key: member-stacked
  array}, unpadded) at `step`: a scalar per seed is one row; a few values
  per seed (classes, heads: at most 16) are `key/i`; larger ones stay the
  experiment's."""
  S = len(next(iter(values.values()))) // len(rates) if values else 0
  out = []
  for key, v in values.items():
    v = np.asarray(v, float)
    v = v.reshape(v.shape[0], -1)
    if v.shape[1] > 16:
      continue
    names = [key] if v.shape[1] == 1 else [f'{key}/{i}'
                                           for i in range(v.shape[1])]
    out += [dict(group=g.name, model=g.model, length=g.length, seed=m % S,
                 learning_rate=rates[m // S], step=step, key=name,
                 value=v[m, i]) for m in range(v.shape[0])
            for i, name in enumerate(names)]
  return out


def _train_and_record(module, config, g, ensemble, budget, sweeper, results,
                      tables, measurements):
  """Trains `g` to `budget` (every rate of the grid), measures it, selects
  its rate on validation strings, logs and writes its rows and its
  measurements; returns its final parameters."""
  S, rates = ensemble.num_seeds, ensemble.learning_rates
  mine = lambda r: r['group'] == g.name
  if module.probe_at_start and g.probe is not None and not any(
      mine(r) and r['step'] == '0' for r in measurements.rows):
    at_start = ensemble.measure(
        ensemble.init()['params'], g.probe, stream=tasks_lib.PROBE_STREAM,
        num_examples=g.probe_examples)
    measurements.append(measurement_rows(g, rates, 0, at_start))

  def log_chunk(step, metrics, writers, seed_writers):
    probe = (ensemble.unpad(metrics['probe']) if 'probe' in metrics
             else None)
    if probe is not None:
      # Rows a killed run wrote past its last checkpoint: not twice.
      measurements.drop(lambda r: mine(r) and int(r['step']) >= step)
      measurements.append(measurement_rows(g, rates, step, probe))
    for r in range(len(rates)):
      writer = writers[r] if writers else None
      _log_per_seed(writer, seed_writers[r] if writers else [],
                    module.on_chunk(g, config, step, None if probe is None
                                    else ensemble.at_rate(probe, r), writer),
                    step)

  trained = sweeper.train(g, ensemble, steps=budget, on_chunk=log_chunk)
  params = trained.state['params']
  start = time.perf_counter()
  final = module.measure(g, ensemble, params, config)
  validation = None
  if len(rates) > 1:  # fresh strings neither training nor the tests see
    validation = ensemble.evaluate(
        params, stream=tasks_lib.VALIDATION_STREAM,
        num_examples=config.eval_examples)['accuracy']
  selected = 0 if validation is None else select_rate(validation, S)
  wall_s = trained.wall_s + time.perf_counter() - start
  diverged = ensemble.unpad(trained.state['diverged'])
  # The TensorBoard metrics first: a group with rows is never redone.
  for r in range(len(rates)):
    for tag, values in module.final_scalars(
        g, config, ensemble.at_rate(final, r)).items():
      step, values = values if isinstance(values, tuple) else (budget,
                                                               values)
      _log_per_seed(trained.writers[r] if trained.writers else None,
                    trained.seed_writers[r] if trained.writers else [],
                    {tag: values}, step)
  measurements.drop(lambda r: mine(r) and r['step'] == str(budget)
                    and r['key'].startswith('final/'))
  measurements.append(measurement_rows(g, rates, budget, {
      f'final/{k}': v for k, v in final.items()
      if np.ndim(v) >= 1 and len(v) == S * len(rates)}))
  accuracy = np.asarray(final['accuracy'], float)
  trained.close(budget, accuracy.reshape(len(accuracy), -1).mean(axis=1),
                selected)
  out = {}
  for r, rate in enumerate(rates):
    timing = Timing(budget, wall_s, ensemble.compile_s,
                    ensemble.num_params, ensemble.at_rate(diverged, r))
    rows = module.rows(g, ensemble.at_rate(final, r), config, timing)
    valid = (None if validation is None
             else ensemble.at_rate(validation, r))
    tag = lambda row: {**row, 'learning_rate': rate,
                       'selected': r == selected,
                       'validation_accuracy': (
                           '' if valid is None else
                           valid[int(row['seed'])] if 'seed' in row
                           else float(np.mean(valid)))}
    for name, table in (rows if isinstance(rows, dict)
                        else {'results.csv': rows}).items():
      out.setdefault(name, []).extend(tag(row) for row in table)
  for name, table in tables.items():
    # Rows a killed run wrote before this group's results: not twice.
    table.drop(lambda r: all(r[k] == str(v) for k, v in g.key.items()))
    table.append(out.get(name, []))
  results.append(out['results.csv'])
  sweeper.progress.say(module.line(
      g, ensemble.at_rate(final, selected), config,
      Timing(budget, wall_s, ensemble.compile_s, ensemble.num_params,
             ensemble.at_rate(diverged, selected)))
      + (f' (lr {rates[selected]:g} of {len(rates)})'
         if len(rates) > 1 else ''))
  return ensemble.rate_first(params, selected)


def _log_per_seed(writer, seed_writers, values: dict | None, step) -> None:
  """Each tag's per-seed values in the seed runs, their mean in the group's
  (nothing on other processes)."""
  if writer is None or not values:
    return
  for tag, v in values.items():
    v = np.asarray(v, float)
    writer.add_scalar(tag, float(v.mean()), step)
    for s, w in enumerate(seed_writers[:len(v)]):
      w.add_scalar(tag, float(v[s]), step)


def _restore_params(ensemble, folder, workdir):
  """The final parameters of a group finished in an earlier run, from its
  checkpoint (None when there is none)."""
  rundir.check_recipe(folder, ensemble.recipe, workdir)
  checkpoints = checkpoint_lib.GroupCheckpoints(folder)
  try:
    _, state = train_lib.restore(ensemble, checkpoints)
  finally:
    checkpoints.close()
  return None if state is None else state['params']


@dataclasses.dataclass(frozen=True)
class Cell:
  """One measurement of a cells experiment: its results.csv rows are found
  by `key`; `work` weighs the ETA."""
  name: str
  key: dict
  work: float = 1.0


def _run_cells(module, config, run_dir, stop) -> dict:
  results = record.ResultsCsv(run_dir.path / 'results.csv', module.columns)
  context = module.context(config)
  cells = module.cells(config)
  progress = record.Progress(sum(c.work for c in cells)
                             + module.after_work(config))
  for cell in cells:
    if stop is not None and stop.requested:
      raise checkpoint_lib.Preempted(stop.signum, cell.name)
    done_before = results.has(**cell.key)
    if not done_before:
      rows = module.measure_cell(cell, config, context)
      results.append(rows)
      line = module.cell_line(cell, rows)
      if line:
        progress.say(line)
    progress.update(cell.work, cell.name, done_before=done_before)
  context = {**context, **module.after(config, results.rows, context,
                                       progress)}
  return finish(module, config, run_dir, results.rows,
                Measured(context=context))


def finish(module, config, run_dir, rows: list[dict], data: Measured, *,
           by_rate=None) -> dict:
  """Summary (with the training time the rows record), summary.json, the
  figures and the config in TensorBoard, the table and the claims."""
  summary = module.summarize(config, rows, data)
  if data.learning_rates:
    summary['learning_rates'] = data.learning_rates
  if 'claims' in summary:  # typed claims: each kind's test, Holm by family
    summary['claims'] = with_rate_verdicts(judged(summary['claims']),
                                           by_rate or {})
    if config.decoys:  # judged on the task variant: claims of their own
      for c in summary['claims']:
        c['decoys'] = config.decoys
  if 'wall_s' in module.columns and not isinstance(module, Cells):
    summary.update(training_time(module, config, rows))
  record.publish(run_dir, config, summary, lambda writer: module.figure(
      config, summary, rows, data, run_dir.path, writer),
                 fields=module.fields)
  printed = io.StringIO()
  with contextlib.redirect_stdout(printed):
    module.print_table(config, summary)
  print(printed.getvalue(), end='')
  if summary.get('compile_share') is not None and 'wall_s' in summary:
    print(f'Training wall time, as the groups recorded it when they ran: '
          f'{summary["wall_s"]:.0f}s, of which waiting for compiles '
          f'{summary["compile_s"]:.0f}s '
          f'({100 * summary["compile_share"]:.0f}%)')
  print_claims(summary)
  if run_dir.is_writer:  # the same lines for the report to quote
    storage.write_whole(run_dir.path / TABLE_FILE, printed.getvalue())
    print(tensorboard_lines(run_dir.path))
  return summary


TABLE_FILE = 'table.txt'  # the table `finish` printed (no timings): the report's


# TensorBoard's TIME SERIES with no smoothing (its default 0.6 would bend
# a curve of a few lengths): the URL the runs print.
TENSORBOARD_URL = 'http://localhost:6006/?smoothing=0#timeseries'


def tensorboard_lines(workdir) -> str:
  """The commands and the URL that open what a run wrote."""
  return (f'\nTensorBoard, the finding first: tensorboard --logdir '
          f'{workdir}/tb/overview\n  then open {TENSORBOARD_URL}\n'
          f'every group and seed: tensorboard --logdir {workdir}/tb')


def training_time(module, config, rows) -> dict:
  """The groups' wall time (training and measuring, in the process that did
  it) and compile time, from their rows: one value per group's row set."""
  walls = {}
  for g in module.groups(config):
    for r in rows:
      if all(r[k] == str(v) for k, v in g.key.items()):
        key = (g.name, r.get('steps'))
        walls[key] = (float(r['wall_s']), float(r.get('compile_s') or 0.0))
  wall = sum(w for w, _ in walls.values())
  out = {'wall_s': wall}
  if 'compile_s' in module.columns:
    compile_s = sum(c for _, c in walls.values())
    out.update(compile_s=compile_s,
               compile_share=compile_s / wall if wall else None)
  return out


def claim_setting(claim: dict) -> str:
  """The setting a claim was judged at, as text: ' (L=20) (decoys=0.25)'."""
  return ''.join(f' ({name}={claim[k]})' for k, name in
                 (('length', 'L'), ('d_model', 'd_model'),
                  ('decoys', 'decoys')) if k in claim)


def print_claims(summary: dict) -> None:
  for c in summary.get('claims', []):
    print(f'- {c["verdict"].upper()}{claim_setting(c)}: {c["claim"]} '
          f'({c["measured"]})')
