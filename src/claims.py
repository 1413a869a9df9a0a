"""The lesson's claims about distance on the memory task, as verdict rules on
per-seed results. Shared by `distance`, `gating` and `budget`, which read
the same kind of rows (model, length, seed, accuracy[, steps]).

Each rule returns a claim: {claim, measured, verdict, test, p, note (the
rule)}; the verdict is `held`, `did not hold` or `inconclusive`
(src/stats.py). A claim judged seed by seed is decided by a binomial test of
its count of seeds (`stats.seed_count`), within its family.
"""

import numpy as np

from src import models as models_lib
from src import stats

HUNDRED_PERCENT = 0.99  # what "stays at 100%" is taken to mean, per seed
LESSON_WINDOW = (10, 20)  # "gives way after about fifteen steps", in L

# The families of the claims judged seed by seed: one lesson claim, every
# model it is tested on (Holm within each).
ATTENTION_FAMILY = 'attention stays at 100% at every distance'
GIVES_WAY_FAMILY = 'a plain recurrent net gives way after about 15 steps'
AS_FAR_FAMILY = ('a parallel linear recurrence carries the first symbol as '
                 'far as attention')


def accuracy_table(rows, **match) -> dict:
  """{(model, length): {seed: accuracy}} of the rows matching `match`."""
  out = {}
  for r in rows:
    if all(str(r[k]) == str(v) for k, v in match.items()):
      out.setdefault((r['model'], int(r['length'])), {})[int(r['seed'])] = \
          float(r['accuracy'])
  return out


def per_seed_critical(table: dict, model: str, lengths) -> list[int]:
  """Seed by seed (in seed order), the critical distance of `model`."""
  seeds = sorted(table[model, lengths[0]])
  return [stats.critical_distance([(L, table[model, L][s]) for L in lengths])
          for s in seeds]


def first_failure(table: dict, model: str, lengths, seed: int):
  """The shortest tested length the seed did not solve (None: it solved
  every one)."""
  for L in sorted(lengths):
    if not stats.solved(table[model, L][seed]):
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
  """Paired per-seed comparison of two models' critical distances."""
  return {'model': a, 'versus': b, **stats.sign_test(crit_a, crit_b)}


# -- the rules ------------------------------------------------------------------

def attention_at_100(table: dict, model: str, lengths) -> dict:
  """Seed s holds if it stays at >= 99% at every tested length; the count
  of seeds decides (`stats.seed_count`)."""
  seeds = sorted(table[model, lengths[0]])
  lowest = [min(table[model, L][s] for L in lengths) for s in seeds]
  k = sum(stats.reaches(x, HUNDRED_PERCENT) for x in lowest)
  return dict(
      claim=f'Attention ({model}) stays at 100% at every distance.',
      measured=f'at >= {HUNDRED_PERCENT:.0%} at every length '
               f'{min(lengths)}..{max(lengths)} in {k} of {len(seeds)} '
               f'seeds; lowest per-seed accuracy {min(lowest):.4f}',
      **stats.seed_count(k, len(seeds), ATTENTION_FAMILY),
      note=f'each seed judged alone: its lowest test accuracy over the '
           f'lengths must reach {HUNDRED_PERCENT:.0%}')


def plain_gives_way(table: dict, model: str, lengths,
                    window=LESSON_WINDOW, curves=None) -> dict:
  """Per seed, the give-way interval (c, f] (c its critical distance, f the
  first length it failed) against the lesson's window [lo, hi]: consistent
  if lo <= c and f <= hi; inconsistent if it had already failed by lo
  (f <= lo) or carried the symbol to hi or beyond (c >= hi); otherwise the
  tested lengths cannot tell. The verdict counts the seeds the lengths can
  judge, by a binomial test of the consistent ones (`stats.seed_count`).
  Giving way is a failure: with `curves`, the seeds that gave way must be
  trained out at the length they failed, else inconclusive."""
  lo, hi = window
  seeds = sorted(table[model, lengths[0]])
  crit = per_seed_critical(table, model, lengths)
  consistent, inconsistent, where, failed = 0, 0, [], {}
  for s, c in zip(seeds, crit):
    f = first_failure(table, model, lengths, s)
    where.append(f'({c}, {f if f is not None else "-"}]')
    if f is not None:
      failed[s] = f
    if f is not None and lo <= c and f <= hi:
      consistent += 1
    elif (f is not None and f <= lo) or c >= hi:
      inconsistent += 1
  judged = consistent + inconsistent
  undetermined = len(seeds) - judged
  test, learning = stats.seed_count(consistent, judged, GIVES_WAY_FAMILY), ''
  if curves is not None and consistent:
    check = failures_trained_out(curves, model, failed)
    if not check['flat']:
      learning = '; ' + still_learning(check)
      test.update(verdict=stats.INCONCLUSIVE, blocked=True)
  return dict(
      claim=f'A plain recurrent net ({model}) gives way after about 15 '
            'steps.',
      measured=f'gave way inside L={lo}..{hi} in {consistent} of {judged} '
               f'seeds the lengths can judge ({undetermined} undetermined); '
               'per seed (solved up to, first failed]: ' + ' '.join(where)
               + learning,
      **test,
      note=f'"about 15" is read as giving way between L={lo} and L={hi}: a '
           f'seed that solved L>={lo} and failed by L={hi} is consistent; '
           f'one that failed by L={lo} or solved L>={hi} is not; the '
           'rest cannot be judged by the tested lengths; the seeds that '
           'gave way must be trained out (their loss flat over the last '
           'doubling of steps at the length they failed)')


