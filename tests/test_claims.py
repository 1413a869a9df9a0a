"""The claim type: every kind's test against synthetic per-seed tables with
known answers, Holm within families, Benjamini-Hochberg over a report, the
power plan, and the routing null checked by brute force."""

import itertools

import numpy as np
import pytest
from scipy import optimize
from scipy import stats as sps

from src import claim_text, claims, stats, tasks
from src import power
from src import gates as gates_lib
from src.claims import Claim


def verdict(kind, evidence, gates=None, family='f'):
  c, = claims.judge([Claim('s', kind, family, evidence, gates=gates or {})])
  return c


# -- threshold ------------------------------------------------------------------

@pytest.mark.parametrize('values,expected', [
    ([0.95] * 8, 'held'),  # 8 of 8 above 0.9: p = 1/256
    ([0.96] * 7 + [0.85], 'held'),  # 7 of 8: p = 9/256
    ([0.96] * 7 + [0.3], 'held'),  # "in most seeds": how far under is not read
    ([0.96] * 5 + [0.3] * 3, 'inconclusive'),  # 5 of 8: p = 0.36
    ([0.5] * 8, 'did not hold'),
    ([0.95] * 4, 'inconclusive (underpowered: 4 seeds)'),  # p >= 1/16
    ([0.5] * 4, 'inconclusive (underpowered: 4 seeds)'),  # whichever the lean
])
def test_threshold_is_the_sign_test_of_the_median(values, expected):
  c = verdict(claims.THRESHOLD, dict(values=values, threshold=0.9))
  assert c.verdict == expected, c.measured
  if expected == 'held' and len(set(values)) == 1:
    assert c.p == pytest.approx(0.5 ** 8)


def test_threshold_drops_the_seeds_at_it_and_matches_scipy():
  values = [0.95, 0.97, 0.9, 0.9, 0.2, 0.99, 0.93, 0.91]  # 5 above, 1 below
  assert claims.sign_counts(values, 0.9) == (5, 1)
  assert claims.sign_counts(values, 0.9, above=False) == (1, 5)
  c = verdict(claims.THRESHOLD, dict(values=values, threshold=0.9))
  assert c.p == pytest.approx(sps.binomtest(5, 6, 0.5,
                                            alternative='greater').pvalue)


# -- reliability ------------------------------------------------------------------

@pytest.mark.parametrize('k,n,expected', [
    (24, 24, 'held'),  # 0.8^24 = 0.005
    (23, 24, 'held'),  # P(X >= 23 | 0.8) = 0.033
    (20, 24, 'inconclusive'),
    (8, 8, 'inconclusive (underpowered: 8 seeds)'),  # 0.8^8 = 0.17
    (10, 24, 'did not hold'),
])
def test_reliability_is_a_bound_on_the_share_of_seeds(k, n, expected):
  c = verdict(claims.RELIABILITY, dict(successes=[True] * k + [False] * (n - k)))
  assert c.verdict == expected, c.measured
  assert c.p == pytest.approx(stats.binomial(
      k, n, claims.RELIABLE_RATE, 'greater' if c.if_significant == 'held'
      else 'less'))


def test_reliability_counts_the_undetermined_against_each_direction():
  e = dict(successes=[True] * 7, undetermined=1, rate=0.5)
  c = verdict(claims.RELIABILITY, e)
  assert c.p == pytest.approx(stats.binomial(7, 8, 0.5, 'greater'))
  assert c.seeds == 8 and c.verdict == 'held'
  c = verdict(claims.RELIABILITY, dict(successes=[True] * 2, undetermined=6,
                                       rate=0.5))
  assert c.verdict == 'inconclusive'


# -- capability and impossibility -------------------------------------------------

def test_one_seed_solving_is_a_capability():
  acc = [0.25] * 7 + [1.0]  # one seed of 8 clears the null 0.5
  c = verdict(claims.CAPABILITY, dict(accuracy=acc, strings=1024, null=0.5))
  assert c.verdict == 'held' and c.p == pytest.approx(
      min(1, 8 * sps.binom.sf(1023, 1024, 0.5)))
  # The same seed on 10 strings: 10 of 10 at a null of 0.5 is p = 1/1024,
  # times 8 seeds searched: 0.0078.
  c = verdict(claims.CAPABILITY, dict(accuracy=acc, strings=10, null=0.5))
  assert c.p == pytest.approx(8 / 1024)


