"""A claim of the lesson as a typed object: its sentence, its kind, the
setting it was measured in, its per-seed evidence (numbers), its family, and
the verdict its kind's test gives.

The kind decides the test (each direction one-sided at stats.ALPHA, Holm
within the family: `judge`):

  threshold      "over 90% of the weight" (in most seeds: the median): the
                 seeds past the threshold against those short of it, exact
                 sign test (Dixon & Mood 1946); a seed at it is no evidence.
  reliability    "stays at 100% at every distance": the share of seeds that
                 do it against a rate declared before the run, exact
                 binomial test (the one-sided Clopper-Pearson bound, 1934).
  capability     "two layers can": existence. The best seed's accuracy on
                 held-out strings against the claim's null, exact binomial
                 test over the strings, Bonferroni over the seeds searched.
  impossibility  "cannot": every seed below null + IMPOSSIBLE_MARGIN (exact
                 binomial per seed, intersection-union: Berger 1982), its
                 loss and accuracy stopped moving, at the best rate of a
                 grid; a seed above the null (capability's test) is did not
                 hold; anything else inconclusive.
  comparison     "carries further than": paired per seed, decided on the
                 pairs that differ (a tie is no evidence either way): exact
                 sign test, McNemar's for solved or not. Pairs tied at the
                 grid's ceiling are censored: counted against each
                 direction in turn. "As far as" (`at_least`): non-
                 inferiority, the share of seeds behind below AS_FAR_MARGIN
                 (held) or above it (did not hold).
  shape          "dies away exponentially": per seed, whether the fit shows
                 the shape; exact binomial test of the count against 1/2.

A claim's role says what it is to the scorecard: LESSON tests the lesson's
own sentence; SIDE is this project's claim beside it (gating, the walls, an
implementation's depth), listed apart; SANITY is a check that cannot fail
by construction, shown, not counted. A claim measured on a model that did
not learn the task (`not_applicable`: why, with its accuracy) is judged
`not applicable`, tested and counted nowhere.

The `measured` text is rendered from the evidence (`render`); no number is
typed into a sentence by hand. The same constructors, given placeholder
evidence before the run, give the power plan (`src/power.py`).
"""

import dataclasses
import functools
import math

import numpy as np

from src import evidence as evidence_lib
from src import stats


THRESHOLD, RELIABILITY, CAPABILITY = 'threshold', 'reliability', 'capability'
IMPOSSIBILITY, COMPARISON, SHAPE = 'impossibility', 'comparison', 'shape'
KINDS = (THRESHOLD, RELIABILITY, CAPABILITY, IMPOSSIBILITY, COMPARISON, SHAPE)
LESSON, SIDE, SANITY = 'lesson', 'side', 'sanity'
ROLES = (LESSON, SIDE, SANITY)

# Fixed before any run, defined with the evidence they default: "always"
# holds when the lower 95% bound on the share of seeds that do it clears
# RELIABLE_RATE; "cannot" needs every seed within IMPOSSIBLE_MARGIN of the
# null at most (a seed that routing alone would put at 0.75 may not reach
# 0.80).
RELIABLE_RATE = evidence_lib.RELIABLE_RATE
IMPOSSIBLE_MARGIN = evidence_lib.IMPOSSIBLE_MARGIN
# "As far as" (non-inferiority): held when the share of seeds that fall
# behind is below this (the upper 95% bound on it), as "always" allows one
# seed in five to fail.
AS_FAR_MARGIN = 1 - RELIABLE_RATE