GATING_FAMILY = 'gating carries the symbol further than a plain RNN'


def gating_beats_plain(gated: str, plain: str, crit_gated, crit_plain,
                       lengths, failed=None, curves=None) -> dict:
  """Paired per-seed critical distances, exact two-sided sign test: held if
  the gated net goes further significantly, did not hold if the plain one
  does; otherwise inconclusive (absence of a difference is not evidence).
  One test of the family GATING_FAMILY (Holm-adjusted by the runner). Did
  not hold says the gated net failed where the plain one did not: with
  `curves`, the gated seeds that fell short (`failed`: {seed: length it
  failed}) must be trained out, else inconclusive."""
  c = compare(gated, plain, crit_gated, crit_plain)
  significant = c['p'] < stats.ALPHA
  direction = stats.HELD if c['wins'] >= c['losses'] else stats.NOT_HELD
  verdict = direction if significant else stats.INCONCLUSIVE
  blocked, learning = False, ''
  if direction == stats.NOT_HELD and curves is not None:
    check = failures_trained_out(curves, gated,
                                 _short(failed, crit_gated, crit_plain))
    if not check['flat']:
      blocked, learning = True, '; ' + still_learning(check)
      verdict = stats.INCONCLUSIVE
  arch = models_lib.get(gated).architecture.upper()
  init = models_lib.get(gated).init_name
  g, p = stats.median_interval(crit_gated), stats.median_interval(crit_plain)
  return dict(
      claim=f'Gating ({arch}, {init}: {gated}) carries the symbol further '
            f'than a plain RNN ({plain}).',
      measured=f'{gated} further in {c["wins"]}, tied in {c["ties"]}, '
               f'shorter in {c["losses"]} of {len(crit_gated)} seeds (sign '
               f'test p = {stats.fmt_p(c["p"])}); median critical distance '
               f'{g["median"]:g} vs {p["median"]:g} over L '
               f'{min(lengths)}..{max(lengths)}' + learning,
      verdict=verdict, test='exact sign test, two-sided, paired by seed',
      p=c['p'], p_min=stats.smallest_p(len(crit_gated)),
      seeds=len(crit_gated), if_significant=direction, blocked=blocked,
      family=GATING_FAMILY,
      note=f'seed i of {gated} against seed i of {plain} (same strings); '
           f'held / did not hold need p < {stats.ALPHA}; ties (for example '
           'both solving every length) carry no evidence')


def as_far_as_attention(model: str, attention: str, crit_model,
                        crit_attention, lengths, failed=None,
                        curves=None) -> dict:
  """Seed i holds if the model carries the symbol at least as far as seed
  i of attention (same strings); the count of seeds decides
  (`stats.seed_count`). The seeds that fall short
  failed: with `curves` they must be trained out (`failed`: {seed: length it
  failed}), else inconclusive."""
  k = sum(m >= a for m, a in zip(crit_model, crit_attention))
  c = stats.median_interval(crit_model)
  test, learning = stats.seed_count(k, len(crit_model), AS_FAR_FAMILY), ''
  short = _short(failed, crit_model, crit_attention)
  if curves is not None and short:
    check = failures_trained_out(curves, model, short)
    if not check['flat']:
      learning = '; ' + still_learning(check)
      test.update(verdict=stats.INCONCLUSIVE, blocked=True)
  return dict(
      claim=f'A parallel linear recurrence ({model}) carries the first '
            f'symbol as far as attention ({attention}).',
      model=model,
      measured=f'as far in {k} of {len(crit_model)} seeds; critical '
               f'distance per seed {" ".join(map(str, crit_model))} against '
               f'{" ".join(map(str, crit_attention))} (median {c["median"]:g};'
               f' L {min(lengths)}..{max(lengths)})' + learning,
      **test,
      note=f'each seed: its critical distance reaches that of the same seed '
           f'of {attention}')


