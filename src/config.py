"""The run config: the fields every experiment shares, parsed and validated
from flags; each experiment adds its own fields in a subclass, in its file.

An experiment's defaults are an instance of its config class; the flags the
user gives override them. The flags an experiment accepts are its class's
field flags (`flags()`), less the shared ones it fixes (`fixed`).
Validation raises `ConfigError` with one line naming the flag and what it
accepts, before anything is written.
"""

import dataclasses
import math
import os
from typing import ClassVar

from src import models as models_lib
from src import tasks as tasks_lib


class ConfigError(ValueError):
  """Bad user input: the message is one line naming the flag."""


def field(default, doc, syntax=None, parse=None, *, defines_run=True,
          divides_width=False):
  """A config field: `doc` its help; a field with `parse` is also a flag,
  `--NAME`, taking `syntax` (for --help and errors) and parsed by
  `parse(flag, text, context)`; `defines_run=False` for fields that never
  change results (they may differ when a run is resumed);
  `divides_width`: a head count (or counts) that must divide --d_model."""
  return dataclasses.field(default=default, metadata={
      'doc': doc, 'syntax': syntax, 'parse': parse,
      'defines_run': defines_run, 'divides_width': divides_width})


COUNT, COUNTS = 'an integer >= 1', 'a comma list of distinct integers >= 1'


def count(default, doc, **kwargs):
  """A field flag taking an integer >= 1."""
  return field(default, doc, COUNT, lambda flag, text, context: _int(
      flag, text), **kwargs)


def counts(default, doc, syntax=COUNTS):
  """A field flag taking distinct integers >= 1."""
  return field(default, doc, syntax, lambda flag, text, context: _int_list(
      flag, text, 1))


def head_counts(default, doc):
  """A field flag taking distinct head counts, each dividing --d_model."""
  return field(default, doc, f'{COUNTS}, each dividing --d_model',
               lambda flag, text, context: _int_list(flag, text, 1),
               divides_width=True)


def integer(default, doc, minimum):
  """A field flag taking an integer >= `minimum`."""
  return field(default, doc, f'an integer >= {minimum}',
               lambda flag, text, context: _int(flag, text, minimum=minimum))


def integers(default, doc, minimum):
  """A field flag taking a comma list of integers >= `minimum`."""
  return field(default, doc, f'a comma list of integers >= {minimum}',
               lambda flag, text, context: _int_list(flag, text, minimum))


def choice(default, doc, choices):
  """A field flag taking one of `choices`."""
  return field(default, doc, ', '.join(choices[:-1]) + f' or {choices[-1]}',
               lambda flag, text, context: _choice(flag, text, choices))


def unit(default, doc):
  """A field flag taking a number in (0, 1]."""
  return field(default, doc, 'a number in (0, 1]',
               lambda flag, text, context: _unit(flag, text))


OPTIMIZERS, SCHEDULES = ('adam', 'adamw', 'sgd'), ('constant', 'cosine')


@dataclasses.dataclass(frozen=True)
class Config:
  """The shared run config: every field the runner and the library read.
  An experiment's own fields are a subclass in its file; a new field is one
  line there (or here, when the runner reads it): run.py defines its flag
  from it."""
  exp: str = field('distance', 'experiment to run')
  quick: bool = field(False, "the experiment's CPU-fast variant (--quick)")
  models: tuple[str, ...] = field(
      ('attention', 'lstm', 'gru', 'rnn'),
      'models to train (names in the registry)',
      'a comma list of distinct registered model names',
      lambda flag, text, context: choice_list(flag, text,
                                               context['models']))
  lengths: tuple[int, ...] = field(
      (20,), 'sequence lengths L (query at L-1)',
      f'a comma list of distinct integers >= {tasks_lib.MIN_LENGTH}',
      lambda flag, text, context: _int_list(flag, text,
                                            context['min_length']))
  seeds: int = count(4, 'seeds per group, trained at once in one program')
  seed: int = integer(0, 'base seed; seed i of a group uses fold_in(seed, '
                      'i)', 0)
  steps: int = count(1000, 'training steps per group (Adam, fresh strings)')
  batch_size: int = count(64, 'strings per training step per seed')
  learning_rate: float = field(
      3e-3, 'Adam learning rate, no schedule', 'a finite number > 0',
      lambda flag, text, context: _rate(flag, text))
  learning_rates: tuple[float, ...] = field(
      (), 'Adam learning rates trained side by side, one compiled program '
      '(a grid on the ensemble axis, paired by seed); each group is judged '
      'at the rate with the best validation accuracy. Empty: the one '
      '--learning_rate', 'a comma list of distinct finite numbers > 0',
      lambda flag, text, context: _rate_list(flag, text))
  d_model: int = count(32, 'width shared by every model (embedding, state)')
  num_heads: int = field(1, 'attention heads per layer',
                         f'{COUNT} dividing --d_model',
                         lambda flag, text, context: _int(flag, text),
                         divides_width=True)
  num_layers: int = count(1, 'attention layers')
  chrono_horizon: int = field(
      0, "chrono's T_max, the same at every length of a sweep (chrono "
      'models only); 0: the longest of --lengths',
      'an integer >= 3, or 0 for the longest of --lengths',
      lambda flag, text, context: _horizon(flag, text))
  num_filler: int = count(8, 'distinct neutral filler symbols')
  decoys: float = field(
      0.0, 'memory task variant: the probability that a filler position '
      'holds A or B (a decoy); the label stays the symbol at position 0',
      'a number in [0, 1)', lambda flag, text, context: _fraction(flag, text))
  optimizer: str = choice(
      'adam', 'the optimiser: adam (constant rate), adamw (decoupled weight '
      'decay, --weight_decay) or sgd (plain gradient descent)', OPTIMIZERS)
  weight_decay: float = field(
      0.0, "AdamW's decoupled weight decay (--optimizer=adamw)",
      'a number >= 0', lambda flag, text, context: _nonnegative(flag, text))
  schedule: str = choice(
      'constant', 'the learning rate over training: constant, or cosine '
      '(from the rate to 0 at --steps)', SCHEDULES)
  train_strings: int = field(
      0, 'a fixed training set of this many strings, shuffled every epoch '
      '(0: fresh strings every step)',
      f'an integer in [0, {2**20}]',
      lambda flag, text, context: _int_at_most(flag, text, 0, 2**20))
  early_stop: float = field(
      0.0, 'a seed stops training once its test accuracy (the test curve, '
      'every chunk) reaches this (0: never)', 'a number in [0, 1)',
      lambda flag, text, context: _fraction(flag, text))
  eval_examples: int = count(2048, 'fresh test strings per seed')
  chunk_steps: int = count(100, 'steps per compiled scan chunk (log points)',
                           defines_run=False)
  checkpoint_every: int = count(500, 'steps between checkpoints',
                                defines_run=False)
  memory_gib: float = field(
      0.0, 'plan for devices of this many GiB each (0: the devices found): '
      'a group whose members do not fit trains them in slices that do',
      'a number >= 0', lambda flag, text, context: _nonnegative(flag, text),
      defines_run=False)

  # The shared fields an experiment fixes at its defaults' values (its
  # design sets them, or it never reads them): not its flags, so the user
  # who gives one is told.
  fixed: ClassVar[tuple[str, ...]] = ()

  @classmethod
  def flags(cls) -> tuple[str, ...]:
    """The field flags this config takes (`--NAME`), in field order."""
    return tuple(f.name for f in dataclasses.fields(cls)
                 if f.metadata['parse'] is not None
                 and f.name not in cls.fixed)

  def check(self) -> None:
    """Checks between fields; raises ConfigError. A subclass may add its
    own. Every head count it takes as a flag divides --d_model."""
    for f in dataclasses.fields(self):
      if f.metadata.get('divides_width') and f.name in self.flags():
        value = getattr(self, f.name)
        for h in value if isinstance(value, tuple) else (value,):
          if self.d_model % h:
            raise ConfigError(f'--{f.name}: must divide --d_model='
                              f'{self.d_model}, got {h}')

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


