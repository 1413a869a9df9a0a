"""When a failure counts as evidence: the gates a claim passes before a
verdict that says a model failed (or cannot) may be reached.

Trained out: over the last doubling of steps, every failing seed's training
loss fell by less than FLAT, where a seed whose accuracy (train
and test) moved by less than ACCURACY_FLAT counts as flat whatever its loss
does: a loss that falls only by growing confident on the strings a seed
already answers right (one head at the routing ceiling) is not learning the
task; and no failure is trained out while other seeds of its group are
still leaving it (more of them solved the task at the end of the doubling
than at its start: a plateau that ends abruptly looks flat until it
ends). Read from the run's curves.csv. A grid: "cannot" is judged only
with each model at its best of several rates, and a failure only where
that best rate is inside the grid (at an end, a rate past it may do
better).
A gate that is not passed leaves its direction inconclusive, with the reason
as `measured` says it (`claims.Claim.gates`).
"""

import numpy as np

from src import stats


FLAT = 0.05  # "flat": the training loss fell by less than 5% over a doubling
# "Stopped moving": the accuracy, train and test, moved by less than two
# strings in a hundred over the doubling (each a mean over the window), and
# the loss fell by less than ACCURACY_LOSS_CAP (a steep fall is learning,
# whatever the accuracy shows yet).
ACCURACY_FLAT = 0.02
ACCURACY_LOSS_CAP = 4 * FLAT


