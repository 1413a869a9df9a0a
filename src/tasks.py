"""Task generators: pure JAX, jittable, keyed by typed PRNG keys.

Shape legend: B batch, L sequence length.

The strings are drawn by `src/streams.py` (counter-based, on the device).

The memory task (the lesson's panel): position 0 holds `A` or `B`, positions
1..L-2 hold neutral filler drawn at random, position L-1 holds the query
marker, and the label is the first symbol (0 for `A`, 1 for `B`).
"""

import contextlib
import dataclasses
import functools
import os
import sys
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from src import streams

A, B, QUERY = 0, 1, 2  # token ids of the two first symbols and the query marker
DECOY_KEY = 0xDEC0  # folded into a batch key for the decoys' own draws
FIRST_FILLER = 3  # memory task: filler ids FIRST_FILLER .. FIRST_FILLER + num_filler - 1
MIN_LENGTH = 3  # first symbol, at least one filler, query

def vocab_size(num_filler: int) -> int:
  return FIRST_FILLER + num_filler


def check_length(length: int) -> None:
  if length < MIN_LENGTH:
    raise ValueError(
        f'memory task length must be >= {MIN_LENGTH} (first symbol, filler,'
        f' query), got {length}')


def memory_batch(key: jax.Array, batch_size: int, length: int,
                 num_filler: int, decoys: float = 0.0
                 ) -> tuple[jax.Array, jax.Array]:
  """Returns (tokens_BxL int32, first_symbol_B int32 in {0: A, 1: B}).

  decoys > 0: each filler position holds A or B (even odds) with that
  probability, independently; the label is still the symbol at position 0,
  so "is there an A anywhere" no longer answers it. decoys = 0 draws the
  same strings as before the option existed (the decoys have their own
  keys)."""
  check_length(length)
  key_symbol, key_filler = streams.split(key, 2)
  first_symbol = streams.coin(key_symbol, (batch_size,))
  filler = streams.randint(key_filler, (batch_size, length - 2),
                           FIRST_FILLER, FIRST_FILLER + num_filler)
  if decoys:
    key_where, key_which = streams.split(streams.fold_in(key, DECOY_KEY), 2)
    shape = (batch_size, length - 2)
    # random_bits are uniform on 2^32: a decoy where they fall below it.
    where = streams.random_bits(key_where, shape) < jnp.uint32(
        min(int(decoys * 2**32), 2**32 - 1))
    filler = jnp.where(where, streams.coin(key_which, shape), filler)
  query = jnp.full((batch_size, 1), QUERY, jnp.int32)
  tokens = jnp.concatenate([first_symbol[:, None], filler, query], axis=1)
  return tokens, first_symbol


# -- two relations at once (heads) ---------------------------------------------
# Tokens: A, B, QUERY as above; C and D the second symbols; then neutral filler.
C, D = 3, 4
FIRST_PAIR_FILLER = 5


def two_symbol_vocab_size(num_filler: int) -> int:
  return FIRST_PAIR_FILLER + num_filler


def two_symbol_batch(key, batch_size: int, length: int, num_filler: int):
  """Position 0 holds A or B; one of C or D sits at a random position in
  1..L-2; the filler is neutral symbols plus A and B decoys, so the first
  symbol can only be found by its position while the second can only be found
  by its content. Label = 2 * first (A=0, B=1) + second (C=0, D=1).

  Returns (tokens_BxL, labels_B).
  """
  if length < 4:
    raise ValueError(f'two-symbol task length must be >= 4, got {length}')
  k_first, k_second, k_pos, k_fill = streams.split(key, 4)
  first = streams.coin(k_first, (batch_size,))
  second = streams.coin(k_second, (batch_size,))
  pos = streams.randint(k_pos, (batch_size,), 1, length - 1)
  # Filler draws from the neutral symbols and the two decoys A and B.
  draw = streams.randint(k_fill, (batch_size, length), 0, num_filler + 2)
  filler = jnp.where(draw < 2, draw, FIRST_PAIR_FILLER + draw - 2)
  positions = jnp.arange(length)[None, :]
  tokens = jnp.where(positions == pos[:, None], C + second[:, None], filler)
  tokens = tokens.at[:, 0].set(first).at[:, -1].set(QUERY)
  return tokens.astype(jnp.int32), 2 * first + second