def test_the_best_seed_shown_is_the_most_accurate_where_none_clears():
  """Every seed far below the null: each p is 1, and the seed shown is the
  most accurate, in the row and its headline alike."""
  e = dict(accuracy=[0.181, 0.182, 0.17], strings=1024, null=0.5)
  c = verdict(claims.IMPOSSIBILITY, e)
  assert 'best seed 0.182' in c.measured
  assert claim_text.headline(dict(kind=claims.IMPOSSIBILITY, evidence=e,
                              p=c.p)) == 'best seed 0.182, null 0.500'


def test_a_long_fit_is_cut_between_items():
  what = ', '.join(f'model_{i} L^1.00' for i in range(12)) + '; more'
  said = claim_text.headline(dict(kind=claims.SHAPE, p=None, evidence=dict(
      exact=True, shows=[True], what=what)))
  assert len(said) <= 95 and said.endswith(', ...')
  assert said[:-5] in what and what[len(said) - 5:].startswith(', ')


@pytest.mark.parametrize('accuracy,gates,expected', [
    ([0.75] * 10, {}, 'held'),  # at the null, far below null + 0.05
    ([0.75] * 9 + [1.0], {}, 'did not hold'),  # one seed computes
    ([0.78] * 10, {}, 'inconclusive'),  # within the margin: cannot tell
    ([0.75] * 10, {'held': 'one learning rate'}, 'inconclusive'),
])
def test_impossibility_needs_every_seed_below_the_null(accuracy, gates,
                                                       expected):
  c = verdict(claims.IMPOSSIBILITY,
              dict(accuracy=accuracy, strings=1024, null=0.75), gates)
  assert c.verdict == expected, c.measured
  if gates:
    assert 'not held: one learning rate' in c.measured


def test_a_gate_on_the_way_the_data_lean_is_said_though_not_significant():
  # 12 of 17 against the declared rate 0.8: leaning did not hold, p 0.24.
  e = dict(successes=[True] * 12 + [False] * 5)
  c = verdict(claims.RELIABILITY, e, {'did not hold': 'still learning'})
  assert c.verdict == 'inconclusive'
  assert c.measured.endswith('did not hold is out of reach here too: still '
                             'learning')
  assert 'out of reach' not in verdict(claims.RELIABILITY, e).measured


def test_gates_on_one_claim_keep_every_reason():
  from src import gates
  both = gates.merged({'held': 'a'}, {}, {'held': 'b', 'did not hold': 'c'})
  assert both == {'held': 'a; b', 'did not hold': 'c'}
  assert gates.one_rate(gates.merged({'held': gates.ONE_RATE}, {'held': 'x'}))
  assert not gates.one_rate({'did not hold': gates.ONE_RATE}, 'held')


def test_capability_did_not_hold_only_trained_out_at_a_grid():
  e = dict(accuracy=[0.2] * 8, strings=1024, null=0.5)
  assert verdict(claims.CAPABILITY, e).verdict == 'did not hold'
  gated = verdict(claims.CAPABILITY, e,
                  gates_lib.grid_gate('did not hold', (3e-3,)))
  assert gated.verdict == 'inconclusive'


# -- comparison -------------------------------------------------------------------

@pytest.mark.parametrize('x,y,extra,expected', [
    ([50] * 8, [20] * 8, {}, 'held'),  # ahead in 8 of 8: p = 1/256
    # Ties are no evidence either way: nothing is concluded, though 10
    # seeds could have (not underpowered: no pair differs).
    ([1.0] * 10, [1.0] * 10, {}, 'inconclusive'),
    ([1.0] * 10, [1.0] * 10, {'ceiling': 1.0}, 'inconclusive'),  # censored
    # 5 ahead, 3 tied (not at the ceiling): decided on the 5, p = 1/32.
    ([100] * 5 + [50] * 3, [50] * 8, {'ceiling': 100}, 'held'),
    ([100] * 5 + [50] * 3, [50] * 8, {}, 'held'),
    ([100] * 4 + [20] * 4, [50] * 8, {}, 'inconclusive'),  # 4 and 4
    ([20] * 8, [50] * 8, {}, 'did not hold'),
    # "As far as": none of 16 behind, against a margin of 1 in 5: p = 0.8^16.
    ([50] * 16, [50] * 16, {'at_least': True}, 'held'),
    ([50] * 8, [50] * 8, {'at_least': True},
     'inconclusive (underpowered: 8 seeds)'),  # 0.8^8 = 0.17 at best
    ([20] * 16, [50] * 16, {'at_least': True}, 'did not hold'),
])
def test_comparison_decides_on_the_pairs_that_differ(x, y, extra, expected):
  c = verdict(claims.COMPARISON, dict(x=x, y=y, x_name='a', y_name='b',
                                      **extra))
  assert c.verdict == expected, c.measured


