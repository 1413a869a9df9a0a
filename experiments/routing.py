"""Routing against transforming: does attention only move information, and
does a dense block compute on what it gathered?

Command: `python run.py --exp=routing` (`--only_check_args` estimates its
time; `--quick` for a first look).

The lesson: attention "only moves information from one place to another
without transforming it deeply"; the Transformer adds a dense block. Each
task holds two symbols a and b (0..k-1, from two alphabets), filler and a
query; the label is a function of the two: a copy of a (routing only, the
control), a XOR b (k = 2), or a + b mod k (k = 5). The symbols stand at
positions 0 and 1 (`_fixed`) or at two random positions, found by their
alphabets (`_tagged`). A softmax is itself nonlinear (a head whose weight
on a symbol depends on that symbol's value is a gate), so whether attention
alone can compute XOR is measured, not assumed.

Trains, at L=10 and ten seeds, 1,000 Adam steps of 32 strings at each of
three learning rates (each group judged at its best, on validation strings):
attention-only
and `transformer` (the same attention, plus a pre-LayerNorm MLP of width
4 x d_model) with 1, 2 and 4 heads; an attention-only model as wide as the
transformer has parameters (4 heads, d_model chosen to match); and
`lstm_chrono` as the recurrent reference. Per seed: the test accuracy and,
per head of the last layer, the read-out query's weight on each symbol.

One beam, one link: a one-head attention model on the two-relation task of
`--exp=heads` (the first symbol by its position, the second by its
content); when it solves, does it split its one head's weight between the
two targets? (One layer: the read-out position's residual holds only the
query and its position, so neither symbol can reach it another way.)

Expect: attention alone copies at every head count; the transformer
computes XOR and the sum; whether attention alone does is the measurement.
"""

import bisect
import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from experiments import routing_figure
from experiments import memory_task as memory
from src import claims as claims_lib
from src import config as config_lib
from src import evaluation
from src import experiment
from src import gates as gates_lib
from src import models as models_lib
from src import probes
from src import record
from src import stats
from src import tasks as tasks_lib
from src.claims import Claim
from src.config import Config

@dataclasses.dataclass(frozen=True)
class RoutingConfig(Config):
  heads: tuple[int, ...] = config_lib.head_counts(
      (1, 2, 4), 'head counts of the attention stacks compared')
  fixed = ('num_heads', 'decoys')  # heads from --heads; its own tasks


DEFAULTS = RoutingConfig(
    exp='routing',
    models=('attention', 'transformer', 'lstm_chrono'),
    lengths=(10,),
    heads=(1, 2, 4),
    seeds=10,  # per group and rate; the power plan says what each claim gets
    steps=1000,
    batch_size=32,
    learning_rate=3e-3,
    # "Attention alone cannot compute" is judged at each group's best rate
    # of a grid (on validation strings).
    learning_rates=(1e-3, 3e-3, 1e-2),
    num_filler=8,
    eval_examples=1024,
    chunk_steps=100,
    checkpoint_every=500,
)
# --quick: a first look (same code; XOR at fixed positions and the
# two-relation task, one head count, fewer seeds and steps; its claims are
# underpowered by design: 4 seeds cannot reach p < 0.05).
QUICK = dataclasses.replace(DEFAULTS, quick=True, seeds=4, steps=600,
                            learning_rates=(),
                            heads=(1,), eval_examples=512)
ONE_LENGTH = True  # its summary and claims are of one length
SECTION, FIGURE = '8. Routing and the dense block', 'routing.png'
COLUMNS = ['model', 'd_model', 'num_heads', 'task', 'length', 'seed',
           'num_params', 'accuracy', 'wall_s', 'compile_s']
HEAD_COLUMNS = ['model', 'd_model', 'num_heads', 'task', 'length', 'seed',
                'head', 'mass_first', 'mass_second']
TABLES = {'heads.csv': HEAD_COLUMNS}  # per head of the last layer

SUM_K = 5  # sum mod k and the copy control: k symbols, chance 1/5
# (function, tagged): the routing tasks, control first.
TASKS = (('copy', False), ('xor', False), ('sum', False),
         ('copy', True), ('xor', True), ('sum', True))
QUICK_TASKS = (('xor', False),)
BEAM_TASK = 'two_symbol'  # the two-relation task of --exp=heads
LINK = 0.2  # a head "follows" a target with at least this weight on it
# (twice the uniform 1/L at L = 10)