def _short(failed, crit, crit_other) -> dict:
  """{seed: the length it failed} of the seeds whose critical distance falls
  short of the other model's (`failed`: {seed: first failed length}, in
  seed order, as crit)."""
  return {s: f for (s, f), a, b in zip(sorted((failed or {}).items()), crit,
                                       crit_other) if a < b and f is not None}


def memory_claims(table: dict, models, lengths, curves=None) -> list[dict]:
  """Every distance claim the models present allow, per model and pair;
  with `curves` (curves.csv rows), a failure must be trained out."""
  lengths = sorted(lengths)
  spec = models_lib.get
  out = [attention_at_100(table, m, lengths) for m in models
         if spec(m).family == models_lib.ATTENTION]
  plain = [m for m in models if spec(m).family == models_lib.PLAIN]
  out += [plain_gives_way(table, m, lengths, curves=curves) for m in plain]
  crit = {m: per_seed_critical(table, m, lengths) for m in models}
  seeds = sorted(table[models[0], lengths[0]]) if models else []
  failed = {m: {s: first_failure(table, m, lengths, s) for s in seeds}
            for m in models}
  for gated in (m for m in models if spec(m).family == models_lib.GATED):
    for p in plain:
      out.append(gating_beats_plain(gated, p, crit[gated], crit[p], lengths,
                                    failed[gated], curves))
  attention = [m for m in models if spec(m).family == models_lib.ATTENTION]
  for m in (m for m in models if spec(m).family == models_lib.LINEAR):
    if attention:
      out.append(as_far_as_attention(m, attention[0], crit[m],
                                     crit[attention[0]], lengths, failed[m],
                                     curves))
  return out


def paired_table(crit: dict) -> list[dict]:
  """Every pair of models, compared seed by seed (sign test)."""
  names = list(crit)
  return [compare(a, b, crit[a], crit[b]) for i, a in enumerate(names)
          for b in names[i + 1:]]


def mean_by_length(table: dict, model: str, lengths) -> dict:
  return {L: float(np.mean(list(table[model, L].values()))) for L in lengths}


# -- wall or budget -----------------------------------------------------------------

FLAT = 0.05  # "flat": the training loss fell by less than 5% over a doubling


