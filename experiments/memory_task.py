"""The memory task as distance, gating and budget measure it (attention and
routing use its rows too): its groups, rows and progress line, and the
lesson's claims about distance as verdict rules on per-seed results
(`src/claims.py` types and judges them). Not an experiment itself: the
experiments of the memory task share it.

Every (model, length) group is tested on fresh strings, after one budget
(distance) or after each of several (gating, budget). There is no
learning-rate schedule, so the model tested after 250 steps of a 4,000-step
run is the one a 250-step run gives: one run per group serves every budget.
"""

import dataclasses

import numpy as np

from src import claims as claims_lib
from src import config as config_lib
from src import experiment
from src import gates as gates_lib
from src import models as models_lib
from src import stats
from src.claims import Claim

COLUMNS = ['model', 'family', 'length', 'seed', 'steps', 'accuracy', 'solved',
           'loss', 'diverged', 'num_params', 'wall_s', 'compile_s']
BUDGET_COLUMNS = ['model', 'family', 'length', 'seed', 'steps', 'accuracy',
                  'solved', 'loss', 'diverged', 'wall_s']


@dataclasses.dataclass(frozen=True)
class BudgetConfig(config_lib.Config):
  """The run config of an experiment tested after each of several budgets
  (gating, budget)."""
  budgets: tuple[int, ...] = config_lib.counts(
      (250, 1000, 4000), 'training budgets in steps: each group trains to the '
      'largest and is tested after each')
  # A group trains to the largest budget; one run serves every budget only
  # with a constant rate and no early stop.
  fixed = ('steps', 'schedule', 'early_stop')


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
          f'{solved["k"]}/{solved["n"]}  {timing.wall_s:5.1f}s '
          f'({timing.compile_text})'
          + (f'  DIVERGED {int(timing.diverged.sum())}'
             if timing.diverged.any() else ''))


def budget_line(group, final, config, timing) -> str:
  acc = final['accuracy']
  return (f'{group.model:>12s} L={group.length:<4d} after '
          f'{timing.steps:>5d} steps: accuracy {acc.mean():.3f}, solved '
          f'{stats.solved_fraction(acc)["k"]}/{config.seeds}')


# -- per-seed tables ----------------------------------------------------------------

HUNDRED_PERCENT = 0.99  # what "stays at 100%" is taken to mean, per seed
LESSON_WINDOW = (10, 20)  # "gives way after about fifteen steps", in L

# The families: one lesson claim each, every model it is tested on (Holm
# within each).
ATTENTION_FAMILY = 'attention stays at 100% at every distance tested'
GIVES_WAY_FAMILY = 'a plain recurrent net gives way after about 15 steps'
GATING_FAMILY = 'gating carries the symbol further than a plain RNN'
AS_FAR_FAMILY = ('a linear recurrence carries the first symbol as far as '
                 'attention')
WALL_FAMILY = 'a recurrent net\'s limit is a wall'


def accuracy_table(rows, **match) -> dict:
  """{(model, length): {seed: accuracy}} of the rows matching `match`."""
  out = {}
  for r in rows:
    if all(str(r[k]) == str(v) for k, v in match.items()):
      out.setdefault((r['model'], int(r['length'])), {})[int(r['seed'])] = \
          float(r['accuracy'])
  return out


@dataclasses.dataclass(frozen=True)
class Rates:
  """The grid of learning rates and each group's selected one, {(model,
  length): rate}: a failure whose group's best rate is at an end of the
  grid is no verdict (`gates.edge_gate`). One rate: no grid, no gate."""
  grid: tuple = ()
  chosen: dict = dataclasses.field(default_factory=dict)

  def gate(self, direction: str, model: str, lengths) -> dict:
    """The edge gate of `model` failing at `lengths`."""
    return gates_lib.edge_gate(direction, self.grid,
                               [self.chosen.get((model, L)) for L in lengths])


