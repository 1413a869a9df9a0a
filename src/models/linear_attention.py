"""Causal linear attention (Katharopoulos et al. 2020): attention whose
softmax is replaced by a positive feature map, so that it is also a linear
recurrence with a fixed-size state (the registry's LINEAR family).

The forward pass does not loop over positions: training runs the chunked
form (C x C grids within a chunk, running sums between chunks), the weights
come from the causally masked L x L grid, and `recurrent_form` (a `lax.scan`
one position at a time) is the tests' reference.

Shape legend: B batch, L sequence length (keys), Q query positions, D
d_model, H heads, K d_model // H (per-head width), C classes.
"""

import jax
import jax.numpy as jnp
from flax import nnx

from src.models import attention as attention_lib
from src.models import readout

# fast-transformers' CausalLinearAttention keeps the normaliser off zero with
# this; the feature map is positive, so it only matters for vanishing features.
LINEAR_ATTENTION_EPS = 1e-6
# Positions per chunk of the chunked form: C x C grids within a chunk, running
# sums between chunks; FLOPs per position ~ (C + K) D.
LINEAR_ATTENTION_CHUNK = 64


def elu_feature_map(x):
  """phi(x) = elu(x) + 1: positive, so phi(q) . phi(k) is a valid similarity
  (Katharopoulos et al. 2020, sec. 3.2.1)."""
  return jax.nn.elu(x) + 1


