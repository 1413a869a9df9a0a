"""The memory task's groups, rows and progress line, as distance, gating and
budget measure them: every (model, length) group tested on fresh strings,
after one budget (distance) or after each of several (gating, budget).

There is no learning-rate schedule, so the model tested after 250 steps of a
4,000-step run is the one a 250-step run gives: one run per group serves
every budget.
"""

from src import experiment
from src import models as models_lib
from src import stats

COLUMNS = ['model', 'family', 'length', 'seed', 'steps', 'accuracy', 'solved',
           'loss', 'diverged', 'num_params', 'wall_s', 'compile_s']
BUDGET_COLUMNS = ['model', 'family', 'length', 'seed', 'steps', 'accuracy',
                  'solved', 'loss', 'diverged', 'wall_s']


def groups(config, *, budgets: bool = False) -> list[experiment.Group]:
  """Every model at every length; tested after each of `config.budgets`
  when `budgets`, else once after `config.steps`."""
  return [experiment.group(m, L, task_params=memory_params(config),
                           budgets=config.budgets if budgets else ())
          for m in config.models for L in config.lengths]


def memory_params(config) -> dict:
  """The memory task's parameters: the filler, and the decoys if any (left
  out at 0, so a plain run's groups are what they were)."""
  return {'num_filler': config.num_filler,
          **({'decoys': config.decoys} if config.decoys else {})}


def planned_tests(config, families=None) -> list[tuple[str, int, str]]:
  """(family, seeds, alternative) of every test the memory claims make
  (src/claims.py): each gated model against each plain one, paired by seed;
  each count of seeds (attention at 100%, a plain net giving way, a linear
  recurrence as far as attention), at best on every seed. `families`: the
  ones an experiment judges (default: every one, as distance)."""
  from src import claims as claims_lib
  family = lambda m: models_lib.get(m).family
  of = lambda f: [m for m in config.models if family(m) == f]
  gated, plain = of(models_lib.GATED), of(models_lib.PLAIN)
  attention, linear = of(models_lib.ATTENTION), of(models_lib.LINEAR)
  planned = ([claims_lib.GATING_FAMILY] * len(gated) * len(plain)
             + [claims_lib.ATTENTION_FAMILY] * len(attention)
             + [claims_lib.GIVES_WAY_FAMILY] * len(plain)
             + [claims_lib.AS_FAR_FAMILY] * (len(linear) if attention
                                             else 0))
  return [(f, config.seeds, 'two-sided') for f in planned
          if families is None or f in families]


def rows(group, final, config, timing) -> list[dict]:
  """One row per seed: its test accuracy and loss on fresh strings."""
  family = models_lib.get(group.model).family.name
  return [dict(model=group.model, family=family, length=group.length, seed=s,
               steps=timing.steps, accuracy=final['accuracy'][s],
               solved=stats.solved(final['accuracy'][s]),
               loss=final['loss'][s], diverged=timing.diverged[s],
               num_params=timing.num_params, wall_s=timing.wall_s,
               compile_s=timing.compile_s)
          for s in range(config.seeds)]


def line(group, final, config, timing) -> str:
  acc = final['accuracy']
  solved = stats.solved_fraction(acc)
  return (f'{group.model:>12s} L={group.length:<4d} acc {acc.mean():.3f} '
          '(seeds ' + ' '.join(f'{a:.2f}' for a in acc) + f')  solved '
          f'{solved["k"]}/{solved["n"]}  {timing.wall_s:5.1f}s (compile '
          f'{timing.compile_s:.1f}s)'
          + (f'  DIVERGED {int(timing.diverged.sum())}'
             if timing.diverged.any() else ''))


def budget_line(group, final, config, timing) -> str:
  acc = final['accuracy']
  return (f'{group.model:>12s} L={group.length:<4d} after '
          f'{timing.steps:>5d} steps: accuracy {acc.mean():.3f}, solved '
          f'{stats.solved_fraction(acc)["k"]}/{config.seeds}')
