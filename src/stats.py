"""The statistics behind every verdict: the seed is the unit.

Accuracy per seed is bimodal (a seed solves a length or sits at chance), so
the summaries here count seeds: solved fractions with Wilson intervals,
per-seed critical distances with their median and an order-statistic
interval, exact paired sign tests, Fisher's exact test, and a binomial test.
Continuous measurements (attention mass, sensitivities) get a Student-t
interval on the mean. Everything exact comes from `scipy.stats`.

A verdict is one of `held`, `did not hold` and `inconclusive` (with
`(underpowered: n seeds)` where held was out of reach at n seeds); which
test decides a claim is its kind's (`src/claims.py`).
"""

import functools
import math

import numpy as np


def sps():
  """scipy.stats, imported when a test first needs it: it takes about a
  second, which every run.py start (and --help) would otherwise pay."""
  from scipy import stats as sps_
  return sps_


SOLVED = 0.95  # a seed "solved" a length at this test accuracy or above
ALPHA = 0.05  # significance level of every test behind a verdict
# Accuracies are k / n in float32; a mean of exactly 0.95 may land a rounding
# error below it. Anything within this of the threshold counts as reaching it.
ROUNDING = 1e-6

HELD, NOT_HELD, INCONCLUSIVE = 'held', 'did not hold', 'inconclusive'
NOT_APPLICABLE = 'not applicable'  # judged on a model that did not learn


def reaches(value, threshold: float) -> bool:
  """value >= threshold, allowing for float rounding; NaN never reaches."""
  return bool(np.isfinite(value) and value >= threshold - ROUNDING)


def solved(accuracy, threshold: float = SOLVED) -> bool:
  return reaches(accuracy, threshold)


def solving(who: str, per_seed: list[dict]) -> tuple[list[dict], str]:
  """A claim about how a model solves the task is judged on the seeds that
  solved it: those of `per_seed` (each with its test `accuracy`), and the
  `not_applicable` text where none did ('' where some did)."""
  kept = [p for p in per_seed if solved(p['accuracy'])]
  return kept, '' if kept else (
      f'not applicable: {who} did not learn the task (test accuracy per '
      'seed ' + ' '.join(f'{p["accuracy"]:.3f}' for p in per_seed)
      + f', none >= {SOLVED})')


# -- proportions -------------------------------------------------------------------

def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
  """Wilson score interval for k successes in n (nan, nan for n = 0)."""
  if n == 0:
    return math.nan, math.nan
  ci = sps().binomtest(int(k), int(n)).proportion_ci(confidence,
                                                    method='wilson')
  return float(ci.low), float(ci.high)


def solved_fraction(accuracies, threshold: float = SOLVED) -> dict:
  """How many seeds solved: {k, n, fraction, ci95} (Wilson)."""
  k = sum(solved(a, threshold) for a in accuracies)
  n = len(accuracies)
  lo, hi = wilson(k, n)
  return {'k': k, 'n': n, 'fraction': k / n if n else math.nan,
          'ci95': [lo, hi]}


def fisher(k1: int, n1: int, k2: int, n2: int,
           alternative: str = 'two-sided') -> float:
  """Fisher's exact test of k1/n1 against k2/n2 (p-value); `alternative`
  'greater' asks whether the first fraction is the larger."""
  table = [[k1, n1 - k1], [k2, n2 - k2]]
  return float(sps().fisher_exact(table, alternative=alternative).pvalue)


def binomial(k: int, n: int, p: float = 0.5,
             alternative: str = 'two-sided') -> float:
  """Exact binomial test of k successes in n against rate p (1 for n = 0)."""
  return _binomial(int(k), int(n), float(p), alternative)


@functools.lru_cache(maxsize=None)
def _binomial(k: int, n: int, p: float, alternative: str) -> float:
  # The same few (k, n) recur in every family and every simulated run
  # (src/calibration.py): scipy's test, once each.
  if n == 0:
    return 1.0
  return float(sps().binomtest(k, n, p, alternative=alternative).pvalue)