# The shared fields only training reads: a measurement that trains nothing
# (cost, throughput) leaves them out of its flags.
TRAINING_ONLY = ('learning_rates', 'decoys', 'optimizer', 'weight_decay',
                 'schedule', 'train_strings', 'early_stop', 'eval_examples',
                 'checkpoint_every')


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


def choice_list(flag, text, choices):
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
          parts=None) -> Config:
  """Overrides `defaults` with the flags given as text (None: not given),
  each one of its class's `flags()`. `models`: the names `--models`
  accepts (default: every registered one); `one_length`: the experiment
  summarises a single length; `parts`: the names `--parts` accepts (an
  experiment made of parts)."""
  context = {'models': models_lib.names() if models is None else models,
             'min_length': min_length, 'parts': parts}
  fields = {f.name: f for f in dataclasses.fields(defaults)}
  updates = {name: fields[name].metadata['parse'](name, text, context)
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
  config.check()
  return config


# -- resources ------------------------------------------------------------------

def estimate_bytes(config: Config) -> int:
  """A rough estimate of the largest group's live memory over all its
  members (seeds x learning rates): the activations a training step keeps
  for its backward pass, or the forward pass of an evaluation chunk,
  whichever is larger (float32). Each model's registry entry says what it
  keeps per string."""
  from src import evaluation  # deferred: it imports jax
  strings = max(2 * config.batch_size,
                evaluation.eval_chunk(config.eval_examples))
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


def memory_plan(config: Config, estimate, devices: int,
                least: int) -> tuple[int | None, str]:
  """(members per slice, or None where a group's members fit at once; the
  plan in a line): the largest group's need against 80% of the devices'
  memory (--memory_gib per device, else the devices found). A group that
  does not fit trains its members in slices that do, each at least `least`
  members per device (`members.least_local`); refused (ConfigError) only
  where no slice fits."""
  need = estimate(config)
  have = (config.memory_gib * 2**30 * devices if config.memory_gib
          else available_bytes())
  usable, per_member = 0.8 * have, need / max(config.members, 1)
  where = 'planned for' if config.memory_gib else 'available'
  said = (f'the largest group needs about {need / 2**30:.1f} GiB of the '
          f'{have / 2**30:.1f} GiB {where} (80% usable)')
  if need <= usable:
    return None, f'memory: {said}'
  # A slice puts as many members on each device (train.Ensemble).
  per_slice = (int(usable // per_member) // devices * devices if per_member
               else config.members)
  fewest = least * devices
  if per_slice < fewest:
    grid = '/--learning_rates' if len(config.rates) > 1 else ''
    raise ConfigError(
        f'--lengths/--seeds{grid}/--batch_size/--eval_examples: the largest '
        f'group needs about {need / 2**30:.1f} GiB, and even {fewest} of its '
        f'members at once need {fewest * per_member / 2**30:.1f} GiB, more '
        f'than 80% of the {have / 2**30:.1f} GiB {where}; lower them')
  slices = -(-config.members // per_slice)
  return per_slice, (f'memory: {said}: its {config.members} members train '
                     f'{per_slice} at a time, {slices} slices of about '
                     f'{per_slice * per_member / 2**30:.1f} GiB')

