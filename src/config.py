"""The run config: one frozen dataclass, parsed and validated from flags.

Every experiment starts from `Config()` with its own defaults replaced; the
flags the user gives override those. Validation raises `ConfigError` with one
line naming the flag and what it accepts, before anything is written.
"""

import dataclasses
import math
import os

from src import models as models_lib
from src import tasks as tasks_lib


class ConfigError(ValueError):
  """Bad user input: the message is one line naming the flag."""


def _field(default, doc, syntax=None, parse=None, *, defines_run=True):
  """A config field: `doc` its help; a field with `parse` is also a flag,
  `--NAME`, taking `syntax` (for --help and errors) and parsed by
  `parse(flag, text, context)`; `defines_run=False` for fields that never
  change results (they may differ when a run is resumed)."""
  return dataclasses.field(default=default, metadata={
      'doc': doc, 'syntax': syntax, 'parse': parse,
      'defines_run': defines_run})


INDUCTION_TASKS = ('induction', 'trigger_induction')
RECALL_TASKS = ('recall', 'mqar')
OPTIMIZERS, SCHEDULES = ('adam', 'adamw', 'sgd'), ('constant', 'cosine')
_COUNT, _COUNTS = 'an integer >= 1', 'a comma list of distinct integers >= 1'
_count = lambda flag, text, context: _int(flag, text)
_counts = lambda flag, text, context: _int_list(flag, text, 1)


