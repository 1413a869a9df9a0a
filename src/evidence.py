"""What a claim of each kind is judged on: one dataclass per kind, each
option documented where it is defined.

A `claims.Claim` keeps its evidence as the plain dict summary.json stores,
and checks it against its kind's class as it is made (`check`): a misspelt
or missing key is a `TypeError` there, not a silent default in the test.
"""

import dataclasses

# Fixed before any run (claims.py's rules read them from here).
RELIABLE_RATE = 0.8  # "always": at least 4 seeds in 5
IMPOSSIBLE_MARGIN = 0.05  # "cannot": every seed within this of the null


@dataclasses.dataclass(frozen=True)
class Threshold:
  """'Over 90% of the weight' in most seeds."""
  values: list  # per seed
  threshold: float
  above: bool = True  # past the threshold is above it (False: below it)
  bounds: tuple = (0.0, 1.0)  # the values' range, for the 95% interval
  what: str = ''  # what the values are, in words


@dataclasses.dataclass(frozen=True)
class Reliability:
  """'Always': the share of seeds that do it against `rate`."""
  successes: list  # per seed: did it
  rate: float = RELIABLE_RATE  # the share declared before the run
  undetermined: int = 0  # seeds that can be neither (counted against it)
  values: list | None = None  # per seed, shown beside the count
  digits: int = 3  # of the values shown
  what: str = ''


@dataclasses.dataclass(frozen=True)
class Capability:
  """'Can': the best seed on held-out strings against the null."""
  accuracy: list  # per seed
  strings: int  # held-out strings each seed was tested on
  null: float  # what the claim's opposite allows
  null_name: str = 'chance'  # the null, in words
  what: str = ''


@dataclasses.dataclass(frozen=True)
class Impossibility(Capability):
  """'Cannot': every seed below null + margin (and trained out)."""
  margin: float = IMPOSSIBLE_MARGIN


@dataclasses.dataclass(frozen=True)
class Comparison:
  """'X further than Y': paired by seed, decided on the pairs that differ."""
  x: list  # per seed, the first
  y: list  # per seed, the second, on the same strings
  x_name: str
  y_name: str
  higher: bool = True  # ahead is higher (False: lower)
  ceiling: float | None = None  # ties here are censored, not evidence
  at_least: bool = False  # 'as far as': non-inferiority, ties count
  digits: int = 3
  what: str = ''


@dataclasses.dataclass(frozen=True)
class Shape:
  """'Dies away exponentially': per seed, whether the fit shows the shape."""
  shows: list  # per seed
  exact: bool = False  # counted, not sampled: the rule decides, no test
  test: str | None = None  # an exact claim's rule, in words
  what: str = ''


BY_KIND = {'threshold': Threshold, 'reliability': Reliability,
           'capability': Capability, 'impossibility': Impossibility,
           'comparison': Comparison, 'shape': Shape}
# Set after a claim is made (gating): the verdicts of smaller budgets.
ANNEXES = ('by_budget',)


def check(kind: str, evidence: dict) -> None:
  """A TypeError naming the key when `evidence` is not what `kind` takes."""
  fields = {k: v for k, v in evidence.items() if k not in ANNEXES}
  try:
    BY_KIND[kind](**fields)
  except TypeError as e:
    raise TypeError(f'{kind} evidence: {e}') from None