FAMILY_CANNOT = ('routing: attention alone cannot compute even xor or a '
                 'sum of two symbols (against what routing allows)')
FAMILY_DENSE = 'routing: a dense block learns it more reliably'
FAMILY_DOES = 'routing: a dense block computes'
FAMILY_ROUTES = 'routing: attention routes (the control)'
FAMILY_BEAM = 'one beam, one link'


def task_name(function: str, tagged: bool) -> str:
  return f'{function}_{"tagged" if tagged else "fixed"}'


def task_params(function: str, tagged: bool, config) -> dict:
  return dict(function=function, k=2 if function == 'xor' else SUM_K,
              num_filler=config.num_filler, tagged=tagged)


def tasks_for(config) -> tuple:
  return QUICK_TASKS if config.quick else TASKS


def num_classes(task: str) -> int:
  return 4 if task == BEAM_TASK else 2 if task.startswith('xor') else SUM_K


# -- what is measured --------------------------------------------------------------

@functools.cache
def symbol_masses(task: str, k: int):
  """fn(model, tokens, labels): accuracy, and per head of the last layer the
  read-out query's mean weight on the first and on the second symbol; also,
  per head, those weights by symbol pair (a, b), for the figure. One
  function per task kind, so each compiles once."""

  def fn(model, tokens_BxL, labels_B):
    logits, aux = model(tokens_BxL)
    att_BxHxL = aux['attention'][-1][:, :, -1, :]
    if task == BEAM_TASK:
      first_B = jnp.zeros_like(labels_B)
      second_B = tasks_lib.second_symbol_position(tokens_BxL)
      pair_B = labels_B  # 2 * first + second
    else:
      first_B, second_B = tasks_lib.routing_positions(tokens_BxL, k)
      a_B = jnp.take_along_axis(tokens_BxL, first_B[:, None], 1)[:, 0]
      b_B = jnp.take_along_axis(tokens_BxL, second_B[:, None], 1)[:, 0] - k
      pair_B = a_B * k + b_B
    at = lambda p_B: jnp.take_along_axis(att_BxHxL, p_B[:, None, None],
                                         axis=2)[..., 0]
    first_BxH, second_BxH = at(first_B), at(second_B)
    one_hot_BxP = jax.nn.one_hot(pair_B, k * k)
    count_P = jnp.maximum(one_hot_BxP.sum(0), 1)
    by_pair = lambda m_BxH: (one_hot_BxP.T @ m_BxH / count_P[:, None]).T
    return {'accuracy': (jnp.argmax(logits, -1) == labels_B).mean(),
            'mass_first': first_BxH.mean(0), 'mass_second': second_BxH.mean(0),
            'first_by_pair': by_pair(first_BxH),
            'second_by_pair': by_pair(second_BxH)}
  return fn


def probe_for(group):
  if not models_lib.get(group.model).has_attention:
    return probes.accuracy
  return symbol_masses(group.key['task'], group.task_params.get('k', 2))


# -- the groups ----------------------------------------------------------------------

def matched_width(config, task_params_: dict) -> int:
  """The attention-only d_model (a multiple of the largest head count)
  whose parameter count is nearest the transformer's at config.d_model."""
  return _matched_width(config.d_model, max(config.heads), config.num_layers,
                        config.lengths[0], tuple(sorted(task_params_.items())))


@functools.cache
def _matched_width(d_model, heads, num_layers, length, task_params_) -> int:
  task = tasks_lib.make_task('routing', length, **dict(task_params_))

  def count(model, d):
    abstract = nnx.eval_shape(lambda: models_lib.make_model(
        model, vocab_size=task.vocab_size, length=task.length, d_model=d,
        num_classes=task.num_classes, num_heads=heads,
        num_layers=num_layers, rngs=nnx.Rngs(0)))
    return models_lib.count_params(nnx.state(abstract, nnx.Param))

  target = count('transformer', d_model)
  widths = range(d_model, 4 * d_model + 1, heads)
  # The count grows with the width: bisect for the first at or above it.
  i = bisect.bisect_left(widths, target, key=lambda d: count('attention', d))
  near = widths[max(i - 1, 0):i + 1]
  return min(near, key=lambda d: abs(count('attention', d) - target))


def label(model: str, num_heads: int, d_model: int, config) -> str:
  """How a trained configuration is named in the summary."""
  if not models_lib.get(model).has_attention:
    return model
  wide = f' d{d_model}' if d_model != config.d_model else ''
  return f'{model}{wide} h{num_heads}'