def loss_before(curves, step: int, seeds, column: str = 'train_loss',
                **match) -> dict:
  """Per seed, the mean of `column` over the last tenth of the steps up to
  `step` (at least the last chunk), from the curves.csv rows matching
  `match` (model=..., length=..., learning_rate=...)."""
  out = {}
  for s in seeds:
    chunks = sorted((int(r['step']), float(r[column])) for r in curves
                    if all(str(r[k]) == str(v) for k, v in match.items())
                    and int(r['seed']) == s and int(r['step']) <= step
                    and r.get(column, '') != '')
    if not chunks:
      continue
    window = max(step // 10, step - chunks[-1][0] + 1)
    inside = [v for t, v in chunks if t > step - window] or [chunks[-1][1]]
    out[s] = float(np.mean(inside))
  return out


def trained_out(curves, seeds, step: int, **match) -> dict:
  """The trained-out rule, shared by every verdict that says a model failed:
  over the last doubling of steps (step / 2 to `step`), every one of the
  failing `seeds`' training loss (curves.csv rows matching `match`) fell by
  less than FLAT, a seed whose train and test accuracy both moved by less
  than ACCURACY_FLAT (its loss by less than ACCURACY_LOSS_CAP) counting as a
  fall of 0; and none while more seeds of the rows matching `match` had
  solved the task at `step` than at step / 2 (`escapes`). {flat, fall,
  falls, seeds, step, accuracy_flat: how many seeds so counted, escaped};
  with no seed to judge it is flat (no seed failed), with no curve it is
  not (nothing shows it stopped)."""
  seeds = list(seeds)
  if not seeds:
    return checked([], 0, step)
  half = loss_before(curves, step // 2, seeds, **match)
  end = loss_before(curves, step, seeds, **match)
  falls = {s: (half[s] - end[s]) / half[s] for s in seeds
           if s in half and s in end and half[s] > 0}
  still = [s for s in falls if falls[s] < ACCURACY_LOSS_CAP
           and accuracy_stopped(curves, s, step, **match)]
  out = checked([0.0 if s in still else f for s, f in falls.items()],
                len(seeds), step, escapes(curves, step, **match))
  out['accuracy_flat'] = len(still)
  return out


def escapes(curves, step: int, **match) -> int:
  """How many more seeds of the curves.csv rows matching `match` had solved
  the task (their latest test accuracy at least stats.SOLVED) by `step`
  than by step / 2."""
  def solved_by(t):
    latest = {}
    for r in curves:
      if (r.get('test_accuracy', '') != '' and int(r['step']) <= t
          and all(str(r[k]) == str(v) for k, v in match.items())):
        seen = latest.get(r['seed'])
        if seen is None or int(r['step']) > seen[0]:
          latest[r['seed']] = (int(r['step']), float(r['test_accuracy']))
    return sum(stats.solved(a) for _, a in latest.values())
  return max(0, solved_by(step) - solved_by(step // 2))


def accuracy_stopped(curves, seed: int, step: int, **match) -> bool:
  """Whether seed `seed`'s train and test accuracy (curves.csv) both moved
  by less than ACCURACY_FLAT over the last doubling of steps (False where
  either curve is missing)."""
  for column in ('train_accuracy', 'test_accuracy'):
    half = loss_before(curves, step // 2, [seed], column=column, **match)
    end = loss_before(curves, step, [seed], column=column, **match)
    if seed not in half or seed not in end or not (
        abs(end[seed] - half[seed]) < ACCURACY_FLAT):
      return False
  return True


def checked(falls, seeds: int, step: int, escaped: int = 0) -> dict:
  """The trained-out verdict of per-seed falls (`seeds` judged in all):
  flat when every failing seed's fall is under FLAT (one still learning is
  enough to leave the failure unproven) and no seed of their groups
  `escaped` (`escapes`); `fall` the largest."""
  fall = float(np.max(falls)) if falls else float('nan')
  return {'flat': not seeds or bool(len(falls) == seeds and not escaped
                                    and np.isfinite(fall) and fall < FLAT),
          'fall': fall, 'falls': list(falls), 'seeds': seeds, 'step': step,
          'escaped': escaped}


def last_step(curves, **match) -> int:
  """The last step the curves.csv rows matching `match` reach (0: none)."""
  return max((int(r['step']) for r in curves
              if all(str(r[k]) == str(v) for k, v in match.items())),
             default=0)


def still_learning(check: dict) -> str:
  """What `measured` says of a failure that is not trained out."""
  fall = check['fall']
  flat = check.get('accuracy_flat', 0)
  escaped = check.get('escaped', 0)
  return (f'still learning at {check["step"]} steps: the training loss of '
          f'the {check["seeds"]} failing seeds fell by up to '
          + (f'{100 * fall:.1f}%' if np.isfinite(fall) else 'n/a (no curve)')
          + f' over the last doubling (flat: under {FLAT:.0%}'
          + (f'; {flat} seeds whose accuracy stopped moving counted as 0'
             if flat else '') + ')'
          + (f', and {escaped} more seeds of the group solved the task over '
             'it' if escaped else ''))


def learning_gate(direction: str, check: dict) -> dict:
  """{direction: reason} for a claim whose `direction` says a model failed:
  empty when its failing seeds are trained out (`check`: trained_out's)."""
  return {} if check['flat'] else {direction: still_learning(check)}


ONE_RATE = ('one learning rate: "cannot" needs each model at its best rate '
            'of a grid (--learning_rates)')


def grid_gate(direction: str, rates) -> dict:
  """{direction: reason} for a claim whose `direction` says a model cannot:
  empty when a grid of rates was trained (each group at its best)."""
  return {} if len(rates) > 1 else {direction: ONE_RATE}


def edge_gate(direction: str, rates, chosen) -> dict:
  """{direction: reason} for a claim whose `direction` says a model failed
  at its best rate of a grid: empty unless a rate it failed at (`chosen`:
  its group's selected rate, or those of every group the failure rests on;
  None where unknown) is the grid's smallest or largest, where a rate past
  it, never tried, may do better."""
  chosen = [chosen] if chosen is None or isinstance(chosen, (int, float)) \
      else list(chosen)
  ends = sorted({c for c in chosen if c is not None
                 and not min(rates) < c < max(rates)}) if rates else []
  if len(rates) < 2 or not ends:
    return {}
  return {direction: f'its best rate{"s" if len(ends) > 1 else ""} '
                     f'({", ".join(f"{c:g}" for c in ends)}) '
                     f'{"are" if len(ends) > 1 else "is"} at an end of the '
                     f'grid ({", ".join(f"{r:g}" for r in sorted(rates))}): '
                     'a rate past it, never tried, may do better'}


def merged(*gates: dict) -> dict:
  """Gates on the same claim, each direction's reasons joined: none hides
  another."""
  out = {}
  for g in gates:
    for direction, why in g.items():
      out[direction] = f'{out[direction]}; {why}' if direction in out else why
  return out


def one_rate(gates: dict, direction: str | None = None) -> bool:
  """Whether `gates` (of `direction`, else any) hold the one-rate reason."""
  return any(ONE_RATE in why for d, why in (gates or {}).items()
             if direction in (None, d))
