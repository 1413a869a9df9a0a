import jax
import jax.numpy as jnp
import numpy as np
import pytest

from src import tasks


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
  eval_tokens, _ = batch(tasks.stream_key(data_key, tasks.EVAL_STREAM))
  eval_rows = {tuple(r) for r in np.asarray(eval_tokens)}
  for step in range(0, 2000, 97):
    train_tokens, _ = batch(tasks.train_key(data_key, step))
    # Strings of 10 random fillers out of 8 symbols essentially never repeat:
    # sharing the key would make every row equal.
    shared = sum(tuple(r) in eval_rows for r in np.asarray(train_tokens))
    assert shared <= 2
  # Same step, same strings: what makes resuming exact.
  again, _ = batch(tasks.train_key(data_key, 97))
  first, _ = batch(tasks.train_key(data_key, 97))
  np.testing.assert_array_equal(again, first)


@pytest.mark.parametrize('length', [0, 1, 2])
def test_short_lengths_refused(length):
  with pytest.raises(ValueError, match='length must be >= 3'):
    tasks.memory_batch(jax.random.key(0), 4, length, 8)


def test_minimum_length_three():
  tokens, first = batch(jax.random.key(3), length=3)
  assert tokens.shape == (512, 3)
  assert (np.asarray(tokens[:, 2]) == tasks.QUERY).all()