def second_symbol_position(tokens_BxL):
  return jnp.argmax((tokens_BxL == C) | (tokens_BxL == D), axis=1)


# -- induction -------------------------------------------------------------------

def induction_batch(key, batch_size: int, length: int, vocab: int):
  """Random tokens; the last token (the trigger) occurs exactly once before,
  at position p in 0..L-3; the label is the token at p + 1.

  Returns (tokens_BxL, labels_B).
  """
  if length < 4:
    raise ValueError(f'induction task length must be >= 4, got {length}')
  k_trigger, k_pos, k_rest = streams.split(key, 3)
  trigger = streams.randint(k_trigger, (batch_size, 1), 0, vocab)
  pos = streams.randint(k_pos, (batch_size, 1), 0, length - 2)
  rest = streams.randint(k_rest, (batch_size, length), 0, vocab - 1)
  rest = rest + (rest >= trigger)  # every other token differs from the trigger
  positions = jnp.arange(length)[None, :]
  tokens = jnp.where((positions == pos) | (positions == length - 1), trigger,
                     rest)
  labels = jnp.take_along_axis(tokens, pos + 1, axis=1)[:, 0]
  return tokens.astype(jnp.int32), labels.astype(jnp.int32)


def trigger_induction_batch(key, batch_size: int, length: int, vocab: int):
  """The Mamba paper's induction heads (Gu & Dao 2023, sec. 4.1.2, after
  H3's): random tokens 0..vocab-1; a special trigger token, id `vocab`,
  occurs once at a position p in 0..L-3 and again at L-1; the label is the
  token at p + 1. Vocabulary: vocab + 1 tokens.

  Returns (tokens_BxL, labels_B).
  """
  if length < 4:
    raise ValueError(f'induction task length must be >= 4, got {length}')
  k_pos, k_rest = streams.split(key, 2)
  pos = streams.randint(k_pos, (batch_size, 1), 0, length - 2)
  rest = streams.randint(k_rest, (batch_size, length), 0, vocab)
  positions = jnp.arange(length)[None, :]
  tokens = jnp.where((positions == pos) | (positions == length - 1), vocab,
                     rest)
  labels = jnp.take_along_axis(tokens, pos + 1, axis=1)[:, 0]
  return tokens.astype(jnp.int32), labels.astype(jnp.int32)


def trigger_position(tokens_BxL):
  """Where the trigger occurred before the end."""
  return jnp.argmax(tokens_BxL[:, :-1] == tokens_BxL[:, -1:], axis=1)


# -- multi-query associative recall (Zoology) ----------------------------------
# Tokens: keys 0..K-1, values K..K+V-1 (K = V = (vocab - 1) // 2), and one
# neutral filler token, vocab - 1.

def recall_vocab(vocab: int) -> tuple[int, int]:
  """(num_keys, filler id) of a recall vocabulary of `vocab` tokens."""
  return (vocab - 1) // 2, vocab - 1


def check_recall(length: int, num_pairs: int, vocab: int) -> None:
  num_keys, _ = recall_vocab(vocab)
  if num_pairs > num_keys:
    raise ValueError(f'recall task: {num_pairs} pairs need distinct keys, '
                     f'but vocab {vocab} has {num_keys} keys (vocab must be '
                     f'>= {2 * num_pairs + 1})')
  if length < 4 * num_pairs:
    raise ValueError(f'recall task: {num_pairs} pairs need length >= '
                     f'{4 * num_pairs} (the pairs, then a key and its value '
                     f'per query), got {length}')


def _first(key, shape, count):
  """Per row, `count` distinct indices in 0..shape[-1]-1, in random order."""
  return jnp.argsort(streams.random_bits(key, shape), axis=-1)[..., :count]


