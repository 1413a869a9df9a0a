"""Sequence classifiers in Flax NNX: an attention stack and three recurrent nets.

Shape legend: B batch, L sequence length (keys), Q query positions, D d_model,
H heads, K d_model // H (per-head width), C classes, G gate width.

Every model maps tokens_BxL to logits_BxC read at the last position, in two
halves so that experiments can differentiate with respect to the inputs:
`embed(tokens) -> x_BxLxD` and `classify(x_BxLxD) -> (logits_BxC, aux)`.
"""

import math

import jax
import jax.numpy as jnp
from flax import nnx

MODELS = ('attention', 'lstm', 'gru', 'rnn')
RECURRENT = ('lstm', 'gru', 'rnn')


def softmax(x, axis=-1):
  """`jax.nn.softmax`'s numbers, normalised by an explicit reciprocal.

  XLA rewrites a division by a broadcast sum into a reciprocal multiply in
  some programs and not in others (it did so for one device and not for
  several), so the backward pass of `jax.nn.softmax` differed in the last bit
  between 1-device and multi-device runs. Here the only division is of
  unbroadcast sums, in both passes.
  """
  e = jnp.exp(x - jax.lax.stop_gradient(x.max(axis, keepdims=True)))
  return e * (1 / e.sum(axis, keepdims=True))


# Training asks for no weights: on an accelerator the layer then goes through
# `jax.nn.dot_product_attention` (a fused kernel where the platform has one).
# On a CPU the einsum path is as fast and its numbers do not depend on the
# device count (see `softmax`). None: decide by backend; True/False: force.
FUSED_ATTENTION: bool | None = None


def use_fused_attention() -> bool:
  if FUSED_ATTENTION is not None:
    return FUSED_ATTENTION
  return jax.default_backend() != 'cpu'


class CausalSelfAttention(nnx.Module):
  """Multi-head causal self-attention: every query against every earlier key.

  The same layer serves single-layer classifiers, stacks and the cost
  experiment. `query_positions` (static) restricts the queries computed; the
  keys and values always cover the whole sequence, so the outputs at those
  positions are exactly the ones the full layer computes there.
  """

  def __init__(self, d_model: int, num_heads: int, *, rngs: nnx.Rngs):
    if d_model % num_heads:
      raise ValueError(f'd_model={d_model} is not divisible by '
                       f'num_heads={num_heads}')
    self.num_heads = num_heads
    linear = lambda: nnx.Linear(d_model, d_model, use_bias=False, rngs=rngs)
    self.query, self.key, self.value, self.out = (linear(), linear(), linear(),
                                                  linear())

  def __call__(self, x_BxLxD, query_positions=None, head_mask=None,
               weights=True):
    """Returns (y_BxQxD, att_BxHxQxL); y excludes the residual.

    head_mask: optional H-vector multiplying each head's output (ablations).
    weights=False lets the layer skip the weights (att is then None) and use
    `jax.nn.dot_product_attention` (see FUSED_ATTENTION).
    """
    B, L, D = x_BxLxD.shape
    H = self.num_heads
    K = D // H
    q_pos = jnp.arange(L) if query_positions is None else jnp.asarray(
        query_positions)
    x_q = x_BxLxD if query_positions is None else x_BxLxD[:, q_pos]
    q_BxQxHxK = self.query(x_q).reshape(B, -1, H, K)
    k_BxLxHxK = self.key(x_BxLxD).reshape(B, L, H, K)
    v_BxLxHxK = self.value(x_BxLxD).reshape(B, L, H, K)
    causal_QxL = jnp.arange(L)[None, :] <= q_pos[:, None]
    if not weights and use_fused_attention():
      mixed_BxQxHxK = jax.nn.dot_product_attention(
          q_BxQxHxK, k_BxLxHxK, v_BxLxHxK, mask=causal_QxL[None, None])
      att_BxHxQxL = None
    else:
      scores_BxHxQxL = jnp.einsum('bqhk,blhk->bhql', q_BxQxHxK, k_BxLxHxK)
      scores_BxHxQxL = scores_BxHxQxL / math.sqrt(K)
      scores_BxHxQxL = jnp.where(causal_QxL, scores_BxHxQxL,
                                 jnp.finfo(scores_BxHxQxL.dtype).min)
      att_BxHxQxL = softmax(scores_BxHxQxL)
      mixed_BxQxHxK = jnp.einsum('bhql,blhk->bqhk', att_BxHxQxL, v_BxLxHxK)
    if head_mask is not None:
      mixed_BxQxHxK = mixed_BxQxHxK * head_mask[:, None]
    y_BxQxD = self.out(mixed_BxQxHxK.reshape(B, -1, D))
    return y_BxQxD, att_BxHxQxL


