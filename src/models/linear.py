"""Linear recurrent classifiers: linear attention, the LRU and Mamba's
selective SSM, each computed in parallel over positions.

All three carry a fixed-size state from position to position (the registry's
LINEAR family), yet none loops over positions in its forward pass: linear
attention multiplies a causally masked L x L grid, the LRU and Mamba run
`jax.lax.associative_scan` over the linear recurrence
h_t = a_t * h_{t-1} + b_t. Each mixer also has a `recurrent_form`, a
`lax.scan` one position at a time, which only the tests use as a reference.

Shape legend: B batch, L sequence length (keys), Q query positions, D
d_model, H heads, K d_model // H (per-head width), N state size (the LRU: D
complex units; Mamba: 16 per channel), I Mamba's inner width E * D, R
Mamba's rank of Delta, W Mamba's convolution width, C classes.
"""

import math

import jax
import jax.numpy as jnp
from flax import nnx

from src.models import attention as attention_lib


def _affine_combine(earlier, later):
  """Composes two spans of h -> a * h + b, `earlier` first: the associative
  operator that lets a scan compute every h_t of a linear recurrence."""
  a1, b1 = earlier
  a2, b2 = later
  return a1 * a2, a2 * b1 + b2


def _read_out(classifier, h_BxLxD, per_position):
  if per_position:
    return classifier(h_BxLxD)
  return classifier(h_BxLxD[:, -1])


# -- recurrences over chunks of positions -----------------------------------------

# Positions per chunk where a recurrence runs as a `lax.scan` over chunks
# with each chunk's positions unrolled (Mamba's selective scan): the state
# entering each chunk is all its VJP keeps, so C trades memory (L / C states)
# against a longer program. On a CPU, chunks of 4 ran faster than 1, 2, 8
# and 16 and compiled in half the time of 16 (docs/ENGINEERING.md has the
# measurements); accelerators get longer chunks.
SCAN_CHUNK_BY_BACKEND = {'cpu': 4}
SCAN_CHUNK_DEFAULT = 64


def scan_chunk() -> int:
  return SCAN_CHUNK_BY_BACKEND.get(jax.default_backend(), SCAN_CHUNK_DEFAULT)