def recall_batch(key, batch_size: int, length: int, num_pairs: int,
                 vocab: int):
  """Searchlight's associative recall, a variant of Zoology's MQAR
  (`mqar_batch` is Zoology's own): positions 0..2P-1 hold P pairs `key
  value` (distinct keys, values drawn with replacement); the rest of the
  string is two-token slots, P of them (chosen uniformly) holding a query
  `key value` for every key once, in random order, the others one neutral
  filler token. The label at a query's key is its value (0..V-1); every
  other position is -1 (nothing asked). It differs from Zoology's in three
  ways: values may repeat, the query slots are uniform (Zoology's follow a
  power law, most near the pairs), and the answer follows each query (in
  Zoology's, the filler does).

  Returns (tokens_BxL, labels_BxL).
  """
  check_recall(length, num_pairs, vocab)
  B, P = batch_size, num_pairs
  K, filler = recall_vocab(vocab)
  slots = (length - 2 * P) // 2
  k_keys, k_values, k_slots, k_order = streams.split(key, 4)
  keys_BxP = _first(k_keys, (B, K), P)
  values_BxP = streams.randint(k_values, (B, P), 0, K)
  slot_BxP = jnp.sort(_first(k_slots, (B, slots), P), axis=-1)
  order_BxP = _first(k_order, (B, P), P)  # pair asked in each query slot
  query_BxP = 2 * P + 2 * slot_BxP  # position of each query's key
  rows = jnp.arange(B)[:, None]
  asked_keys = jnp.take_along_axis(keys_BxP, order_BxP, axis=1)
  asked_values = jnp.take_along_axis(values_BxP, order_BxP, axis=1)
  tokens = jnp.full((B, length), filler, jnp.int32)
  tokens = tokens.at[:, 0:2 * P:2].set(keys_BxP)
  tokens = tokens.at[:, 1:2 * P:2].set(K + values_BxP)
  tokens = tokens.at[rows, query_BxP].set(asked_keys)
  tokens = tokens.at[rows, query_BxP + 1].set(K + asked_values)
  labels = jnp.full((B, length), -1, jnp.int32).at[rows, query_BxP].set(
      asked_values)
  return tokens.astype(jnp.int32), labels.astype(jnp.int32)
# -- Zoology's MQAR, as published (Arora et al. 2023) -------------------------
# Tokens as zoology/data/multiquery_ar.py lays them out (HazyResearch/zoology):
# 0 the filler, keys 1..V/2-1, values V/2..V-1; the labels are token ids
# (the paper's head reads the whole vocabulary, tied to the embeddings).
MQAR_POWER_A = 0.01  # the query gaps' power law, Zoology's Figure 2 setting


def check_mqar(length: int, num_pairs: int, vocab: int) -> None:
  if length % 2:
    raise ValueError(f'mqar task: the length must be even, got {length}')
  if vocab <= length:
    raise ValueError(f'mqar task: the vocabulary ({vocab}) must exceed the '
                     f'length ({length}), as Zoology asserts')
  if 4 * num_pairs > length:
    raise ValueError(f'mqar task: {num_pairs} pairs need length >= '
                     f'{4 * num_pairs} (the pairs, then a query slot each), '
                     f'got {length}')
  if num_pairs > vocab // 2 - 1:
    raise ValueError(f'mqar task: {num_pairs} pairs need distinct keys; '
                     f'vocabulary {vocab} has {vocab // 2 - 1}')


def mqar_gap_weights(space: int, power_a: float) -> np.ndarray:
  """Zoology's query-gap distribution over slots 0..space-1: p(i) ~ (i +
  1)^(a - 1), normalised (most queries near the pairs)."""
  p = power_a * np.arange(1, space + 1) ** (power_a - 1)
  return p / p.sum()


def _uniform(key, shape):
  """Floats in (0, 1), 24 bits."""
  bits = streams.random_bits(key, shape) >> 8
  return (bits.astype(jnp.float32) + 0.5) / 2**24


