import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from src import models
from src.models import attention as attention_lib


def make(name, length=20, d_model=32, num_heads=1, num_layers=1, seed=0,
         num_classes=2):
  return models.make_model(name, vocab_size=11, length=length,
                           d_model=d_model, num_classes=num_classes,
                           num_heads=num_heads, num_layers=num_layers,
                           rngs=nnx.Rngs(seed))


def tokens(batch=4, length=20, seed=0):
  return jax.random.randint(jax.random.key(seed), (batch, length), 0, 11)


# Embeddings V*D (+ positions L*D), cell kernels and biases, classifier D*C+C.
@pytest.mark.parametrize('name,expected', [
    ('attention', 11 * 32 + 20 * 32 + 4 * 32 * 32 + 32 * 2 + 2),
    ('lstm', 11 * 32 + 2 * 32 * 128 + 128 + 32 * 2 + 2),
    ('gru', 11 * 32 + 2 * 32 * 96 + 96 + 32 * 2 + 2),
    ('rnn', 11 * 32 + 2 * 32 * 32 + 32 + 32 * 2 + 2),
])
def test_shapes_and_parameter_counts(name, expected):
  model = make(name)
  logits, _ = model(tokens())
  assert logits.shape == (4, 2)
  assert models.count_params(nnx.state(model, nnx.Param)) == expected


def test_two_layer_parameter_count():
  model = make('attention', num_layers=2, num_heads=4)
  assert models.count_params(nnx.state(model)) == (
      11 * 32 + 20 * 32 + 2 * 4 * 32 * 32 + 32 * 2 + 2)


@pytest.mark.parametrize('num_heads', [1, 2, 4])
def test_attention_matches_independent_references(num_heads):
  layer = attention_lib.CausalSelfAttention(32, num_heads, rngs=nnx.Rngs(1))
  x = jax.random.normal(jax.random.key(2), (3, 9, 32))
  y, att = layer(x)
  B, L, H, K = 3, 9, num_heads, 32 // num_heads
  wq, wk, wv, wo = (np.asarray(m.kernel[...]) for m in
                    (layer.query, layer.key, layer.value, layer.out))
  q = (x @ wq).reshape(B, L, H, K)
  k = (x @ wk).reshape(B, L, H, K)
  v = (x @ wv).reshape(B, L, H, K)
  # 1) plain numpy: masked softmax over earlier keys only.
  scores = np.einsum('bqhk,blhk->bhql', q, k) / np.sqrt(K)
  scores = np.where(np.tril(np.ones((L, L), bool)), scores, -np.inf)
  ref_att = np.exp(scores - scores.max(-1, keepdims=True))
  ref_att /= ref_att.sum(-1, keepdims=True)
  np.testing.assert_allclose(att, ref_att, atol=1e-6)
  np.testing.assert_allclose(att.sum(-1), 1.0, atol=1e-6)
  assert np.all(np.asarray(att)[..., np.triu_indices(L, 1)[0],
                                np.triu_indices(L, 1)[1]] == 0)
  # 2) JAX's own fused attention, causal flag.
  mixed = jax.nn.dot_product_attention(q, k, v, is_causal=True)
  np.testing.assert_allclose(y, mixed.reshape(B, L, 32) @ wo, atol=1e-5)


@pytest.mark.parametrize('num_layers', [1, 2])
def test_last_query_shortcut_is_exact(num_layers):
  model = make('attention', num_layers=num_layers, num_heads=2)
  x = model.embed(tokens(length=20))
  fast, aux_fast = model.classify(x)
  full, aux_full = model.classify(x, all_positions=True)
  np.testing.assert_allclose(fast, full, atol=1e-5)
  np.testing.assert_allclose(aux_fast['attention'][-1][:, :, 0],
                             aux_full['attention'][-1][:, :, -1], atol=1e-6)


@pytest.mark.parametrize('name', models.names(
    lambda spec: spec.loops_over_positions and spec.architecture != 'lstm97'))
def test_recurrent_scan_matches_flax_cell(name):
  model = make(name, seed=3)
  x = jax.random.normal(jax.random.key(4), (5, 13, 32))
  h_ours = model.hidden_states(x)
  # Flax's own cell, called step by step.
  carry = model.cell.initialize_carry((5, 32), rngs=nnx.Rngs(0))
  outs = []
  for t in range(13):
    carry, out = model.cell(carry, x[:, t])
    outs.append(out)
  np.testing.assert_allclose(h_ours, jnp.stack(outs), atol=1e-5)
  logits, _ = model.classify(x)
  np.testing.assert_allclose(logits, model.classifier(outs[-1]), atol=1e-5)


