"""The linear recurrent unit (Orvieto et al. 2023): a diagonal complex
linear recurrence h_t = lambda * h_{t-1} + gamma * (B u_t), computed in
parallel over positions by `jax.lax.associative_scan` (a fixed-size state,
the registry's LINEAR family, with no loop over positions in its forward
pass). `recurrent_form`, a `lax.scan` one position at a time, is the tests'
reference.

Shape legend: B batch, L sequence length, D d_model, N state size (D
complex units), C classes.
"""

import math

import jax
import jax.numpy as jnp
from flax import nnx

from src.models import readout


def affine_combine(earlier, later):
  """Composes two spans of h -> a * h + b, `earlier` first: the associative
  operator that lets a scan compute every h_t of a linear recurrence."""
  a1, b1 = earlier
  a2, b2 = later
  return a1 * a2, a2 * b1 + b2


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
        affine_combine, (lambda_1xLxN, bu_BxLxN), axis=1)
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
    return readout.read_out(self.classifier, self.hidden_states(x_BxLxD),
                            per_position), {}

  def __call__(self, tokens_BxL, **kwargs):
    return self.classify(self.embed(tokens_BxL), **kwargs)