@dataclasses.dataclass(frozen=True)
class Config:
  """Every field a run reads: its default, its help, and, for a flag, what
  it accepts. A new field is one line here (and its name in the FIELDS of
  each experiment that reads it): run.py defines its flag from it."""
  exp: str = _field('distance', 'experiment to run')
  quick: bool = _field(False, "the experiment's CPU-fast variant (--quick)")
  models: tuple[str, ...] = _field(
      ('attention', 'lstm', 'gru', 'rnn'),
      'models to train (names in the registry)',
      'a comma list of distinct registered model names',
      lambda flag, text, context: _choice_list(flag, text,
                                               context['models']))
  lengths: tuple[int, ...] = _field(
      (20,), 'sequence lengths L (query at L-1)',
      f'a comma list of distinct integers >= {tasks_lib.MIN_LENGTH}',
      lambda flag, text, context: _int_list(flag, text,
                                            context['min_length']))
  seeds: int = _field(4, 'seeds per group, trained at once on a vmap axis',
                      _COUNT, _count)
  seed: int = _field(0, 'base seed; seed i of a group uses fold_in(seed, i)',
                     'an integer >= 0',
                     lambda flag, text, context: _int(flag, text, minimum=0))
  steps: int = _field(1000, 'training steps per group (Adam, fresh strings)',
                      _COUNT, _count)
  batch_size: int = _field(64, 'strings per training step per seed', _COUNT,
                           _count)
  learning_rate: float = _field(
      3e-3, 'Adam learning rate, no schedule', 'a finite number > 0',
      lambda flag, text, context: _rate(flag, text))
  learning_rates: tuple[float, ...] = _field(
      (), 'Adam learning rates trained side by side, one compiled program '
      '(a grid on the ensemble axis, paired by seed); each group is judged '
      'at the rate with the best validation accuracy. Empty: the one '
      '--learning_rate', 'a comma list of distinct finite numbers > 0',
      lambda flag, text, context: _rate_list(flag, text))
  d_model: int = _field(32, 'width shared by every model (embedding, state)',
                        _COUNT, _count)
  num_heads: int = _field(1, 'attention heads per layer',
                          f'{_COUNT} dividing --d_model', _count)
  num_layers: int = _field(1, 'attention layers', _COUNT, _count)
  chrono_horizon: int = _field(
      0, "chrono's T_max, the same at every length of a sweep (chrono "
      'models only); 0: the longest of --lengths',
      'an integer >= 3, or 0 for the longest of --lengths',
      lambda flag, text, context: _horizon(flag, text))
  heads: tuple[int, ...] = _field((1, 2, 4),
                                  'head counts compared (--exp=heads)',
                                  f'{_COUNTS}, each dividing --d_model',
                                  _counts)
  depths: tuple[int, ...] = _field(
      (1, 2), 'attention depths compared (--exp=induction)', _COUNTS,
      _counts)
  test_lengths: tuple[int, ...] = _field(
      (), 'the lengths --exp=induction tests a model that reads any length '
      'at, beside its training length (default: 2x and 4x it)',
      'a comma list of integers >= 3',
      lambda flag, text, context: _int_list(flag, text, 3))
  vocab: int = _field(16, 'token vocabulary of the induction task',
                      'an integer >= 3',
                      lambda flag, text, context: _int(flag, text, minimum=3))
  induction_task: str = _field(
      'induction', "the induction experiment's task: `induction` (the last "
      'token occurred once before) or `trigger_induction` (the Mamba '
      "paper's: a special trigger token, the positive control)",
      'induction or trigger_induction',
      lambda flag, text, context: _choice(flag, text, INDUCTION_TASKS))
  budgets: tuple[int, ...] = _field(
      (250, 1000, 4000), 'training budgets in steps (--exp=budget)', _COUNTS,
      _counts)
  pairs: tuple[int, ...] = _field(
      (4, 8, 16), 'key-value pairs per string compared (--exp=recall)',
      _COUNTS, _counts)
  widths: tuple[int, ...] = _field(
      (16, 32, 64), 'model widths d_model compared (--exp=recall; '
      "--exp=cost counts attention's price at each)", _COUNTS,
      _counts)
  bridge_length: int = _field(
      200, 'the length at which --exp=gradient measures the sensitivity to '
      'every position of the same strings (a model trained at that length, '
      'one more group per model unless it is one of --lengths)',
      f'an integer >= {tasks_lib.MIN_LENGTH}',
      lambda flag, text, context: _int(flag, text,
                                       minimum=tasks_lib.MIN_LENGTH))
  num_filler: int = _field(8, 'distinct neutral filler symbols', _COUNT,
                           _count)
  decoys: float = _field(
      0.0, 'memory task variant: the probability that a filler position '
      'holds A or B (a decoy); the label stays the symbol at position 0',
      'a number in [0, 1)', lambda flag, text, context: _fraction(flag, text))
  parts: tuple[str, ...] = _field(
      (), 'the parts --exp=all runs and reports (default: every one)',
      'a comma list of the parts of --exp=all',
      lambda flag, text, context: _choice_list(
          flag, text, context.get('parts') or _list(flag, text)))
  recall_task: str = _field(
      'recall', "the recall experiment's task: `recall` (Searchlight's "
      'variant: uniform query slots, the answer after each query, values '
      "with replacement, a read-out over the values) or `mqar` (Zoology's, "
      'as published: power-law query slots, the filler after each query, '
      'distinct values, a read-out tied to the embeddings over the '
      'vocabulary)', 'recall or mqar',
      lambda flag, text, context: _choice(flag, text, RECALL_TASKS))
  power_a: float = _field(
      0.01, "the mqar task's query-slot power law a (p(slot i) ~ "
      '(i+1)^(a-1); 1 is uniform)', 'a number in (0, 1]',
      lambda flag, text, context: _unit(flag, text))
  optimizer: str = _field(
      'adam', 'the optimiser: adam (constant rate), adamw (decoupled weight '
      'decay, --weight_decay) or sgd (plain gradient descent)',
      'adam, adamw or sgd',
      lambda flag, text, context: _choice(flag, text, OPTIMIZERS))
  weight_decay: float = _field(
      0.0, "AdamW's decoupled weight decay (--optimizer=adamw)",
      'a number >= 0', lambda flag, text, context: _nonnegative(flag, text))
  schedule: str = _field(
      'constant', 'the learning rate over training: constant, or cosine '
      '(from the rate to 0 at --steps)', 'constant or cosine',
      lambda flag, text, context: _choice(flag, text, SCHEDULES))
  train_strings: int = _field(
      0, 'a fixed training set of this many strings, shuffled every epoch '
      '(0: fresh strings every step)',
      f'an integer in [0, {2**20}]',
      lambda flag, text, context: _int_at_most(flag, text, 0, 2**20))
  early_stop: float = _field(
      0.0, 'a seed stops training once its test accuracy (the test curve, '
      'every chunk) reaches this (0: never)', 'a number in [0, 1)',
      lambda flag, text, context: _fraction(flag, text))
  eval_examples: int = _field(2048, 'fresh test strings per seed', _COUNT,
                              _count)
  chunk_steps: int = _field(100, 'steps per compiled scan chunk (log points)',
                            _COUNT, _count, defines_run=False)
  checkpoint_every: int = _field(500, 'steps between checkpoints', _COUNT,
                                 _count, defines_run=False)

  @property
  def rates(self) -> tuple[float, ...]:
    """The learning-rate grid: --learning_rates, else --learning_rate."""
    return self.learning_rates or (self.learning_rate,)

  @property
  def members(self) -> int:
    """A group's ensemble members: every (seed, learning rate) pair."""
    return self.seeds * len(self.rates)

  @property
  def horizon(self) -> int:
    """Chrono's T_max: --chrono_horizon, else the longest of --lengths."""
    return self.chrono_horizon or max(self.lengths)

  def run_fields(self) -> dict:
    """The fields that define the results (compared when resuming)."""
    return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
            if f.metadata.get('defines_run', True)}

  def to_json(self) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v
            for k, v in dataclasses.asdict(self).items()}


