import jax
import numpy as np
import pytest

from src import streams, tasks


def batch(key, n=512, length=12, num_filler=8):
  return jax.jit(tasks.memory_batch, static_argnums=(1, 2, 3))(
      key, n, length, num_filler)


def test_layout_and_label():
  tokens, first = batch(jax.random.key(0))
  tokens, first = np.asarray(tokens), np.asarray(first)
  assert tokens.shape == (512, 12) and tokens.dtype == np.int32
  np.testing.assert_array_equal(tokens[:, 0], first)  # label = first symbol
  assert set(np.unique(tokens[:, 0])) == {tasks.A, tasks.B}
  assert (tokens[:, -1] == tasks.QUERY).all()
  filler = tokens[:, 1:-1]
  assert filler.min() >= tasks.FIRST_FILLER  # never A, B or the query
  assert filler.max() < tasks.vocab_size(8)
  assert len(np.unique(filler)) == 8  # every filler symbol is used
  assert 0.4 < first.mean() < 0.6  # balanced classes


def test_keys_give_different_strings():
  a, _ = batch(jax.random.key(0))
  b, _ = batch(jax.random.key(1))
  assert (np.asarray(a) != np.asarray(b)).any(axis=1).mean() > 0.99


def test_eval_stream_disjoint_from_training_steps():
  data_key = jax.random.key(7)
  eval_tokens, _ = batch(streams.stream_key(data_key, streams.EVAL_STREAM))
  eval_rows = {tuple(r) for r in np.asarray(eval_tokens)}
  for step in range(0, 2000, 97):
    train_tokens, _ = batch(streams.train_key(data_key, step))
    # Strings of 10 random fillers out of 8 symbols essentially never repeat:
    # sharing the key would make every row equal.
    shared = sum(tuple(r) in eval_rows for r in np.asarray(train_tokens))
    assert shared <= 2
  # Same step, same strings: what makes resuming exact.
  again, _ = batch(streams.train_key(data_key, 97))
  first, _ = batch(streams.train_key(data_key, 97))
  np.testing.assert_array_equal(again, first)


@pytest.mark.parametrize('length', [0, 1, 2])
def test_short_lengths_refused(length):
  with pytest.raises(ValueError, match='length must be >= 3'):
    tasks.memory_batch(jax.random.key(0), 4, length, 8)


def test_minimum_length_three():
  tokens, first = batch(jax.random.key(3), length=3)
  assert tokens.shape == (512, 3)
  assert (np.asarray(tokens[:, 2]) == tasks.QUERY).all()


def test_two_symbol_task():
  tokens, labels = jax.jit(tasks.two_symbol_batch, static_argnums=(1, 2, 3))(
      jax.random.key(0), 512, 12, 6)
  tokens, labels = np.asarray(tokens), np.asarray(labels)
  second = (tokens == tasks.C) | (tokens == tasks.D)
  assert (second.sum(1) == 1).all()  # exactly one second symbol
  assert not second[:, 0].any() and not second[:, -1].any()
  pos = np.asarray(tasks.second_symbol_position(tokens))
  np.testing.assert_array_equal(labels, 2 * tokens[:, 0] +
                                (tokens[np.arange(512), pos] - tasks.C))
  assert (tokens[:, -1] == tasks.QUERY).all()
  decoys = np.isin(tokens[:, 1:-1], [tasks.A, tasks.B])
  assert decoys.any()  # the first symbol is only found by its position
  assert set(np.unique(labels)) == {0, 1, 2, 3}
  assert len(np.unique(pos)) == 10  # every filler position is used


def test_induction_task():
  V, L = 16, 20
  tokens, labels = jax.jit(tasks.induction_batch, static_argnums=(1, 2, 3))(
      jax.random.key(1), 1024, L, V)
  tokens, labels = np.asarray(tokens), np.asarray(labels)
  trigger = tokens[:, -1]
  earlier = tokens[:, :-1] == trigger[:, None]
  assert (earlier.sum(1) == 1).all()  # the trigger appears exactly once before
  p = earlier.argmax(1)
  assert (p <= L - 3).all()
  np.testing.assert_array_equal(labels, tokens[np.arange(1024), p + 1])
  np.testing.assert_array_equal(p, tasks.trigger_position(tokens))
  assert tokens.min() >= 0 and tokens.max() < V
  assert len(np.unique(labels)) == V


