"""src/stats.py against known answers and scipy.stats."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from src import stats


@pytest.mark.parametrize('lengths_acc,expected', [
    ([(10, 1.0), (20, 1.0), (50, 0.5)], 20),
    ([(20, 1.0), (10, 1.0), (50, 0.5)], 20),  # unsorted (--lengths=20,10)
    ([(20, 0.5), (10, 1.0)], 10),  # unsorted, the longer one fails
    ([(10, 1.0), (20, 0.5), (50, 1.0)], 10),  # a gap: 50 does not count
    ([(10, 0.5), (20, 1.0)], 0),  # fails the shortest: nothing carried
    ([(10, 1.0), (20, float('nan'))], 10),  # NaN is not solved
    ([(10, (0.9 + 1.0) / 2), (20, 0.9)], 10),  # a mean of exactly 0.95
    ([(10, 0.95), (20, 0.9499)], 10),  # >=, not >
    ([(10, 1.0), (20, 1.0)], 20),
])
def test_critical_distance(lengths_acc, expected):
  assert stats.critical_distance(lengths_acc) == expected


def test_mean_of_0_95_lands_below_in_floating_point():
  """The case the rounding allowance is for."""
  mean = float(np.mean(np.float32([0.9, 1.0])))
  assert mean < 0.95 and stats.solved(mean)
  assert not stats.solved(0.9499)
  # The boundary itself reaches (>=, not >).
  assert stats.reaches(0.95 - stats.ROUNDING, 0.95)
  assert not stats.reaches(0.95 - 2 * stats.ROUNDING, 0.95)


@pytest.mark.parametrize('n', [2, 3, 8])
def test_t_interval_matches_scipy(n):
  x = np.linspace(0.2, 0.7, n) ** 2
  mean, lo, hi = stats.mean_ci95(x, bounds=None)
  ref = sps.t.interval(0.95, n - 1, loc=x.mean(), scale=sps.sem(x))
  assert mean == pytest.approx(x.mean())
  assert (lo, hi) == pytest.approx(ref)
  # Clipped to [0, 1] for a bounded quantity, never beyond it.
  _, lo, hi = stats.mean_ci95([0.0, 1.0])
  assert (lo, hi) == (0.0, 1.0)


@pytest.mark.parametrize('k,n', [(0, 2), (1, 3), (8, 8), (3, 8)])
def test_wilson_matches_the_formula(k, n):
  z = sps.norm.ppf(0.975)
  p = k / n
  centre = (p + z * z / (2 * n)) / (1 + z * z / n)
  half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
  assert stats.wilson(k, n) == pytest.approx((centre - half, centre + half),
                                             abs=1e-9)
  lo, hi = stats.wilson(k, n)
  assert 0 <= lo <= p <= hi <= 1


def test_solved_fraction():
  s = stats.solved_fraction([1.0, 0.96, 0.5, 0.949])
  assert (s['k'], s['n'], s['fraction']) == (2, 4, 0.5)
  assert s['ci95'][0] < 0.5 < s['ci95'][1]


@pytest.mark.parametrize('n,coverage_floor', [(2, 0.5), (3, 0.75), (8, 0.95),
                                              (16, 0.95)])
def test_median_interval_coverage_is_exact(n, coverage_floor):
  x = np.arange(n, dtype=float)
  out = stats.median_interval(x)
  lo, hi = out['ci95']
  j = int(lo) + 1  # (x_(j), x_(n+1-j)), 1-based
  assert hi == n - j
  assert out['coverage'] == pytest.approx(1 - 2 * sps.binom.cdf(j - 1, n, 0.5))
  assert out['coverage'] >= coverage_floor
  assert out['median'] == np.median(x)
  if n == 16:  # the narrowest interval with 95% coverage: (x_(4), x_(13))
    assert (lo, hi) == (3, 12)


def test_sign_test():
  x = [20, 50, 50, 100, 200, 200, 50, 50]
  y = [10, 10, 10, 10, 10, 10, 10, 10]
  out = stats.sign_test(x, y)
  assert (out['wins'], out['ties'], out['losses']) == (8, 0, 0)
  assert out['p'] == pytest.approx(2 / 256)  # the smallest with 8 seeds
  out = stats.sign_test([1, 2, 3, 3], [1, 1, 4, 3])
  assert (out['wins'], out['ties'], out['losses']) == (1, 2, 1)
  assert out['p'] == 1.0
  assert stats.sign_test([1, 1], [1, 1])['p'] == 1.0  # all ties: no evidence
  assert stats.sign_test([2] * 6, [1] * 6, 'greater')['p'] == pytest.approx(
      1 / 64)
  with pytest.raises(ValueError):
    stats.sign_test([1, 2], [1])


def test_fisher_and_binomial_match_scipy():
  assert stats.fisher(8, 8, 0, 8) == pytest.approx(
      sps.fisher_exact([[8, 0], [0, 8]]).pvalue)
  assert stats.fisher(8, 8, 0, 8) < 0.001
  assert stats.fisher(4, 8, 4, 8) == pytest.approx(1.0)
  assert stats.binomial(4, 8) == pytest.approx(1.0)
  assert stats.binomial(8, 8) == pytest.approx(2 / 256)
  assert stats.binomial(0, 0) == 1.0


@pytest.mark.parametrize('k,n,bound', [
    (0, 8, 1 - 0.05 ** (1 / 8)),  # 0.312: eight stuck seeds bound little
    (0, 14, 1 - 0.05 ** (1 / 14)),  # 0.193: the fewest below 0.2
    (0, 20, 0.1391),
    (1, 30, 0.1486),  # one escape in 30 can still clear 0.2
    (6, 8, 0.9536),
    (8, 8, 1.0), (0, 0, 1.0),  # nothing bounds it
])
def test_rate_upper_bound_is_clopper_pearson(k, n, bound):
  """One-sided 95% = the upper end of the two-sided 90% exact interval."""
  assert stats.rate_upper_bound(k, n) == pytest.approx(bound, abs=1e-4)
  if 0 < n and k < n:
    assert stats.rate_upper_bound(k, n) == pytest.approx(sps.binomtest(
        k, n).proportion_ci(0.90, method='exact').high)
    # the bound and the test agree: below 0.2 exactly when p < 0.05
    assert (stats.rate_upper_bound(k, n) < 0.2) == (
        stats.rate_below(k, n, 0.2) < 0.05)


def test_trials_needed_and_fewer_than_half():
  assert stats.trials_needed(0.2) == 14  # 0.8^14 = 0.044, 0.8^13 = 0.055
  assert stats.trials_needed(0.25) == 11
  assert stats.rate_below(0, 14, 0.2) == pytest.approx(0.8 ** 14)
  # fewer than half, significantly: 1 of 8 (p = 9/256), not 2 of 8 (37/256)
  assert [stats.most_below_half(n) for n in (4, 5, 8, 16, 19, 20)] == \
      [-1, 0, 1, 4, 5, 5]
  assert stats.fewer_than_half(5, 20) and not stats.fewer_than_half(6, 20)


def test_decay_fits_tell_exponential_from_power_law():
  L = np.array([5, 10, 20, 40, 80])
  exp = stats.decay_fits(L, 0.9 ** L)
  assert exp['better'] == 'exponential'
  assert math.exp(exp['exponential']['slope']) == pytest.approx(0.9)
  power = stats.decay_fits(L, 3.0 / L)
  assert power['better'] == 'power'
  assert power['power']['slope'] == pytest.approx(-1.0)


def _float32(v):  # as the probe measures it: float32, past its floor 0
  return np.asarray(v, np.float32).astype(float)


D = np.arange(200.0)  # distances along one string of L = 200
with np.errstate(divide='ignore'):
  HYPERBOLA = 3.0 / D


@pytest.mark.parametrize('profile,better,slope,last', [
    (0.8 ** D, 'exponential', math.log(0.8), 199),
    (HYPERBOLA, 'power', -1.0, 199),  # d = 0 (1/0) is never fitted
    # Underflowed: 0.6^d falls to 1e-30 at d = 135, float32 to 0 by 180.
    (_float32(0.6 ** D), 'exponential', math.log(0.6), 135),
    # A value past the floor ends the range, whatever follows.
    (np.where(D == 50, 0.0, 0.8 ** D), 'exponential', math.log(0.8), 49),
    (np.where(D == 20, np.nan, HYPERBOLA), 'power', -1.0, 19),
    (np.where(D == 3, np.inf, 0.8 ** D), None, None, 2),  # 2 points: no fit
])
def test_profile_fits_along_one_string(profile, better, slope, last):
  fit = stats.profile_fits(profile)
  assert fit['range'] == [1, last] and fit['points'] == last
  assert fit['better'] == better
  if better:
    assert fit[better]['slope'] == pytest.approx(slope, rel=1e-4)
  else:
    assert fit['exponential'] is None and fit['power'] is None
