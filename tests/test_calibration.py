"""Every kind's test proven on known truth (src/calibration.py): under its
null it decides the guarded direction in at most alpha of the simulated
runs (plus Monte Carlo error), at every n the report uses; at its declared
effect it decides often enough to be worth running (power at 32 seeds)."""

import pytest

from src import calibration

RUNS = 300
NULLS = [s for s in calibration.scenarios() if s.guards]
EFFECTS = [s for s in calibration.scenarios() if s.expects]


@pytest.mark.parametrize('scenario', NULLS,
                         ids=[f'{s.kind}: {s.name} ({s.guards})'
                              for s in NULLS])
def test_under_its_null_a_kind_decides_at_most_alpha(scenario):
  key = 'held' if scenario.guards == calibration.HELD else 'not'
  decided = {n: calibration.rates(scenario, n, RUNS)[key]
             for n in calibration.SIZES}
  bound = calibration.tolerance(RUNS)
  assert all(v <= bound for v in decided.values()), (decided, bound)


@pytest.mark.parametrize('scenario', EFFECTS,
                         ids=[f'{s.kind}: {s.name}' for s in EFFECTS])
def test_at_its_declared_effect_a_kind_has_power(scenario):
  key = 'held' if scenario.expects == calibration.HELD else 'not'
  assert calibration.rates(scenario, 32, RUNS)[key] >= 0.8