@dataclasses.dataclass
class Claim:
  """One claim, judged or not yet (`verdict` None until `judge`)."""
  sentence: str
  kind: str
  family: str
  evidence: dict  # its kind's fields (`src/evidence.py`)
  setting: dict = dataclasses.field(default_factory=dict)
  note: str = ''  # what the rule reads as, in words: the kind's is added
  # Reasons a direction may not be concluded ({verdict: reason}): a failure
  # still learning, a rate not tuned. The verdict is then inconclusive.
  gates: dict = dataclasses.field(default_factory=dict)
  extra: dict = dataclasses.field(default_factory=dict)  # summary.json keys
  role: str = LESSON  # LESSON, SIDE or SANITY (the module's docstring)
  not_applicable: str = ''  # why it cannot be judged here, with the numbers
  verdict: str | None = None
  test: str = ''
  p: float | None = None
  # The held direction's best case at this many seeds (every seed for it):
  # at or above alpha after the family's adjustment, held is out of reach
  # whatever the data (underpowered).
  p_min: float | None = None
  # The smallest p either direction's test could give these data (the
  # pairs that differ, the seeds off the threshold), whatever way they
  # fall: at or above alpha, the claim cannot be decided and leaves its
  # family's Holm (Tarone 1990).
  p_floor: float | None = None
  if_significant: str | None = None
  p_adjusted: float | None = None
  family_size: int = 1
  measured: str = ''

  def __post_init__(self):
    if self.kind not in KINDS:
      raise ValueError(f'unknown kind {self.kind!r}; one of {KINDS}')
    if self.role not in ROLES:
      raise ValueError(f'unknown role {self.role!r}; one of {ROLES}')
    evidence_lib.check(self.kind, self.evidence)  # typed: `src/evidence.py`

  @property
  def seeds(self) -> int:
    return _seeds(self)

  def to_json(self) -> dict:
    """The summary.json entry: the keys the report and users read."""
    out = dict(claim=self.sentence, kind=self.kind, verdict=self.verdict,
               measured=self.measured, test=self.test, p=self.p,
               p_adjusted=self.p_adjusted, p_min=self.p_min,
               p_floor=self.p_floor, gates=dict(self.gates),
               seeds=self.seeds, family=self.family,
               family_size=self.family_size,
               if_significant=self.if_significant, note=self.note,
               role=self.role,
               evidence=_jsonable(self.evidence), **self.setting,
               **self.extra)
    return out


def _jsonable(x):
  if isinstance(x, dict):
    return {str(k): _jsonable(v) for k, v in x.items()}
  if isinstance(x, (list, tuple, np.ndarray)):
    return [_jsonable(v) for v in x]
  if isinstance(x, (np.floating, float)):
    return float(x)
  if isinstance(x, (np.integer,)):
    return int(x)
  if isinstance(x, np.bool_):
    return bool(x)
  return x


# -- the tests, one per kind ---------------------------------------------------------

def sign_counts(values, threshold: float, above: bool = True) -> tuple:
  """(above, below) the threshold, in the claim's direction; a value at the
  threshold is neither (no evidence either way)."""
  v = np.asarray(values, float)
  v = v[np.isfinite(v)]
  over, under = int(np.sum(v > threshold)), int(np.sum(v < threshold))
  return (over, under) if above else (under, over)


def _threshold(c: Claim) -> dict:
  """"In most seeds over t": the median. Exact sign test of the seeds past
  the threshold against the seeds short of it (Dixon & Mood 1946), one-
  sided each way; exact whatever the values' shape (bimodal, bounded)."""
  e = c.evidence
  k, m = sign_counts(e['values'], e['threshold'], e.get('above', True))
  n = k + m
  return dict(test='exact sign test of the median: the seeds past '
                   f'{e["threshold"]:g} against those short of it, one-'
                   'sided each way (seeds at it dropped)',
              p_held=stats.binomial(k, n, 0.5, 'greater'),
              p_not=stats.binomial(k, n, 0.5, 'less'),
              p_min_held=0.5 ** n, p_min_not=0.5 ** n,
              p_best=0.5 ** _seeds(c))


