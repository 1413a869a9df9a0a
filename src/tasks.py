"""Task generators: pure JAX, jittable, keyed by typed PRNG keys.

Shape legend: B batch, L sequence length.

The memory task (the lesson's panel): position 0 holds `A` or `B`, positions
1..L-2 hold neutral filler drawn at random, position L-1 holds the query
marker, and the label is the first symbol (0 for `A`, 1 for `B`).
"""

import jax
import jax.numpy as jnp

A, B, QUERY = 0, 1, 2  # token ids of the two first symbols and the query marker
FIRST_FILLER = 3  # filler ids are FIRST_FILLER .. FIRST_FILLER + num_filler - 1
MIN_LENGTH = 3  # first symbol, at least one filler, query

# Independent data streams drawn from one seed's data key.
TRAIN_STREAM, EVAL_STREAM, PROBE_STREAM = 0, 1, 2


def vocab_size(num_filler: int) -> int:
  return FIRST_FILLER + num_filler


def check_length(length: int) -> None:
  if length < MIN_LENGTH:
    raise ValueError(
        f'memory task length must be >= {MIN_LENGTH} (first symbol, filler,'
        f' query), got {length}')


def memory_batch(key: jax.Array, batch_size: int, length: int,
                 num_filler: int) -> tuple[jax.Array, jax.Array]:
  """Returns (tokens_BxL int32, first_symbol_B int32 in {0: A, 1: B})."""
  check_length(length)
  key_symbol, key_filler = jax.random.split(key)
  first_symbol = jax.random.bernoulli(key_symbol, 0.5, (batch_size,))
  first_symbol = first_symbol.astype(jnp.int32)
  filler = jax.random.randint(key_filler, (batch_size, length - 2),
                              FIRST_FILLER, FIRST_FILLER + num_filler,
                              dtype=jnp.int32)
  query = jnp.full((batch_size, 1), QUERY, jnp.int32)
  tokens = jnp.concatenate([first_symbol[:, None], filler, query], axis=1)
  return tokens, first_symbol


def stream_key(data_key: jax.Array, stream: int) -> jax.Array:
  """Key of one data stream; training folds the step in on top of it."""
  return jax.random.fold_in(data_key, stream)


def train_key(data_key: jax.Array, step) -> jax.Array:
  """Training strings at `step`: a resumed run draws exactly the same ones."""
  return jax.random.fold_in(stream_key(data_key, TRAIN_STREAM), step)