def selected_rates(config, rows, **match) -> Rates:
  """The grid (`config.rates`) and the selected rate of each group, from
  its rows matching `match` (at the selected rates, as summarize gets them)."""
  return Rates(tuple(config.rates), {
      (r['model'], int(r['length'])): float(r['learning_rate'])
      for r in rows if r.get('learning_rate', '') != ''
      and all(str(r[k]) == str(v) for k, v in match.items())})


def per_seed_critical(table: dict, model: str, lengths) -> list[int]:
  """Seed by seed (in seed order), the critical distance of `model`."""
  seeds = sorted(table[model, lengths[0]])
  return [stats.critical_distance([(L, table[model, L][s]) for L in lengths])
          for s in seeds]


def first_failure(table: dict, model: str, lengths, seed: int,
                  threshold: float = stats.SOLVED):
  """The shortest tested length the seed did not solve, its accuracy short
  of `threshold` (None: it solved every one)."""
  for L in sorted(lengths):
    if not stats.reaches(table[model, L][seed], threshold):
      return L
  return None


def critical_summary(per_seed) -> dict:
  """Per-seed critical distances, their median and an interval."""
  return {'per_seed': [int(c) for c in per_seed],
          **stats.median_interval(per_seed)}


def fmt_median(summary: dict) -> str:
  lo, hi = summary['ci95']
  return f'{summary["median"]:g} [{lo:g}, {hi:g}]'


def compare(a: str, b: str, crit_a, crit_b) -> dict:
  """Paired per-seed comparison of two models' critical distances: wins,
  ties, losses (a against b) and the exact sign test's p (ties aside)."""
  return {'model': a, 'versus': b, **stats.sign_test(crit_a, crit_b)}


def paired_table(crit: dict) -> list[dict]:
  """Every pair of models, compared seed by seed (sign test)."""
  names = list(crit)
  return [compare(a, b, crit[a], crit[b]) for i, a in enumerate(names)
          for b in names[i + 1:]]


def mean_by_length(table: dict, model: str, lengths) -> dict:
  return {L: float(np.mean(list(table[model, L].values()))) for L in lengths}


def _setting(model: str, **more) -> dict:
  spec = models_lib.get(model)
  return dict(model=model, initialisation=spec.init_name, **more)


# -- the rules ------------------------------------------------------------------

def attention_at_100(table: dict, model: str, lengths, curves=None,
                     rates: Rates = Rates()) -> Claim:
  """"Stays at 100% at every distance": a seed does when its lowest test
  accuracy over the lengths reaches HUNDRED_PERCENT; reliability: the share
  of seeds against claims.RELIABLE_RATE. A seed short of it failed: for the
  verdict that says so, with `curves`, trained out at the first length it
  fell short, at a best rate inside the grid (`rates`)."""
  seeds = sorted(table[model, lengths[0]])
  lowest = [min(table[model, L][s] for L in lengths) for s in seeds]
  short = {s: f for s in seeds if (f := first_failure(
      table, model, lengths, s, HUNDRED_PERCENT)) is not None}
  gates = rates.gate(stats.NOT_HELD, model, short.values())
  if curves is not None:
    gates = gates_lib.merged(gates, gates_lib.learning_gate(
        stats.NOT_HELD, failures_trained_out(curves, model, short)))
  return Claim(
      f'Attention ({model}) stays at 100% at every distance tested '
      f'(L={min(lengths)}..{max(lengths)}).',
      claims_lib.RELIABILITY, ATTENTION_FAMILY,
      dict(successes=[stats.reaches(x, HUNDRED_PERCENT) for x in lowest],
           values=lowest, digits=4,
           what=f'at >= {HUNDRED_PERCENT:.0%} at every length '
                f'{min(lengths)}..{max(lengths)}'),
      _setting(model, lengths=list(lengths)), gates=gates,
      note=f'a seed stays at 100% when its lowest test accuracy over the '
           f'lengths reaches {HUNDRED_PERCENT:.0%}; the seeds short of it '
           'must be trained out (their loss flat over the last doubling of '
           'steps at the first length they fell short)')