def mqar_batch(key, batch_size: int, length: int, num_pairs: int,
               vocab: int, power_a: float = MQAR_POWER_A):
  """Multi-query associative recall as Zoology generates it
  (`multiquery_ar`, random_non_queries=False as in its Figure 2): P pairs
  `key value`, keys and values each distinct; then (L - 2P)/2 two-token
  slots, P of them (drawn without replacement, p(slot i) ~ (i+1)^(a-1))
  holding the keys in the pairs' order, each followed, as every other
  position, by the filler 0. The label at a query is its value's token id;
  -1 elsewhere. numpy's choice without replacement draws slots one by one
  in proportion to the weights left: the same law as the top P of log
  weight + Gumbel noise (Plackett-Luce), drawn here.

  Returns (tokens_BxL, labels_BxL).
  """
  check_mqar(length, num_pairs, vocab)
  B, P, half = batch_size, num_pairs, vocab // 2
  space = (length - 2 * P) // 2
  k_keys, k_values, k_gaps = streams.split(key, 3)
  keys_BxP = 1 + _first(k_keys, (B, half - 1), P)
  values_BxP = half + _first(k_values, (B, vocab - half), P)
  log_p = jnp.log(jnp.asarray(mqar_gap_weights(space, power_a), jnp.float32))
  gumbel = -jnp.log(-jnp.log(_uniform(k_gaps, (B, space))))
  gaps_BxP = jnp.argsort(-(log_p + gumbel), axis=-1)[:, :P]
  query_BxP = 2 * P + 2 * gaps_BxP
  rows = jnp.arange(B)[:, None]
  tokens = jnp.zeros((B, length), jnp.int32)
  tokens = tokens.at[:, 0:2 * P:2].set(keys_BxP)
  tokens = tokens.at[:, 1:2 * P:2].set(values_BxP)
  tokens = tokens.at[rows, query_BxP].set(keys_BxP)
  labels = jnp.full((B, length), -1, jnp.int32).at[rows, query_BxP].set(
      values_BxP)
  return tokens.astype(jnp.int32), labels.astype(jnp.int32)


# -- LSTM'97's long time lags (Hochreiter & Schmidhuber 1997, Experiment 2) ---
# p + 1 symbols: a_1..a_{p-1} (ids 0..p-2), x (p - 1) and y (p).


LONG_LAG_TARGETS = ('every', 'end')  # where the error signal is


def long_lag_batch(key, batch_size: int, p: int, random_middle: bool = True,
                   targets: str = 'every'):
  """Task 2b (2a with random_middle=False) of the 1997 paper: the string
  (s, a_i1, ..., a_i(p-1), s), s x or y at even odds, the middle drawn
  uniformly from a_1..a_{p-1} (2a: a_1..a_{p-1} in order). The model reads
  the first p symbols and predicts the next one at every step, as the
  paper's net does; only the last, s again after p steps, can be known.

  Returns (tokens_BxP, labels_BxP): labels[:, t] is symbol t + 1; with
  targets='end', labels_B: the last symbol alone (the error signal at the
  sequence's end only).
  """
  if targets not in LONG_LAG_TARGETS:
    raise ValueError(f'long-lag task: targets must be one of '
                     f'{", ".join(LONG_LAG_TARGETS)}, got {targets!r}')
  if p < 2:
    raise ValueError(f'long-lag task: p must be >= 2, got {p}')
  k_first, k_middle = streams.split(key, 2)
  first = (p - 1) + streams.coin(k_first, (batch_size, 1))
  if random_middle:
    middle = streams.randint(k_middle, (batch_size, p - 1), 0, p - 1)
  else:
    middle = jnp.broadcast_to(jnp.arange(p - 1, dtype=jnp.int32),
                              (batch_size, p - 1))
  string = jnp.concatenate([first, middle, first], axis=1).astype(jnp.int32)
  labels = string[:, 1:] if targets == 'every' else string[:, -1]
  return string[:, :-1], labels


# -- routing against transforming (routing) ------------------------------------
# Tokens: the first symbol's alphabet 0..k-1, the second's k..2k-1 (its slot
# is its tag: a symbol is found by its content wherever it stands), the
# query 2k, then neutral filler.
ROUTING_FUNCTIONS = {
    'copy': lambda a, b, k: a,  # routing alone: the control
    'xor': lambda a, b, k: a ^ b,  # two classes (k = 2)
    'sum': lambda a, b, k: (a + b) % k,
}


