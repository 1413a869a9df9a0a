"""Zoology's MQAR generator (`tasks.mqar_batch`) against an independent
numpy implementation of the published distribution (zoology/data/
multiquery_ar.py's algorithm: numpy's choice without replacement with the
power-law weights): the layout, distinct keys and values, the labels, and
the law of the query slots and of the key-to-query lag."""

import jax
import numpy as np
import pytest
from scipy import stats as sps

from src import tasks


def numpy_gaps(n, length, pairs, power_a, rng):
  """The query slots as Zoology draws them, one string at a time."""
  space = (length - 2 * pairs) // 2
  p = power_a * np.arange(1, space + 1) ** (power_a - 1)
  p = p / p.sum()
  return np.stack([rng.choice(space, size=pairs, replace=False, p=p)
                   for _ in range(n)])


def jax_gaps(tokens, labels, pairs):
  """The slot of each pair's query, in the pairs' order."""
  out = np.zeros((len(tokens), pairs), int)
  for b, (t, l) in enumerate(zip(tokens, labels)):
    for pos in np.nonzero(l >= 0)[0]:
      j, = np.nonzero(t[:2 * pairs:2] == t[pos])[0]
      out[b, j] = (pos - 2 * pairs) // 2
  return out


@pytest.fixture(scope='module')
def draw():
  L, P, V = 64, 4, 8192
  tokens, labels = jax.jit(tasks.mqar_batch, static_argnums=(1, 2, 3, 4))(
      jax.random.key(3), 6000, L, P, V)
  return L, P, V, np.asarray(tokens), np.asarray(labels)


def test_layout_and_labels(draw):
  L, P, V, tokens, labels = draw
  keys, values = tokens[:, 0:2 * P:2], tokens[:, 1:2 * P:2]
  assert ((keys >= 1) & (keys < V // 2)).all()
  assert ((values >= V // 2) & (values < V)).all()
  for row in (keys, values):  # distinct within each string
    assert (np.sort(row, 1)[:, 1:] != np.sort(row, 1)[:, :-1]).all()
  asked = labels >= 0
  assert (asked.sum(1) == P).all() and not asked[:, :2 * P].any()
  assert not asked[:, 2 * P + 1::2].any()  # queries at even offsets only
  rest = tokens[:, 2 * P:].copy()
  rest[asked[:, 2 * P:]] = 0
  assert (rest == 0).all()  # the filler everywhere else, after each query too
  for t, l in zip(tokens[:500], labels[:500]):
    for pos in np.nonzero(l >= 0)[0]:
      j, = np.nonzero(t[:2 * P:2] == t[pos])[0]
      assert l[pos] == t[2 * j + 1]  # the value of that key's pair


def test_query_slots_follow_zoologys_law(draw):
  """Chi-square tests of homogeneity against numpy's sampler: the slot of
  the first pair's query, of the last, and of all of them (p > 1e-4)."""
  L, P, V, tokens, labels = draw
  ours = jax_gaps(tokens, labels, P)
  theirs = numpy_gaps(len(ours), L, P, tasks.MQAR_POWER_A,
                      np.random.default_rng(0))
  space = (L - 2 * P) // 2
  for a, b in ((ours[:, 0], theirs[:, 0]), (ours[:, -1], theirs[:, -1]),
               (ours.ravel(), theirs.ravel())):
    table = np.stack([np.bincount(a, minlength=space),
                      np.bincount(b, minlength=space)])
    table = table[:, table.sum(0) > 0]
    assert sps.chi2_contingency(table)[1] > 1e-4
  # The law favours the slots near the pairs: the first is the likeliest.
  assert np.bincount(ours.ravel()).argmax() == 0


def test_the_lag_as_zoology_has_it():
  """At (L, P) = (256, 16), the median distance from a key to its query is
  50 positions under Zoology's law (uniform slots would give about 128)."""
  L, P = 256, 16
  tokens, labels = tasks.mqar_batch(jax.random.key(4), 1500, L, P, 8192)
  gaps = jax_gaps(np.asarray(tokens), np.asarray(labels), P)
  lag = 2 * P + 2 * gaps - 2 * np.arange(P)
  theirs = numpy_gaps(1500, L, P, tasks.MQAR_POWER_A,
                      np.random.default_rng(1))
  their_lag = 2 * P + 2 * theirs - 2 * np.arange(P)
  assert np.median(their_lag) == pytest.approx(50, abs=3)
  assert np.median(lag) == pytest.approx(np.median(their_lag), abs=3)
  assert sps.mannwhitneyu(lag.ravel(), their_lag.ravel()).pvalue > 1e-4


@pytest.mark.parametrize('length, pairs, vocab, message', [
    (63, 4, 8192, 'must be even'), (64, 4, 64, 'must exceed the length'),
    (64, 17, 8192, 'need length >= 68'), (64, 8, 16, 'must exceed')])
def test_impossible_strings_refused(length, pairs, vocab, message):
  with pytest.raises(ValueError, match=message):
    tasks.make_task('mqar', length, num_pairs=pairs, vocab=vocab)