def test_head_mask_zeroes_a_head():
  layer = attention_lib.CausalSelfAttention(32, 2, rngs=nnx.Rngs(1))
  x = jax.random.normal(jax.random.key(2), (2, 6, 32))
  y_full, _ = layer(x)
  y_ablate, _ = layer(x, head_mask=jnp.array([1.0, 0.0]))
  # The second head's contribution is exactly what ablation removed.
  y_one, _ = layer(x, head_mask=jnp.array([0.0, 1.0]))
  np.testing.assert_allclose(y_full, y_ablate + y_one, atol=1e-5)
  assert not np.allclose(y_full, y_ablate)


@pytest.mark.parametrize('num_layers,num_heads', [(1, 1), (2, 2)])
def test_fused_attention_path_matches_einsum(monkeypatch, num_layers,
                                             num_heads):
  """Training's path through `jax.nn.dot_product_attention` (taken on
  accelerators) gives the einsum path's logits, last-query shortcut,
  all positions and head masks included."""
  model = make('attention', num_layers=num_layers, num_heads=num_heads)
  x = model.embed(tokens(length=20))
  masks = [jnp.array([1.0, 0.0])[:num_heads]] * num_layers
  for kwargs in ({}, {'all_positions': True}, {'head_masks': masks}):
    einsum, aux = model.classify(x, **kwargs)
    assert aux['attention'][0] is not None
    monkeypatch.setattr(attention_lib, 'FUSED_ATTENTION', True)
    fused, aux = model.classify(x, weights=False, **kwargs)
    monkeypatch.setattr(attention_lib, 'FUSED_ATTENTION', None)
    assert aux['attention'][0] is None
    np.testing.assert_allclose(fused, einsum, atol=1e-5)
  monkeypatch.setattr(attention_lib, 'FUSED_ATTENTION', False)
  einsum_again, _ = model.classify(x, weights=False)
  np.testing.assert_array_equal(einsum_again, model.classify(x)[0])


def test_rotary_scores_depend_on_the_offset_only():
  q, k = jax.random.normal(jax.random.key(5), (2, 1, 1, 1, 8))
  score = lambda t, s: float(jnp.sum(
      attention_lib.rotate(q, jnp.array([t])) *
      attention_lib.rotate(k, jnp.array([s]))))
  np.testing.assert_allclose(score(7, 3), score(107, 103), rtol=1e-4)
  assert abs(score(7, 3) - score(7, 6)) > 1e-3
  model = make('attention_rope', num_layers=2, num_heads=2)
  assert models.takes_any_length(
      'attention_rope', vocab_size=11, length=20, d_model=32, num_classes=2,
      num_heads=2, num_layers=2)
  logits, _ = model(tokens(length=40))  # twice the length it was built for
  assert logits.shape == (4, 2) and np.all(np.isfinite(logits))


# A recurrent variant as the README's "Extending it" builds one: a
# `functools.partial` of a Flax cell and an init (Le, Jaitly & Hinton 2015's
# IRNN: ReLU, the recurrent kernel the identity, the bias zero).
IRNN = functools.partial(models.RNN, activation_fn=jax.nn.relu)


def identity_recurrence(cell, length, key):
  del length, key
  cell.dense_h.kernel[...] = jnp.eye(cell.hidden_features)
  cell.dense_i.bias[...] = jnp.zeros_like(cell.dense_i.bias[...])


def test_a_recurrent_variant_runs_its_cells_activation():
  build = lambda cell, init: models.cell_model(cell, init)(
      vocab_size=11, length=13, d_model=32, num_classes=2, num_heads=1,
      num_layers=1, rngs=nnx.Rngs(3))
  irnn = build(IRNN, identity_recurrence)
  np.testing.assert_array_equal(irnn.cell.dense_h.kernel[...], np.eye(32))
  x = jax.random.normal(jax.random.key(4), (5, 13, 32))
  carry = irnn.cell.initialize_carry((5, 32), rngs=nnx.Rngs(0))
  outs = []
  for t in range(13):
    carry, out = irnn.cell(carry, x[:, t])  # Flax's own ReLU cell
    outs.append(out)
  h = irnn.hidden_states(x)
  np.testing.assert_allclose(h, jnp.stack(outs), rtol=1e-5, atol=1e-5)
  assert float(h.min()) == 0.0 and float(h.max()) > 1.0  # ReLU, not tanh
  tanh = build(models.RNN, identity_recurrence)
  assert not np.allclose(tanh.hidden_states(x), h, atol=1e-3)