def groups(config: Config) -> list:
  L = config.lengths[0]
  attention = [m for m in config.models if models_lib.get(m).has_attention]
  out = []
  for function, tagged in tasks_for(config):
    name = task_name(function, tagged)
    params = task_params(function, tagged, config)
    configs = [(m, h, config.d_model) for m in attention
               for h in config.heads]
    # The wide control only where attention alone may fail to compute.
    if ('attention' in attention and 'transformer' in attention
        and function != 'copy'):
      configs.append(('attention', max(config.heads),
                      matched_width(config, params)))
    configs += [(m, 0, config.d_model) for m in config.models
                if m not in attention]
    for m, h, d in configs:
      extra = {'num_heads': h} if h else {}
      if d != config.d_model:
        extra['d_model'] = d
      out.append(experiment.group(
          m, L, name=f'{label(m, h, d, config).replace(" ", "_")}_{name}',
          task='routing', task_params=params,
          key=dict(model=m, d_model=d, num_heads=h, task=name),
          work_scale=(d / config.d_model) ** 2, **extra))
  if 'attention' in attention:
    out.append(experiment.group(
        'attention', L, name=f'attention_h1_{BEAM_TASK}', task=BEAM_TASK,
        task_params={'num_filler': config.num_filler},
        key=dict(model='attention', d_model=config.d_model, num_heads=1,
                 task=BEAM_TASK), num_heads=1))
  return out


# -- the summary and the claims --------------------------------------------------------

def summarize(config: Config, rows, tables, curves=()) -> dict:
  accuracy, params, rates = {}, {}, {}
  for r in rows:
    key = (r['task'], label(r['model'], int(r['num_heads']),
                            int(r['d_model']), config))
    accuracy.setdefault(key, {})[int(r['seed'])] = float(r['accuracy'])
    params[key] = int(r['num_params'])
    if r.get('learning_rate', '') != '':  # the group's selected rate
      rates[key] = float(r['learning_rate'])
  table = {}
  for (task, name), by_seed in accuracy.items():
    v = [by_seed[s] for s in sorted(by_seed)]
    table.setdefault(task, {})[name] = dict(
        mean=float(np.mean(v)), seeds=v, num_params=params[task, name],
        chance=1 / num_classes(task), rate=rates.get((task, name)))
  masses = {}
  for r in tables['heads.csv']:
    if r['model'] == 'attention' and int(r['num_heads']) == 1 and \
        int(r['d_model']) == config.d_model:
      masses.setdefault(r['task'], []).append(dict(
          seed=int(r['seed']), mass_first=float(r['mass_first']),
          mass_second=float(r['mass_second']),
          accuracy=accuracy[r['task'], label('attention', 1, config.d_model,
                                             config)][int(r['seed'])]))
  names = {g.key['task'] + '|' + label(g.model, g.key['num_heads'],
                                       g.key['d_model'], config): g
           for g in groups(config)}
  # What routing alone allows on each task (the null of "cannot compute").
  nulls = {task: null(task) for task in table if task != BEAM_TASK}
  out = {'accuracy': table, 'one_head': masses, 'routing_null': nulls,
         'claims': []}
  out['claims'] = claims(config, table, masses, curves, names)
  return out


def trained_out(curves, group, seeds, step) -> dict:
  """The shared trained-out rule (`gates_lib.trained_out`) on `seeds` of
  `group`, from step/2 to `step`."""
  return gates_lib.trained_out(curves or [], seeds, step, group=group.name)


def null(task: str) -> float:
  """The null of "attention alone cannot compute f": the best accuracy of a
  read-out that only routes the two symbols (`tasks.routing_ceiling`)."""
  function = task.split('_')[0]
  return tasks_lib.routing_ceiling(function, 2 if function == 'xor'
                                   else SUM_K)


def claims(config, table, masses, curves, names) -> list[Claim]:
  out = []
  for function, tagged in tasks_for(config):
    task = task_name(function, tagged)
    rows = table.get(task, {})
    if function == 'copy':
      out += _routes(config, task, rows)
      continue
    for name in (n for n in rows if n.startswith('attention')):
      heads = name.split(' h')[-1]
      dense = rows.get(f'transformer h{heads}')
      out.append(_cannot(config, task, name, rows[name], curves,
                         names[f'{task}|{name}']))
      if dense is not None:
        out.append(_more_reliably(config, task, name, rows[name],
                                  f'transformer h{heads}', dense, curves,
                                  names[f'{task}|{name}']))
    out += _dense_computes(config, task, rows, curves, names)
  if BEAM_TASK in masses:
    out.append(_one_beam(masses[BEAM_TASK]))
  return out


