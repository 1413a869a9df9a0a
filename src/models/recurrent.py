"""Recurrent classifiers: Flax's own cells run by `lax.scan`, and the
initialisations their literature recommends.

Shape legend: B batch, L sequence length, D d_model (state width), G gate
width (4D for the LSTM, 3D for the GRU, D for the plain RNN), C classes.

The cells are Flax's (`nnx.OptimizedLSTMCell`, `nnx.GRUCell`,
`nnx.SimpleCell`) with Flax's default initialisation: LeCun-normal input
kernels, orthogonal recurrent kernels, zero biases. An initialisation here is
a function `init(cell, length, key)` applied after Flax's, which replaces the
parameters it names; the tests check each against what its name says.
"""

import functools
import math
from typing import Callable

import jax
import jax.numpy as jnp
from flax import nnx

# What each Flax cell computes, by its class (a variant built by
# `functools.partial` of one, another activation say, is still that class).
_KINDS = (
    (nnx.OptimizedLSTMCell, 'lstm'),  # fused gates i, f, g, o; bias in dense_h
    (nnx.GRUCell, 'gru'),  # gates r, z, n; bias in dense_i; h' = (1-z) n + z h
    (nnx.SimpleCell, 'rnn'),  # Elman: h' = act(W_i x + b + W_h h)
)


def cell_kind(cell) -> str:
  """'lstm', 'gru' or 'rnn': which Flax cell `cell` is (a cell, its class,
  or a `functools.partial` of that class)."""
  cls = cell.func if isinstance(cell, functools.partial) else cell
  cls = cls if isinstance(cls, type) else type(cls)
  for base, kind in _KINDS:
    if issubclass(cls, base):
      return kind
  raise TypeError(f'not a Flax LSTM, GRU or simple cell: {cls}')


def _cell_step(cell, kind, w_hh, b_hh, carry, xi_BxG):
  """One recurrent step given the input transform xi = dense_i(x_t).

  Mirrors the Flax cells' own __call__, with their own gate and activation
  functions (tests check it against them), and the input matmul hoisted out
  of the scan: only the recurrent product is sequential.
  """
  act = cell.activation_fn
  if kind == 'lstm':
    c, h = carry
    i, f, g, o = jnp.split(xi_BxG + h @ w_hh + b_hh, 4, axis=-1)
    c = cell.gate_fn(f) * c + cell.gate_fn(i) * act(g)
    h = cell.gate_fn(o) * act(c)
    return (c, h), h
  if kind == 'gru':
    h = carry
    xr, xz, xn = jnp.split(xi_BxG, 3, axis=-1)
    hr, hz, hn = jnp.split(h @ w_hh, 3, axis=-1)
    r = cell.gate_fn(xr + hr)
    z = cell.gate_fn(xz + hz)
    n = act(xn + r * hn)
    h = (1.0 - z) * n + z * h
    return h, h
  h = act(xi_BxG + carry @ w_hh)
  return h, h


class RecurrentClassifier(nnx.Module):
  """Token embedding, a Flax recurrent cell run by `lax.scan`, a linear
  classifier on the last hidden state.

  `cell(d_model, d_model, rngs=...)` builds a Flax OptimizedLSTMCell,
  GRUCell or SimpleCell (a class, or a `functools.partial` of one: its
  activation and gate functions are the ones run). `init(cell, length, key)`, if given,
  replaces some of the cell's Flax defaults (see the initialisations
  below); `length` is the group's sequence length, which only chrono at
  T_max = L reads.
  """

  def __init__(self, cell: Callable[..., nnx.Module], *, vocab_size: int,
               length: int, d_model: int, num_classes: int, rngs: nnx.Rngs,
               init=None, unroll: int = 1):
    self.unroll = unroll  # scan steps per loop iteration (same numbers)
    self.token_embed = nnx.Embed(vocab_size, d_model, rngs=rngs)
    self.cell = cell(d_model, d_model, rngs=rngs)
    self.kind = cell_kind(self.cell)
    if init is not None:
      init(self.cell, length, rngs.params())
    self.classifier = nnx.Linear(d_model, num_classes, rngs=rngs)

  def embed(self, tokens_BxL):
    return self.token_embed(tokens_BxL)

  def hidden_states(self, x_BxLxD):
    """Returns the hidden state after every step, h_LxBxD."""
    return self._scan(x_BxLxD, 'h')

  @property
  def has_cell_state(self) -> bool:
    """An LSTM carries a cell state c beside h."""
    return self.kind == 'lstm'

  def cell_states(self, x_BxLxD):
    """The LSTM's cell state after every step, c_LxBxD (analysis only)."""
    if self.kind != 'lstm':
      raise ValueError(f'a {self.kind} has no cell state apart from h')
    return self._scan(x_BxLxD, 'carry')[0]

  def _scan(self, x_BxLxD, keep: str):
    """The cell run over the positions, keeping every step's h ('h':
    h_LxBxD), every step's carry ('carry'), or the last h only ('last':
    h_BxD, a scan with no per-step output, whose backward pass then adds
    no zero cotangents for outputs nothing reads: the same numbers, less
    work)."""
    B, _, D = x_BxLxD.shape
    xi_LxBxG = jnp.swapaxes(self.cell.dense_i(x_BxLxD), 0, 1)
    w_hh = self.cell.dense_h.kernel[...]
    b_hh = (self.cell.dense_h.bias[...]
            if self.cell.dense_h.bias is not None else 0.0)
    h0 = jnp.zeros((B, D), x_BxLxD.dtype)
    carry = (h0, h0) if self.kind == 'lstm' else h0
    def step(carry, xi):
      carry, h = _cell_step(self.cell, self.kind, w_hh, b_hh, carry, xi)
      return carry, {'h': h, 'carry': carry, 'last': None}[keep]
    last, out_L = jax.lax.scan(step, carry, xi_LxBxG, unroll=self.unroll)
    if keep == 'last':
      return last[1] if self.kind == 'lstm' else last
    return out_L

  def classify(self, x_BxLxD, *, per_position=False, **unused):
    if per_position:
      h_LxBxD = self.hidden_states(x_BxLxD)
      return self.classifier(jnp.swapaxes(h_LxBxD, 0, 1)), {}
    return self.classifier(self._scan(x_BxLxD, 'last')), {}

  def __call__(self, tokens_BxL, **kwargs):
    return self.classify(self.embed(tokens_BxL), **kwargs)