def loss_before(curves, step: int, seeds, **match) -> dict:
  """Per seed, the mean training loss over the last tenth of the steps up to
  `step` (at least the last chunk), from the curves.csv rows matching
  `match` (model=..., length=..., learning_rate=...)."""
  out = {}
  for s in seeds:
    chunks = sorted((int(r['step']), float(r['train_loss'])) for r in curves
                    if all(str(r[k]) == str(v) for k, v in match.items())
                    and int(r['seed']) == s and int(r['step']) <= step)
    if not chunks:
      continue
    window = max(step // 10, step - chunks[-1][0] + 1)
    inside = [v for t, v in chunks if t > step - window] or [chunks[-1][1]]
    out[s] = float(np.mean(inside))
  return out


def trained_out(curves, seeds, step: int, **match) -> dict:
  """The trained-out rule, shared by every verdict that says a model failed:
  the failing `seeds`' training loss (curves.csv rows matching `match`) fell
  by a median of less than FLAT over the last doubling of steps (step / 2 to
  `step`). {flat, fall, seeds, step}; with no seed to judge it is flat (no
  seed failed), with no curve it is not (nothing shows it stopped)."""
  seeds = list(seeds)
  if not seeds:
    return checked([], 0, step)
  half = loss_before(curves, step // 2, seeds, **match)
  end = loss_before(curves, step, seeds, **match)
  return checked([(half[s] - end[s]) / half[s] for s in seeds
                   if s in half and s in end and half[s] > 0],
                  len(seeds), step)


def checked(falls, seeds: int, step: int) -> dict:
  """The trained-out verdict of per-seed falls (`seeds` judged in all)."""
  fall = float(np.median(falls)) if falls else float('nan')
  return {'flat': not seeds or bool(np.isfinite(fall) and fall < FLAT),
          'fall': fall, 'falls': list(falls), 'seeds': seeds, 'step': step}


def last_step(curves, **match) -> int:
  """The last step the curves.csv rows matching `match` reach (0: none)."""
  return max((int(r['step']) for r in curves
              if all(str(r[k]) == str(v) for k, v in match.items())),
             default=0)


def failures_trained_out(curves, model: str, failures: dict) -> dict:
  """The trained-out rule over seeds that failed at different lengths:
  `failures` {seed: the length it failed}; each seed's fall is measured at
  its own length, over the last doubling of that group's steps."""
  falls, step = [], 0
  for L in sorted(set(failures.values())):
    seeds = [s for s, f in failures.items() if f == L]
    last = last_step(curves, model=model, length=L)
    step = max(step, last)
    falls += trained_out(curves, seeds, last, model=model,
                         length=L)['falls']
  return checked(falls, len(failures), step)


def still_learning(check: dict) -> str:
  """What `measured` says of a failure that is not trained out."""
  fall = check['fall']
  return (f'still learning at {check["step"]} steps: the training loss of '
          f'the {check["seeds"]} failing seeds fell by a median '
          + (f'{100 * fall:.1f}%' if np.isfinite(fall) else 'n/a (no curve)')
          + f' over the last doubling (flat: under {FLAT:.0%})')


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


def naive_limit_length(table: dict, model: str, lengths, seeds):
  """The rule L* replaced: the shortest length fewer than half solve."""
  return next((L for L in sorted(lengths) if 2 * sum(
      stats.solved(table[model, L][s]) for s in seeds) < len(seeds)), None)


def wall_seeds_needed(max_escape: float = MAX_ESCAPE) -> int:
  """The fewest seeds with which a wall can be held whatever L* turns out
  to be: L* lets up to stats.most_below_half(n) seeds solve it, and the
  rest, stuck, must be enough for 0 escapes to bound the rate below
  `max_escape`."""
  need = stats.trials_needed(max_escape)
  return next(n for n in range(need, 10 * need)
              if n - stats.most_below_half(n) >= need)


def limit_is_a_wall(rows, curves, model: str, lengths, budgets,
                    max_escape: float = MAX_ESCAPE) -> dict:
  """At L* (limit_length, at the smallest budget B1) the seeds that do not
  solve it are stuck; those of them that solve it at the largest budget B2
  escaped. k of n escaping bounds the escape rate below the exact one-sided
  95% (Clopper-Pearson) upper bound. Did not hold: a significant rise at L*
  (exact one-sided paired test, unsolved -> solved against solved ->
  unsolved). Held: that bound below `max_escape` (the exact binomial test
  of a rate of `max_escape` or more, p < ALPHA) and the seeds still stuck
  at B2 trained out (claims.trained_out). Inconclusive (underpowered) when
  even 0 escapes in n could not clear `max_escape`; the rest, no L* in the
  tested lengths and a single budget are inconclusive."""
  lengths, budgets = sorted(lengths), sorted(budgets)
  first, last = budgets[0], budgets[-1]
  small = accuracy_table(rows, steps=first)
  large = accuracy_table(rows, steps=last)
  claim = (f'The limit of {model} ({models_lib.get(model).init_name}) is a '
           'wall: more training does not carry it further.')
  seeds = sorted(small[model, lengths[0]])
  edge = stats.most_below_half(len(seeds))
  note = ('L* is the shortest length that significantly fewer than half the '
          f'seeds solve after the smallest budget (exact one-sided binomial '
          f'test against 1/2, p < {stats.ALPHA}: at {len(seeds)} seeds, '
          f'{edge} or fewer solving), so a length within the noise of half '
          f'is not L*, and one seed moved at the edge of "fewer than half" '
          'cannot move it; the seeds stuck at L* are the trials, and those '
          'solving it '
          'after the largest budget escaped; k of n escaping bounds the '
          'escape rate by the exact one-sided 95% (Clopper-Pearson) upper '
          'bound; a significant rise at L* (exact one-sided paired test, p '
          f'< {stats.ALPHA}) is did not hold; held needs that bound below '
          f'the declared maximum escape rate {max_escape:.0%} (fixed before '
          'any run: a wall lets through at most 1 in 5) and a flat training '
          'loss at L* over the last doubling of steps in the seeds still '
          f'stuck (median fall under {FLAT:.0%}); inconclusive '
          '(underpowered) when even 0 escapes could not bound the rate below '
          f'{max_escape:.0%} (fewer than {stats.trials_needed(max_escape)} '
          f'stuck seeds: {wall_seeds_needed(max_escape)} seeds guarantee '
          'them); the rest, no L* in the tested lengths and a single budget, '
          'is inconclusive. Lengths past L* are shown, not pooled: seed i '
          'starts from the same weights at every length')
  if len(budgets) < 2:
    return dict(claim=claim, measured=f'one budget ({first} steps): no '
                'longer training to compare', verdict=stats.INCONCLUSIVE,
                test='none', note=note)
  L = limit_length(small, model, lengths, seeds)
  if L is None and edge < 0:
    return dict(claim=claim, measured=f'no L*: {len(seeds)} seeds are too '
                'few for any count to be significantly fewer than half (5 '
                'or more needed)', verdict=stats.underpowered(len(seeds)),
                test='none', note=note)
  if L is None:
    naive = naive_limit_length(small, model, lengths, seeds)
    return dict(claim=claim, measured=f'no limit: no length up to '
                f'{lengths[-1]} is solved by significantly fewer than half '
                f'of {len(seeds)} seeds after {first} steps'
                + (f' (fewer than half at L={naive})' if naive else ''),
                verdict=stats.INCONCLUSIVE, test='none', note=note)
  escape = escapes(small, large, model, L, seeds, max_escape)
  n, k = escape['stuck'], escape['escaped']
  before = [stats.solved(small[model, L][s]) for s in seeds]
  after = [stats.solved(large[model, L][s]) for s in seeds]
  rise = stats.sign_test(after, before, alternative='greater')
  still = [s for s, a in zip(seeds, after) if not a]
  check = trained_out(curves, still, last, model=model, length=L)
  fall, flat = check['fall'], check['flat'] and bool(still)
  if rise['p'] < stats.ALPHA:
    verdict, p = stats.NOT_HELD, rise['p']
  elif stats.rate_below(0, n, max_escape) >= stats.ALPHA:
    verdict, p = stats.underpowered(n), escape['p']
  elif escape['p'] < stats.ALPHA and flat:
    verdict, p = stats.HELD, escape['p']
  else:
    verdict, p = stats.INCONCLUSIVE, escape['p']
  naive = naive_limit_length(small, model, lengths, seeds)
  past = [escapes(small, large, model, M, seeds, max_escape)
          for M in lengths if M > L]
  return dict(
      claim=claim,
      measured=f'at L*={L} (solved by {sum(before)} of {len(seeds)} seeds '
               f'after {first} steps'
               + (f'; fewer than half, the old rule, would take L={naive}'
                  if naive != L else '') + '): '
               + fmt_escape(escape, first, last)
               + f'; solved by {sum(after)} after {last} (rise in '
               f'{rise["wins"]}, fall in {rise["losses"]}; exact paired test '
               f'p = {stats.fmt_p(rise["p"])})'
               + (f'; training loss at L*={L} in the {len(still)} seeds '
                  'still stuck fell by a median '
                  + (f'{100 * fall:.1f}%' if np.isfinite(fall) else 'n/a')
                  + f' from step {last // 2} to {last}' if still else '')
               + ('; past L* (not pooled): ' + ', '.join(
                   f'{e["escaped"]} of {e["stuck"]} at L={e["length"]}'
                   for e in past) if past else ''),
      verdict=verdict, test='exact one-sided bound on the escape rate '
      '(Clopper-Pearson); exact one-sided sign test (McNemar) for a rise, '
      'paired by seed', p=p, p_rise=rise['p'], p_escape=escape['p'],
      length=L, stuck=n, escaped=k, escape_bound=escape['bound'],
      max_escape=max_escape,
      past=[{k: e[k] for k in ('length', 'stuck', 'escaped', 'bound')}
            for e in past], note=note)


def escapes(small: dict, large: dict, model: str, length: int, seeds,
            max_escape: float = MAX_ESCAPE) -> dict:
  """The seeds not solving `length` in `small` (stuck) and those of them
  solving it in `large` (escaped), with the escape rate's exact one-sided
  95% upper bound and the p of the test that it is below `max_escape`."""
  stuck = [s for s in seeds if not stats.solved(small[model, length][s])]
  k = sum(stats.solved(large[model, length][s]) for s in stuck)
  return {'length': length, 'stuck': len(stuck), 'escaped': k,
          'bound': stats.rate_upper_bound(k, len(stuck)),
          'p': stats.rate_below(k, len(stuck), max_escape)}


def fmt_escape(e: dict, first: int, last: int) -> str:
  """"k of n seeds escaped between B1 and B2 steps: escape rate below x%"."""
  return (f'{e["escaped"]} of {e["stuck"]} stuck seeds escaped between '
          f'{first} and {last} steps: escape rate below '
          f'{100 * e["bound"]:.1f}% (one-sided 95%)')