def _fmt(values) -> str:
  return ' '.join(f'{v:.2f}' for v in values)


def _cannot(config, task, name, row, curves, group) -> Claim:
  """Attention alone against what routing allows (`null`): every seed at or
  below it, at its best rate of a grid and trained out, is held; a seed
  above it (it computes) is did not hold. A model none of whose seeds
  reached what routing allows (within IMPOSSIBLE_MARGIN) did not learn even
  the routing: its failure says nothing of computing (not applicable)."""
  ceiling = null(task)
  learned = [a for a in row['seeds']
             if a >= ceiling - claims_lib.IMPOSSIBLE_MARGIN]
  # One head: the class scores' numerators, over one softmax's positive
  # normaliser, are additive in the two symbols whatever the weights, so
  # no seed can pass what routing allows: a check of the ceiling, not a
  # finding.
  one_head = name.endswith(' h1')
  return Claim(
      f'Without a dense block, attention ({name}) cannot compute '
      f'{task.split("_")[0]} of the two symbols ({task}): it gets no further '
      'than routing them allows.', claims_lib.IMPOSSIBILITY, FAMILY_CANNOT,
      dict(accuracy=row['seeds'], strings=config.eval_examples,
           null=ceiling, null_name='the best additive read-out of the two '
                                   'routed symbols, exact',
           what=f'{row["num_params"]} parameters'),
      dict(model='attention', task=task, steps=config.steps),
      # With one head the ceiling binds however the training went: no
      # gate; a seed past it would be a bug in the model or the ceiling.
      gates={} if one_head else gates_lib.merged(
          gates_lib.grid_gate(stats.HELD, config.rates),
          gates_lib.edge_gate(stats.HELD, config.rates, row.get('rate')),
          gates_lib.learning_gate(stats.HELD, trained_out(
              curves, group, range(len(row['seeds'])), config.steps))),
      not_applicable='' if learned else (
          f'no seed reached what routing allows ({ceiling:.3f}, within '
          f'{claims_lib.IMPOSSIBLE_MARGIN}): it did not learn to route the '
          f'two symbols, so its failure to compute says nothing (accuracy '
          f'per seed {_fmt(row["seeds"])})'),
      note='the null is what routing alone can reach: weights that do not '
           'depend on the symbols and a linear read-out make every class '
           'score additive in the two symbols; its exact best accuracy '
           '(tasks.routing_ceiling) is 1 for copy, 0.75 for xor, 0.76 for '
           'sum mod 5, not chance' + (
               '. A sanity check with one head: each class score is then a '
               'ratio over one positive softmax normaliser whose numerator '
               'is additive in the two symbols, so routing\'s ceiling binds '
               'by construction' if one_head else ''),
      role=claims_lib.SANITY if one_head else claims_lib.LESSON)


def _more_reliably(config, task, name, row, dense_name, dense, curves,
                   group) -> Claim:
  """Seed i of the transformer against seed i of attention-only, solved or
  not (a tie, both solving or both failing, is not ahead). Held needs the
  attention-only seeds that failed trained out, unless it has one head:
  routing's ceiling, below what solving needs, binds it however the
  training went (`_cannot`): a sanity check."""
  one_head = name.endswith(' h1')
  solved = lambda v: [float(stats.solved(a)) for a in v]
  behind = [s for s, (d, a) in enumerate(zip(dense['seeds'], row['seeds']))
            if stats.solved(d) and not stats.solved(a)]
  return Claim(
      f'A dense block learns {task.split("_")[0]} of the two symbols '
      f'({task}) more reliably than attention alone: {dense_name} solves it '
      f'in more seeds than {name}, {memory.conditions(config)}.',
      claims_lib.COMPARISON, FAMILY_DENSE,
      dict(x=solved(dense['seeds']), y=solved(row['seeds']),
           x_name=dense_name, y_name=name, digits=0,
           what=f'solved (>= {stats.SOLVED:.0%}: 1) (accuracy '
                f'{dense["mean"]:.3f} with {dense["num_params"]} parameters '
                f'against {row["mean"]:.3f} with {row["num_params"]})'),
      dict(model=name, versus=dense_name, task=task, steps=config.steps),
      gates={} if one_head else gates_lib.merged(
          gates_lib.edge_gate(stats.HELD, config.rates, row.get('rate')),
          gates_lib.learning_gate(stats.HELD, trained_out(
              curves, group, behind, config.steps))),
      note='seed i of each on the same strings; both solving, or both '
           'failing, is a tie, and a tie is not more reliable' + (
               '. A sanity check with one head: it cannot solve it '
               f'(routing\'s ceiling, {null(task):.2f}, binds it by '
               'construction), so this says only that the dense block '
               'solves it' if one_head else ''),
      role=claims_lib.SANITY if one_head else claims_lib.LESSON)


