"""The power plan, before the run: the chance that each claim says its
direction at its kind's declared effect, from the same `claims.Claim`
objects the run will judge (built on placeholder evidence of the run's
shape): what `--only_check_args` and the start of a run print, and what
`--exp=all` reads to tell a powered part's inconclusive from an unpowered
one's."""

from src import gates as gates_lib
from src import stats
from src.claims import (AS_FAR_MARGIN, CAPABILITY, COMPARISON,
                        IMPOSSIBILITY, RELIABILITY, RELIABLE_RATE, THRESHOLD,
                        SHAPE)

# The effects the power plan assumes, one per kind, fixed before any run.
EFFECTS = {
    THRESHOLD: 'past the threshold in 4 seeds of 5',
    RELIABILITY: 'a true rate of 0.98 (one seed in 50 fails)',
    CAPABILITY: 'half the seeds succeed',
    IMPOSSIBILITY: 'every seed at the null, trained out',
    COMPARISON: 'the first ahead in 4 seeds of 5, behind in the fifth',
    SHAPE: 'the shape in 9 seeds of 10',
}
AS_FAR_EFFECT = 'never behind (as far as)'
POWER_WANTED = 0.8


def power(kind: str, n: int, family_size: int = 1, *,
          rate: float = RELIABLE_RATE, alpha: float = stats.ALPHA,
          gated: bool = False, at_least: bool = False) -> float:
  """The chance that a claim of `kind` on `n` seeds says its direction at
  the kind's declared effect (EFFECTS), at Holm's strictest step (alpha /
  family_size). `gated`: the direction needs what one run cannot give (a
  rate grid for "cannot"): 0. `at_least`: an "as far as" comparison, held
  on the share of seeds behind (never behind: held where n seeds can)."""
  if gated or n == 0:
    return 0.0
  a = alpha / family_size
  if kind == THRESHOLD:
    return _binomial_power(n, 0.5, 0.8, a)
  if kind == RELIABILITY:
    return _binomial_power(n, rate, 0.98, a)
  if kind == CAPABILITY:
    return 1 - 0.5 ** n
  if kind == IMPOSSIBILITY:
    return 1.0
  if kind == COMPARISON and at_least:
    return float(stats.rate_below(0, n, AS_FAR_MARGIN) < a)
  if kind == COMPARISON:
    return _binomial_power(n, 0.5, 0.8, a)
  return _binomial_power(n, 0.5, 0.9, a)


def _binomial_power(n: int, null: float, true: float, alpha: float) -> float:
  """P(the exact one-sided binomial test against `null` rejects) at a true
  rate `true`."""
  need = next((k for k in range(n + 1)
               if stats.binomial(k, n, null, 'greater') < alpha), None)
  return 0.0 if need is None else float(stats.sps().binom.sf(need - 1, n, true))


def plan(claims: list) -> list[dict]:
  """Per family and kind: the seeds, the family's size and the power at the
  kind's declared effect. `claims`: placeholder claims (their evidence has
  the run's seeds, its values are not read)."""
  sizes = {}
  for c in claims:
    sizes[c.family] = sizes.get(c.family, 0) + 1
  out, seen = [], set()
  for c in claims:
    if c.evidence.get('exact'):  # counted: nothing to plan
      continue
    key = (c.family, c.kind, c.seeds, tuple(sorted(c.gates)))
    if key in seen:
      continue
    seen.add(key)
    # One rate is known before the run; a failure still learning is not.
    gated = gates_lib.one_rate(c.gates, stats.HELD)
    out.append(dict(family=c.family, kind=c.kind, seeds=c.seeds,
                    family_size=sizes[c.family],
                    power=power(c.kind, c.seeds, sizes[c.family],
                                rate=c.evidence.get('rate', RELIABLE_RATE),
                                gated=gated,
                                at_least=bool(c.evidence.get('at_least'))),
                    effect=(AS_FAR_EFFECT if c.evidence.get('at_least')
                            else EFFECTS[c.kind]),
                    why=gates_lib.ONE_RATE if gated else ''))
  return out
