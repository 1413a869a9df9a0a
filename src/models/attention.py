"""The attention classifier: causal multi-head self-attention in Flax NNX.

Shape legend: B batch, L sequence length (keys), Q query positions, D d_model,
H heads, K d_model // H (per-head width), C classes.
"""

import math

import jax
import jax.numpy as jnp
from flax import nnx


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


def cap_weights(att_BxHxQxL, cap_L):
  """Attention weights with each key's capped at `cap_L` (1: no cap), the
  weight taken off handed to the uncapped keys in proportion to theirs, so
  every row still sums to 1 (ablations: a beam dimmed to a uniform look)."""
  cap_L = jnp.asarray(cap_L, att_BxHxQxL.dtype)
  capped = jnp.minimum(att_BxHxQxL, cap_L)
  freed = (att_BxHxQxL - capped).sum(-1, keepdims=True)
  free = jnp.where(att_BxHxQxL < cap_L, capped, 0.0)
  share = free * (1 / jnp.maximum(free.sum(-1, keepdims=True), 1e-30))
  return capped + freed * share


ROPE_BASE = 10_000.0  # Su et al. (2021): theta_i = base^(-2i/K)


def rotate(x_BxLxHxK, positions_L):
  """Rotary position embedding (RoPE, Su et al. 2021): each pair of
  channels (i, i + K/2) of a query or key at position t turned by the
  angle t theta_i, so a score depends on positions only through their
  difference; no parameters, any length."""
  K = x_BxLxHxK.shape[-1]
  theta_K2 = ROPE_BASE ** (-jnp.arange(K // 2, dtype=jnp.float32) * 2 / K)
  angle_LxK2 = positions_L.astype(jnp.float32)[:, None] * theta_K2
  cos, sin = (f(angle_LxK2)[None, :, None] for f in (jnp.cos, jnp.sin))
  a, b = x_BxLxHxK[..., :K // 2], x_BxLxHxK[..., K // 2:]
  return jnp.concatenate([a * cos - b * sin, a * sin + b * cos], -1)


class CausalSelfAttention(nnx.Module):
  """Multi-head causal self-attention: every query against every earlier key.

  The same layer serves single-layer classifiers, stacks and the cost
  experiment. `query_positions` (static) restricts the queries computed; the
  keys and values always cover the whole sequence, so the outputs at those
  positions are exactly the ones the full layer computes there.
  """

  def __init__(self, d_model: int, num_heads: int, *, rngs: nnx.Rngs,
               rope: bool = False):
    if d_model % num_heads:
      raise ValueError(f'd_model={d_model} is not divisible by '
                       f'num_heads={num_heads}')
    if rope and (d_model // num_heads) % 2:
      raise ValueError(f'rotary positions need an even head width, got '
                       f'd_model={d_model}, num_heads={num_heads}')
    self.num_heads, self.rope = num_heads, rope
    linear = lambda: nnx.Linear(d_model, d_model, use_bias=False, rngs=rngs)
    self.query, self.key, self.value, self.out = (linear(), linear(), linear(),
                                                  linear())

  def __call__(self, x_BxLxD, query_positions=None, head_mask=None,
               weights=True, key_mask=None, key_cap=None):
    """Returns (y_BxQxD, att_BxHxQxL); y excludes the residual.

    head_mask: optional H-vector multiplying each head's output (ablations).
    key_mask: optional L- or BxL-array, False where a key is removed from
    every query's weights (renormalised over the keys left: ablations).
    key_cap: optional L-array, each key's weight capped there (`cap_weights`).
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
    if self.rope:
      q_BxQxHxK = rotate(q_BxQxHxK, q_pos)
      k_BxLxHxK = rotate(k_BxLxHxK, jnp.arange(L))
    causal_QxL = jnp.arange(L)[None, :] <= q_pos[:, None]
    if key_mask is not None:  # B x 1 x Q x L (or 1 x Q x L)
      causal_QxL = causal_QxL & jnp.asarray(key_mask)[..., None, None, :]
    if (not weights and key_mask is None and key_cap is None
        and use_fused_attention()):
      mixed_BxQxHxK = jax.nn.dot_product_attention(
          q_BxQxHxK, k_BxLxHxK, v_BxLxHxK, mask=causal_QxL[None, None])
      att_BxHxQxL = None
    else:
      scores_BxHxQxL = jnp.einsum('bqhk,blhk->bhql', q_BxQxHxK, k_BxLxHxK)
      scores_BxHxQxL = scores_BxHxQxL / math.sqrt(K)
      scores_BxHxQxL = jnp.where(causal_QxL, scores_BxHxQxL,
                                 jnp.finfo(scores_BxHxQxL.dtype).min)
      att_BxHxQxL = softmax(scores_BxHxQxL)
      if key_cap is not None:
        att_BxHxQxL = cap_weights(att_BxHxQxL, key_cap)
      mixed_BxQxHxK = jnp.einsum('bhql,blhk->bqhk', att_BxHxQxL, v_BxLxHxK)
    if head_mask is not None:
      mixed_BxQxHxK = mixed_BxQxHxK * head_mask[:, None]
    y_BxQxD = self.out(mixed_BxQxHxK.reshape(B, -1, D))
    return y_BxQxD, att_BxHxQxL


class AttentionClassifier(nnx.Module):
  """Token + learned position embeddings, causal attention layers with
  residual connections, a linear classifier on the last position.
  positions=False: no position embedding, so a position can be found by its
  content only (the causal mask still orders the keys); positions='rope':
  no embedding, queries and keys rotated by their positions (`rotate`),
  so it reads any length."""

  def __init__(self, *, vocab_size: int, length: int, d_model: int,
               num_heads: int, num_layers: int, num_classes: int,
               rngs: nnx.Rngs, positions: bool | str = True):
    self.token_embed = nnx.Embed(vocab_size, d_model, rngs=rngs)
    self.position_embed = (nnx.Embed(length, d_model, rngs=rngs)
                           if positions is True else None)
    self.layers = nnx.List([
        CausalSelfAttention(d_model, num_heads, rngs=rngs,
                            rope=positions == 'rope')
        for _ in range(num_layers)
    ])
    self.classifier = nnx.Linear(d_model, num_classes, rngs=rngs)

  def embed(self, tokens_BxL):
    x_BxLxD = self.token_embed(tokens_BxL)
    if self.position_embed is None:
      return x_BxLxD
    return x_BxLxD + self.position_embed(jnp.arange(tokens_BxL.shape[1]))

  def classify(self, x_BxLxD, *, all_positions=False, head_masks=None,
               per_position=False, weights=True, read_out_key_mask=None,
               read_out_key_cap=None):
    """all_positions=False computes only the read-out query in the last layer
    (exact: tests check it against the full layer). per_position=True
    returns logits_BxLxC at every position, as a sequence model uses it.
    weights=False: no attention weights in aux (training).
    read_out_key_mask: an L- or BxL-array, False where a key is removed from
    the last layer's weights (renormalised over the rest): what the
    read-out query may look at (ablations); read_out_key_cap: an L-array
    capping each key's weight in the last layer (`cap_weights`)."""
    all_positions = all_positions or per_position
    L = x_BxLxD.shape[1]
    attention = []
    for i in range(len(self.layers)):
      last = i == len(self.layers) - 1
      q_pos = None if (all_positions or not last) else (L - 1,)
      mask = None if head_masks is None else head_masks[i]
      x_BxLxD, att = self.block(
          i, x_BxLxD, query_positions=q_pos, head_mask=mask, weights=weights,
          key_mask=read_out_key_mask if last else None,
          key_cap=read_out_key_cap if last else None)
      attention.append(att)
    if per_position:
      return self.classifier(x_BxLxD), {'attention': attention}
    return self.classifier(x_BxLxD[:, -1]), {'attention': attention}

  def block(self, i, x_BxLxD, *, query_positions, head_mask, weights,
            key_mask=None, key_cap=None):
    """Layer i: x + attention(x), at the query positions (all: None)."""
    y, att = self.layers[i](x_BxLxD, query_positions=query_positions,
                            head_mask=head_mask, weights=weights,
                            key_mask=key_mask, key_cap=key_cap)
    return _at(x_BxLxD, query_positions) + y, att

  def __call__(self, tokens_BxL, **kwargs):
    return self.classify(self.embed(tokens_BxL), **kwargs)


def _at(x_BxLxD, query_positions):
  return x_BxLxD if query_positions is None else x_BxLxD[:, query_positions]


MLP_RATIO = 4  # the dense block's hidden width, in d_model (Vaswani et al.)


class DenseBlock(nnx.Module):
  """The position-wise MLP of a Transformer layer: Linear(D, 4D), GELU,
  Linear(4D, D), on its pre-LayerNorm input; returns it without the
  residual."""

  def __init__(self, d_model: int, *, rngs: nnx.Rngs):
    self.norm = nnx.LayerNorm(d_model, rngs=rngs)
    self.hidden = nnx.Linear(d_model, MLP_RATIO * d_model, rngs=rngs)
    self.out = nnx.Linear(MLP_RATIO * d_model, d_model, rngs=rngs)

  def __call__(self, x_BxLxD):
    return self.out(jax.nn.gelu(self.hidden(self.norm(x_BxLxD))))


class TransformerClassifier(AttentionClassifier):
  """The Transformer brick: each layer is x + attention(LayerNorm(x)), then
  x + MLP(LayerNorm(x)) (pre-LayerNorm, as GPT-2 and most since). The same
  embeddings, attention layers, read-out and attention weights as
  `AttentionClassifier`; only the layer differs. No final LayerNorm: the
  read-out sees the residual stream as attention-only's does."""

  def __init__(self, *, d_model: int, num_layers: int, rngs: nnx.Rngs,
               **kwargs):
    super().__init__(d_model=d_model, num_layers=num_layers, rngs=rngs,
                     **kwargs)
    self.attention_norms = nnx.List([nnx.LayerNorm(d_model, rngs=rngs)
                                     for _ in range(num_layers)])
    self.dense = nnx.List([DenseBlock(d_model, rngs=rngs)
                           for _ in range(num_layers)])

  def block(self, i, x_BxLxD, *, query_positions, head_mask, weights,
            key_mask=None, key_cap=None):
    # The norm is position-wise: normalising every position, then keeping
    # the queries', is exact.
    y, att = self.layers[i](self.attention_norms[i](x_BxLxD),
                            query_positions=query_positions,
                            head_mask=head_mask, weights=weights,
                            key_mask=key_mask, key_cap=key_cap)
    x_BxQxD = _at(x_BxLxD, query_positions) + y
    return x_BxQxD + self.dense[i](x_BxQxD), att