def _dense_computes(config, task, rows, curves, names) -> list[Claim]:
  """The transformer computes f: a seed above what routing allows, at every
  head count (its lowest accuracy over them), on held-out strings."""
  dense = [n for n in rows if n.startswith('transformer')]
  if not dense:
    return []
  seeds = range(len(rows[dense[0]]['seeds']))
  lowest = [min(rows[n]['seeds'][s] for n in dense) for s in seeds]
  failing = [s for s in seeds if lowest[s] < null(task)]
  gates = gates_lib.merged(
      gates_lib.grid_gate(stats.NOT_HELD, config.rates),
      gates_lib.edge_gate(stats.NOT_HELD, config.rates, [
          rows[m].get('rate') for m in dense
          if any(rows[m]['seeds'][s] < null(task) for s in failing)]),
      *(gates_lib.learning_gate(stats.NOT_HELD, trained_out(
          curves, names[f'{task}|{m}'], failing, config.steps))
        for m in dense))
  return [Claim(
      f'A dense block computes {task.split("_")[0]} of the two symbols '
      f'({task}).', claims_lib.CAPABILITY, FAMILY_DOES,
      dict(accuracy=lowest, strings=config.eval_examples, null=null(task),
           null_name='the best additive read-out of the two routed symbols',
           what=f'its lowest accuracy over {", ".join(dense)}'),
      dict(model='transformer', task=task, steps=config.steps), gates=gates)]


def _routes(config, task, rows) -> list[Claim]:
  """The control: attention alone copies, seed by seed, at every head
  count (the share of seeds, claims.RELIABILITY)."""
  names = [n for n in rows if n.startswith('attention')]
  if not names:
    return []
  n = len(rows[names[0]]['seeds'])
  lowest = [min(rows[m]['seeds'][s] for m in names) for s in range(n)]
  return [Claim(
      f'Attention alone routes: it copies the first symbol ({task}).',
      claims_lib.RELIABILITY, FAMILY_ROUTES,
      dict(successes=[stats.solved(a) for a in lowest], values=lowest,
           what=f'solved (>= {stats.SOLVED:.0%}) by every attention-only '
                f'model ({", ".join(names)}; the lowest per seed below)'),
      dict(model='attention', task=task),
      note='the control: routing, no computation')]


def _one_beam(seeds: list[dict]) -> Claim:
  """Among the seeds whose one head solves the two-relation task: one link
  (under LINK of its weight on one target) against a split; in most of
  them (rate 1/2)."""
  solvers = sorted((r for r in seeds if stats.solved(r['accuracy'])),
                   key=lambda r: r['seed'])
  return Claim(
      'A single beam of attention follows a single link at a time.',
      claims_lib.RELIABILITY, FAMILY_BEAM,
      dict(successes=[min(r['mass_first'], r['mass_second']) < LINK
                      for r in solvers], rate=0.5,
           values=[min(r['mass_first'], r['mass_second']) for r in solvers],
           what=f'one link (under {LINK} of the weight on one target) among '
                f'the {len(solvers)} of {len(seeds)} seeds that solved with '
                'one head (the weight on the lesser target per seed below)'),
      dict(model='attention', task=BEAM_TASK),
      note='one layer, one head: the read-out position holds only the query '
           'and its position, so a head that solves must bring both symbols '
           'itself; one link in most solving seeds holds, a split in most '
           'does not')