def plain_gives_way(table: dict, model: str, lengths, window=LESSON_WINDOW,
                    curves=None, rates: Rates = Rates()) -> Claim:
  """Per seed, the give-way interval (c, f] (c its critical distance, f the
  first length it failed) against the lesson's window [lo, hi]: consistent
  if lo <= c and f <= hi; inconsistent if it had already failed by lo (f <=
  lo) or carried the symbol to hi or beyond (c >= hi); otherwise the tested
  lengths cannot tell (counted against each direction). Reliability at 1/2:
  does a plain net give way there in most seeds? Giving way is a failure:
  with `curves`, the seeds that failed must be trained out at the length
  they failed, for the verdict that says so, at a best rate inside the
  grid (`rates`)."""
  lo, hi = window
  seeds = sorted(table[model, lengths[0]])
  crit = per_seed_critical(table, model, lengths)
  successes, where, undetermined = [], [], 0
  inside, early = {}, {}
  for s, c in zip(seeds, crit):
    f = first_failure(table, model, lengths, s)
    where.append(f'({c}, {f if f is not None else "-"}]')
    if f is not None and lo <= c and f <= hi:
      successes.append(True)
      inside[s] = f
    elif (f is not None and f <= lo) or c >= hi:
      successes.append(False)
      if f is not None and f <= lo:
        early[s] = f
    else:
      undetermined += 1
  gates = gates_lib.merged(rates.gate(stats.HELD, model, inside.values()),
                           rates.gate(stats.NOT_HELD, model, early.values()))
  if curves is not None:
    gates = gates_lib.merged(gates, gates_lib.learning_gate(
        stats.HELD, failures_trained_out(curves, model, inside)),
                             gates_lib.learning_gate(
        stats.NOT_HELD, failures_trained_out(curves, model, early)))
  return Claim(
      f'A plain recurrent net ({model}, {models_lib.get(model).init_name}) '
      f'gives way after about 15 steps (declared before the run: between '
      f'L={lo} and L={hi}).',
      claims_lib.RELIABILITY, GIVES_WAY_FAMILY,
      dict(successes=successes, undetermined=undetermined, rate=0.5,
           what=f'gave way inside L={lo}..{hi} (per seed, solved up to, '
                f'first failed: {" ".join(where)}; {undetermined} the '
                'lengths cannot judge)'),
      _setting(model, lengths=list(lengths)), gates=gates,
      note=f'"about 15" is read as giving way between L={lo} and L={hi}: a '
           f'seed that solved L>={lo} and failed by L={hi} is consistent; '
           f'one that failed by L={lo} or solved L>={hi} is not; the rest '
           'the tested lengths cannot judge; most seeds (rate 1/2) must; the '
           'seeds that gave way must be trained out (their loss flat over '
           'the last doubling of steps at the length they failed)')


def conditions(config, steps: int | None = None) -> str:
  """The training a comparison of two models rests on, for its sentence:
  the rate (or the grid each group's best was chosen from) and the steps."""
  rates = config.rates
  rate = (f'at one rate ({rates[0]:g})' if len(rates) == 1 else
          'each at its best of rates ' + ', '.join(f'{r:g}' for r in rates))
  return f'{rate}, after {steps or config.steps} steps'