class AttentionClassifier(nnx.Module):
  """Token + learned position embeddings, causal attention layers with
  residual connections, a linear classifier on the last position."""

  def __init__(self, *, vocab_size: int, length: int, d_model: int,
               num_heads: int, num_layers: int, num_classes: int,
               rngs: nnx.Rngs):
    self.token_embed = nnx.Embed(vocab_size, d_model, rngs=rngs)
    self.position_embed = nnx.Embed(length, d_model, rngs=rngs)
    self.layers = nnx.List([
        CausalSelfAttention(d_model, num_heads, rngs=rngs)
        for _ in range(num_layers)
    ])
    self.classifier = nnx.Linear(d_model, num_classes, rngs=rngs)

  def embed(self, tokens_BxL):
    L = tokens_BxL.shape[1]
    return self.token_embed(tokens_BxL) + self.position_embed(jnp.arange(L))

  def classify(self, x_BxLxD, *, all_positions=False, head_masks=None,
               per_position=False, weights=True):
    """all_positions=False computes only the read-out query in the last layer
    (exact: tests check it against the full layer). per_position=True
    returns logits_BxLxC at every position, as a sequence model uses it.
    weights=False: no attention weights in aux (training)."""
    all_positions = all_positions or per_position
    L = x_BxLxD.shape[1]
    attention = []
    for i, layer in enumerate(self.layers):
      last = i == len(self.layers) - 1
      q_pos = None if (all_positions or not last) else (L - 1,)
      mask = None if head_masks is None else head_masks[i]
      y, att = layer(x_BxLxD, query_positions=q_pos, head_mask=mask,
                     weights=weights)
      x_BxLxD = (x_BxLxD if q_pos is None else x_BxLxD[:, q_pos]) + y
      attention.append(att)
    if per_position:
      return self.classifier(x_BxLxD), {'attention': attention}
    logits_BxC = self.classifier(x_BxLxD[:, -1])
    return logits_BxC, {'attention': attention}

  def __call__(self, tokens_BxL, **kwargs):
    return self.classify(self.embed(tokens_BxL), **kwargs)


_CELLS = {
    'lstm': nnx.OptimizedLSTMCell,  # fused gates: i, f, g, o
    'gru': nnx.GRUCell,
    'rnn': nnx.SimpleCell,  # Elman: h' = tanh(W_i x + b + W_h h)
}


def _cell_step(kind, w_hh, b_hh, carry, xi_BxG):
  """One recurrent step given the input transform xi = dense_i(x_t).

  Mirrors the Flax cells' own __call__ (tests check it against them), with the
  input matmul hoisted out of the scan: only the recurrent product is
  sequential.
  """
  if kind == 'lstm':
    c, h = carry
    i, f, g, o = jnp.split(xi_BxG + h @ w_hh + b_hh, 4, axis=-1)
    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return (c, h), h
  if kind == 'gru':
    h = carry
    xr, xz, xn = jnp.split(xi_BxG, 3, axis=-1)
    hr, hz, hn = jnp.split(h @ w_hh, 3, axis=-1)
    r = jax.nn.sigmoid(xr + hr)
    z = jax.nn.sigmoid(xz + hz)
    n = jnp.tanh(xn + r * hn)
    h = (1.0 - z) * n + z * h
    return h, h
  h = jnp.tanh(xi_BxG + carry @ w_hh)
  return h, h


class RecurrentClassifier(nnx.Module):
  """Token embedding, a Flax recurrent cell run by `lax.scan`, a linear
  classifier on the last hidden state. Flax's default initialisation:
  LeCun-normal input kernels, orthogonal recurrent kernels, zero biases."""

  def __init__(self, kind: str, *, vocab_size: int, d_model: int,
               num_classes: int, rngs: nnx.Rngs, unroll: int = 1):
    self.kind = kind
    self.unroll = unroll  # scan steps per loop iteration (same numbers)
    self.token_embed = nnx.Embed(vocab_size, d_model, rngs=rngs)
    self.cell = _CELLS[kind](d_model, d_model, rngs=rngs)
    self.classifier = nnx.Linear(d_model, num_classes, rngs=rngs)

  def embed(self, tokens_BxL):
    return self.token_embed(tokens_BxL)

  def hidden_states(self, x_BxLxD):
    """Returns the hidden state after every step, h_LxBxD."""
    B, _, D = x_BxLxD.shape
    xi_LxBxG = jnp.swapaxes(self.cell.dense_i(x_BxLxD), 0, 1)
    w_hh = self.cell.dense_h.kernel[...]
    b_hh = (self.cell.dense_h.bias[...]
            if self.cell.dense_h.bias is not None else 0.0)
    h0 = jnp.zeros((B, D), x_BxLxD.dtype)
    carry = (h0, h0) if self.kind == 'lstm' else h0
    step = lambda carry, xi: _cell_step(self.kind, w_hh, b_hh, carry, xi)
    _, h_LxBxD = jax.lax.scan(step, carry, xi_LxBxG, unroll=self.unroll)
    return h_LxBxD

  def classify(self, x_BxLxD, *, per_position=False, **unused):
    h_LxBxD = self.hidden_states(x_BxLxD)
    if per_position:
      return self.classifier(jnp.swapaxes(h_LxBxD, 0, 1)), {}
    return self.classifier(h_LxBxD[-1]), {}

  def __call__(self, tokens_BxL, **kwargs):
    return self.classify(self.embed(tokens_BxL), **kwargs)


def make_model(name: str, *, vocab_size: int, length: int, d_model: int,
               num_classes: int, num_heads: int = 1, num_layers: int = 1,
               rngs: nnx.Rngs) -> nnx.Module:
  if name == 'attention':
    return AttentionClassifier(vocab_size=vocab_size, length=length,
                               d_model=d_model, num_heads=num_heads,
                               num_layers=num_layers, num_classes=num_classes,
                               rngs=rngs)
  if name in RECURRENT:
    return RecurrentClassifier(name, vocab_size=vocab_size, d_model=d_model,
                               num_classes=num_classes, rngs=rngs)
  raise ValueError(f'unknown model {name!r}; expected one of {MODELS}')


def count_params(params) -> int:
  return sum(x.size for x in jax.tree.leaves(params))