class Routing(experiment.Experiment):
  """Routing against transforming: attention alone, and the dense block."""
  columns_note = (
      '; `heads.csv`: '
      '`model,d_model,num_heads,task,length,seed,head,mass_first,mass_second`')
  summary_keys = (
      '`accuracy{task}{model: mean, seeds, num_params, chance}`, '
      '`one_head{task: [seed, mass_first, mass_second, accuracy]}`, '
      '`claims` (with `p`, `p_min`, `if_significant`, `family`)')
  name, section, figure_file = 'routing', SECTION, FIGURE
  defaults, quick, columns = DEFAULTS, QUICK, COLUMNS
  tables, one_length, final_test, keeps = TABLES, ONE_LENGTH, False, True

  def groups(self, config):
    return groups(config)

  def measure(self, group, ensemble, params, config):
    return evaluation.measure(ensemble, params, probe_for(group),
                              num_examples=config.eval_examples)

  def rows(self, group, final, config, timing) -> dict:
    k = group.key
    base = dict(model=k['model'], d_model=k['d_model'],
                num_heads=k['num_heads'], task=k['task'], length=group.length)
    heads = [dict(base, seed=s, head=h, mass_first=final['mass_first'][s, h],
                  mass_second=final['mass_second'][s, h])
             for s in range(config.seeds) for h in range(k['num_heads'])
             if 'mass_first' in final]
    return {'heads.csv': heads,
            'results.csv': [dict(base, seed=s, num_params=timing.num_params,
                                 accuracy=final['accuracy'][s],
                                 wall_s=timing.wall_s,
                                 compile_s=timing.compile_s)
                            for s in range(config.seeds)]}

  def line(self, group, final, config, timing) -> str:
    return (f'{group.name}: accuracy {final["accuracy"].mean():.3f} (seeds '
            + ' '.join(f'{a:.2f}' for a in final['accuracy'])
            + f'), {timing.num_params} parameters, {timing.wall_s:.1f} s')

  def print_table(self, config, summary) -> None:
    print('\nRouting: test accuracy by task and model (per seed)')
    print(record.table(
        [[task, name, v['num_params'], f'{v["chance"]:.2f}', f'{v["mean"]:.3f}',
          _fmt(v['seeds'])]
         for task, models in summary['accuracy'].items()
         for name, v in models.items()],
        ['task', 'model', 'params', 'chance', 'accuracy', 'seeds']))
    print('\nOne head (attention h1): weight on [first, second] per seed')
    for task, seeds in summary['one_head'].items():
      print(f'{task:>13s}: ' + ' '.join(
          f'[{r["mass_first"]:.2f}, {r["mass_second"]:.2f}]'
          for r in sorted(seeds, key=lambda r: r['seed'])))

  def planned_claims(self, config):
    """The claims `claims` makes, on placeholder accuracies of the groups
    this config trains."""
    table, masses = {}, {}
    for g in groups(config):
      name = label(g.model, g.key['num_heads'], g.key['d_model'], config)
      table.setdefault(g.key['task'], {})[name] = dict(
          mean=0.5, seeds=[0.5] * config.seeds, num_params=0,
          chance=1 / num_classes(g.key['task']))
      if g.key['task'] == BEAM_TASK:
        masses[BEAM_TASK] = [dict(seed=s, mass_first=0.5, mass_second=0.5,
                                  accuracy=1.0) for s in range(config.seeds)]
    names = {g.key['task'] + '|' + label(g.model, g.key['num_heads'],
                                         g.key['d_model'], config): g
             for g in groups(config)}
    return claims(config, table, masses, [], names)

  def keep(self, group, ensemble, params, config):
    """Attention-only models' weights by symbol pair on xor_fixed, for the
    figure."""
    if not (group.model == 'attention' and group.key['task'] == 'xor_fixed'
            and group.key['d_model'] == config.d_model):
      return None
    return self.measure(group, ensemble, params, config)

  def summarize(self, config, rows, data):
    return summarize(config, rows, data.tables, data.curves)

  def figure(self, config, summary, rows, data, folder, writer):
    """The xor_fixed maps shown are those of the attention-only model with
    the fewest heads whose seeds solved it (else the most heads)."""
    xor = {g.key['num_heads']: data.kept[g.name] for g in groups(config)
           if data.kept.get(g.name) is not None}
    solved = [h for h in sorted(xor)
              if np.mean(np.asarray(xor[h]['accuracy'])) >= stats.SOLVED]
    shown = (solved or sorted(xor))[-1 if not solved else 0] if xor else None
    routing_figure.plot(config, summary, shown and (shown, xor[shown]),
                        folder / FIGURE, writer, link=LINK)


EXPERIMENT = Routing()