def gating_beats_plain(gated: str, plain: str, crit_gated, crit_plain,
                       lengths, failed=None, curves=None,
                       trained: str = '', rates: Rates = Rates()) -> Claim:
  """Paired per-seed critical distances, a tie not a win, both solving the
  longest length censored (claims.COMPARISON). Did not hold says the gated
  net fell short: with `curves`, the gated seeds that fell short (`failed`:
  {seed: length it failed}) must be trained out, each at a best rate
  inside the grid (`rates`). `trained` (`conditions`): the rate and steps,
  in the sentence: either verdict is theirs."""
  short = _short(failed, crit_gated, crit_plain)
  gates = rates.gate(stats.NOT_HELD, gated, short.values())
  if curves is not None:
    gates = gates_lib.merged(gates, gates_lib.learning_gate(
        stats.NOT_HELD, failures_trained_out(curves, gated, short)))
  spec = models_lib.get(gated)
  return Claim(
      f'Gating ({spec.architecture.upper()}, {spec.init_name}: {gated}) '
      f'carries the symbol further than a plain RNN ({plain})'
      + (f' {trained}' if trained else '') + '.',
      claims_lib.COMPARISON, GATING_FAMILY,
      dict(x=list(crit_gated), y=list(crit_plain), x_name=gated,
           y_name=plain, ceiling=max(lengths), digits=0,
           what=f'critical distance (L {min(lengths)}..{max(lengths)})'),
      _setting(gated, versus=plain, lengths=list(lengths)), gates=gates,
      note=f'seed i of {gated} against seed i of {plain} (same strings); a '
           'side claim: the lesson speaks of a plain recurrent net',
      role=claims_lib.SIDE)


def as_far_as_attention(model: str, attention: str, crit_model,
                        crit_attention, lengths, failed=None,
                        curves=None, rates: Rates = Rates()) -> Claim:
  """Seed i at least as far as seed i of attention (a tie counts: "as far
  as", within the tested lengths, as attention's own "stays at 100%" is):
  non-inferiority, claims.AS_FAR_MARGIN. The seeds that fall short failed:
  with `curves` they must be trained out, each at a best rate inside the
  grid (`rates`)."""
  short = _short(failed, crit_model, crit_attention)
  gates = rates.gate(stats.NOT_HELD, model, short.values())
  if curves is not None:
    gates = gates_lib.merged(gates, gates_lib.learning_gate(
        stats.NOT_HELD, failures_trained_out(curves, model, short)))
  # A seed of attention that failed the shortest length sets no distance to
  # reach (a tie at 0, "as far as" from nothing): judged on the others.
  kept = [i for i, c in enumerate(crit_attention) if c > 0]
  never = ('' if kept else f'not applicable: {attention} failed the '
           f'shortest length in every seed (critical distance 0 in all '
           f'{len(crit_attention)})')
  crit_model = [crit_model[i] for i in kept]
  crit_attention = [crit_attention[i] for i in kept]
  return Claim(
      f'A linear recurrence ({model}) carries the first symbol as '
      f'far as attention ({attention}) at the tested lengths '
      f'({min(lengths)}..{max(lengths)}).',
      claims_lib.COMPARISON, AS_FAR_FAMILY,
      dict(x=list(crit_model), y=list(crit_attention), x_name=model,
           y_name=attention, ceiling=max(lengths), at_least=True, digits=0,
           what=f'critical distance (L {min(lengths)}..{max(lengths)})'),
      _setting(model, versus=attention, lengths=list(lengths)), gates=gates,
      note=f'each seed: its critical distance reaches that of the same seed '
           f'of {attention}; judged on the {len(kept)} seeds where '
           f'{attention} solved the shortest length', not_applicable=never)


def _short(failed, crit, crit_other) -> dict:
  """{seed: the length it failed} of the seeds whose critical distance falls
  short of the other model's (`failed`: {seed: first failed length}, in
  seed order, as crit)."""
  return {s: f for (s, f), a, b in zip(sorted((failed or {}).items()), crit,
                                       crit_other) if a < b and f is not None}


