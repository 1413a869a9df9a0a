"""The API an experiment subclasses: what it measures, nothing of how.

An experiment (`experiments/<name>.py`) is an `Experiment` subclass (or a
`Cells` one, for a measurement that trains nothing: cost, throughput), its
instance the module's EXPERIMENT. It says its name and REPORT.md section,
its config (an instance of its config class, whose fields are its flags,
and the CPU-fast variant), its groups (`group(...)`, below), what it
measures of a trained group, its rows and its claims; the methods the base
class gives (measure, on_chunk, rows, ...) are its defaults. The runner
(`src/runner.py`) calls only those methods, so a reader can follow every
call from `runner.train_and_evaluate` into the experiment.
"""

import abc
import dataclasses
from typing import Callable

import numpy as np

from src import evaluation
from src import models as models_lib
from src import power as power_lib
from src import tasks as tasks_lib
from src import config as config_lib
from src import train as train_lib
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
  compile_s: float  # how long training waited for its programs
  num_params: int
  diverged: np.ndarray  # per seed: a non-finite loss at some step
  compiled_s: float = 0.0  # compiling its programs, in whichever thread

  @property
  def compile_text(self) -> str:
    """The compiles in a progress line: their time, and how much of it
    training waited for (none where they ran ahead, beside the group
    before)."""
    return (f'compile {self.compiled_s:.1f}s, '
            + (f'{self.compile_s:.1f}s of it waited' if self.compile_s >= 0.05
               else 'ahead of training'))


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
  # For docs/REFERENCE.md's table of outputs (docs/sync_readme.py writes it
  # from these and `columns`): what its columns mean beyond their names,
  # its other CSV files, and the keys of its summary.json.
  columns_note: str = ''
  summary_keys: str = ''

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
    return evaluation.evaluate(ensemble, params,
                               num_examples=config.eval_examples)

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
  """The power of every claim the run will judge (`power.plan`), from the
  experiment's claims built on placeholder data of the run's shape
  (`module.planned_claims(config)`): the same constructors as the real ones,
  so the plan cannot drift from the claims."""
  return power_lib.plan(module.planned_claims(config))


def power_warning(module, config) -> str | None:
  """The power plan, one line per family and kind, as the run starts; a
  warning where a family cannot reach `POWER_WANTED` at its declared effect
  (and `underpowered` where held is out of reach at its seeds).
  None when there is no claim to plan."""
  rows = power_plan(module, config)
  if not rows:
    return None
  lines = []
  for r in rows:
    weak = r['power'] < power_lib.POWER_WANTED
    lines.append(
        f'{"warning: low power: " if weak else "power: "}"{r["family"]}" '
        f'({r["kind"]}, {r["seeds"]} seeds, family of {r["family_size"]}): '
        f'{r["power"]:.0%} at {r["effect"]}'
        + (f' ({r["why"]})' if r['why'] else ''))
  return '\n'.join(lines)


@dataclasses.dataclass(frozen=True)
class Cell:
  """One measurement of a cells experiment: its results.csv rows are found
  by `key`; `work` weighs the ETA."""
  name: str
  key: dict
  work: float = 1.0