def test_comparison_of_solved_or_not_is_exact_mcnemar():
  """Discordant pairs alone: 9 solved by a only, 1 by b only, 14 tied."""
  x = [1] * 9 + [0] * 1 + [1] * 7 + [0] * 7
  y = [0] * 9 + [1] * 1 + [1] * 7 + [0] * 7
  c = verdict(claims.COMPARISON, dict(x=x, y=y, x_name='a', y_name='b'))
  assert c.p == pytest.approx(sps.binomtest(9, 10, 0.5,
                                            alternative='greater').pvalue)
  assert c.verdict == 'held'


def test_ties_at_a_ceiling_must_not_decide_the_verdict():
  """3 ahead, 5 tied at the longest length: held if those 5 resolved as
  ahead, not if they resolved as behind: inconclusive, and said."""
  e = dict(x=[100] * 5 + [50] * 3, y=[100] * 5 + [20] * 3, x_name='a',
           y_name='b', ceiling=100)
  c = verdict(claims.COMPARISON, e)
  assert claims.comparison_counts(e) == dict(wins=3, ties=0, losses=0,
                                              censored=5, ahead=3)
  assert c.verdict == 'inconclusive' and 'censored' in c.measured
  # 8 ahead, 4 tied at the ceiling: 8 of 8 judged is p = 1/256, but 8 of 12
  # (were the 4 to resolve behind) is p = 0.073: inconclusive.
  e = dict(x=[50] * 8 + [100] * 4, y=[20] * 8 + [100] * 4, x_name='a',
           y_name='b', ceiling=100)
  assert verdict(claims.COMPARISON, e).verdict == 'inconclusive'


# -- shape, and counted claims -------------------------------------------------------

def test_shape_counts_the_seeds_and_a_counted_claim_has_no_test():
  assert verdict(claims.SHAPE, dict(shows=[True] * 8)).verdict == 'held'
  c = verdict(claims.SHAPE, dict(shows=[True], exact=True, what='counted'))
  assert c.verdict == 'held' and c.p is None and c.measured == 'counted'


# -- families ---------------------------------------------------------------------

def test_holm_within_each_family_only():
  reliable = lambda k: Claim('s', claims.THRESHOLD, 'f',
                             dict(values=[1.0] * k, threshold=0.5))
  out = claims.judge([reliable(8), reliable(8), reliable(5),
                      Claim('t', claims.THRESHOLD, 'g',
                            dict(values=[1.0] * 5, threshold=0.5))])
  assert [c.family_size for c in out] == [3, 3, 3, 1]
  assert out[3].verdict == 'held'  # 1/32 alone
  # Holm's last step multiplies by 1: 1/32 after two of 3/256 is held; a
  # significant adjusted p stands, whatever the family's strictest step
  # could have allowed 5 seeds.
  assert out[2].verdict == 'held'
  assert out[2].p_adjusted == pytest.approx(1 / 32)
  assert out[0].p_adjusted == pytest.approx(3 / 256)
  assert 'family of 3' in out[0].measured
  # Three of 5 seeds: each 3 x 1/32 > 0.05 at best, whatever the data.
  three = claims.judge([reliable(5) for _ in range(3)])
  assert [c.verdict for c in three] == ['inconclusive (underpowered: 5 seeds)'] * 3


def test_holm_decides_on_the_adjusted_p():
  """7 of 8 seeds: p = 9/256 = 0.035 alone (held); two such tests in one
  family: Holm makes both 0.07 (inconclusive)."""
  seven = lambda: Claim('s', claims.SHAPE, 'f', dict(shows=[True] * 7 + [False]))
  alone, = claims.judge([seven()])
  assert alone.verdict == 'held'
  pair = claims.judge([seven(), seven()])
  assert [c.verdict for c in pair] == ['inconclusive'] * 2
  assert pair[0].p_adjusted == pytest.approx(2 * 9 / 256)