def memory_claims(table: dict, models, lengths, curves=None,
                  trained: str = '', rates: Rates = Rates()) -> list[Claim]:
  """Every distance claim the models present allow, per model and pair;
  with `curves` (curves.csv rows), a failure must be trained out; `trained`
  (`conditions`): the training the comparisons of two models rest on;
  `rates`: the groups' selected rates, for the edge of a grid."""
  lengths = sorted(lengths)
  spec = models_lib.get
  out = [attention_at_100(table, m, lengths, curves, rates) for m in models
         if spec(m).family == models_lib.ATTENTION]
  plain = [m for m in models if spec(m).family == models_lib.PLAIN]
  out += [plain_gives_way(table, m, lengths, curves=curves, rates=rates)
          for m in plain]
  crit = {m: per_seed_critical(table, m, lengths) for m in models}
  seeds = sorted(table[models[0], lengths[0]]) if models else []
  failed = {m: {s: first_failure(table, m, lengths, s) for s in seeds}
            for m in models}
  for gated in (m for m in models if spec(m).family == models_lib.GATED):
    for p in plain:
      out.append(gating_beats_plain(gated, p, crit[gated], crit[p], lengths,
                                    failed[gated], curves, trained, rates))
  attention = [m for m in models if spec(m).family == models_lib.ATTENTION]
  for m in (m for m in models if spec(m).family == models_lib.LINEAR):
    if attention:
      out.append(as_far_as_attention(m, attention[0], crit[m],
                                     crit[attention[0]], lengths, failed[m],
                                     curves, rates))
  return out


def placeholder_table(config) -> dict:
  """A table of the run's shape (every model, length and seed), for the
  power plan: the claims built on it have the run's seeds and families.
  Attention solves every length in it, as the run is designed to show (a
  claim against attention is judged on its seeds that solved)."""
  attention = lambda m: models_lib.get(m).family == models_lib.ATTENTION
  return {(m, L): {s: 1.0 if attention(m) else 0.5
                   for s in range(config.seeds)}
          for m in config.models for L in config.lengths}


def failures_trained_out(curves, model: str, failures: dict) -> dict:
  """The trained-out rule over seeds that failed at different lengths:
  `failures` {seed: the length it failed}; each seed's fall is measured at
  its own length, over the last doubling of that group's steps."""
  falls, step, escaped = [], 0, 0
  for L in sorted(set(failures.values())):
    seeds = [s for s, f in failures.items() if f == L]
    last = gates_lib.last_step(curves, model=model, length=L)
    step = max(step, last)
    check = gates_lib.trained_out(curves, seeds, last, model=model, length=L)
    falls += check['falls']
    escaped += check['escaped']
  return gates_lib.checked(falls, len(failures), step, escaped)


# -- wall or budget -----------------------------------------------------------------

# A wall lets through at most 1 in 5 of the seeds stuck at L* in the longer
# training: a rate near a half would leave the limit where training luck puts
# it; a tenth would need about 40 seeds. Fixed before any run at this rule.
MAX_ESCAPE = 0.2


def limit_length(table: dict, model: str, lengths, seeds):
  """L*: the shortest tested length that significantly fewer than half the
  seeds solve (exact one-sided binomial test against 1/2, p < ALPHA); None
  if none. A length within the noise of half (4 of 8, 9 of 20) is not the
  limit, so moving one seed there cannot move L*."""
  return next((L for L in sorted(lengths) if stats.fewer_than_half(
      sum(stats.solved(table[model, L][s]) for s in seeds), len(seeds))),
              None)


def wall_seeds_needed(max_escape: float = MAX_ESCAPE) -> int:
  """The fewest seeds with which a wall can be held whatever L* turns out
  to be: L* lets up to stats.most_below_half(n) seeds solve it, and the
  rest, stuck, must be enough for none escaping to clear 1 - `max_escape`
  (claims.RELIABILITY's test)."""
  need = stats.trials_needed(max_escape)
  return next(n for n in range(need, 10 * need)
              if n - stats.most_below_half(n) >= need)


def stable_limit(rows, model: str, lengths, budgets):
  """(L*, the budget it is taken at): the first budget whose L* the next
  budget's equals, so that L* is where training stopped moving the limit,
  not where 250 steps had not learned yet; (None, None) if none is."""
  seeds = None
  limits = []
  for b in budgets:
    table = accuracy_table(rows, steps=b)
    seeds = seeds or sorted(table[model, lengths[0]])
    limits.append(limit_length(table, model, lengths, seeds))
  for b, here, after in zip(budgets, limits, limits[1:]):
    if here is not None and here == after:
      return here, b
  return None, None