def rate_upper_bound(k: int, n: int, confidence: float = 0.95) -> float:
  """Exact (Clopper-Pearson) one-sided upper confidence bound on a rate
  with k events in n independent trials: the rate at which k or fewer
  would happen with probability 1 - confidence. 1 - (1 - confidence)^(1/n)
  for k = 0; 1 for k = n or n = 0 (nothing bounds it)."""
  if n == 0 or k >= n:
    return 1.0
  return float(sps().beta.ppf(confidence, k + 1, n - k))


def rate_below(k: int, n: int, rate: float) -> float:
  """p of the exact one-sided binomial test that the rate is below `rate`
  (k events in n): P(k or fewer | rate). p < alpha exactly when
  rate_upper_bound(k, n, 1 - alpha) < rate; 1 for n = 0."""
  return float(sps().binom.cdf(k, n, rate)) if n else 1.0


def trials_needed(rate: float, alpha: float = ALPHA) -> int:
  """The fewest trials whose one-sided bound can fall below `rate` at all
  (no event in any): the smallest n with (1 - rate)^n < alpha."""
  return math.floor(math.log(alpha) / math.log(1 - rate)) + 1


def fewer_than_half(k: int, n: int, alpha: float = ALPHA) -> bool:
  """k of n is significantly fewer than half (exact one-sided binomial
  test against 1/2, p < alpha)."""
  return n > 0 and binomial(k, n, 0.5, 'less') < alpha


def most_below_half(n: int, alpha: float = ALPHA) -> int:
  """The largest k that fewer_than_half(k, n) accepts (-1: none, n < 5 at
  alpha 0.05)."""
  return max((k for k in range(n + 1) if fewer_than_half(k, n, alpha)),
             default=-1)


# -- paired comparisons --------------------------------------------------------------

def sign_test(x, y, alternative: str = 'two-sided') -> dict:
  """Exact sign test of paired values: seed i of x against seed i of y.
  Ties are dropped. 'greater' asks whether x tends to exceed y.
  Returns {wins, ties, losses, p} (wins: x > y)."""
  x, y = np.asarray(x, float), np.asarray(y, float)
  if x.shape != y.shape:
    raise ValueError(f'paired samples differ in size: {x.shape} vs {y.shape}')
  wins, losses = int(np.sum(x > y)), int(np.sum(x < y))
  return {'wins': wins, 'ties': int(x.size - wins - losses), 'losses': losses,
          'p': binomial(wins, wins + losses, 0.5, alternative)}


# -- critical distance -------------------------------------------------------------------

def critical_distance(length_accuracy, threshold: float = SOLVED) -> int:
  """The largest tested L such that every tested L' <= L is solved
  (accuracy >= threshold); 0 if the shortest tested length is not. Lengths
  may come in any order; NaN counts as not solved; a length solved after a
  failure (a gap) does not count."""
  best = 0
  for length, accuracy in sorted(length_accuracy):
    if not reaches(accuracy, threshold):
      break
    best = length
  return best


def median_interval(values, confidence: float = 0.95) -> dict:
  """Median and a distribution-free interval for it from order statistics:
  the narrowest symmetric (x_(j), x_(n+1-j)) whose exact coverage under
  Binomial(n, 1/2) is at least `confidence`. With too few seeds for that
  coverage (n < 6 at 95%) it is (min, max), and `coverage` says what that
  is. Works on ordered data such as critical distances."""
  x = np.sort(np.asarray(values, float))
  n = x.size
  if n == 0:
    return {'median': math.nan, 'ci95': [math.nan, math.nan],
            'coverage': math.nan}
  j, coverage = 1, 1 - 2 * sps().binom.cdf(0, n, 0.5)
  while j + 1 <= n // 2:
    c = 1 - 2 * sps().binom.cdf(j, n, 0.5)  # coverage of (x_(j+1), x_(n-j))
    if c < confidence:
      break
    j, coverage = j + 1, c
  return {'median': float(np.median(x)), 'ci95': [float(x[j - 1]),
                                                   float(x[n - j])],
          'coverage': float(coverage)}


# -- continuous measurements ---------------------------------------------------------

