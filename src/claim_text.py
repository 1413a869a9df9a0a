"""A judged claim in a few words: its test's name and the one or two
numbers behind its verdict (its summary.json entry), for the scorecard,
the printed verdict lines and TensorBoard's claims table; the whole is
`claims.render`'s."""

import numpy as np

from src import stats
from src.claims import (CAPABILITY, COMPARISON, IMPOSSIBILITY, RELIABILITY,
                        SHAPE, THRESHOLD, comparison_counts)


def claim_setting(claim: dict) -> str:
  """The setting a claim was judged at, as text: ' (L=20) (decoys=0.25)'."""
  return ''.join(f' ({name}={claim[k]})' for k, name in
                 (('length', 'L'), ('d_model', 'd_model'),
                  ('decoys', 'decoys')) if k in claim)


# Each kind's test in a few words (its `test` says it whole).
TEST_NAMES = {
    THRESHOLD: 'sign test of the median',
    RELIABILITY: 'binomial bound on the share of seeds',
    CAPABILITY: 'binomial, best seed (Bonferroni)',
    IMPOSSIBILITY: 'binomial, every seed (intersection-union)',
    COMPARISON: 'sign test on the pairs that differ',
    SHAPE: 'binomial on the seeds that show it',
}


def test_name(c: dict) -> str:
  """A judged claim's test in a few words: counted, none, or its kind's."""
  if c.get('p') is None:
    return 'counted, not sampled' if c.get('verdict') != stats.NOT_APPLICABLE \
        else 'none: not applicable'
  if c.get('kind') == COMPARISON and (c.get('evidence') or {}).get('at_least'):
    return 'binomial bound on the share behind'
  return TEST_NAMES.get(c.get('kind'), c.get('test', ''))


def headline(c: dict) -> str:
  """The one or two numbers behind a judged claim (its summary.json entry),
  for a scorecard."""
  e, kind = c.get('evidence') or {}, c.get('kind')
  if kind == RELIABILITY:
    k = sum(bool(x) for x in e.get('successes', []))
    n = len(e.get('successes', [])) + int(e.get('undetermined', 0))
    return f'{k} of {n} seeds' if n else 'no seed'
  if kind == THRESHOLD and e.get('values'):
    return (f'median {np.median(e["values"]):.3g} against '
            f'{e["threshold"]:g}')
  if kind == COMPARISON and 'x' in e:
    n = comparison_counts(e)
    total = n['wins'] + n['ties'] + n['losses'] + n['censored']
    said = 'not behind' if e.get('at_least') else 'ahead'
    return (f'{e["x_name"]} {said} in {n["ahead"]} of {total}'
            + (f', {n["censored"]} censored' if n['censored'] else ''))
  if kind in (CAPABILITY, IMPOSSIBILITY) and e.get('accuracy'):
    return (f'best seed {max(e["accuracy"]):.3f}, null {e["null"]:.3f}')
  if kind == SHAPE and e.get('exact'):
    said = str(e.get('what', '')).split(';')[0]
    return said if len(said) <= 90 else said[:said.rfind(', ', 0, 90)] + ', ...'
  if kind == SHAPE and 'shows' in e:
    return f'{sum(bool(x) for x in e["shows"])} of {len(e["shows"])} seeds'
  return ''