def test_benjamini_hochberg_by_hand():
  # sorted 0.01, 0.02, 0.03, 0.2: 4 x 0.01 = 0.04, 2 x 0.02 = 0.04, 4/3 x
  # 0.03 = 0.04, 0.2; step-up minimum from the top.
  assert claims.benjamini_hochberg([0.03, 0.01, 0.2, 0.02]) == pytest.approx(
      [0.04, 0.04, 0.2, 0.04])
  # Step-up: 0.03 x 3/2 = 0.045 is capped by the larger p's 0.04.
  assert claims.benjamini_hochberg([0.01, 0.04, 0.03]) == pytest.approx(
      [0.03, 0.04, 0.04])
  assert claims.benjamini_hochberg([]) == []


# -- power -------------------------------------------------------------------------

def test_power_at_the_declared_effects():
  # Reliability at 0.8, a true 0.98: at 24 seeds 23 or more must succeed.
  assert power.power(claims.RELIABILITY, 24) == pytest.approx(
      sps.binom.sf(22, 24, 0.98))
  assert power.power(claims.RELIABILITY, 8) == 0.0  # 8 of 8: p = 0.17
  # Comparison, a true 4 in 5 ahead, against 1/2.
  need = next(k for k in range(17) if stats.binomial(k, 16, 0.5,
                                                     'greater') < 0.05)
  assert power.power(claims.COMPARISON, 16) == pytest.approx(
      sps.binom.sf(need - 1, 16, 0.8))
  # Holm's strictest step: a family of 4 halves what 8 seeds can do.
  assert power.power(claims.SHAPE, 8, 4) < power.power(claims.SHAPE, 8)
  assert power.power(claims.IMPOSSIBILITY, 8, gated=True) == 0.0
  # Threshold: the sign test at a true 4 in 5 past the threshold.
  assert power.power(claims.THRESHOLD, 16) == pytest.approx(
      sps.binom.sf(need - 1, 16, 0.8))


def test_the_plan_reads_the_claims_it_will_judge():
  planned = [Claim('a', claims.RELIABILITY, 'f', dict(successes=[False] * 24)),
             Claim('b', claims.IMPOSSIBILITY, 'g',
                   dict(accuracy=[0.5] * 8, strings=64, null=0.5),
                   gates=gates_lib.grid_gate('held', (3e-3,)))]
  rows = power.plan(planned)
  assert [(r['family'], r['seeds']) for r in rows] == [('f', 24), ('g', 8)]
  assert rows[0]['power'] == pytest.approx(power.power(claims.RELIABILITY,
                                                        24))
  assert rows[1]['power'] == 0.0 and 'learning_rates' in rows[1]['why']


# -- the routing null ------------------------------------------------------------------

def brute_force_ceiling(function, k):
  """The largest set of (a, b) pairs some additive score f_c(a) + g_c(b)
  gets right: every subset, largest first, checked by an LP for a margin."""
  pairs = [(a, b) for a in range(k) for b in range(k)]
  label = lambda a, b: tasks.ROUTING_FUNCTIONS[function](a, b, k)
  n = 2 * k * k
  for size in range(len(pairs), 0, -1):
    for subset in itertools.combinations(pairs, size):
      rows = []
      for a, b in subset:
        y = label(a, b)
        for c in range(k):
          if c != y:
            row = np.zeros(n)
            row[y * k + a] += 1
            row[k * k + y * k + b] += 1
            row[c * k + a] -= 1
            row[k * k + c * k + b] -= 1
            rows.append(-row)  # -(score_y - score_c) <= -1
      result = optimize.linprog(np.zeros(n), A_ub=np.array(rows),
                                b_ub=-np.ones(len(rows)),
                                bounds=[(-50, 50)] * n)
      if result.status == 0:
        return size / len(pairs)
  return 0.0


@pytest.mark.parametrize('function,k', [('xor', 2), ('sum', 3), ('copy', 3)])
def test_the_routing_ceiling_is_the_brute_force_one(function, k):
  assert tasks.routing_ceiling(function, k) == pytest.approx(
      brute_force_ceiling(function, k))


def test_the_routing_ceilings_the_claims_use():
  assert tasks.routing_ceiling('xor', 2) == 0.75
  assert tasks.routing_ceiling('sum', 5) == pytest.approx(19 / 25)
  assert tasks.routing_ceiling('copy', 5) == 1.0


