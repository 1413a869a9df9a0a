"""Mamba (Gu & Dao 2023): blocks of a selective state-space model, a
linear recurrence h_t = exp(Delta_t A) h_{t-1} + Delta_t B_t u_t whose
Delta, B and C depend on the input (a fixed-size state, the registry's
LINEAR family).

On a CPU the selective scan runs as a `lax.scan` over chunks of
positions, each chunk's positions unrolled, with a hand-written backward
pass that keeps only the state entering each chunk; on an accelerator as
an associative scan over positions, log L deep, its (B, L, N, I) states
kept by autodiff.

Shape legend: B batch, L sequence length, D d_model, N state size (16 per
channel), I Mamba's inner width E * D, R Mamba's rank of Delta, W Mamba's
convolution width, C classes; M chunks of C positions (in the chunked
helpers).
"""

import math

import jax
import jax.numpy as jnp
from flax import nnx

from src.models import lru
from src.models import readout


# Where the selective scan walks the positions in sequence. A CPU keeps the
# chunked form, its values and its small memory (the parallel form makes
# and keeps every (B, L, N, I) state: 7 to 8 times a training step's memory at
# L=200); an accelerator runs the positions in parallel, log L deep, where
# chunks in sequence would leave it waiting on each.
SEQUENTIAL_BACKENDS = ('cpu',)


def parallel_scan() -> bool:
  return jax.default_backend() not in SEQUENTIAL_BACKENDS


# Positions per chunk of the sequential form, a `lax.scan` over chunks with
# each chunk's positions unrolled: the state entering each chunk is all its
# VJP keeps, so C trades memory (L / C states) against a longer program.
# Chunks of 4 ran faster than 1, 2, 8 and 16 on a CPU and compiled in half
# the time of 16 (docs/ENGINEERING.md has the measurements).
SCAN_CHUNK = 4


def scan_chunk() -> int:
  return SCAN_CHUNK


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


def selective_scan(u_BxLxI, delta_BxLxI, A_IxN, b_BxLxN, c_BxLxN, D_I):
  """y_t = C_t . h_t + D * u_t, h_t = exp(Delta_t A) h_{t-1} + Delta_t B_t u_t,
  every channel its own N states (Mamba's `selective_scan_ref` without the
  gate), y_BxLxI: in chunks on a CPU, in parallel elsewhere."""
  scan = parallel_selective_scan if parallel_scan() else chunked_selective_scan
  return scan(u_BxLxI, delta_BxLxI, A_IxN, b_BxLxN, c_BxLxN, D_I)


def parallel_selective_scan(u_BxLxI, delta_BxLxI, A_IxN, b_BxLxN, c_BxLxN,
                            D_I):
  """`selective_scan` as an associative scan over positions (the LRU's
  `affine_combine`): every h_t at once, log L levels deep, the whole
  (B, L, N, I) decay, input and state tensors made and kept for autodiff."""
  dA_BxLxNxI = jnp.exp(delta_BxLxI[:, :, None, :] * A_IxN.T)
  dBx_BxLxNxI = b_BxLxN[..., None] * (delta_BxLxI * u_BxLxI)[:, :, None, :]
  _, h_BxLxNxI = jax.lax.associative_scan(
      lru.affine_combine, (dA_BxLxNxI, dBx_BxLxNxI), axis=1)
  return jnp.einsum('blni,bln->bli', h_BxLxNxI, c_BxLxN) + D_I * u_BxLxI


@jax.custom_vjp
def chunked_selective_scan(u_BxLxI, delta_BxLxI, A_IxN, b_BxLxN, c_BxLxN,
                           D_I):
  """`selective_scan` in sequence: a `lax.scan` over chunks of
  `scan_chunk()` positions carries h_BxNxI, and within a chunk a scan over
  its positions; no (B, L, N, I) tensor exists.
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


chunked_selective_scan.defvjp(_selective_scan_forward,
                              _selective_scan_backward)


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
    return readout.read_out(self.classifier, self.hidden_states(x_BxLxD),
                            per_position), {}

  def __call__(self, tokens_BxL, **kwargs):
    return self.classify(self.embed(tokens_BxL), **kwargs)