def _to_chunks(x_BxLxZ, C):
  """x_MxCxBxZ: positions in M chunks of C (the last padded with zeros),
  chunk and position first, for `lax.scan`; Z any trailing axes."""
  B, L = x_BxLxZ.shape[:2]
  M = -(-L // C)
  pad = [(0, 0), (0, M * C - L)] + [(0, 0)] * (x_BxLxZ.ndim - 2)
  x_BxMxCxZ = jnp.pad(x_BxLxZ, pad).reshape(B, M, C, *x_BxLxZ.shape[2:])
  return jnp.moveaxis(x_BxMxCxZ, 0, 2)


def _from_chunks(x_MxCxBxZ, L):
  M, C, B = x_MxCxBxZ.shape[:3]
  x_BxMxCxZ = jnp.moveaxis(x_MxCxBxZ, 2, 0)
  return x_BxMxCxZ.reshape(B, M * C, *x_MxCxBxZ.shape[3:])[:, :L]


# -- linear attention (Katharopoulos et al. 2020) ----------------------------------

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
    return _read_out(self.classifier, h_BxLxD, per_position), aux

  def __call__(self, tokens_BxL, **kwargs):
    return self.classify(self.embed(tokens_BxL), **kwargs)


# -- LRU (Orvieto et al. 2023) -----------------------------------------------------

# The paper's ring for its longest-range tasks (Orvieto et al. 2023, sec. 3.3
# and the appendix's hyperparameters: PathX needs |lambda| near 1 and small
# phases): r_min 0.9, r_max 0.999, max_phase pi/10.
LRU_RING = (0.9, 0.999, math.pi / 10)  # (r_min, r_max, max_phase)
# The whole unit disk, the defaults of the paper's appendix code and of
# minimal-LRU (r_min 0, r_max 1, max_phase 2 pi): fast units beside slow ones.
LRU_DISK = (0.0, 1.0, 2 * math.pi)


class LRU(nnx.Module):
  """The linear recurrent unit, N complex units on a D-wide input:
  h_t = lambda * h_{t-1} + gamma * (B u_t), y_t = Re(C h_t) + D * u_t,
  lambda = exp(-exp(nu_log) + i exp(theta_log)), gamma = exp(gamma_log).

  Initialisation as the paper's appendix code (and its JAX port,
  NicolasZucchet/minimal-LRU): lambda uniform over the ring's area between
  radii r_min and r_max (|lambda|^2 ~ U(r_min^2, r_max^2), so nu_log =
  log(-log(|lambda|^2) / 2)), phase U(0, max_phase),
  gamma_log = log(sqrt(1 - |lambda|^2)), Re B, Im B ~ N(0, 1 / (2D)),
  Re C, Im C ~ N(0, 1 / N) (Glorot-style: unit variance in and out),
  D ~ N(0, 1). Complex matrices are held as real and imaginary parts, so
  every parameter the optimiser sees is real.
  """

  def __init__(self, d_model: int, state_size: int, *, r_min: float,
               r_max: float, max_phase: float, rngs: nnx.Rngs):
    D, N = d_model, state_size
    k_nu, k_theta, k_b_re, k_b_im, k_c_re, k_c_im, k_d = jax.random.split(
        rngs.params(), 7)
    u = jax.random.uniform(k_nu, (N,))
    # |lambda|^2 kept above 0: at r_min 0 a draw of u = 0 would put nu_log
    # at inf (a no-op on the ring, whose r_min^2 is far above the floor).
    modulus_sq = jnp.maximum(u * (r_max**2 - r_min**2) + r_min**2, 1e-12)
    self.nu_log = nnx.Param(jnp.log(-0.5 * jnp.log(modulus_sq)))
    # Above 0: the phase is exp(theta_log), and log(0) would be -inf.
    u = jax.random.uniform(k_theta, (N,), minval=1e-6)
    self.theta_log = nnx.Param(jnp.log(max_phase * u))
    modulus = jnp.exp(-jnp.exp(self.nu_log[...]))
    self.gamma_log = nnx.Param(jnp.log(jnp.sqrt(1 - modulus**2)))
    normal = lambda key, shape, fan: (jax.random.normal(key, shape)
                                      / math.sqrt(fan))
    self.B_re = nnx.Param(normal(k_b_re, (N, D), 2 * D))
    self.B_im = nnx.Param(normal(k_b_im, (N, D), 2 * D))
    self.C_re = nnx.Param(normal(k_c_re, (D, N), N))
    self.C_im = nnx.Param(normal(k_c_im, (D, N), N))
    self.D = nnx.Param(jax.random.normal(k_d, (D,)))

  def eigenvalues(self):
    """lambda_N, the diagonal of the recurrence."""
    return jnp.exp(-jnp.exp(self.nu_log[...])
                   + 1j * jnp.exp(self.theta_log[...]))

  def _inputs(self, u_BxLxD):
    """gamma * (B u_t) at every position, bu_BxLxN (complex)."""
    B_NxD = ((self.B_re[...] + 1j * self.B_im[...])
             * jnp.exp(self.gamma_log[...])[:, None])
    return jnp.einsum('bld,nd->bln', u_BxLxD.astype(B_NxD.dtype), B_NxD)

  def _outputs(self, h_BxLxN, u_BxLxD):
    C_DxN = self.C_re[...] + 1j * self.C_im[...]
    return (jnp.einsum('bln,dn->bld', h_BxLxN, C_DxN).real
            + self.D[...] * u_BxLxD)

  def states(self, u_BxLxD):
    """h_BxLxN (complex), by an associative scan over positions."""
    bu_BxLxN = self._inputs(u_BxLxD)
    # lambda is the same at every position: one row, broadcast by the scan.
    lambda_1xLxN = jnp.broadcast_to(self.eigenvalues(),
                                    (1,) + bu_BxLxN.shape[1:])
    _, h_BxLxN = jax.lax.associative_scan(
        _affine_combine, (lambda_1xLxN, bu_BxLxN), axis=1)
    return h_BxLxN

  def recurrent_states(self, u_BxLxD):
    """h_BxLxN one position at a time, by `lax.scan` (tests only)."""
    bu_LxBxN = jnp.swapaxes(self._inputs(u_BxLxD), 0, 1)
    lambda_N = self.eigenvalues()

    def step(h_BxN, bu_BxN):
      h_BxN = lambda_N * h_BxN + bu_BxN
      return h_BxN, h_BxN

    _, h_LxBxN = jax.lax.scan(step, jnp.zeros_like(bu_LxBxN[0]), bu_LxBxN)
    return jnp.swapaxes(h_LxBxN, 0, 1)

  def __call__(self, u_BxLxD):
    return self._outputs(self.states(u_BxLxD), u_BxLxD)

  def recurrent_form(self, u_BxLxD):
    return self._outputs(self.recurrent_states(u_BxLxD), u_BxLxD)


class LRUBlock(nnx.Module):
  """The paper's block (Orvieto et al. 2023, fig. 1; minimal-LRU's
  SequenceLayer with prenorm): x + GLU(GELU(LRU(LayerNorm(x)))), with
  GLU(y) = W1 y * sigmoid(W2 y); dropout omitted."""

  def __init__(self, d_model: int, *, ring=LRU_RING, rngs: nnx.Rngs):
    self.norm = nnx.LayerNorm(d_model, rngs=rngs)
    r_min, r_max, max_phase = ring
    self.lru = LRU(d_model, d_model, r_min=r_min, r_max=r_max,
                   max_phase=max_phase, rngs=rngs)
    self.glu_value = nnx.Linear(d_model, d_model, rngs=rngs)
    self.glu_gate = nnx.Linear(d_model, d_model, rngs=rngs)

  def __call__(self, x_BxLxD, *, recurrent=False):
    u_BxLxD = self.norm(x_BxLxD)
    y_BxLxD = self.lru.recurrent_form(u_BxLxD) if recurrent else self.lru(
        u_BxLxD)
    y_BxLxD = jax.nn.gelu(y_BxLxD)  # tanh approximation: minimal-LRU's
    y_BxLxD = self.glu_value(y_BxLxD) * jax.nn.sigmoid(self.glu_gate(y_BxLxD))
    return x_BxLxD + y_BxLxD


class LRUClassifier(nnx.Module):
  """Token embedding, `num_layers` LRU blocks, a linear classifier on the
  last position. No final norm: the paper's stack has none (its decoder
  reads the last block's output). `ring`: (r_min, r_max, max_phase) of the
  eigenvalues' initialisation."""

  def __init__(self, *, vocab_size: int, length: int, d_model: int,
               num_classes: int, num_heads: int = 1, num_layers: int = 1,
               ring=LRU_RING, rngs: nnx.Rngs):
    del length, num_heads  # positions are the recurrence's; no heads
    self.token_embed = nnx.Embed(vocab_size, d_model, rngs=rngs)
    self.layers = nnx.List([LRUBlock(d_model, ring=ring, rngs=rngs)
                            for _ in range(num_layers)])
    self.classifier = nnx.Linear(d_model, num_classes, rngs=rngs)

  def embed(self, tokens_BxL):
    return self.token_embed(tokens_BxL)

  def hidden_states(self, x_BxLxD, *, recurrent=False):
    """The last block's output at every position, h_BxLxD; recurrent=True
    steps every LRU with `lax.scan` (tests only)."""
    for layer in self.layers:
      x_BxLxD = layer(x_BxLxD, recurrent=recurrent)
    return x_BxLxD

  def classify(self, x_BxLxD, *, per_position=False, **unused):
    return _read_out(self.classifier, self.hidden_states(x_BxLxD),
                     per_position), {}

  def __call__(self, tokens_BxL, **kwargs):
    return self.classify(self.embed(tokens_BxL), **kwargs)


# -- Mamba (Gu & Dao 2023) ---------------------------------------------------------

MAMBA_EXPAND = 2  # E: inner width E * D
MAMBA_STATE = 16  # N per channel
MAMBA_CONV = 4  # W: the short causal convolution's width
MAMBA_DT_MIN, MAMBA_DT_MAX = 1e-3, 1e-1  # softplus(dt bias) log-uniform here
MAMBA_DT_FLOOR = 1e-4  # the reference clamps the drawn Delta to this


def _torch_uniform(fan_in):
  """PyTorch's default for nn.Linear and nn.Conv1d weights (kaiming-uniform,
  a = sqrt(5)) and for their biases: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
  bound = 1 / math.sqrt(fan_in)
  return lambda key, shape, dtype=jnp.float32: jax.random.uniform(
      key, shape, dtype, -bound, bound)


def _ssm_step(h_BxNxI, u_BxI, delta_BxI, A_NxI, b_BxN):
  """One position: h = dA h + dB x with dA = exp(Delta A), dB x = Delta B x
  (Mamba's zero-order hold for A, Euler for B, as its `selective_scan_ref`);
  returns h and dA. The channels I are the minor axis: XLA's CPU backend
  compiles the chunk's unrolled positions in about two thirds of the time
  the (B, I, N) order took."""
  dA_BxNxI = jnp.exp(delta_BxI[:, None, :] * A_NxI)
  dBx_BxNxI = b_BxN[..., None] * (delta_BxI * u_BxI)[:, None, :]
  return dA_BxNxI * h_BxNxI + dBx_BxNxI, dA_BxNxI


# Contractions over N or I, as `einsum`: a dot with one batch axis (the
# strings, and the seeds under vmap), faster than a product and a sum (a
# reduce fusion) and than contracting over the chunk's positions as well
# (many tiny matrix products): docs/ENGINEERING.md has the A/B.
def _sum_n(x_BxNxI, y_BxN):
  return jnp.einsum('bni,bn->bi', x_BxNxI, y_BxN)


def _sum_i(x_BxNxI, y_BxI):
  return jnp.einsum('bni,bi->bn', x_BxNxI, y_BxI)


def _selective_forward(u_BxLxI, delta_BxLxI, A_NxI, b_BxLxN, c_BxLxN):
  """(C_t . h_t)_BxLxI and the state entering each chunk, h0_MxBxNxI."""
  B, L, I = u_BxLxI.shape
  chunk = lambda z: _to_chunks(z, scan_chunk())

  def position(h_BxNxI, inputs):
    u_BxI, delta_BxI, b_BxN, c_BxN = inputs
    h_BxNxI, _ = _ssm_step(h_BxNxI, u_BxI, delta_BxI, A_NxI, b_BxN)
    return h_BxNxI, _sum_n(h_BxNxI, c_BxN)

  def chunk_step(h0_BxNxI, inputs_CxBxZ):
    h_BxNxI, ch_CxBxI = jax.lax.scan(position, h0_BxNxI, inputs_CxBxZ,
                                     unroll=True)
    return h_BxNxI, (ch_CxBxI, h0_BxNxI)

  h0_BxNxI = jnp.zeros((B, A_NxI.shape[0], I), u_BxLxI.dtype)
  _, (ch_MxCxBxI, h0_MxBxNxI) = jax.lax.scan(
      chunk_step, h0_BxNxI, tuple(map(chunk, (u_BxLxI, delta_BxLxI, b_BxLxN,
                                              c_BxLxN))))
  return _from_chunks(ch_MxCxBxI, L), h0_MxBxNxI


@jax.custom_vjp
def selective_scan(u_BxLxI, delta_BxLxI, A_IxN, b_BxLxN, c_BxLxN, D_I):
  """y_t = C_t . h_t + D * u_t, h_t = exp(Delta_t A) h_{t-1} + Delta_t B_t u_t,
  every channel its own N states (Mamba's `selective_scan_ref` without the
  gate), y_BxLxI.

  A `lax.scan` over chunks of `scan_chunk()` positions carries h_BxNxI, and
  within a chunk a scan over its positions; no (B, L, N, I) tensor exists.
  The VJP keeps, as Mamba's kernel, the inputs and the state entering each
  chunk, and recomputes one chunk's states at a time in the backward pass,
  a scan over the chunks from the end.
  """
  ch_BxLxI, _ = _selective_forward(u_BxLxI, delta_BxLxI, A_IxN.T, b_BxLxN,
                                   c_BxLxN)
  return ch_BxLxI + D_I * u_BxLxI


def _selective_scan_forward(u_BxLxI, delta_BxLxI, A_IxN, b_BxLxN, c_BxLxN,
                            D_I):
  ch_BxLxI, h0_MxBxNxI = _selective_forward(u_BxLxI, delta_BxLxI, A_IxN.T,
                                            b_BxLxN, c_BxLxN)
  inputs = (u_BxLxI, delta_BxLxI, A_IxN, b_BxLxN, c_BxLxN, D_I)
  return ch_BxLxI + D_I * u_BxLxI, (inputs, h0_MxBxNxI)


def _selective_scan_backward(residuals, y_bar_BxLxI):
  """With g_t = dLoss/dh_t = C_t y_bar_t + exp(Delta_{t+1} A) g_{t+1} (a
  recurrence from the end) and a_bar_t = g_t h_{t-1} exp(Delta_t A) the
  gradient reaching Delta through the decay, every input's gradient at t is
  a sum of products with g_t, h_t or a_bar_t. Chunk by chunk from the end:
  the chunk's states recomputed from the state entering it (kept as h_{t-1}
  and dA_t; h_t = dA_t h_{t-1} + dB x_t again where it is needed), then its
  positions from the last, carrying exp(Delta_{t+1} A) g_{t+1} and A's
  summed gradient."""
  (u_BxLxI, delta_BxLxI, A_IxN, b_BxLxN, c_BxLxN, D_I), h0_MxBxNxI = residuals
  A_NxI = A_IxN.T
  L = u_BxLxI.shape[1]
  chunk = lambda z: _to_chunks(z, scan_chunk())

  def states(h_prev_BxNxI, inputs):
    h_BxNxI, dA_BxNxI = _ssm_step(h_prev_BxNxI, *inputs[:2], A_NxI,
                                  inputs[2])
    return h_BxNxI, (h_prev_BxNxI, dA_BxNxI)

  def position(carry, inputs):
    future_BxNxI, A_bar_NxI = carry
    h_prev_BxNxI, dA_BxNxI, u, delta, b, c, y_bar = inputs
    x = delta * u
    h_BxNxI = dA_BxNxI * h_prev_BxNxI + b[..., None] * x[:, None, :]
    g_BxNxI = c[..., None] * y_bar[:, None, :] + future_BxNxI
    a_bar_BxNxI = g_BxNxI * h_prev_BxNxI * dA_BxNxI
    x_bar_BxI = _sum_n(g_BxNxI, b)  # x = Delta u
    grads = (x_bar_BxI * delta,
             jnp.sum(a_bar_BxNxI * A_NxI, axis=1) + x_bar_BxI * u,
             _sum_i(g_BxNxI, x), _sum_i(h_BxNxI, y_bar))
    A_bar_NxI = A_bar_NxI + jnp.sum(a_bar_BxNxI * delta[:, None, :], axis=0)
    return (dA_BxNxI * g_BxNxI, A_bar_NxI), grads

  def chunk_step(carry, inputs):
    h0_BxNxI, u, delta, b, c, y_bar = inputs
    _, (h_prev_CxBxNxI, dA_CxBxNxI) = jax.lax.scan(
        states, h0_BxNxI, (u, delta, b), unroll=True)
    return jax.lax.scan(
        position, carry, (h_prev_CxBxNxI, dA_CxBxNxI, u, delta, b, c, y_bar),
        reverse=True, unroll=True)

  carry = (jnp.zeros_like(h0_MxBxNxI[0]), jnp.zeros_like(A_NxI))
  (_, A_bar_NxI), grads = jax.lax.scan(
      chunk_step, carry, (h0_MxBxNxI,) + tuple(map(chunk, (
          u_BxLxI, delta_BxLxI, b_BxLxN, c_BxLxN, y_bar_BxLxI))),
      reverse=True)
  u_bar, delta_bar, b_bar, c_bar = (_from_chunks(z, L) for z in grads)
  return (y_bar_BxLxI * D_I + u_bar, delta_bar, A_bar_NxI.T, b_bar, c_bar,
          jnp.sum(y_bar_BxLxI * u_BxLxI, axis=(0, 1)))


selective_scan.defvjp(_selective_scan_forward, _selective_scan_backward)


class SelectiveSSM(nnx.Module):
  """The Mamba mixer (Gu & Dao 2023, fig. 3; state-spaces/mamba
  `mamba_simple.Mamba`): in_proj to x and z (I wide each); x through a
  causal depthwise convolution (width W) and SiLU; input-dependent
  Delta = softplus(dt_proj(x_proj_R(x))), B_t, C_t = x_proj_N(x); the
  selective scan with A = -exp(A_log); gated by SiLU(z); out_proj.

  Initialisation as the reference: A_log = log(1..N) per channel (S4D-real),
  D = 1, dt bias = softplus^-1 of Delta ~ log-uniform [1e-3, 1e-1] (floored
  at 1e-4), dt_proj weights U(+-R^-1/2); the other projections and the
  convolution PyTorch's default U(+-1/sqrt(fan_in)), its bias too; no
  projection biases; out_proj divided by sqrt(num_layers), the Mamba LM's
  GPT-2-style rescaling of a residual branch.
  """

  def __init__(self, d_model: int, *, num_layers: int, rngs: nnx.Rngs):
    D, N, W = d_model, MAMBA_STATE, MAMBA_CONV
    I = MAMBA_EXPAND * D
    R = math.ceil(D / 16)
    self.rank = R
    self.in_proj = nnx.Linear(D, 2 * I, use_bias=False,
                              kernel_init=_torch_uniform(D), rngs=rngs)
    self.conv_kernel = nnx.Param(_torch_uniform(W)(rngs.params(), (W, I)))
    self.conv_bias = nnx.Param(_torch_uniform(W)(rngs.params(), (I,)))
    self.x_proj = nnx.Linear(I, R + 2 * N, use_bias=False,
                             kernel_init=_torch_uniform(I), rngs=rngs)
    self.dt_proj = nnx.Linear(R, I, kernel_init=_torch_uniform(R), rngs=rngs)
    dt = jnp.exp(jax.random.uniform(
        rngs.params(), (I,), minval=math.log(MAMBA_DT_MIN),
        maxval=math.log(MAMBA_DT_MAX)))
    dt = jnp.maximum(dt, MAMBA_DT_FLOOR)
    self.dt_proj.bias[...] = dt + jnp.log(-jnp.expm1(-dt))  # softplus^-1
    self.A_log = nnx.Param(jnp.log(jnp.broadcast_to(
        jnp.arange(1, N + 1, dtype=jnp.float32), (I, N))))
    self.D = nnx.Param(jnp.ones((I,)))
    self.out_proj = nnx.Linear(
        I, D, use_bias=False, rngs=rngs,
        kernel_init=lambda key, shape, dtype=jnp.float32: _torch_uniform(I)(
            key, shape, dtype) / math.sqrt(num_layers))

  def _select(self, x_BxLxI):
    """Delta_BxLxI, B_BxLxN, C_BxLxN from the convolved input."""
    N = MAMBA_STATE
    dt_BxLxR, b_BxLxN, c_BxLxN = jnp.split(
        self.x_proj(x_BxLxI), [self.rank, self.rank + N], axis=-1)
    return jax.nn.softplus(self.dt_proj(dt_BxLxR)), b_BxLxN, c_BxLxN

  def __call__(self, x_BxLxD):
    L = x_BxLxD.shape[1]
    W = MAMBA_CONV
    x_BxLxI, z_BxLxI = jnp.split(self.in_proj(x_BxLxD), 2, axis=-1)
    # Causal: position t sees t-W+1..t; the kernel's last tap is position t.
    padded = jnp.pad(x_BxLxI, ((0, 0), (W - 1, 0), (0, 0)))
    x_BxLxI = sum(self.conv_kernel[w] * padded[:, w:w + L]
                  for w in range(W)) + self.conv_bias[...]
    x_BxLxI = jax.nn.silu(x_BxLxI)
    delta_BxLxI, b_BxLxN, c_BxLxN = self._select(x_BxLxI)
    y_BxLxI = selective_scan(x_BxLxI, delta_BxLxI, -jnp.exp(self.A_log[...]),
                             b_BxLxN, c_BxLxN, self.D[...])
    return self.out_proj(y_BxLxI * jax.nn.silu(z_BxLxI))

  def recurrent_form(self, x_BxLxD):
    """The mixer one position at a time, as the reference's `step`: a window
    of the last W inputs for the convolution, h_BxIxN for the SSM, with
    dA = exp(Delta A), dB x = Delta B x (tests only)."""
    B = x_BxLxD.shape[0]
    W, N = MAMBA_CONV, MAMBA_STATE
    x_BxLxI, z_BxLxI = jnp.split(self.in_proj(x_BxLxD), 2, axis=-1)
    I = x_BxLxI.shape[-1]
    A_IxN = -jnp.exp(self.A_log[...])

    def step(carry, x_BxI):
      window_BxWxI, h_BxIxN = carry
      window_BxWxI = jnp.concatenate([window_BxWxI[:, 1:], x_BxI[:, None]], 1)
      u_BxI = jax.nn.silu(jnp.einsum('bwi,wi->bi', window_BxWxI,
                                     self.conv_kernel[...])
                          + self.conv_bias[...])
      delta_Bx1xI, b_Bx1xN, c_Bx1xN = self._select(u_BxI[:, None])
      delta_BxI, b_BxN, c_BxN = delta_Bx1xI[:, 0], b_Bx1xN[:, 0], c_Bx1xN[:, 0]
      dA_BxIxN = jnp.exp(delta_BxI[..., None] * A_IxN)
      dBx_BxIxN = (delta_BxI * u_BxI)[..., None] * b_BxN[:, None, :]
      h_BxIxN = dA_BxIxN * h_BxIxN + dBx_BxIxN
      y_BxI = jnp.einsum('bin,bn->bi', h_BxIxN, c_BxN) + self.D[...] * u_BxI
      return (window_BxWxI, h_BxIxN), y_BxI

    carry = (jnp.zeros((B, W, I)), jnp.zeros((B, I, N)))
    _, y_LxBxI = jax.lax.scan(step, carry, jnp.swapaxes(x_BxLxI, 0, 1))
    y_BxLxI = jnp.swapaxes(y_LxBxI, 0, 1)
    return self.out_proj(y_BxLxI * jax.nn.silu(z_BxLxI))


class MambaBlock(nnx.Module):
  """x + Mamba(RMSNorm(x)): the Mamba LM's pre-norm residual block (its
  fused add-then-norm computes the same numbers); eps 1e-5 as the LM."""

  def __init__(self, d_model: int, *, num_layers: int, rngs: nnx.Rngs):
    self.norm = nnx.RMSNorm(d_model, epsilon=1e-5, rngs=rngs)
    self.mixer = SelectiveSSM(d_model, num_layers=num_layers, rngs=rngs)

  def __call__(self, x_BxLxD, *, recurrent=False):
    u_BxLxD = self.norm(x_BxLxD)
    y_BxLxD = (self.mixer.recurrent_form(u_BxLxD) if recurrent
               else self.mixer(u_BxLxD))
    return x_BxLxD + y_BxLxD


class MambaClassifier(nnx.Module):
  """Token embedding, `num_layers` Mamba blocks, a final RMSNorm (the LM's
  norm_f), a linear classifier on the last position."""

  def __init__(self, *, vocab_size: int, length: int, d_model: int,
               num_classes: int, num_heads: int = 1, num_layers: int = 1,
               rngs: nnx.Rngs):
    del length, num_heads  # positions are the recurrence's; no heads
    self.token_embed = nnx.Embed(vocab_size, d_model, rngs=rngs)
    self.layers = nnx.List([
        MambaBlock(d_model, num_layers=num_layers, rngs=rngs)
        for _ in range(num_layers)
    ])
    self.final_norm = nnx.RMSNorm(d_model, epsilon=1e-5, rngs=rngs)
    self.classifier = nnx.Linear(d_model, num_classes, rngs=rngs)

  def embed(self, tokens_BxL):
    return self.token_embed(tokens_BxL)

  def hidden_states(self, x_BxLxD, *, recurrent=False):
    """The final normalised states at every position, h_BxLxD;
    recurrent=True steps every mixer with `lax.scan` (tests only)."""
    for layer in self.layers:
      x_BxLxD = layer(x_BxLxD, recurrent=recurrent)
    return self.final_norm(x_BxLxD)

  def classify(self, x_BxLxD, *, per_position=False, **unused):
    return _read_out(self.classifier, self.hidden_states(x_BxLxD),
                     per_position), {}

  def __call__(self, tokens_BxL, **kwargs):
    return self.classify(self.embed(tokens_BxL), **kwargs)
