"""Each kind's test on simulated seeds with a known truth.

A test is trusted once it is calibrated: under its null (the truth at the
boundary a direction must not cross) it decides that direction in at most
alpha of the runs, and at the kind's declared effect it decides the truth
often enough (its power). The per-seed evidence is drawn in the shapes real
runs give: bimodal, bounded values (a seed solves or it does not), ties,
ties at the grid's ceiling, n from 4 to 32. `rates` judges simulated claims
with `claims.judge`, the project's own rule, so a change of rule is
calibrated by the same code that the report's verdicts come from.
"""

import dataclasses
import zlib
from typing import Callable

import numpy as np

from src import claims as claims_lib
from src import stats
from src.claims import Claim

STRINGS = 2048  # held-out strings per seed (the runs' default eval_examples)
THRESHOLD = 0.9  # "over 90%": the searchlight's own threshold
NULL = 0.75  # a capability's null (routing's XOR ceiling)
GRID = (10, 20, 50, 100)  # critical distances on the headline's grid
SIZES = (4, 8, 16, 24, 32)  # the seeds the report's parts use


@dataclasses.dataclass(frozen=True)
class Scenario:
  """Per-seed evidence of one kind under one truth, drawn by `draw(rng,
  n)`. `guards`: the direction a verdict must not take in more than alpha
  of the runs (a null), or None for an effect (`expects` is then the
  direction its power is counted for)."""
  kind: str
  name: str
  draw: Callable
  guards: str | None = None
  expects: str | None = None


def _threshold(values, **extra) -> Claim:
  return Claim('simulated: over the threshold in most seeds',
               claims_lib.THRESHOLD, 'simulated',
               dict(values=list(values), threshold=THRESHOLD, above=True,
                    **extra))


def _bimodal_at(rng, n, p_above):
  """Seeds just above the threshold (a solving seed's mass) with chance
  `p_above`, far below otherwise: the bimodal shape of the searchlight."""
  above = rng.random(n) < p_above
  return np.where(above, rng.uniform(THRESHOLD + 1e-3, 1.0, n),
                  rng.uniform(0.2, THRESHOLD - 0.3, n))


def _ceiling_at(rng, n, p_above):
  """Seeds at exactly 1.0 (ties at the ceiling) or spread below."""
  return np.where(rng.random(n) < p_above, 1.0,
                  rng.uniform(0.0, THRESHOLD, n))


def _comparison(x, y, **extra) -> Claim:
  return Claim('simulated: x further than y', claims_lib.COMPARISON,
               'simulated', dict(x=list(x), y=list(y), x_name='x',
                                 y_name='y', **extra))


def _exchangeable_grid(rng, n):
  """Critical distances of two models with the same law (no difference):
  bimodal on the grid, many ties, ties at the ceiling."""
  law = np.array([0.4, 0.1, 0.1, 0.4])
  return (rng.choice(GRID, n, p=law), rng.choice(GRID, n, p=law))


def _solved_or_not(rng, n, p=0.7):
  """Solved (1) or not (0), the same chance for both: McNemar's null."""
  return ((rng.random(n) < p).astype(float), (rng.random(n) < p).astype(
      float))


def _ahead_in(rng, n, share, tie=0.4):
  """x ahead of y in `share` of the pairs that differ; `tie` of the pairs
  tied (both solved or both not)."""
  x, y = np.zeros(n), np.zeros(n)
  tied = rng.random(n) < tie
  both = rng.random(n) < 0.5
  x[tied], y[tied] = both[tied], both[tied]
  wins = rng.random(n) < share
  x[~tied] = wins[~tied]
  y[~tied] = ~wins[~tied]
  return x, y


def _at_least(rng, n, behind):
  """x against y where x falls behind in a share `behind` of the seeds and
  ties (as far as) in the rest."""
  y = np.full(n, 100.0)
  x = np.where(rng.random(n) < behind, 50.0, 100.0)
  return x, y


def _accuracies(rng, n, truth):
  """Per-seed accuracy on STRINGS held-out strings at true rates `truth`."""
  return rng.binomial(STRINGS, np.broadcast_to(truth, (n,))) / STRINGS


def _capability(acc, kind=claims_lib.CAPABILITY) -> Claim:
  return Claim('simulated: can (or cannot)', kind, 'simulated',
               dict(accuracy=list(acc), strings=STRINGS, null=NULL))


def _one_at(rng, n, value, rest):
  truth = np.full(n, rest)
  truth[rng.integers(n)] = value
  return _accuracies(rng, n, truth)


def _reliability(successes) -> Claim:
  return Claim('simulated: always', claims_lib.RELIABILITY, 'simulated',
               dict(successes=[bool(s) for s in successes]))