def _reliability(c: Claim) -> dict:
  e = c.evidence
  k, n = int(sum(bool(s) for s in e['successes'])), len(e['successes'])
  rate = e.get('rate', RELIABLE_RATE)
  held = stats.binomial(k, n, rate, 'greater') if n else 1.0
  refuted = stats.binomial(k, n, rate, 'less') if n else 1.0
  undetermined = int(e.get('undetermined', 0))
  if undetermined:  # bounded both ways: as failures for held, else not
    held = stats.binomial(k, n + undetermined, rate, 'greater')
    refuted = stats.binomial(k + undetermined, n + undetermined, rate,
                             'less')
  n += undetermined
  return dict(test=f'exact one-sided binomial test of the share of seeds '
                   f'against the declared rate {rate:g} (Clopper-Pearson)'
                   + (', the seeds the lengths cannot judge counted against '
                      'each direction' if undetermined else ''),
              p_held=held, p_not=refuted, p_min_held=rate ** n,
              p_min_not=(1 - rate) ** n, p_best=rate ** n)


def _exists(e: dict) -> tuple[float, int]:
  """The capability p: the best seed's exact binomial p over its held-out
  strings against the null, times the seeds searched (Bonferroni); and
  that seed (of equal p, 1 where every seed is at or below the null, the
  most accurate)."""
  acc, strings = np.asarray(e['accuracy'], float), int(e['strings'])
  if acc.size == 0:
    return 1.0, -1
  k = np.rint(acc * strings).astype(int)
  p = stats.sps().binom.sf(k - 1, strings, e['null'])
  best = int(np.lexsort((-acc, p))[0])
  return min(1.0, float(p[best]) * acc.size), best


def _below(e: dict) -> float:
  """The impossibility p: every seed below null + margin (each an exact
  binomial test over its strings; intersection-union: the largest p)."""
  acc, strings = np.asarray(e['accuracy'], float), int(e['strings'])
  if acc.size == 0:
    return 1.0
  bar = min(e['null'] + e.get('margin', IMPOSSIBLE_MARGIN), 1.0)
  k = np.rint(acc * strings).astype(int)
  return float(stats.sps().binom.cdf(k, strings, bar).max())


def _capability(c: Claim) -> dict:
  exists, _ = _exists(c.evidence)
  return dict(test='existence: the best seed\'s exact binomial test over '
                   'its held-out strings against the null, Bonferroni over '
                   'the seeds; did not hold needs every seed below the null '
                   f'+ {IMPOSSIBLE_MARGIN} (exact binomial, intersection-'
                   'union), trained out at the best rate of a grid',
              p_held=exists, p_not=_below(c.evidence), p_min_held=0.0,
              p_min_not=0.0, p_best=0.0)


def _impossibility(c: Claim) -> dict:
  exists, _ = _exists(c.evidence)
  return dict(test=f'every seed below the null + {IMPOSSIBLE_MARGIN} (exact '
                   'binomial over its held-out strings, intersection-union), '
                   'trained out at the best rate of a grid; did not hold: '
                   'the best seed above the null (exact binomial, '
                   'Bonferroni over the seeds)',
              p_held=_below(c.evidence), p_not=exists, p_min_held=0.0,
              p_min_not=0.0, p_best=0.0)


def comparison_counts(e: dict) -> dict:
  """wins, ties, losses and censored (tied at the grid's ceiling) of x
  against y, paired by seed; `higher`: a larger value is ahead; `ahead`:
  the seeds that support the claim (wins; for `at_least`, "as far as",
  every seed not behind)."""
  x, y = np.asarray(e['x'], float), np.asarray(e['y'], float)
  if x.shape != y.shape:
    raise ValueError(f'paired samples differ in size: {x.shape}, {y.shape}')
  if not e.get('higher', True):
    x, y = -x, -y
  ceiling = e.get('ceiling')
  at_top = (np.zeros(x.shape, bool) if ceiling is None or e.get('at_least')
            else (np.isclose(np.abs(x), abs(ceiling))
                  & np.isclose(np.abs(y), abs(ceiling))))
  out = {'wins': int(np.sum((x > y) & ~at_top)),
         'ties': int(np.sum((x == y) & ~at_top)),
         'losses': int(np.sum((x < y) & ~at_top)),
         'censored': int(np.sum(at_top))}
  out['ahead'] = out['wins'] + (out['ties'] if e.get('at_least') else 0)
  return out