# -- named initialisations -------------------------------------------------------
# Each replaces parameters after Flax's defaults; see each docstring's source.

def _set_slice(param, index, values):
  param[...] = param[...].at[index].set(values)


def forget_bias(value: float):
  """LSTM forget-gate bias `value` (Gers, Schmidhuber & Cummins 2000; 1 is
  recommended by Jozefowicz, Zaremba & Sutskever 2015 and is the default of
  Keras, TensorFlow's LSTM cells and Haiku)."""
  def init(cell, length, key):
    del length, key
    D = cell.hidden_features
    _set_slice(cell.dense_h.bias, slice(D, 2 * D), value)
  return init


def chrono_timescales(key, D: int, t_max: int) -> jax.Array:
  """log U(1, T_max - 1), T_max at least 3: the chrono bias (Tallec &
  Ollivier 2018), whose gate sigmoid(b) keeps a memory of
  1 / (1 - sigmoid(b)) = 1 + U steps, from 2 up to T_max."""
  t_max = max(t_max, 3)
  return jnp.log(jax.random.uniform(key, (D,), minval=1.0, maxval=t_max - 1))


# T_max is the longest memory the gates start with. A fixed horizon (the
# run's --chrono_horizon) starts every length of a sweep from one model, as
# the plain RNN does, and tells it nothing of L; None spreads up to each
# group's own length (the paper's choice, and this code's before the horizon
# was a setting).

def lstm_chrono(t_max: int | None = None):
  """Chrono initialisation of the LSTM (Tallec & Ollivier 2018): forget-gate
  bias log U(1, T_max - 1), input-gate bias its negative; T_max = `t_max`,
  or the length when None."""
  def init(cell, length, key):
    D = cell.hidden_features
    b_f = chrono_timescales(key, D, length if t_max is None else t_max)
    _set_slice(cell.dense_h.bias, slice(D, 2 * D), b_f)  # gates i, f, g, o
    _set_slice(cell.dense_h.bias, slice(0, D), -b_f)
  return init


def gru_chrono(t_max: int | None = None):
  """Chrono initialisation for the GRU's update gate z (Flax keeps z * h, so
  z plays the forget gate): bias log U(1, T_max - 1), T_max = `t_max`, or
  the length when None. The reset and candidate biases stay at zero."""
  def init(cell, length, key):
    D = cell.hidden_features
    _set_slice(cell.dense_i.bias, slice(D, 2 * D),  # gates r, z, n
               chrono_timescales(key, D, length if t_max is None else t_max))
  return init


def pytorch_uniform(cell, length, key):
  """The plain RNN as PyTorch's `nn.RNN` starts it: every weight and bias
  U(-1/sqrt(d), 1/sqrt(d)), no orthogonal matrix. PyTorch adds two such
  biases (b_ih + b_hh); Flax's cell has one, drawn here as that sum."""
  del length
  D = cell.hidden_features
  k = 1 / math.sqrt(D)
  k_i, k_h, k_b1, k_b2 = jax.random.split(key, 4)
  u = lambda key, shape: jax.random.uniform(key, shape, minval=-k, maxval=k)
  cell.dense_i.kernel[...] = u(k_i, cell.dense_i.kernel.shape)
  cell.dense_h.kernel[...] = u(k_h, cell.dense_h.kernel.shape)
  cell.dense_i.bias[...] = u(k_b1, (D,)) + u(k_b2, (D,))