def field_docs() -> dict[str, str]:
  return {f.name: f.metadata['doc'] for f in dataclasses.fields(Config)}


def flag_fields() -> tuple[str, ...]:
  """The fields that are flags (`--NAME`), in Config's order."""
  return tuple(f.name for f in dataclasses.fields(Config)
               if f.metadata['parse'] is not None)


def flag_syntax(name: str) -> str:
  """What field flag `--NAME` accepts, for --help and errors."""
  return _FIELDS[name].metadata['syntax']


_FIELDS = {f.name: f for f in dataclasses.fields(Config)}


# -- parsing ------------------------------------------------------------------

def _int(flag, text, minimum=1):
  try:
    value = int(text)
  except (TypeError, ValueError):
    raise ConfigError(f'--{flag}: expected an integer >= {minimum}, '
                      f'got {text!r}') from None
  if value < minimum:
    raise ConfigError(f'--{flag}: expected an integer >= {minimum}, '
                      f'got {value}')
  return value


def _horizon(flag, text):
  if str(text).strip() == '0':
    return 0
  try:
    return _int(flag, text, minimum=3)
  except ConfigError:
    raise ConfigError(f'--{flag}: expected an integer >= 3, or 0 for the '
                      f'longest of --lengths, got {text!r}') from None


def _number(flag, text, accepts, within):
  """A float `within(value)` holds for, else one line naming the flag."""
  try:
    value = float(text)
  except (TypeError, ValueError):
    value = math.nan
  if not (math.isfinite(value) and within(value)):
    raise ConfigError(f'--{flag}: expected {accepts}, got {text!r}')
  return value


def _fraction(flag, text):
  return _number(flag, text, 'a number in [0, 1)', lambda v: 0 <= v < 1)


def _unit(flag, text):
  return _number(flag, text, 'a number in (0, 1]', lambda v: 0 < v <= 1)


def _nonnegative(flag, text):
  return _number(flag, text, 'a number >= 0', lambda v: v >= 0)


def _int_at_most(flag, text, minimum, maximum):
  value = _int(flag, text, minimum=minimum)
  if value > maximum:
    raise ConfigError(f'--{flag}: expected an integer in [{minimum}, '
                      f'{maximum}], got {value}')
  return value


def _rate(flag, text):
  try:
    value = float(text)
  except (TypeError, ValueError):
    value = math.nan
  if not (math.isfinite(value) and value > 0):
    raise ConfigError(f'--{flag}: expected a finite number > 0, got {text!r}')
  return value


def _rate_list(flag, text):
  out = tuple(_rate(flag, item) for item in _list(flag, text))
  if len(set(out)) != len(out):
    raise ConfigError(f'--{flag}: values must be distinct, got {text!r}')
  return out


def _list(flag, text):
  items = [s.strip() for s in str(text).split(',')]
  if not text or not all(items):
    raise ConfigError(f'--{flag}: expected a comma-separated list, '
                      f'got {text!r}')
  return items


