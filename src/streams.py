"""The data streams: counter-based random draws and the key of each stream.

Strings are drawn from a counter-based hash of the key's two words and each
element's index (`lowbias32`, a bijective 32-bit mixer), not from
`jax.random`: the same determinism (every string is a function of seed,
stream, step and position), one fused elementwise op that compiles in a
fraction of threefry's time in every program that draws data
(docs/ENGINEERING.md). Parameters are still initialised with `jax.random`.
"""

import math

import jax
import jax.numpy as jnp


# Independent data streams drawn from one seed's data key: training, the
# final test, the experiments' probes, the test curve during training, and
# the validation strings a learning rate is selected on.
TRAIN_STREAM, EVAL_STREAM, PROBE_STREAM, CURVE_STREAM = 0, 1, 2, 3
VALIDATION_STREAM = 4


def _mix(x):
  """lowbias32 (C. Wellons): a bijection on uint32 with strong avalanche."""
  x = x ^ (x >> 16)
  x = x * jnp.uint32(0x7FEB352D)
  x = x ^ (x >> 15)
  x = x * jnp.uint32(0x846CA68B)
  return x ^ (x >> 16)


def fold_in(key: jax.Array, n) -> jax.Array:
  """A new key for each integer `n` (like `jax.random.fold_in`)."""
  w = jax.random.key_data(key)
  n = jnp.asarray(n).astype(jnp.uint32)
  a = _mix(w[..., 0] ^ _mix(n + jnp.uint32(0x9E3779B9)))
  b = _mix(w[..., 1] + a)
  return jax.random.wrap_key_data(jnp.stack([a, b], -1))


def split(key: jax.Array, num: int) -> list[jax.Array]:
  return [fold_in(key, 0x51ED0000 + i) for i in range(num)]


def random_bits(key: jax.Array, shape) -> jax.Array:
  """uint32 words, one per element, each a hash of the key and its index."""
  w = jax.random.key_data(key)
  index = jnp.arange(math.prod(shape), dtype=jnp.uint32).reshape(shape)
  return _mix(_mix(index ^ w[..., 0]) + w[..., 1])


def randint(key: jax.Array, shape, low: int, high):
  """Integers in [low, high) (bias below (high - low) / 2**32)."""
  span = (jnp.asarray(high) - low).astype(jnp.uint32)
  return (low + random_bits(key, shape) % span).astype(jnp.int32)


def coin(key: jax.Array, shape) -> jax.Array:
  """0 or 1 with probability 1/2 each (the top bit)."""
  return (random_bits(key, shape) >> 31).astype(jnp.int32)


def stream_key(data_key: jax.Array, stream: int) -> jax.Array:
  """Key of one data stream; training folds the step in on top of it."""
  return fold_in(data_key, stream)


def train_key(data_key: jax.Array, step) -> jax.Array:
  """Training strings at `step`: a resumed run draws exactly the same ones."""
  return fold_in(stream_key(data_key, TRAIN_STREAM), step)


def curve_key(data_key: jax.Array, step) -> jax.Array:
  """Fresh test strings for the test curve at `step` (never trained on)."""
  return fold_in(stream_key(data_key, CURVE_STREAM), step)