def _comparison(c: Claim) -> dict:
  """"x further than y": paired by seed, decided on the pairs that differ
  (ties are no evidence either way): the exact sign test, which for solved-
  or-not outcomes is the exact McNemar test (McNemar 1947). Pairs tied at
  the grid's ceiling are interval-censored: either could be ahead past it,
  so each direction must hold with them counted against it.
  "As far as" (`at_least`, non-inferiority within the tested lengths):
  held when the share of seeds behind is below AS_FAR_MARGIN, did not hold
  when it is above (exact one-sided binomial tests, each way)."""
  e = c.evidence
  n = comparison_counts(e)
  w, l, z = n['wins'], n['losses'], n['censored']
  if e.get('at_least'):
    judged = w + n['ties'] + l
    return dict(test='as far as (non-inferiority within the tested '
                     'lengths): exact one-sided binomial tests of the share '
                     f'of seeds behind against {AS_FAR_MARGIN:g} (held: '
                     'below it; did not hold: above it)',
                p_held=stats.rate_below(l, judged, AS_FAR_MARGIN),
                p_not=stats.binomial(l, judged, AS_FAR_MARGIN, 'greater'),
                p_min_held=(1 - AS_FAR_MARGIN) ** judged,
                p_min_not=AS_FAR_MARGIN ** judged,
                p_best=(1 - AS_FAR_MARGIN) ** _seeds(c))
  # Censored pairs resolve against each direction in turn: as losses for
  # held, as wins for did not hold.
  held = stats.binomial(w, w + l + z, 0.5, 'greater')
  refuted = stats.binomial(w + z, w + l + z, 0.5, 'less')
  return dict(test='paired by seed, on the pairs that differ (ties no '
                   'evidence): exact sign test (McNemar\'s for solved or '
                   'not), one-sided each way; pairs tied at the grid\'s '
                   'ceiling counted against each direction in turn',
              p_held=held, p_not=refuted, p_min_held=0.5 ** (w + l + z),
              p_min_not=0.5 ** (w + l + z), p_best=0.5 ** _seeds(c))


def _shape(c: Claim) -> dict:
  shows = c.evidence['shows']
  k, n = int(sum(bool(s) for s in shows)), len(shows)
  return dict(test='per seed, whether its fit shows the shape: exact one-'
                   'sided binomial test of the count against 1/2',
              p_held=stats.binomial(k, n, 0.5, 'greater') if n else 1.0,
              p_not=stats.binomial(k, n, 0.5, 'less') if n else 1.0,
              p_min_held=0.5 ** n, p_min_not=0.5 ** n, p_best=0.5 ** n)


TESTS = {THRESHOLD: _threshold, RELIABILITY: _reliability,
         CAPABILITY: _capability, IMPOSSIBILITY: _impossibility,
         COMPARISON: _comparison, SHAPE: _shape}


def _seeds(c: Claim) -> int:
  e = c.evidence
  if 'successes' in e:
    return len(e['successes']) + int(e.get('undetermined', 0))
  for key in ('values', 'accuracy', 'x', 'shows'):
    if key in e:
      return len(e[key])
  return 0


# -- judging ---------------------------------------------------------------------------

def test(c: Claim, words: bool = True) -> Claim:
  """The claim's own test, before its family: p (in the direction the data
  lean), p_min (held's best case at this n), p_floor (the smallest p its
  test could give these data), if_significant, and the raw verdict; with
  `words`, what was measured in words (`render`)."""
  if c.not_applicable:  # no test: the model did not do what it describes
    return dataclasses.replace(c, test='none: not applicable', p=None,
                               p_min=None, measured=c.not_applicable,
                               verdict=stats.NOT_APPLICABLE)
  if c.evidence.get('exact'):  # counted, not sampled: the rule decides
    shows = [bool(x) for x in c.evidence['shows']]
    return dataclasses.replace(
        c, test=c.evidence.get('test', 'counted, not sampled: no test'),
        p=None, p_min=None, measured=render(c) if words else '',
        verdict=stats.HELD if shows and all(shows) else stats.NOT_HELD)
  t = TESTS[c.kind](c)
  held = t['p_held'] <= t['p_not']
  direction = stats.HELD if held else stats.NOT_HELD
  p = t['p_held'] if held else t['p_not']
  c = dataclasses.replace(
      c, test=t['test'], p=float(p), p_min=float(t['p_best']),
      p_floor=float(min(t['p_min_held'], t['p_min_not'])),
      if_significant=direction, measured=render(c) if words else '')
  return dataclasses.replace(c, verdict=decide(c, direction, p, 1))