@functools.cache
def routing_ceiling(function: str, k: int) -> float:
  """The best accuracy on `function`(a, b) (a, b uniform in 0..k-1) of a
  read-out that only routes the two symbols: weights that do not depend on
  them, then a linear read-out, make every class score additive, f_c(a) +
  g_c(b). The null of "attention alone cannot compute f": the exact
  maximum, over all additive scores, of the pairs answered right (a
  mixed-integer program, HiGHS through scipy: one binary per pair, a margin
  of 1 for its label over every other class, scores bounded, the scale
  being free). copy: 1; xor: 3/4; sum mod 5: 19/25."""
  from scipy import optimize  # deferred: only the routing claims ask
  pairs = [(a, b) for a in range(k) for b in range(k)]
  classes = k
  label = lambda a, b: int(ROUTING_FUNCTIONS[function](a, b, k))
  f = lambda c, a: c * k + a  # f_c(a), then g_c(b), then z per pair
  g = lambda c, b: classes * k + c * k + b
  z = lambda i: 2 * classes * k + i
  n, big = 2 * classes * k + len(pairs), 4 * 10 + 1
  rows = []
  for i, (a, b) in enumerate(pairs):
    y = label(a, b)
    for c in range(classes):
      if c != y:  # z_i = 1 forces score_y >= score_c + 1
        row = np.zeros(n)
        row[[f(y, a), g(y, b)]] += 1
        row[[f(c, a), g(c, b)]] -= 1
        row[z(i)] = -big
        rows.append(row)
  cost = np.zeros(n)
  cost[2 * classes * k:] = -1
  integrality = np.zeros(n)
  integrality[2 * classes * k:] = 1
  bounds = optimize.Bounds(
      np.r_[np.full(2 * classes * k, -10.0), np.zeros(len(pairs))],
      np.r_[np.full(2 * classes * k, 10.0), np.ones(len(pairs))])
  with _quiet():  # HiGHS prints a line of its own now and then
    result = optimize.milp(
        cost, integrality=integrality, bounds=bounds,
        constraints=optimize.LinearConstraint(np.array(rows), 1 - big,
                                              np.inf),
        options={'disp': False})
  if not result.success:
    raise RuntimeError(f'routing_ceiling({function!r}, {k}): {result.message}')
  return float(round(-result.fun) / len(pairs))


@contextlib.contextmanager
def _quiet():
  """The process's stdout silenced at the file descriptor (C code's too)."""
  sys.stdout.flush()
  saved = os.dup(1)
  try:
    with open(os.devnull, 'w') as null:
      os.dup2(null.fileno(), 1)
      yield
  finally:
    os.dup2(saved, 1)
    os.close(saved)


def routing_vocab_size(k: int, num_filler: int) -> int:
  return 2 * k + 1 + num_filler


def routing_batch(key, batch_size: int, length: int, function: str, k: int,
                  num_filler: int, tagged: bool):
  """Two symbols a, b in 0..k-1 (a from the first alphabet, b from the
  second), filler, the query at L-1; label = function(a, b). Untagged, a
  stands at position 0 and b at 1; tagged, at two distinct random positions
  in 0..L-2 (either order), found only by their alphabets.

  Returns (tokens_BxL, labels_B).
  """
  if length < 4:
    raise ValueError(f'routing task length must be >= 4, got {length}')
  k_a, k_b, k_first, k_second, k_fill = streams.split(key, 5)
  a = streams.randint(k_a, (batch_size,), 0, k)
  b = streams.randint(k_b, (batch_size,), 0, k)
  if tagged:
    first = streams.randint(k_first, (batch_size,), 0, length - 1)
    second = streams.randint(k_second, (batch_size,), 0, length - 2)
    second = second + (second >= first)  # distinct from the first
  else:
    first = jnp.zeros((batch_size,), jnp.int32)
    second = jnp.ones((batch_size,), jnp.int32)
  positions = jnp.arange(length)[None, :]
  tokens = streams.randint(k_fill, (batch_size, length), 2 * k + 1,
                           2 * k + 1 + num_filler)
  tokens = jnp.where(positions == first[:, None], a[:, None], tokens)
  tokens = jnp.where(positions == second[:, None], k + b[:, None], tokens)
  tokens = tokens.at[:, -1].set(2 * k)
  label = ROUTING_FUNCTIONS[function](a, b, k)
  return tokens.astype(jnp.int32), label.astype(jnp.int32)


def routing_positions(tokens_BxL, k: int):
  """(first_B, second_B): where the two symbols stand."""
  return (jnp.argmax(tokens_BxL < k, axis=1),
          jnp.argmax((tokens_BxL >= k) & (tokens_BxL < 2 * k), axis=1))


# -- tasks: what the trainer needs of each -----------------------------------------

@dataclasses.dataclass(frozen=True)
class Task:
  """What the trainer needs of a task: a batch sampler and its sizes.
  `make_task(name, length, **params)` builds it again (a loaded run)."""
  name: str
  length: int
  vocab_size: int
  num_classes: int
  sample: Callable[[jax.Array, int], tuple[jax.Array, jax.Array]]
  params: dict = dataclasses.field(default_factory=dict)