# -- the 1997 LSTM (Hochreiter & Schmidhuber 1997) ---------------------------------

LSTM97_INIT = 0.2  # every weight drawn from U(-0.2, 0.2) (the paper's §5)


class LSTM97Classifier(nnx.Module):
  """The LSTM of Hochreiter & Schmidhuber (1997), as its Experiment 2 (tasks
  2a and 2b) builds it: memory cells with input gates and no forget gate
  (the constant error carousel: s_t = s_{t-1} + y_in g(net_c)), g the
  logistic sigmoid, h the identity, no output gate ("no output gate
  required"), no bias weights. The input is one-hot (local coding: the
  tokens are not embedded); the cells and the input gates read the input
  and the cells' outputs at the step before; the output layer reads the
  input and the cells (connectivity "B", every layer from every layer
  below). `d_model` is the number of cells (1 in the paper's 2a and 2b).
  Every weight U(-0.2, 0.2).

  The gradient is truncated as the paper's: error reaching the nets of the
  gates and cell inputs goes no further back in time (it flows back through
  the cells' states alone). Not the paper's, and said where it is used: the
  output units are a softmax trained on cross-entropy (the paper's are
  sigmoids on squared error); the cells are there from the start (the
  paper adds them once the error stops falling).
  """

  def __init__(self, *, vocab_size: int, length: int, d_model: int,
               num_classes: int, rngs: nnx.Rngs):
    del length
    self.vocab_size, self.unroll = vocab_size, 1
    uniform = lambda *shape: nnx.Param(jax.random.uniform(
        rngs.params(), shape, minval=-LSTM97_INIT, maxval=LSTM97_INIT))
    # Rows: the input's one-hot, then the cells' outputs at t - 1.
    self.w_cell = uniform(vocab_size + d_model, d_model)
    self.w_gate = uniform(vocab_size + d_model, d_model)
    self.w_out = uniform(vocab_size + d_model, num_classes)

  def embed(self, tokens_BxL):
    return jax.nn.one_hot(tokens_BxL, self.vocab_size)

  def _inputs(self, x_BxLxV):
    """The input's share of each net: a one-hot times the input rows."""
    V = self.vocab_size
    return (x_BxLxV @ self.w_cell[:V], x_BxLxV @ self.w_gate[:V],
            x_BxLxV @ self.w_out[:V])

  def _run(self, cell_BxLxD, gate_BxLxD, out_BxLxC, per_position):
    V = self.vocab_size
    w_cc, w_gc = self.w_cell[V:], self.w_gate[V:]

    def step(s_BxD, inputs):
      cx, gx = inputs
      # The paper's truncation: error reaching the nets of the gates and
      # cell inputs goes no further back; it flows back through s alone.
      y_BxD = jax.lax.stop_gradient(s_BxD)
      s_BxD = s_BxD + jax.nn.sigmoid(gx + y_BxD @ w_gc) * jax.nn.sigmoid(
          cx + y_BxD @ w_cc)
      return s_BxD, s_BxD

    s0 = jnp.zeros((cell_BxLxD.shape[0], w_cc.shape[1]), cell_BxLxD.dtype)
    _, s_LxBxD = jax.lax.scan(
        step, s0, (jnp.swapaxes(cell_BxLxD, 0, 1),
                   jnp.swapaxes(gate_BxLxD, 0, 1)), unroll=self.unroll)
    if per_position:
      return out_BxLxC + jnp.swapaxes(s_LxBxD, 0, 1) @ self.w_out[V:], s_LxBxD
    return out_BxLxC[:, -1] + s_LxBxD[-1] @ self.w_out[V:], s_LxBxD

  def hidden_states(self, x_BxLxV):
    """The cells' outputs y_c = s_c after every step, h_LxBxD."""
    return self._run(*self._inputs(x_BxLxV), per_position=False)[1]

  def classify(self, x_BxLxV, *, per_position=False, **unused):
    return self._run(*self._inputs(x_BxLxV), per_position)[0], {}

  def __call__(self, tokens_BxL, *, per_position=False, **unused):
    """The same as classify(embed(tokens)), by row lookups: no one-hot."""
    V = self.vocab_size
    return self._run(self.w_cell[:V][tokens_BxL],
                     self.w_gate[:V][tokens_BxL],
                     self.w_out[:V][tokens_BxL], per_position)[0], {}