def decide(c: Claim, direction: str, p_adjusted: float, size: int) -> str:
  """The verdict of a tested claim at its family-adjusted p (`size` tests
  in its family): its direction where p < alpha and no gate stops it; else
  underpowered where held was out of reach at this n (its best case, every
  seed for it, times the family's size), else inconclusive. A significant
  result stands whatever the plan's power."""
  return _verdict(c.seeds, c.gates, c.p_min, direction, p_adjusted, size)


def _verdict(seeds: int, gates: dict, p_min: float, direction: str,
             p_adjusted: float, size: int) -> str:
  if seeds == 0:
    return stats.INCONCLUSIVE
  if p_adjusted < stats.ALPHA:
    return stats.INCONCLUSIVE if direction in gates else direction
  if size * p_min >= stats.ALPHA:
    return stats.underpowered(seeds)
  return stats.INCONCLUSIVE


def undecidable(kind: str, evidence: dict, p_floor: float | None) -> str:
  """Why these data cannot decide a claim either way at any adjustment (the
  smallest p either direction's test could give them, `p_floor`, is alpha
  or more), or ''."""
  if p_floor is None or p_floor < stats.ALPHA:
    return ''
  best = f'p = {stats.fmt_p(p_floor)} at best, which cannot reach {stats.ALPHA:g}'
  if kind == COMPARISON and not evidence.get('at_least'):
    n = comparison_counts(evidence)
    differ, censored = n['wins'] + n['losses'], n['censored']
    tied = f'{censored} tied at the ceiling, censored' if censored else ''
    if not differ:
      return ('no pair differs (a tie is no evidence either way'
              + (f'; {tied}' if tied else '') + ')')
    return (f'only {differ} pairs differ' + (f' ({tied})' if tied else '')
            + f': {best}')
  return f'{_seeds_of(kind, evidence)} seeds: {best}'


def _seeds_of(kind: str, evidence: dict) -> int:
  return _seeds(Claim('', kind, '', evidence))


def _family(members: list[dict]) -> list[dict]:
  """Holm over the members of one family that can decide (each a dict of
  kind, evidence, p, p_floor, p_min, seeds, gates, if_significant, test):
  for each, its p_adjusted, verdict and the words `measured` ends with. A
  member that cannot decide leaves Holm: never decided, no adjusted p; the
  others' underpowered screen counts the members that can (and it, had
  its best case come)."""
  size = len(members)
  whys = [undecidable(m['kind'], m['evidence'], m['p_floor'])
          for m in members]
  can = [i for i, why in enumerate(whys) if not why]
  adjusted = dict(zip(can, stats.holm([members[i]['p'] for i in can])))
  out = []
  for i, (m, why) in enumerate(zip(members, whys)):
    direction = m['if_significant']
    steps = len(can) + (1 if why else 0)  # Holm's strictest step for it
    if why:
      p_adj = None
      verdict = _verdict(m['seeds'], {}, m['p_min'], direction, 1.0, steps)
      tail = (f'; {m["test"]}: p = {stats.fmt_p(m["p"])}, not adjusted: '
              f'{why}, so it leaves its family\'s Holm (family of {size}, '
              f'{len(can)} that can decide)')
    else:
      p_adj = adjusted[i]
      verdict = _verdict(m['seeds'], m['gates'], m['p_min'], direction,
                         p_adj, steps)
      blocked = m['gates'].get(direction)
      tail = (f'; {m["test"]}: p = {stats.fmt_p(m["p"])}, Holm-adjusted '
              f'{stats.fmt_p(p_adj)} (family of {size}'
              + (f', {len(can)} that can decide' if len(can) < size else '')
              + ')' + ((f'; not {direction}: {blocked}'
                        if p_adj < stats.ALPHA else
                        f'; {direction} is out of reach here too: {blocked}')
                       if blocked else ''))
    out.append(dict(p_adjusted=p_adj, family_size=size, verdict=verdict,
                    tail=tail))
  return out