class CausalLinearAttention(attention_lib.CausalSelfAttention):
  """Multi-head causal linear attention.

  V'_i = sum_{j<=i} phi(q_i).phi(k_j) v_j / sum_{j<=i} phi(q_i).phi(k_j)
  (Katharopoulos et al. 2020, sec. 3.3), computed in its parallel form:
  the L x L grid phi(Q) phi(K)^T, masked causally and normalised by its row
  sums. The projections are the attention layer's (it inherits them: no
  biases), so the two layers differ only in the similarity.
  """

  def _features(self, x_BxLxD):
    B, L, D = x_BxLxD.shape
    H = self.num_heads
    split = lambda y: y.reshape(B, L, H, D // H)
    return (elu_feature_map(split(self.query(x_BxLxD))),
            elu_feature_map(split(self.key(x_BxLxD))),
            split(self.value(x_BxLxD)))

  def _output(self, mixed_BxLxHxK, head_mask):
    if head_mask is not None:
      mixed_BxLxHxK = mixed_BxLxHxK * head_mask[:, None]
    B, L = mixed_BxLxHxK.shape[:2]
    return self.out(mixed_BxLxHxK.reshape(B, L, -1))

  def __call__(self, x_BxLxD, head_mask=None, weights=True, key_mask=None,
               key_cap=None):
    """Returns (y_BxLxD, att_BxHxQxL) with Q = L; y excludes the residual.
    weights=True: the quadratic form, whose att rows sum to 1 (up to the
    eps) and are zero above the diagonal; weights=False: the chunked form
    at linear cost, and att is None. key_mask (quadratic form only): as
    the attention layer's, keys removed and the rest renormalised."""
    if weights or key_mask is not None or key_cap is not None:
      return self.quadratic_form(x_BxLxD, head_mask, key_mask, key_cap)
    return self.chunked_form(x_BxLxD, head_mask), None

  def quadratic_form(self, x_BxLxD, head_mask=None, key_mask=None,
                     key_cap=None):
    """(y_BxLxD, att_BxHxQxL): the causally masked L x L grid."""
    L = x_BxLxD.shape[1]
    phi_q_BxQxHxK, phi_k_BxLxHxK, v_BxLxHxK = self._features(x_BxLxD)
    causal_QxL = jnp.arange(L)[None, :] <= jnp.arange(L)[:, None]
    if key_mask is not None:  # B x 1 x Q x L (or 1 x Q x L)
      causal_QxL = causal_QxL & jnp.asarray(key_mask)[..., None, None, :]
    sim_BxHxQxL = jnp.einsum('bqhk,blhk->bhql', phi_q_BxQxHxK, phi_k_BxLxHxK)
    sim_BxHxQxL = jnp.where(causal_QxL, sim_BxHxQxL, 0.0)
    # An explicit reciprocal of unbroadcast sums, as attention's `softmax`,
    # so that the numbers do not depend on the device count.
    att_BxHxQxL = sim_BxHxQxL * (
        1 / (sim_BxHxQxL.sum(-1, keepdims=True) + LINEAR_ATTENTION_EPS))
    if key_cap is not None:
      att_BxHxQxL = attention_lib.cap_weights(att_BxHxQxL, key_cap)
    mixed_BxQxHxK = jnp.einsum('bhql,blhk->bqhk', att_BxHxQxL, v_BxLxHxK)
    return self._output(mixed_BxQxHxK, head_mask), att_BxHxQxL

  def chunked_form(self, x_BxLxD, head_mask=None):
    """y_BxLxD at linear cost (Katharopoulos et al. 2020, sec. 3.3 computed
    by blocks): within a chunk of C positions the C x C masked grid; from
    the chunks before it the running sums S = sum phi(k) v^T and z = sum
    phi(k), prefix sums over chunks (no loop). FLOPs ~ L (C + K) D."""
    B, L, D = x_BxLxD.shape
    C = min(LINEAR_ATTENTION_CHUNK, L)  # no padding of a short string to C
    M = -(-L // C)
    phi_q_BxLxHxK, phi_k_BxLxHxK, v_BxLxHxK = self._features(x_BxLxD)
    # Zero padding at the end: a padded key adds nothing to any sum, and a
    # padded query's output is cut off.
    by_chunk = lambda z: jnp.pad(
        z, ((0, 0), (0, M * C - L), (0, 0), (0, 0))).reshape(
            B, M, C, *z.shape[2:])
    q_BxMxCxHxK, k_BxMxCxHxK, v_BxMxCxHxK = map(
        by_chunk, (phi_q_BxLxHxK, phi_k_BxLxHxK, v_BxLxHxK))
    causal_CxC = jnp.arange(C)[None, :] <= jnp.arange(C)[:, None]
    sim_BxMxHxCxC = jnp.einsum('bmqhk,bmlhk->bmhql', q_BxMxCxHxK, k_BxMxCxHxK)
    sim_BxMxHxCxC = jnp.where(causal_CxC, sim_BxMxHxCxC, 0.0)
    # What each chunk adds to the running sums, then the sums of the chunks
    # strictly before it.
    S_BxMxHxKxK = jnp.einsum('bmlhk,bmlhv->bmhkv', k_BxMxCxHxK, v_BxMxCxHxK)
    z_BxMxHxK = k_BxMxCxHxK.sum(2)
    before = lambda z: jnp.concatenate(
        [jnp.zeros_like(z[:, :1]), jnp.cumsum(z, axis=1)[:, :-1]], axis=1)
    S_BxMxHxKxK, z_BxMxHxK = before(S_BxMxHxKxK), before(z_BxMxHxK)
    numerator_BxMxCxHxK = (
        jnp.einsum('bmhql,bmlhv->bmqhv', sim_BxMxHxCxC, v_BxMxCxHxK)
        + jnp.einsum('bmqhk,bmhkv->bmqhv', q_BxMxCxHxK, S_BxMxHxKxK))
    denominator_BxMxCxH = (
        jnp.swapaxes(sim_BxMxHxCxC.sum(-1), 2, 3)
        + jnp.einsum('bmqhk,bmhk->bmqh', q_BxMxCxHxK, z_BxMxHxK))
    mixed_BxMxCxHxK = numerator_BxMxCxHxK * (
        1 / (denominator_BxMxCxH + LINEAR_ATTENTION_EPS))[..., None]
    mixed_BxLxHxK = mixed_BxMxCxHxK.reshape(B, M * C, *v_BxLxHxK.shape[2:])
    return self._output(mixed_BxLxHxK[:, :L], head_mask)

  def recurrent_form(self, x_BxLxD, head_mask=None):
    """The same layer as an RNN (Katharopoulos et al. 2020, sec. 3.4):
    S_i = S_{i-1} + phi(k_i) v_i^T, z_i = z_{i-1} + phi(k_i),
    V'_i = phi(q_i)^T S_i / (phi(q_i)^T z_i). Returns y_BxLxD (tests only)."""
    phi_q_BxLxHxK, phi_k_BxLxHxK, v_BxLxHxK = self._features(x_BxLxD)
    B, _, H, K = v_BxLxHxK.shape

    def step(carry, inputs):
      S_BxHxKxK, z_BxHxK = carry
      phi_q, phi_k, v = inputs
      S_BxHxKxK = S_BxHxKxK + jnp.einsum('bhk,bhv->bhkv', phi_k, v)
      z_BxHxK = z_BxHxK + phi_k
      numerator = jnp.einsum('bhk,bhkv->bhv', phi_q, S_BxHxKxK)
      denominator = jnp.einsum('bhk,bhk->bh', phi_q, z_BxHxK)
      out = numerator / (denominator + LINEAR_ATTENTION_EPS)[..., None]
      return (S_BxHxKxK, z_BxHxK), out

    carry = (jnp.zeros((B, H, K, K)), jnp.zeros((B, H, K)))
    by_position = lambda y: jnp.swapaxes(y, 0, 1)
    _, mixed_LxBxHxK = jax.lax.scan(
        step, carry, (by_position(phi_q_BxLxHxK), by_position(phi_k_BxLxHxK),
                      by_position(v_BxLxHxK)))
    return self._output(by_position(mixed_LxBxHxK), head_mask)


class LinearAttentionClassifier(nnx.Module):
  """Token + learned position embeddings (as the attention classifier), then
  per layer x = LayerNorm(x + LinearAttention(x)), a final LayerNorm, a
  linear classifier on the last position.

  The norms are those of the paper's code (fast-transformers): its
  TransformerEncoderLayer is post-LN (`norm1(x + attention(x))`) and its
  builder adds a final LayerNorm by default; PyTorch's eps 1e-5. The layer's
  feed-forward half is left out, as the other classifiers here have none.
  """

  def __init__(self, *, vocab_size: int, length: int, d_model: int,
               num_classes: int, num_heads: int = 1, num_layers: int = 1,
               rngs: nnx.Rngs):
    layer_norm = lambda: nnx.LayerNorm(d_model, epsilon=1e-5, rngs=rngs)
    self.token_embed = nnx.Embed(vocab_size, d_model, rngs=rngs)
    self.position_embed = nnx.Embed(length, d_model, rngs=rngs)
    self.layers = nnx.List([
        CausalLinearAttention(d_model, num_heads, rngs=rngs)
        for _ in range(num_layers)
    ])
    self.norms = nnx.List([layer_norm() for _ in range(num_layers)])
    self.final_norm = layer_norm()
    self.classifier = nnx.Linear(d_model, num_classes, rngs=rngs)

  def embed(self, tokens_BxL):
    L = tokens_BxL.shape[1]
    return self.token_embed(tokens_BxL) + self.position_embed(jnp.arange(L))

  def _stack(self, x_BxLxD, form, head_masks, read_out_key_mask=None,
             read_out_key_cap=None):
    """form: 'quadratic' (with the weights), 'chunked' or 'recurrent';
    read_out_key_mask: keys removed from the last layer's weights;
    read_out_key_cap: its keys' weights capped (`cap_weights`)."""
    attention = []
    for i, (layer, norm) in enumerate(zip(self.layers, self.norms)):
      mask = None if head_masks is None else head_masks[i]
      last = i == len(self.layers) - 1
      keys = read_out_key_mask if last else None
      if form == 'recurrent':
        y, att = layer.recurrent_form(x_BxLxD, head_mask=mask), None
      else:
        y, att = layer(x_BxLxD, head_mask=mask, weights=form == 'quadratic',
                       key_mask=keys,
                       key_cap=read_out_key_cap if last else None)
      x_BxLxD = norm(x_BxLxD + y)
      attention.append(att)
    return self.final_norm(x_BxLxD), attention

  def hidden_states(self, x_BxLxD, *, recurrent=False, head_masks=None,
                    form=None):
    """The final normalised states at every position, h_BxLxD, by the
    chunked form; recurrent=True (or form='recurrent') runs every layer's
    `recurrent_form` (tests only), form='quadratic' the L x L grid."""
    form = form or ('recurrent' if recurrent else 'chunked')
    return self._stack(x_BxLxD, form, head_masks)[0]

  def classify(self, x_BxLxD, *, per_position=False, weights=True,
               head_masks=None, read_out_key_mask=None,
               read_out_key_cap=None, **unused):
    """Every query is computed (neither form has a cheaper last row worth a
    third path), so `all_positions` is accepted and ignored.
    weights=True: the quadratic form, and aux['attention'] holds each
    layer's att_BxHxQxL; weights=False (training): the chunked form.
    read_out_key_mask, read_out_key_cap: keys removed from the last layer's
    weights, or their weights capped (the quadratic form; ablations)."""
    quadratic = (weights or read_out_key_mask is not None
                 or read_out_key_cap is not None)
    h_BxLxD, attention = self._stack(
        x_BxLxD, 'quadratic' if quadratic else 'chunked', head_masks,
        read_out_key_mask, read_out_key_cap)
    aux = {'attention': attention} if weights else {}
    return readout.read_out(self.classifier, h_BxLxD, per_position), aux

  def __call__(self, tokens_BxL, **kwargs):
    return self.classify(self.embed(tokens_BxL), **kwargs)