def _shape(shows) -> Claim:
  return Claim('simulated: the shape', claims_lib.SHAPE, 'simulated',
               dict(shows=[bool(s) for s in shows]))


HELD, NOT = stats.HELD, stats.NOT_HELD
BAR = NULL + claims_lib.IMPOSSIBLE_MARGIN
RATE = claims_lib.RELIABLE_RATE
MARGIN = claims_lib.AS_FAR_MARGIN


def scenarios() -> list[Scenario]:
  """Every kind under its nulls (each direction's boundary) and at its
  declared effect (power.EFFECTS)."""
  S = Scenario
  out = []
  for guards in (HELD, NOT):  # the median exactly at the threshold
    out += [
        S(claims_lib.THRESHOLD, 'bimodal, median at the threshold',
          lambda r, n: _threshold(_bimodal_at(r, n, 0.5)), guards),
        S(claims_lib.THRESHOLD, 'ties at the ceiling, median at the '
          'threshold', lambda r, n: _threshold(_ceiling_at(r, n, 0.5)),
          guards),
        S(claims_lib.THRESHOLD, 'continuous, median at the threshold',
          lambda r, n: _threshold(np.clip(
              THRESHOLD + r.normal(0, 0.05, n), 0, 1)), guards),
        S(claims_lib.COMPARISON, 'exchangeable critical distances (ties, '
          'ceiling ties)', lambda r, n: _comparison(
              *_exchangeable_grid(r, n), ceiling=max(GRID)), guards),
        S(claims_lib.COMPARISON, 'solved or not, the same chance',
          lambda r, n: _comparison(*_solved_or_not(r, n)), guards),
        S(claims_lib.RELIABILITY, f'true rate {RATE}',
          lambda r, n: _reliability(r.random(n) < RATE), guards),
        S(claims_lib.SHAPE, 'the shape in half the seeds',
          lambda r, n: _shape(r.random(n) < 0.5), guards),
    ]
    # "As far as" is behind in at most MARGIN of the seeds: its boundary is
    # the null of each direction.
    out.append(S(claims_lib.COMPARISON, f'as far as: behind in {MARGIN:.0%} '
                 'of the seeds', lambda r, n: _comparison(
                     *_at_least(r, n, MARGIN), at_least=True), guards))
  out += [
      S(claims_lib.CAPABILITY, f'every seed at the null {NULL}',
        lambda r, n: _capability(_accuracies(r, n, NULL)), HELD),
      S(claims_lib.CAPABILITY, f'one seed at the bar {BAR:.2f}, the rest '
        'at the null', lambda r, n: _capability(_one_at(r, n, BAR, NULL)),
        NOT),
      S(claims_lib.IMPOSSIBILITY, f'one seed at the bar {BAR:.2f}, the '
        'rest at the null', lambda r, n: _capability(
            _one_at(r, n, BAR, NULL), claims_lib.IMPOSSIBILITY), HELD),
      S(claims_lib.IMPOSSIBILITY, f'every seed at the null {NULL}',
        lambda r, n: _capability(_accuracies(r, n, NULL),
                                 claims_lib.IMPOSSIBILITY), NOT),
      # The declared effects (power.EFFECTS): what the power plan assumes.
      S(claims_lib.THRESHOLD, 'effect: above in 4 seeds of 5 (bimodal)',
        lambda r, n: _threshold(_bimodal_at(r, n, 0.8)), expects=HELD),
      S(claims_lib.COMPARISON, 'effect: ahead in 4 of 5 pairs that differ',
        lambda r, n: _comparison(*_ahead_in(r, n, 0.8)), expects=HELD),
      S(claims_lib.COMPARISON, 'effect: as far as, never behind',
        lambda r, n: _comparison(*_at_least(r, n, 0.0), at_least=True),
        expects=HELD),
      S(claims_lib.RELIABILITY, 'effect: true rate 0.98',
        lambda r, n: _reliability(r.random(n) < 0.98), expects=HELD),
      S(claims_lib.CAPABILITY, 'effect: half the seeds solve',
        lambda r, n: _capability(_accuracies(
            r, n, np.where(r.random(n) < 0.5, 0.99, NULL))), expects=HELD),
      S(claims_lib.IMPOSSIBILITY, 'effect: every seed at the null',
        lambda r, n: _capability(_accuracies(r, n, NULL),
                                 claims_lib.IMPOSSIBILITY), expects=HELD),
      S(claims_lib.SHAPE, 'effect: the shape in 9 seeds of 10',
        lambda r, n: _shape(r.random(n) < 0.9), expects=HELD),
  ]
  return out