def judge(claims: list[Claim], words: bool = True) -> list[Claim]:
  """Every claim tested, then Holm within each family (Holm 1979) over the
  tests that can decide: a test whose smallest possible p on its data is
  alpha or more (every pair tied, say) cannot reject at any level, so it
  leaves the family (Tarone 1990; the p-values are exact given the pairs
  that differ) and is inconclusive, saying why. The verdict is `decide`'s
  at the adjusted p; underpowered counts the whole family. `words`: False
  leaves out what was measured in words (`render`), which the verdicts do
  not read: src/calibration.py's simulations need only those."""
  tested = [c if c.verdict is None or c.p is not None or not words else
            dataclasses.replace(c, measured=c.measured or render(c))
            for c in claims]
  fresh = [c.verdict is None for c in tested]  # their `measured` is render's
  tested = [test(c, words) if new else c for c, new in zip(tested, fresh)]
  families = {}
  for i, c in enumerate(tested):
    if c.p is not None:  # a counted claim has no test to adjust
      families.setdefault(c.family, []).append(i)
  out = list(tested)
  for members in families.values():
    judged = _family([dict(kind=tested[i].kind, evidence=tested[i].evidence,
                           p=tested[i].p, p_floor=tested[i].p_floor,
                           p_min=tested[i].p_min, seeds=tested[i].seeds,
                           gates=tested[i].gates, test=tested[i].test,
                           if_significant=tested[i].if_significant)
                      for i in members])
    for i, j in zip(members, judged):
      c = tested[i]
      out[i] = dataclasses.replace(
          c, p_adjusted=j['p_adjusted'], family_size=j['family_size'],
          verdict=j['verdict'],
          measured=(c.measured if fresh[i] else render(c) if words else '')
          + j['tail'])
  return out


# What `runner.with_rate_verdicts` appends to `measured` with a grid of rates.
BY_RATE = '; verdict at each rate alone: '


def judge_together(claims: list[dict]) -> list[dict]:
  """summary.json claims judged in several runs (the parts of a report),
  judged again as one family per family name across all of them, as
  `judge` judges one run's: a claim tested at several settings is one
  family wherever it was measured. Counted and not-applicable claims are
  kept as they are."""
  families = {}
  for i, c in enumerate(claims):
    # A claim judged before its summary recorded its gates keeps its verdict.
    if c.get('p') is not None and 'gates' in c:
      families.setdefault(c['family'], []).append(i)
  out = [dict(c) for c in claims]
  for members in families.values():
    rows = [claims[i] for i in members]
    judged = _family([dict(kind=c['kind'], evidence=c['evidence'], p=c['p'],
                           p_floor=c.get('p_floor'), p_min=c['p_min'],
                           seeds=c['seeds'], gates=c['gates'],
                           test=c['test'],
                           if_significant=c['if_significant'])
                      for c in rows])
    for i, c, j in zip(members, rows, judged):
      rendered, _, rest = c['measured'].partition(f'; {c["test"]}: p = ')
      by_rate = rest.partition(BY_RATE)
      out[i].update(p_adjusted=j['p_adjusted'], family_size=j['family_size'],
                    verdict=j['verdict'], measured=rendered + j['tail'] + (
                        by_rate[1] + by_rate[2] if by_rate[1] else ''))
  return out


def benjamini_hochberg(ps) -> list[float]:
  """Benjamini-Hochberg (1995) adjusted p-values, in the input order: the
  false discovery rate over a whole report's tests."""
  ps = np.asarray(ps, float)
  m = ps.size
  if m == 0:
    return []
  order = np.argsort(ps, kind='stable')
  adjusted = np.empty(m)
  running = 1.0
  for rank in range(m - 1, -1, -1):
    i = order[rank]
    running = min(running, ps[i] * m / (rank + 1))
    adjusted[i] = running
  return [float(min(a, 1.0)) for a in adjusted]


