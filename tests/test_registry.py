"""The model registry: named initialisations are what their names say, and a
model registered in one place runs through an experiment end to end."""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from src import models
from tests.helpers import assert_figure, ROOT, read_csv


def cell(name, length=50, d_model=32, seed=0):
  return models.make_model(name, vocab_size=11, length=length,
                           d_model=d_model, num_classes=2,
                           rngs=nnx.Rngs(seed)).cell


def sigmoid(x):
  return 1 / (1 + np.exp(-np.asarray(x, np.float64)))


def test_every_model_has_a_family_colour_and_initialisation():
  assert models.names()[:2] == ('attention', 'attention_last')
  for name in models.names():
    spec = models.get(name)
    assert spec.family in (models.ATTENTION, models.GATED, models.PLAIN,
                           models.LINEAR)
    assert spec.color.startswith('#') and spec.init
  colours = [models.get(n).color for n in models.names()]
  assert len(set(colours)) == len(colours)
  with pytest.raises(KeyError, match='unknown model'):
    models.get('no_such_model')


def test_lstm_forget_gate_biases():
  D = 32
  b = np.asarray(cell('lstm').dense_h.bias[...])
  assert np.all(b == 0)  # Flax's default: every gate starts at 0.5
  b = np.asarray(cell('lstm_fb1').dense_h.bias[...])
  np.testing.assert_array_equal(b[D:2 * D], 1.0)  # gates i, f, g, o
  assert np.all(b[:D] == 0) and np.all(b[2 * D:] == 0)


@pytest.mark.parametrize('length', [20, 200])
def test_lstm_chrono_spreads_time_constants_up_to_the_length(length):
  D = 256
  b = np.asarray(cell('lstm_chrono', length=length, d_model=D)
                 .dense_h.bias[...])
  b_i, b_f = b[:D], b[D:2 * D]
  np.testing.assert_array_equal(b_i, -b_f)
  assert np.all(b[2 * D:] == 0)
  tau = 1 / (1 - sigmoid(b_f))  # the memory the forget gate keeps, in steps
  assert tau.min() >= 2 - 1e-4 and tau.max() <= length + 1e-3
  # Uniform over [2, T]: the spread fills the range.
  assert tau.min() < 2 + 0.05 * length and tau.max() > 0.95 * length
  assert np.median(tau) == pytest.approx((2 + length) / 2, rel=0.15)


def test_gru_chrono_update_gate():
  D, length = 256, 100
  b = np.asarray(cell('gru_chrono', length=length, d_model=D)
                 .dense_i.bias[...])
  b_r, b_z, b_n = b[:D], b[D:2 * D], b[2 * D:]
  assert np.all(b_r == 0) and np.all(b_n == 0)
  tau = 1 / (1 - sigmoid(b_z))  # Flax's GRU keeps z * h
  assert tau.min() >= 2 - 1e-4 and tau.max() <= length + 1e-3
  assert tau.max() > 0.95 * length
  assert np.all(np.asarray(cell('gru', d_model=D).dense_i.bias[...]) == 0)


def test_rnn_uniform_is_pytorchs():
  D = 256
  c = cell('rnn_uniform', d_model=D)
  k = 1 / np.sqrt(D)
  w_h = np.asarray(c.dense_h.kernel[...])
  for w in (np.asarray(c.dense_i.kernel[...]), w_h):
    assert np.abs(w).max() <= k and np.abs(w).max() > 0.99 * k
    assert w.std() == pytest.approx(k / np.sqrt(3), rel=0.05)
  bias = np.asarray(c.dense_i.bias[...])  # b_ih + b_hh, each U(-k, k)
  assert np.abs(bias).max() <= 2 * k and bias.std() == pytest.approx(
      k * np.sqrt(2 / 3), rel=0.2)
  # Circular law: spectral radius sqrt(D * k^2 / 3) = 1/sqrt(3).
  radius = np.abs(np.linalg.eigvals(w_h)).max()
  assert radius == pytest.approx(1 / np.sqrt(3), abs=0.06)
  # Flax's default is orthogonal: every eigenvalue on the unit circle.
  w_flax = np.asarray(cell('rnn', d_model=D).dense_h.kernel[...])
  np.testing.assert_allclose(np.abs(np.linalg.eigvals(w_flax)), 1, atol=1e-4)


def test_initialisations_differ_only_where_named():
  """Same seed: lstm_fb1 changes only the forget-gate bias."""
  a, b = cell('lstm'), cell('lstm_fb1')
  for x, y in zip(jax.tree.leaves(nnx.state(a)), jax.tree.leaves(nnx.state(b))):
    if x.shape == (128,):
      continue
    np.testing.assert_array_equal(x, y)


class MeanOfEmbeddings(nnx.Module):
  """A throwaway model for the test below: the mean of the token embeddings,
  then a linear classifier."""

  def __init__(self, *, vocab_size, length, d_model, num_classes, num_heads,
               num_layers, rngs):
    del length, num_heads, num_layers
    self.token_embed = nnx.Embed(vocab_size, d_model, rngs=rngs)
    self.classifier = nnx.Linear(d_model, num_classes, rngs=rngs)

  def embed(self, tokens_BxL):
    return self.token_embed(tokens_BxL)

  def classify(self, x_BxLxD, **unused):
    return self.classifier(jnp.mean(x_BxLxD, axis=1)), {}

  def __call__(self, tokens_BxL, **kwargs):
    return self.classify(self.embed(tokens_BxL), **kwargs)


def test_a_model_registered_in_one_place_runs_distance_end_to_end(tmp_path):
  script = tmp_path / 'with_mean_model.py'
  script.write_text(textwrap.dedent(f'''
      import sys
      sys.path.insert(0, {str(ROOT)!r})
      from absl import app
      from src import models
      from tests.test_registry import MeanOfEmbeddings
      models.register(models.ModelSpec(
          'mean_embed', models.PLAIN, MeanOfEmbeddings,
          init='Flax default', color='#abcdef', architecture='mean_embed',
          activations=lambda L, D, H, layers: 2 * L * D))
      import run
      app.run(run.main)
  '''))
  proc = subprocess.run(
      [sys.executable, str(script), '--exp=distance',
       '--models=attention,mean_embed', '--lengths=3,6', '--seeds=2',
       '--steps=20', '--chunk_steps=10', '--batch_size=16',
       '--eval_examples=64', f'--workdir={tmp_path}/run',
       f'--checkpoint_dir={tmp_path}/ckpt'],
      capture_output=True, text=True, cwd=ROOT, timeout=300,
      env={**__import__('os').environ, 'JAX_PLATFORMS': 'cpu'})
  assert proc.returncode == 0, proc.stderr[-3000:]
  rows = read_csv(tmp_path / 'run/results.csv')
  assert {r['model'] for r in rows} == {'attention', 'mean_embed'}
  assert len(rows) == 2 * 2 * 2
  assert (tmp_path / 'run/tb/mean_embed_L006').is_dir()
  assert_figure(tmp_path / 'run/distance.png')