def limit_is_a_wall(rows, curves, model: str, lengths, budgets,
                    max_escape: float = MAX_ESCAPE) -> Claim:
  """At L* (`stable_limit`, taken at budget B), the seeds that do not solve
  it are stuck; a wall keeps them stuck to the largest budget: the share
  that stay stuck against 1 - `max_escape` (claims.RELIABILITY: held when
  significantly more stay, did not hold when significantly fewer). Held
  also needs the seeds still stuck trained out (loss flat over the last
  doubling of steps, at L*)."""
  lengths, budgets = sorted(lengths), sorted(budgets)
  last = budgets[-1]
  spec = models_lib.get(model)
  claim = (f'The limit of {model} ({spec.init_name}) is a wall: more '
           'training does not carry it further.')
  note = (f'L* is the shortest length that significantly fewer than half '
          f'the seeds solve (exact one-sided binomial test against 1/2), '
          'taken at the first budget whose L* the next budget\'s equals '
          '(where more training stopped moving it); the seeds stuck there '
          f'must stay stuck to {last} steps in more than '
          f'{1 - max_escape:.0%} of them (declared before any run: a wall '
          f'lets through at most 1 in {round(1 / max_escape)}), and those '
          f'still stuck must be trained out; {wall_seeds_needed(max_escape)} '
          'seeds guarantee enough stuck seeds for a verdict')
  empty = lambda why, **more: Claim(
      claim, claims_lib.RELIABILITY, WALL_FAMILY,
      dict(successes=[], rate=1 - max_escape, what=why), _setting(model),
      note=note, **more)
  if len(budgets) < 2:
    return empty('one budget: no longer training to compare')
  seeds = sorted(accuracy_table(rows, steps=last)[model, lengths[0]])
  if stats.most_below_half(len(seeds)) < 0:
    return empty(f'{len(seeds)} seeds are too few for any length to be '
                 'solved by significantly fewer than half (5 or more needed)',
                 verdict=stats.underpowered(len(seeds)), test='none')
  L, start = stable_limit(rows, model, lengths, budgets)
  stable, gates = L is not None, {}
  if not stable:  # L* moved at every budget: not a wall's, if any
    start = budgets[-2]
    L = limit_length(accuracy_table(rows, steps=start), model, lengths, seeds)
    if L is None:
      return empty(f'no L*: no length up to {lengths[-1]} is solved by '
                   f'significantly fewer than half the seeds after {start} '
                   'steps')
    gates[stats.HELD] = (f'L* moved between every two budgets: L*={L} after '
                         f'{start} steps is not where training stopped')
  small = accuracy_table(rows, steps=start)
  large = accuracy_table(rows, steps=last)
  seeds = sorted(small[model, lengths[0]])
  stuck = [s for s in seeds if not stats.solved(small[model, L][s])]
  stayed = [not stats.solved(large[model, L][s]) for s in stuck]
  still = [s for s, st in zip(stuck, stayed) if st]
  gates = gates_lib.merged(gates_lib.learning_gate(
      stats.HELD, gates_lib.trained_out(curves, still, last, model=model,
                                        length=L)), gates)
  return Claim(
      claim, claims_lib.RELIABILITY, WALL_FAMILY,
      dict(successes=stayed, rate=1 - max_escape,
           what=f'at L*={L} ({"stable" if stable else "still moving"} from '
                f'{start} steps on), the {len(stuck)} seeds stuck after '
                f'{start} steps stayed stuck to {last}'),
      _setting(model, length=L), gates=gates, note=note,
      extra=dict(stuck=len(stuck), escaped=len(stuck) - sum(stayed),
                 start_budget=start,
                 escape_bound=stats.rate_upper_bound(
                     len(stuck) - sum(stayed), len(stuck))))


class BudgetExperiment(experiment.Experiment):
  """An experiment tested after each of several budgets (gating, budget):
  every model at every length, one run per group to the largest budget,
  rows of the test after each."""
  rows = staticmethod(rows)
  line = staticmethod(budget_line)

  def groups(self, config):
    return groups(config, budgets=True)