def mean_ci95(values, bounds=(0.0, 1.0)) -> tuple[float, float, float]:
  """Mean and Student-t 95% interval over seeds (the mean alone for one),
  clipped to the quantity's `bounds` (None: unbounded). NaNs are dropped."""
  x = np.asarray(values, np.float64)
  x = x[np.isfinite(x)]
  if x.size == 0:
    return math.nan, math.nan, math.nan
  mean = float(x.mean())
  if x.size == 1:
    return mean, mean, mean
  half = float(sps().t.ppf(0.975, x.size - 1)) * float(x.std(ddof=1)) / \
      math.sqrt(x.size)
  lo, hi = bounds if bounds else (-math.inf, math.inf)
  return mean, max(mean - half, lo), min(mean + half, hi)


# Exponential against power law (`decay_fits`): two parameters each, so their
# residuals tell them apart only from three points on (two fit both exactly).
FIT_POINTS = 3


def decay_fits(x, values) -> dict:
  """Least-squares fits of log(value) against x (a length, or a distance
  along one string: exponential decay) and against log x (power law), each
  with two parameters, so their residual sums of squares compare directly.
  Returns the slopes, the residuals and which fits better."""
  x = np.asarray(x, float)
  y = np.log(np.maximum(np.asarray(values, float), 1e-300))
  out = {}
  for name, t in (('exponential', x), ('power', np.log(x))):
    coef, residual, *_ = np.polyfit(t, y, 1, full=True)
    out[name] = {'slope': float(coef[0]),
                 'rss': float(residual[0]) if residual.size else 0.0}
  out['better'] = ('exponential' if out['exponential']['rss']
                   < out['power']['rss'] else 'power')
  return out


# A sensitivity at or below this is not fitted: float32's smallest normal
# number is 1.2e-38, and a gradient that has come within a few orders of it
# has lost digits (or flushed to 0) on the way back.
FLOOR = 1e-30


def fits_above_floor(x, values, *, floor: float = FLOOR) -> dict:
  """`decay_fits` over the unbroken run of `values` from the first (at
  ascending `x`) that are finite and above `floor`: past the first that
  underflowed, nothing further is trusted. Adds 'points', the run's length;
  with fewer than FIT_POINTS, 'better' is None and nothing is fitted."""
  v = np.asarray(values, float)
  bad = ~(np.isfinite(v) & (v > floor))
  points = int(np.argmax(bad)) if bad.any() else bad.size
  if points < FIT_POINTS:
    return {'points': points, 'exponential': None, 'power': None,
            'better': None}
  return {'points': points, **decay_fits(np.asarray(x, float)[:points],
                                         v[:points])}


def decays(fit) -> bool:
  """A fit shows exponential decay: the exponential fits better than the
  power law, and falls (a seed with no fit does not)."""
  return fit['better'] == 'exponential' and fit['exponential']['slope'] < 0


def profile_fits(values, *, floor: float = FLOOR, start: int = 1) -> dict:
  """`fits_above_floor` of a profile along one string, `values[d]` at
  distance d from the output, from distance `start` on (d = 0 is the query
  itself, log 0 has no power law). Adds 'range' [first, last] distance."""
  v = np.asarray(values, float)[start:]
  fit = fits_above_floor(np.arange(start, start + v.size), v, floor=floor)
  return {'range': [start, start + fit['points'] - 1], **fit}


def loglog_slope(x, y) -> float:
  """Least-squares slope of log y on log x: the exponent of a power law."""
  x, y = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
  return float(np.polyfit(x, y, 1)[0]) if len(x) > 1 else math.nan


# -- families of tests -------------------------------------------------------------

def holm(ps) -> list[float]:
  """Holm's step-down adjusted p-values (Holm 1979), in the input order:
  the k-th smallest of m is max over j <= k of (m - j + 1) p_(j), capped at
  1. Rejecting where the adjusted p < alpha keeps the family-wise error at
  alpha."""
  ps = np.asarray(ps, float)
  m = ps.size
  order = np.argsort(ps, kind='stable')
  adjusted = np.empty(m)
  running = 0.0
  for rank, i in enumerate(order):
    running = max(running, min(1.0, (m - rank) * ps[i]))
    adjusted[i] = running
  return [float(a) for a in adjusted]


def underpowered(n: int) -> str:
  return f'{INCONCLUSIVE} (underpowered: {n} seeds)'


def fmt_p(p: float) -> str:
  return 'n/a' if not np.isfinite(p) else (f'{p:.3f}' if p >= 0.001
                                           else f'{p:.1e}')