def memory_task(length: int, num_filler: int, decoys: float = 0.0) -> Task:
  """The lesson's task: name the first symbol (A or B) after the filler;
  with `decoys`, A and B also appear in the filler (`memory_batch`)."""
  check_length(length)
  return Task(
      'memory', length, vocab_size(num_filler), 2,
      lambda key, n: memory_batch(key, n, length, num_filler, decoys),
      {'num_filler': num_filler, **({'decoys': decoys} if decoys else {})})


def two_symbol_task(length: int, num_filler: int) -> Task:
  """Two relations at once (heads): the first symbol by its position, the
  second by its content; 4 classes."""
  return Task(
      'two_symbol', length, two_symbol_vocab_size(num_filler), 4,
      lambda key, n: two_symbol_batch(key, n, length, num_filler),
      {'num_filler': num_filler})


def induction_task(length: int, vocab: int) -> Task:
  """Name the token that followed the earlier occurrence of the last one."""
  return Task(
      'induction', length, vocab, vocab,
      lambda key, n: induction_batch(key, n, length, vocab),
      {'vocab': vocab})


def trigger_induction_task(length: int, vocab: int) -> Task:
  """The Mamba paper's induction heads: a special trigger token (id vocab);
  name the token that followed its earlier occurrence."""
  return Task(
      'trigger_induction', length, vocab + 1, vocab,
      lambda key, n: trigger_induction_batch(key, n, length, vocab),
      {'vocab': vocab})


def recall_task(length: int, num_pairs: int, vocab: int) -> Task:
  """Multi-query associative recall: every query's value, at its key's
  position (labels per position); classes: the values."""
  check_recall(length, num_pairs, vocab)
  return Task(
      'recall', length, vocab, recall_vocab(vocab)[0],
      lambda key, n: recall_batch(key, n, length, num_pairs, vocab),
      {'num_pairs': num_pairs, 'vocab': vocab})


def mqar_task(length: int, num_pairs: int, vocab: int,
              power_a: float = MQAR_POWER_A) -> Task:
  """Zoology's MQAR (`mqar_batch`): classes are the whole vocabulary, as
  its tied head reads them."""
  check_mqar(length, num_pairs, vocab)
  return Task(
      'mqar', length, vocab, vocab,
      lambda key, n: mqar_batch(key, n, length, num_pairs, vocab, power_a),
      {'num_pairs': num_pairs, 'vocab': vocab, 'power_a': power_a})


def long_lag_task(length: int, random_middle: bool = True,
                  targets: str = 'every') -> Task:
  """LSTM'97's task 2b (2a): the lag p is the length; p + 1 classes; the
  error at every step, or (targets='end') at the sequence's end only."""
  return Task(
      'long_lag', length, length + 1, length + 1,
      lambda key, n: long_lag_batch(key, n, length, random_middle, targets),
      {'random_middle': random_middle,
       **({'targets': targets} if targets != 'every' else {})})


def routing_task(length: int, function: str, k: int, num_filler: int,
                 tagged: bool) -> Task:
  """A function of two gathered symbols (copy, xor, sum mod k), at fixed
  positions or tagged at random ones."""
  if function not in ROUTING_FUNCTIONS:
    raise ValueError(f'routing function must be one of '
                     f'{", ".join(ROUTING_FUNCTIONS)}, got {function!r}')
  if k < 2 or (function == 'xor' and k != 2):
    raise ValueError(f'routing task: k must be >= 2 (2 for xor), got {k}')
  if length < 4:
    raise ValueError(f'routing task length must be >= 4, got {length}')
  return Task(
      'routing', length, routing_vocab_size(k, num_filler), k,
      lambda key, n: routing_batch(key, n, length, function, k, num_filler,
                                   tagged),
      {'function': function, 'k': k, 'num_filler': num_filler,
       'tagged': tagged})


TASKS = {'memory': memory_task, 'two_symbol': two_symbol_task,
         'induction': induction_task, 'routing': routing_task,
         'recall': recall_task, 'mqar': mqar_task, 'long_lag': long_lag_task,
         'trigger_induction': trigger_induction_task}


def make_task(name: str, length: int, **params) -> Task:
  return TASKS[name](length, **params)
