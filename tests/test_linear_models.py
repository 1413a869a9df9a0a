"""The linear recurrent classifiers (src/models/linear_attention.py, lru.py
and mamba.py): the parallel forms against their step-by-step references,
parameter counts, the papers' initialisations, and a short training run
that learns."""

import functools
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from src import evaluation, models, tasks, train
from src.models import linear_attention, mamba
from src.models import lru as lru_lib
from tests.helpers import fit

NAMES = ('linear_attention', 'lru', 'mamba')
# float32 (eps 1.2e-7) on states of size 1 to 5: the parallel and recurrent
# forms add the same terms in different orders (a tree of log2 L levels or a
# masked L x L product, against running sums), and the LRU's |lambda| near 1
# keeps every term. Measured: at most 4e-6 (four seeds, L 24 and 64, one and
# two layers); 2e-5 leaves a factor of five.
RTOL, ATOL = 1e-5, 2e-5


def make(name, length=20, d_model=32, num_heads=1, num_layers=1, seed=0):
  return models.make_model(name, vocab_size=11, length=length,
                           d_model=d_model, num_classes=2,
                           num_heads=num_heads, num_layers=num_layers,
                           rngs=nnx.Rngs(seed))


def tokens(batch=4, length=20, seed=0):
  return jax.random.randint(jax.random.key(seed), (batch, length), 0, 11)


def jitted(model, fn, *args):
  """fn(model, *args) compiled: op by op, the scans take seconds."""
  graphdef, state = nnx.split(model)
  return jax.jit(lambda state, *args: fn(nnx.merge(graphdef, state), *args))(
      state, *args)


# -- the parallel forms against the step-by-step references ------------------------

@pytest.mark.parametrize('num_layers', [1, 2])
@pytest.mark.parametrize('name', NAMES)
def test_parallel_form_equals_step_by_step_scan(name, num_layers):
  length = 24
  model = make(name, length=length, num_heads=2, num_layers=num_layers,
               seed=num_layers)
  x = model.embed(tokens(length=length, seed=5))

  def both_forms(model, x):
    recurrent = model.hidden_states(x, recurrent=True)
    return (model.hidden_states(x), recurrent,
            model.classify(x, weights=False)[0],
            model.classify(x, per_position=True, weights=False)[0],
            model.classifier(recurrent))

  parallel, recurrent, logits, every, recurrent_every = jitted(
      model, both_forms, x)
  assert parallel.shape == (4, length, 32)
  np.testing.assert_allclose(parallel, recurrent, rtol=RTOL, atol=ATOL)
  np.testing.assert_allclose(logits, recurrent_every[:, -1], rtol=RTOL,
                             atol=ATOL)
  assert every.shape == (4, length, 2)
  np.testing.assert_allclose(every, recurrent_every, rtol=RTOL, atol=ATOL)
  # The classifier reads the last position of the same computation (up to
  # float rounding: XLA may pick another dot kernel for one position).
  np.testing.assert_allclose(every[:, -1], logits, rtol=1e-6, atol=1e-6)


def test_lru_states_equal_step_by_step_scan():
  model = make('lru', seed=2)
  lru = model.layers[0].lru
  u = jax.random.normal(jax.random.key(3), (3, 40, 32))
  parallel, recurrent = jitted(
      lru, lambda lru, u: (lru.states(u), lru.recurrent_states(u)), u)
  np.testing.assert_allclose(parallel, recurrent, rtol=RTOL, atol=ATOL)