@dataclasses.dataclass(frozen=True)
class Family:
  """A family of claims judged together (Holm, and the tests that cannot
  decide left out), every one under its null: `draw(rng, n)` gives the
  family; `guards`: the direction no claim of it may take in more than
  alpha of the runs (the family-wise error)."""
  name: str
  draw: Callable
  guards: str


def _family_of(*makers):
  """A family drawn by each (count, make) of `makers`: make(rng, n) a
  claim, count of them; all in one family."""
  def draw(rng, n):
    return [make(rng, n) for count, make in makers for _ in range(count)]
  return draw


def _tied_everywhere(rng, n):
  """Both models solve every seed: no pair differs."""
  del rng
  return _comparison(np.ones(n), np.ones(n))


def families() -> list[Family]:
  """Families under their nulls, in the shapes the report's have: the
  routing comparisons (16, six tied in every pair), the gating ones
  (critical distances with ceiling ties), and kinds mixed."""
  out = []
  for guards in (HELD, NOT):
    out += [
        Family('16 comparisons: 6 tied in every pair, 10 solved or not at '
               'the same chance', _family_of(
                   (6, _tied_everywhere),
                   (10, lambda r, n: _comparison(*_solved_or_not(r, n)))),
               guards),
        Family('11 comparisons of exchangeable critical distances (ties, '
               'ceiling ties)', _family_of(
                   (11, lambda r, n: _comparison(*_exchangeable_grid(r, n),
                                                 ceiling=max(GRID)))), guards),
        Family('16 reliabilities at the declared rate (held out of reach '
               'below 14 seeds, did not hold not)', _family_of(
                   (16, lambda r, n: _reliability(r.random(n) < RATE))),
               guards),
        Family('mixed: 3 thresholds at the median, 3 comparisons, 2 of them '
               'tied everywhere', _family_of(
                   (3, lambda r, n: _threshold(_bimodal_at(r, n, 0.5))),
                   (2, _tied_everywhere),
                   (1, lambda r, n: _comparison(*_solved_or_not(r, n)))),
               guards),
    ]
  return out


def family_rates(family: Family, n: int, runs: int = 400,
                 seed: int = 0) -> dict:
  """The share of `runs` simulated families in which some claim was judged
  held, and did not hold (the family-wise error under the null)."""
  rng = np.random.default_rng([seed, n, zlib.crc32(family.name.encode())])
  held = not_held = 0
  for _ in range(runs):
    verdicts = {c.verdict for c in claims_lib.judge(family.draw(rng, n),
                                                    words=False)}
    held += HELD in verdicts
    not_held += NOT in verdicts
  return {'held': held / runs, 'not': not_held / runs, 'runs': runs}


def rates(scenario: Scenario, n: int, runs: int = 400,
          seed: int = 0) -> dict:
  """The share of `runs` simulated claims judged held and did not hold."""
  rng = np.random.default_rng([seed, n, zlib.crc32(scenario.name.encode())])
  verdicts = [claims_lib.judge([scenario.draw(rng, n)],
                               words=False)[0].verdict for _ in range(runs)]
  return {'held': float(np.mean([v == HELD for v in verdicts])),
          'not': float(np.mean([v == NOT for v in verdicts])),
          'runs': runs}


def tolerance(runs: int, alpha: float = stats.ALPHA) -> float:
  """alpha plus three Monte Carlo standard errors: what a calibrated test
  may show under its null in `runs` simulated runs."""
  return alpha + 3 * np.sqrt(alpha * (1 - alpha) / runs)


def table(runs: int = 400, sizes=SIZES) -> str:
  """The calibration table for docs/REFERENCE.md: per kind and truth, the
  share decided in the guarded direction (a null) or the power (an effect)
  at each n."""
  head = ('| kind | truth | decided | ' + ' | '.join(f'n={n}' for n in sizes)
          + ' |\n|---|---|---|' + '---|' * len(sizes))
  lines = [head]
  for s in scenarios():
    which = s.guards or s.expects
    key = 'held' if which == HELD else 'not'
    cells = [f'{rates(s, n, runs)[key]:.3f}' for n in sizes]
    what = (f'{which} (null: at most {tolerance(runs):.3f})' if s.guards
            else f'{which} (power)')
    lines.append(f'| {s.kind} | {s.name} | {what} | ' + ' | '.join(cells)
                 + ' |')
  for f in families():
    key = 'held' if f.guards == HELD else 'not'
    cells = [f'{family_rates(f, n, runs)[key]:.3f}' for n in sizes]
    lines.append(f'| a family | {f.name} | {f.guards} by any (null: at most '
                 f'{tolerance(runs):.3f}) | ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines)


if __name__ == '__main__':  # python -m src.calibration: REFERENCE's table
  print(table())