# -- what is measured, in words -------------------------------------------------------

def _fmt(values, digits=2) -> str:
  return ' '.join(f'{v:.{digits}f}' for v in values)


def render(c: Claim) -> str:
  """The `measured` text of a claim, from its evidence alone (and, where
  the evidence has them, the verdicts of the smaller budgets)."""
  text = _render(c)
  by_budget = c.evidence.get('by_budget')
  if by_budget:
    text += '; by budget (raw p): ' + ', '.join(
        f'{b}: {v} (p = {stats.fmt_p(p)})' for b, (v, p) in by_budget.items())
  return text


def _render(c: Claim) -> str:
  e = c.evidence
  what = e.get('what', '')
  if c.kind == THRESHOLD:
    v = np.asarray(e['values'], float)
    above = e.get('above', True)
    k = int(np.sum(v > e['threshold'] if above else v < e['threshold']))
    mean, lo, hi = stats.mean_ci95(v, bounds=e.get('bounds', (0.0, 1.0)))
    return (f'{what} per seed {_fmt(v, 3)}: {"above" if above else "below"} '
            f'{e["threshold"]:g} in {k} of {v.size}; median '
            f'{np.median(v):.3f}, mean {mean:.3f} [{lo:.3f}, {hi:.3f}]'
            if v.size else f'{what}: no seed')
  if c.kind == RELIABILITY:
    s = [bool(x) for x in e['successes']]
    k, n, u = sum(s), len(s), int(e.get('undetermined', 0))
    if n + u == 0:
      return what
    shown = (f'; per seed {_fmt(e["values"], e.get("digits", 3))}'
             if 'values' in e else '')
    seeds = (f'{k} of {n} seeds the test can judge ({u} more it cannot)'
             if u else f'{k} of {n} seeds')
    bound = (f'one-sided 95% lower bound on the rate '
             f'{_bound(k, n + u, "lower"):.2f}, ' if n + u else '')
    return (f'{what} in {seeds} ({bound}declared rate '
            f'{e.get("rate", RELIABLE_RATE):g})' + shown)
  if c.kind in (CAPABILITY, IMPOSSIBILITY):
    acc = np.asarray(e['accuracy'], float)
    if acc.size == 0:
      return f'{what}: no seed'
    p, best = _exists(e)
    return (f'{what}: accuracy per seed {_fmt(acc, 3)} on {e["strings"]} '
            f'held-out strings each; null {e["null"]:.3f} '
            f'({e.get("null_name", "chance")}); best seed {acc[best]:.3f}')
  if c.kind == COMPARISON:
    n = comparison_counts(e)
    total = n['wins'] + n['ties'] + n['losses'] + n['censored']
    return (f'{e["x_name"]} ahead in {n["wins"]}, tied in {n["ties"]}, '
            f'behind in {n["losses"]} of {total} seeds'
            + (f', {n["censored"]} tied at the ceiling ({e["ceiling"]:g}: '
               'censored)' if n['censored'] else '')
            + f'; {what} per seed {e["x_name"]} '
            f'{_fmt(e["x"], e.get("digits", 3))}, {e["y_name"]} '
            f'{_fmt(e["y"], e.get("digits", 3))}')
  shows = [bool(x) for x in e['shows']]
  if e.get('exact'):
    return what
  return f'{what} in {sum(shows)} of {len(shows)} seeds'


@functools.lru_cache(maxsize=None)
def _bound(k: int, n: int, side: str) -> float:
  """The exact one-sided 95% Clopper-Pearson bound on a rate (the same few
  (k, n) recur in every family and every simulated run)."""
  if n == 0:
    return math.nan
  if side == 'lower':
    return 0.0 if k == 0 else float(stats.sps().beta.ppf(0.05, k, n - k + 1))
  return stats.rate_upper_bound(k, n, 0.95)