def chunk_lengths(chunk):
  """One length a multiple of the chunk, one not (a partial last chunk)."""
  return (2 * chunk, 2 * chunk + chunk // 2 + 1)


@pytest.mark.parametrize('parallel, chunk, length', [
    (False, chunk, length) for chunk in (mamba.scan_chunk(), 16)
    for length in chunk_lengths(chunk)]  # and a longer chunk, as elsewhere
    + [(True, None, length) for length in (7, 16)])  # accelerators' form
def test_mamba_scans_equal_step_by_step_scan(parallel, chunk, length,
                                             monkeypatch):
  """The chunked scan (a CPU's), and the associative scan (accelerators'),
  both run on the CPU, against `lax.scan` one position at a time."""
  monkeypatch.setattr(mamba, 'scan_chunk', lambda: chunk)
  monkeypatch.setattr(mamba, 'parallel_scan', lambda: parallel)
  model = make('mamba', length=length, num_layers=2, seed=3)
  x = model.embed(tokens(batch=3, length=length, seed=7))
  scanned, recurrent = jitted(model, lambda m, x: (
      m.hidden_states(x), m.hidden_states(x, recurrent=True)), x)
  np.testing.assert_allclose(scanned, recurrent, rtol=RTOL, atol=ATOL)


# Chunks of 4 positions (the sequential form's own).
GRADIENT_CHUNK = 4


@pytest.mark.parametrize('parallel, length', [
    (False, length) for length in chunk_lengths(GRADIENT_CHUNK)] + [
    (True, 9)])
def test_mamba_gradients_equal_autodiff_of_the_step_by_step_scan(
    parallel, length, monkeypatch):
  """The chunked scan's own VJP (states recomputed chunk by chunk, the
  gradient run backwards), and autodiff of the accelerators' associative
  scan, against JAX's autodiff of `lax.scan`."""
  monkeypatch.setattr(mamba, 'scan_chunk', lambda: GRADIENT_CHUNK)
  monkeypatch.setattr(mamba, 'parallel_scan', lambda: parallel)
  # One layer: every input of the scan already depends on the parameters.
  model = make('mamba', length=length, seed=4)
  x = model.embed(tokens(batch=3, length=length, seed=6))
  graphdef, params = nnx.split(model)

  def loss(params, recurrent):
    h = nnx.merge(graphdef, params).hidden_states(x, recurrent=recurrent)
    return jnp.sum(jnp.sin(h))

  grad = jax.jit(jax.grad(loss), static_argnums=1)
  ours, reference = grad(params, False), grad(params, True)
  mixer = reference['layers'][0]['mixer']
  assert np.abs(mixer['A_log'][...]).min() > 0  # the scan's inputs all count
  reference = dict(nnx.to_flat_state(reference))
  for path, a in nnx.to_flat_state(ours):
    b = reference[path][...]
    # Float32 sums of L * N products, relative to the largest entry (measured
    # at most 5e-7 of it over three seeds). The embeddings and the classifier
    # are outside the loss: zero in both.
    np.testing.assert_allclose(a[...], b, rtol=RTOL,
                               atol=1e-5 * np.abs(b).max(), err_msg=str(path))


@pytest.mark.parametrize('length', chunk_lengths(
    linear_attention.LINEAR_ATTENTION_CHUNK) + (20,))
def test_linear_attention_chunked_equals_quadratic_and_recurrent(length):
  model = make('linear_attention', length=length, num_heads=2, num_layers=2,
               seed=5)
  x = model.embed(tokens(length=length, seed=8))
  chunked, quadratic, recurrent = jitted(model, lambda m, x: tuple(
      m.hidden_states(x, form=f)
      for f in ('chunked', 'quadratic', 'recurrent')), x)
  np.testing.assert_allclose(chunked, quadratic, rtol=RTOL, atol=ATOL)
  np.testing.assert_allclose(chunked, recurrent, rtol=RTOL, atol=ATOL)
  # Training (weights=False) takes the chunked form; probes get the grid.
  (train, aux), (probe, weights) = jitted(model, lambda m, x: (
      m.classify(x, weights=False), m.classify(x)), x)
  assert aux == {} and weights['attention'][0].shape == (4, 2, length, length)
  np.testing.assert_allclose(train, probe, rtol=RTOL, atol=ATOL)


# -- parameter counts --------------------------------------------------------------

V, L, D, C = 11, 20, 32, 2


def linear_attention_params(layers):
  # Token and position embeddings; per layer q, k, v, out (no biases) and a
  # LayerNorm; the final LayerNorm; the classifier.
  return V * D + L * D + layers * (4 * D * D + 2 * D) + 2 * D + D * C + C


def lru_params(layers):
  # Per layer: LayerNorm; nu_log, theta_log, gamma_log (N = D each);
  # B and C as real and imaginary parts (N x D each); D; the GLU's two
  # D x D layers with biases. No final norm.
  N = D
  per_layer = 2 * D + 3 * N + 4 * N * D + D + 2 * (D * D + D)
  return V * D + layers * per_layer + D * C + C


def mamba_params(layers):
  # Per layer: RMSNorm; in_proj D -> 2I; depthwise conv W x I and its bias;
  # x_proj I -> R + 2N; dt_proj R -> I with bias; A_log I x N; D; out_proj
  # I -> D. Then the final RMSNorm and the classifier.
  I, N, R, W = 2 * D, 16, math.ceil(D / 16), 4
  per_layer = (D + D * 2 * I + W * I + I + I * (R + 2 * N) + R * I + I
               + I * N + I + I * D)
  return V * D + layers * per_layer + D + D * C + C


@pytest.mark.parametrize('num_layers', [1, 2])
@pytest.mark.parametrize('name,formula', [
    ('linear_attention', linear_attention_params),
    ('lru', lru_params),
    ('mamba', mamba_params),
])
def test_parameter_counts(name, formula, num_layers):
  model = make(name, num_layers=num_layers, num_heads=2)
  assert models.count_params(nnx.state(model, nnx.Param)) == formula(
      num_layers)
  assert models.count_params(nnx.state(model)) == formula(num_layers)


def test_parameter_counts_at_one_layer():
  assert (linear_attention_params(1), lru_params(1), mamba_params(1)) == (
      5282, 6818, 10402)


# -- linear attention's weights ----------------------------------------------------

@pytest.mark.parametrize('num_heads', [1, 2, 4])
def test_linear_attention_weights_match_numpy(num_heads):
  layer = linear_attention.CausalLinearAttention(32, num_heads,
                                                 rngs=nnx.Rngs(1))
  x = jax.random.normal(jax.random.key(2), (3, 9, 32))
  y, att = layer(x)
  B, L, H, K = 3, 9, num_heads, 32 // num_heads
  wq, wk, wv, wo = (np.asarray(m.kernel[...], np.float64) for m in
                    (layer.query, layer.key, layer.value, layer.out))
  x64 = np.asarray(x, np.float64)
  phi = lambda z: np.where(z > 0, z + 1, np.exp(z))  # elu(z) + 1
  q = phi(x64 @ wq).reshape(B, L, H, K)
  k = phi(x64 @ wk).reshape(B, L, H, K)
  v = (x64 @ wv).reshape(B, L, H, K)
  sim = np.einsum('bqhk,blhk->bhql', q, k) * np.tril(np.ones((L, L)))
  eps = linear_attention.LINEAR_ATTENTION_EPS
  ref = sim / (sim.sum(-1, keepdims=True) + eps)
  np.testing.assert_allclose(att, ref, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(np.asarray(att).sum(-1), 1.0, atol=1e-5)
  upper = np.triu_indices(L, 1)
  assert np.all(np.asarray(att)[..., upper[0], upper[1]] == 0)
  mixed = np.einsum('bhql,blhk->bqhk', ref, v).reshape(B, L, 32)
  np.testing.assert_allclose(y, mixed @ wo, rtol=1e-5, atol=1e-5)


def test_linear_attention_classifier_returns_every_layers_weights():
  model = make('linear_attention', num_layers=2, num_heads=2)
  logits, aux = model(tokens())
  assert logits.shape == (4, 2)
  assert [a.shape for a in aux['attention']] == [(4, 2, 20, 20)] * 2
  _, aux = model(tokens(), weights=False)
  assert 'attention' not in aux
  # A head mask removes that head's share of the output.
  x = model.embed(tokens())
  layer = model.layers[0]
  full, _ = layer(x)
  first, _ = layer(x, head_mask=jnp.array([1.0, 0.0]))
  second, _ = layer(x, head_mask=jnp.array([0.0, 1.0]))
  np.testing.assert_allclose(full, first + second, atol=1e-5)


# -- the papers' initialisations ---------------------------------------------------

@pytest.mark.parametrize('name, ring', [
    ('lru', (0.9, 0.999, np.pi / 10)),  # the long-range tasks' ring
    ('lru_disk', (0.0, 1.0, 2 * np.pi)),  # the appendix code's defaults
])
def test_lru_initialisation_is_the_papers_ring(name, ring):
  model = make(name, d_model=256, seed=7)
  lru = model.layers[0].lru
  lam = np.asarray(lru.eigenvalues(), np.complex128)
  r_min, r_max, max_phase = ring
  assert models.get(name).architecture == 'lru'
  assert ring == {'lru': lru_lib.LRU_RING, 'lru_disk': lru_lib.LRU_DISK}[name]
  modulus, phase = np.abs(lam), np.angle(lam) % (2 * np.pi)
  assert modulus.min() >= r_min - 1e-6 and modulus.max() <= r_max + 1e-6
  assert phase.min() >= 0 and phase.max() <= max_phase + 1e-6
  # Uniform over the ring's area: |lambda|^2 ~ U(r_min^2, r_max^2).
  sq = modulus**2
  assert sq.min() < r_min**2 + 0.05 * (r_max**2 - r_min**2)
  assert sq.max() > r_max**2 - 0.05 * (r_max**2 - r_min**2)
  # 256 draws: the median's spread is about 0.03 of the range.
  assert np.median(sq) == pytest.approx((r_min**2 + r_max**2) / 2,
                                        abs=0.1 * (r_max**2 - r_min**2))
  assert phase.max() > 0.9 * max_phase
  gamma = np.exp(np.asarray(lru.gamma_log[...], np.float64))
  # gamma = sqrt(1 - |lambda|^2), checked as a sum: near |lambda| = 1 the
  # float32 difference under the root loses the digits a ratio would need.
  np.testing.assert_allclose(gamma**2 + modulus**2, 1, atol=1e-5)
  # Glorot-style B and C: unit variance through the complex product.
  D = N = 256
  for part in (lru.B_re, lru.B_im):
    assert np.std(part[...]) == pytest.approx(1 / np.sqrt(2 * D), rel=0.05)
  for part in (lru.C_re, lru.C_im):
    assert np.std(part[...]) == pytest.approx(1 / np.sqrt(N), rel=0.05)


def test_mamba_initialisation_is_the_reference_codes():
  D = 256
  mixer = make('mamba', d_model=D, seed=8).layers[0].mixer
  I, N = 2 * D, 16
  A = -np.exp(np.asarray(mixer.A_log[...], np.float64))
  np.testing.assert_allclose(A, -np.tile(np.arange(1, N + 1), (I, 1)),
                             rtol=1e-6)
  dt = np.asarray(jax.nn.softplus(mixer.dt_proj.bias[...]), np.float64)
  assert dt.min() >= 0.001 * (1 - 1e-4) and dt.max() <= 0.1 * (1 + 1e-4)
  # Log-uniform: log dt fills [log 0.001, log 0.1] evenly.
  assert np.median(np.log(dt)) == pytest.approx(np.log(0.01), abs=0.3)
  assert dt.min() < 0.0015 and dt.max() > 0.08
  np.testing.assert_array_equal(mixer.D[...], 1.0)
  assert mixer.rank == math.ceil(D / 16)
  bound = mixer.rank**-0.5
  assert np.abs(mixer.dt_proj.kernel[...]).max() <= bound


# -- the registry ------------------------------------------------------------------

def scan_lengths(jaxpr):
  """The trip count of every `scan` in a jaxpr, called ones included."""
  lengths = []
  for eqn in jaxpr.eqns:
    if eqn.primitive.name == 'scan':
      lengths.append(eqn.params['length'])
    for value in eqn.params.values():
      sub = getattr(value, 'jaxpr', value)
      if hasattr(sub, 'eqns'):
        lengths += scan_lengths(sub)
  return lengths


@pytest.mark.parametrize('name', NAMES)
def test_registry_entries_and_no_loop_over_positions(name):
  spec = models.get(name)
  assert spec.family == models.LINEAR
  assert spec.has_attention == (name == 'linear_attention')
  assert spec.layered and not spec.loops_over_positions
  assert spec.architecture == name
  assert spec.activations(200, 32, 1, 2) > spec.activations(200, 32, 1, 1) > 0
  # No loop over positions in the forward pass: no `while`, and a `scan`
  # only over Mamba's chunks or within one (never L steps long).
  length = 3 * mamba.scan_chunk() + 1
  model = make(name, length=length, num_layers=2)
  jaxpr = jax.make_jaxpr(lambda t: model(t, weights=False)[0])(
      tokens(length=length)).jaxpr
  assert not re.search(r'\bwhile\[', str(jaxpr)), jaxpr
  scans = scan_lengths(jaxpr)
  assert all(n <= mamba.scan_chunk() for n in scans), scans
  assert bool(scans) == (name == 'mamba')


def test_mamba_on_an_accelerator_has_no_scan(monkeypatch):
  monkeypatch.setattr(mamba, 'parallel_scan', lambda: True)
  model = make('mamba', length=13, num_layers=2)
  jaxpr = jax.make_jaxpr(lambda t: model(t)[0])(tokens(length=13)).jaxpr
  assert not scan_lengths(jaxpr) and not re.search(r'\bwhile\[', str(jaxpr))
  assert models.get('mamba').activations(200, 32, 1, 1) > 10 * 200 * 64 * 16


# -- learning ----------------------------------------------------------------------

# 200 steps: each model reached 1.0 on both seeds by step 100 when tried.
@pytest.mark.parametrize('name', NAMES)
def test_learns_the_memory_task(name):
  length = 10
  task = tasks.memory_task(length, 8)
  model_fn = functools.partial(models.make_model, name,
                               vocab_size=task.vocab_size, length=length,
                               d_model=32, num_classes=2)
  ens = train.Ensemble(model_fn, task, num_seeds=2, seed=0, batch_size=32,
                       learning_rates=3e-3)
  state = fit(ens, ens.init(), 0, steps=200, chunk_steps=200)
  test = evaluation.evaluate(ens, state['params'], num_examples=1024)
  assert (test['accuracy'] >= 0.9).all(), test