def _int_list(flag, text, minimum):
  out = []
  for item in _list(flag, text):
    try:
      value = int(item)
    except ValueError:
      raise ConfigError(f'--{flag}: expected comma-separated integers >= '
                        f'{minimum}, got {item!r}') from None
    if value < minimum:
      raise ConfigError(f'--{flag}: expected comma-separated integers >= '
                        f'{minimum}, got {value}')
    out.append(value)
  if len(set(out)) != len(out):
    raise ConfigError(f'--{flag}: values must be distinct, got {text!r}')
  return tuple(out)


def _choice(flag, text, choices):
  if text not in choices:
    raise ConfigError(f'--{flag}: unknown value {text!r}; expected one of '
                      f'{", ".join(choices)}')
  return text


def _choice_list(flag, text, choices):
  out = _list(flag, text)
  for item in out:
    if item not in choices:
      raise ConfigError(f'--{flag}: unknown value {item!r}; expected a comma '
                        f'list from {",".join(choices)}')
  if len(set(out)) != len(out):
    raise ConfigError(f'--{flag}: values must be distinct, got {text!r}')
  return tuple(out)


def parse(defaults: Config, raw: dict, *, models=None,
          min_length=tasks_lib.MIN_LENGTH, one_length: bool = False,
          parts=None, reads=None) -> Config:
  """Overrides `defaults` with the flags given as text (None: not given).
  `models`: the names `--models` accepts (default: every registered one);
  `one_length`: the experiment summarises a single length; `parts`: the
  names `--parts` accepts (an experiment made of parts); `reads`: the
  fields the experiment reads (None: all), the only ones checked against
  each other."""
  context = {'models': models_lib.names() if models is None else models,
             'min_length': min_length, 'parts': parts}
  updates = {name: _FIELDS[name].metadata['parse'](name, text, context)
             for name, text in raw.items() if text is not None}
  if 'learning_rate' in updates and 'learning_rates' in updates:
    raise ConfigError('--learning_rates: give either --learning_rate (one '
                      'rate) or --learning_rates (a grid), not both')
  if 'learning_rate' in updates:  # one rate given: the grid is that rate
    updates['learning_rates'] = ()
  config = dataclasses.replace(defaults, **updates)
  if one_length and len(config.lengths) != 1:
    raise ConfigError(f'--lengths: --exp={config.exp} takes one length, got '
                      f'{",".join(map(str, config.lengths))}')
  for flag, counts in (('num_heads', (config.num_heads,)),
                       ('heads', config.heads)):
    if reads is not None and flag not in reads:
      continue
    for h in counts:
      if config.d_model % h:
        raise ConfigError(f'--{flag}: must divide --d_model={config.d_model},'
                          f' got {h}')
  return config


# -- resources ------------------------------------------------------------------

def estimate_bytes(config: Config) -> int:
  """A rough estimate of the largest group's live memory over all its
  members (seeds x learning rates): the activations a training step keeps
  for its backward pass, or the forward pass of an evaluation chunk,
  whichever is larger (float32). Each model's registry entry says what it
  keeps per string."""
  from src import train as train_lib  # deferred: it imports jax
  strings = max(2 * config.batch_size,
                train_lib.eval_chunk(config.eval_examples))
  worst = 0
  for model in config.models:
    activations = models_lib.get(model).activations
    for L in config.lengths:
      per_string = activations(L, config.d_model, config.num_heads,
                               config.num_layers)
      worst = max(worst, per_string * strings)
  return int(4 * config.members * worst)


def available_bytes() -> int:
  """Memory of one device (accelerator), or of the host for the CPU."""
  import jax  # deferred: parsing flags must not start a backend
  device = jax.local_devices()[0]
  stats = device.memory_stats() if device.platform != 'cpu' else None
  if stats and 'bytes_limit' in stats:
    return int(stats['bytes_limit']) * jax.device_count()
  return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_AVPHYS_PAGES')


def check_memory(config: Config, estimate=estimate_bytes) -> None:
  need, have = estimate(config), available_bytes()
  if need > 0.8 * have:
    grid = '/--learning_rates' if len(config.rates) > 1 else ''
    raise ConfigError(
        f'--lengths/--seeds{grid}/--batch_size/--eval_examples: the largest '
        f'group needs about {need / 2**30:.1f} GiB, more than 80% of the '
        f'{have / 2**30:.1f} GiB available; lower them')