@pytest.mark.parametrize('kind, evidence, key', [
    (claims.COMPARISON, dict(x=[1], y=[0], x_name='a', y_name='b',
                             atleast=True), 'atleast'),  # misspelt at_least
    (claims.THRESHOLD, dict(values=[0.9]), 'threshold'),  # missing
    (claims.RELIABILITY, dict(successes=[True], ceiling=1.0), 'ceiling'),
])
def test_evidence_is_typed_a_wrong_key_is_a_type_error(kind, evidence, key):
  with pytest.raises(TypeError, match=key):
    Claim('s', kind, 'f', evidence)


def test_a_claim_not_applicable_is_tested_nowhere():
  """A claim on a model that did not learn the task: `not applicable`, no
  p, and out of its family's Holm (the other member keeps its size 1)."""
  judged = claims.judge([
      Claim('s', claims.THRESHOLD, 'f', dict(values=[1.0] * 8, threshold=0.5),
            not_applicable='not applicable: it did not learn (0.5 0.5)'),
      Claim('t', claims.THRESHOLD, 'f', dict(values=[1.0] * 8,
                                             threshold=0.5))])
  na, held = judged
  assert na.verdict == stats.NOT_APPLICABLE and na.p is None
  assert na.measured == 'not applicable: it did not learn (0.5 0.5)'
  assert held.verdict == stats.HELD and held.family_size == 1
  assert held.to_json()['role'] == claims.LESSON


def test_a_role_is_one_of_three():
  with pytest.raises(ValueError, match='role'):
    Claim('s', claims.THRESHOLD, 'f', dict(values=[1.0], threshold=0.5),
          role='decorative')


def test_a_family_is_judged_across_the_runs_that_measured_it():
  """The same family in two runs (two parts of a report): each held alone
  at p = 1/32, Holm over both makes it 1/16: inconclusive, and
  underpowered (5 seeds in a family of two could not do better); a family
  of one run only is as it was."""
  five = lambda family, what='': Claim('s', claims.SHAPE, family,
                                       dict(shows=[True] * 5, what=what))
  part_a = [c.to_json() for c in claims.judge([five('f'), five('g')])]
  part_b = [c.to_json() for c in claims.judge([five('f', 'again')])]
  assert all(c['verdict'] == 'held' for c in part_a + part_b)
  together = claims.judge_together(part_a + part_b)
  f = [c for c in together if c['family'] == 'f']
  assert [c['verdict'] for c in f] == ['inconclusive (underpowered: 5 seeds)'] * 2
  assert all(c['p_adjusted'] == pytest.approx(1 / 16) for c in f)
  assert all('Holm-adjusted 0.062 (family of 2)' in c['measured'] for c in f)
  g, = [c for c in together if c['family'] == 'g']
  assert g['verdict'] == 'held' and g['measured'] == part_a[1]['measured']


def test_judged_together_keeps_what_follows_the_test_and_old_verdicts():
  """A part's `measured` ends with its verdicts by rate: kept after the new
  adjustment. A summary written before claims recorded their gates is kept
  as judged (a gate it had cannot be read back)."""
  five = lambda: Claim('s', claims.SHAPE, 'f', dict(shows=[True] * 5))
  a, b = (c.to_json() for c in claims.judge([five(), five()]))
  a['measured'] += claims.BY_RATE + '0.001 held, 0.003 inconclusive'
  old = dict(b, verdict='held (as an old part judged it)')
  del old['gates']
  together = claims.judge_together([a, old])
  assert together[0]['measured'].endswith(
      claims.BY_RATE + '0.001 held, 0.003 inconclusive')
  assert together[0]['family_size'] == 1  # the old claim is not re-judged
  assert together[1] == old


def test_a_test_that_cannot_decide_is_never_decided():
  """Excluded from Holm (no pair differs), a claim has no adjusted p and
  no verdict of a direction, whatever its raw p."""
  tied = Claim('t', claims.COMPARISON, 'f',
               dict(x=[1.0] * 8, y=[1.0] * 8, x_name='x', y_name='y'))
  c, = claims.judge([tied])
  assert c.verdict == 'inconclusive' and c.p_adjusted is None
  assert 'no pair differs' in c.measured