def test_hash_generator_is_uniform_and_independent():
  """Chi-square checks of the counter hash that draws every string: symbol
  counts, pairs of neighbouring positions, the same position at consecutive
  steps, and neighbouring seeds' keys. Critical values at p = 1e-4, so a
  sound generator fails this about once in ten thousand runs."""
  n, k = 200_000, 8
  key = streams.stream_key(jax.random.key(5), streams.TRAIN_STREAM)

  def chi2(counts):
    counts = np.asarray(counts, float).ravel()
    expected = counts.sum() / counts.size
    return ((counts - expected) ** 2 / expected).sum()

  x = np.asarray(streams.randint(key, (n,), 0, k))
  assert chi2(np.bincount(x, minlength=k)) < 33.1  # 7 dof
  pairs = np.bincount(x[:-1] * k + x[1:], minlength=k * k)
  assert chi2(pairs) < 103.4  # 63 dof
  a = np.asarray(streams.randint(streams.fold_in(key, 41), (n,), 0, k))
  b = np.asarray(streams.randint(streams.fold_in(key, 42), (n,), 0, k))
  assert chi2(np.bincount(a * k + b, minlength=k * k)) < 103.4
  seeds = jax.random.wrap_key_data(np.array([[0, 7], [0, 8]], np.uint32))
  c = np.asarray(jax.vmap(lambda s: streams.randint(s, (n,), 0, k))(seeds))
  assert chi2(np.bincount(c[0] * k + c[1], minlength=k * k)) < 103.4
  bits = np.asarray(streams.coin(key, (n,)))
  assert abs(bits.mean() - 0.5) < 4.5 * 0.5 / np.sqrt(n)


def test_decoys_put_a_and_b_in_the_filler_and_change_nothing_else():
  key, B, L = jax.random.key(7), 512, 52
  plain, labels = tasks.memory_batch(key, B, L, 8)
  tokens, decoy_labels = tasks.memory_batch(key, B, L, 8, decoys=0.25)
  plain, tokens = np.asarray(plain), np.asarray(tokens)
  # The label, the first symbol and the query are the plain task's.
  np.testing.assert_array_equal(labels, decoy_labels)
  np.testing.assert_array_equal(tokens[:, [0, -1]], plain[:, [0, -1]])
  filler, plain_filler = tokens[:, 1:-1], plain[:, 1:-1]
  decoy = filler != plain_filler
  assert set(np.unique(filler[decoy])) == {tasks.A, tasks.B}
  assert decoy.mean() == pytest.approx(0.25, abs=0.01)
  assert (filler[decoy] == tasks.A).mean() == pytest.approx(0.5, abs=0.02)
  # "Is there an A anywhere" no longer answers: most strings hold both.
  both = ((filler == tasks.A).any(1) & (filler == tasks.B).any(1)).mean()
  assert both > 0.99
  # Without decoys the task and its recipe are what they were.
  assert tasks.memory_task(L, 8).params == {'num_filler': 8}
  assert tasks.memory_task(L, 8, 0.25).params == {'num_filler': 8,
                                                  'decoys': 0.25}


@pytest.mark.parametrize('name, length, params', [
    ('memory', 12, dict(num_filler=8)),
    ('memory', 12, dict(num_filler=8, decoys=0.25)),
    ('two_symbol', 12, dict(num_filler=8)),
    ('induction', 12, dict(vocab=8)),
    ('trigger_induction', 12, dict(vocab=8)),
    ('recall', 24, dict(num_pairs=4, vocab=16)),
    ('mqar', 24, dict(num_pairs=4, vocab=32)),
    ('routing', 12, dict(function='copy', k=4, num_filler=8, tagged=True)),
])
def test_a_draws_first_strings_are_a_smaller_draws(name, length, params):
  """Each string is a hash of the key and its own index, so the first n
  strings of a draw of 4n are the draw of n: the test curve evaluates the
  first chunk of the final test's program's draw
  (`evaluation._test_program`)."""
  task = tasks.make_task(name, length, **params)
  key = jax.random.key(5)
  small, large = task.sample(key, 64), task.sample(key, 256)
  for a, b in zip(small, large):
    np.testing.assert_array_equal(a, b[:64])
