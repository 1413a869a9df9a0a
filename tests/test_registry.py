"""The model registry: named initialisations are what their names say, and a
model registered in one place runs through an experiment end to end."""

import dataclasses
import json
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from src import models
from tests.helpers import assert_figure, ROOT, read_csv, run_script


def cell(name, length=50, d_model=32, seed=0, **kwargs):
  return models.make_model(name, vocab_size=11, length=length,
                           d_model=d_model, num_classes=2,
                           rngs=nnx.Rngs(seed), **kwargs).cell


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


@pytest.mark.parametrize('model,length,horizon', [
    ('lstm_chrono_L', 20, None), ('lstm_chrono_L', 200, None),
    ('lstm_chrono', 20, 200), ('lstm_chrono', 200, 20)])
def test_lstm_chrono_spreads_time_constants_up_to_t_max(model, length,
                                                        horizon):
  D, t_max = 256, horizon or length
  kwargs = {} if horizon is None else {'chrono_horizon': horizon}
  b = np.asarray(cell(model, length=length, d_model=D, **kwargs)
                 .dense_h.bias[...])
  b_i, b_f = b[:D], b[D:2 * D]
  np.testing.assert_array_equal(b_i, -b_f)
  assert np.all(b[2 * D:] == 0)
  tau = 1 / (1 - sigmoid(b_f))  # the memory the forget gate keeps, in steps
  assert tau.min() >= 2 - 1e-4 and tau.max() <= t_max + 1e-3
  # Uniform over [2, T]: the spread fills the range.
  assert tau.min() < 2 + 0.05 * t_max and tau.max() > 0.95 * t_max
  assert np.median(tau) == pytest.approx((2 + t_max) / 2, rel=0.15)


@pytest.mark.parametrize('model,bias,gate', [
    ('lstm_chrono', 'dense_h', slice(0, 64)),  # gates i and f
    ('gru_chrono', 'dense_i', slice(32, 64))])  # gate z
def test_chrono_at_a_fixed_horizon_is_one_model_at_every_length(model, bias,
                                                               gate):
  at = lambda L: np.asarray(getattr(cell(model, length=L, chrono_horizon=50),
                                    bias).bias[...])[gate]
  np.testing.assert_array_equal(at(10), at(50))
  # Without a horizon (a recipe from before it), T_max is each length.
  old = lambda L: np.asarray(getattr(cell(model, length=L), bias).bias[...])
  assert not np.array_equal(old(10)[gate], old(50)[gate])
  np.testing.assert_array_equal(old(50)[gate], at(50))


def test_only_chrono_models_take_a_horizon():
  assert models.names(lambda s: s.takes_horizon) == ('lstm_chrono',
                                                     'gru_chrono')
  with pytest.raises(ValueError, match="'lstm' takes no chrono_horizon"):
    cell('lstm', chrono_horizon=50)


def test_a_sweep_gives_chrono_its_longest_length_and_records_it():
  import experiments
  from experiments import memory_task as memory
  from src import experiment, train
  config = dataclasses.replace(
      experiments.load('distance').defaults, models=('lstm_chrono', 'rnn'),
      lengths=(10, 50), seeds=2)
  groups = {g.name: experiment.with_settings(g, config)
            for g in memory.groups(config)}
  recipes = {n: experiment.recipe(g, config) for n, g in groups.items()}
  for name in ('lstm_chrono_L010', 'lstm_chrono_L050'):
    assert groups[name].hparams['chrono_horizon'] == 50
    assert recipes[name]['model_kwargs']['chrono_horizon'] == 50
  for name in ('rnn_L010', 'rnn_L050'):  # no use for it: not recorded
    assert 'chrono_horizon' not in groups[name].hparams
    assert 'chrono_horizon' not in recipes[name]['model_kwargs']
  assert experiment.recipe(groups['lstm_chrono_L010'], dataclasses.replace(
      config, chrono_horizon=7))['model_kwargs']['chrono_horizon'] == 7

  # groups.json's recipe rebuilds the same init, at every length; an older
  # recipe (no chrono_horizon) still builds, at T_max = L as it trained.
  def forget_bias(recipe):
    params = train.build(json.loads(json.dumps(recipe))).init()['params']
    return np.asarray(params['cell']['dense_h']['bias'][...])[:, 32:64]
  short, long = (forget_bias(recipes[n]) for n in ('lstm_chrono_L010',
                                                   'lstm_chrono_L050'))
  np.testing.assert_array_equal(short, long)
  old = json.loads(json.dumps(recipes['lstm_chrono_L010']))
  del old['model_kwargs']['chrono_horizon']
  tau = lambda b: 1 / (1 - sigmoid(b))  # steps of memory
  assert tau(forget_bias(old)).max() <= 10 + 1e-3 < tau(short).max()


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
      from tests.test_models import IRNN, identity_recurrence
      models.register(models.cell_spec(  # a variant: a cell and an init
          'irnn', models.PLAIN, IRNN, identity_recurrence,
          init='Le et al. 2015: identity recurrence', color='#123456'))
      import run
      app.run(run.main)
  '''))
  proc = run_script(
      script, '--exp=distance',
      '--models=attention,mean_embed,irnn', '--lengths=3,6', '--seeds=2',
      '--steps=20', '--chunk_steps=10', '--batch_size=16',
      '--eval_examples=64', f'--workdir={tmp_path}/run',
       f'--checkpoint_dir={tmp_path}/ckpt')
  assert proc.returncode == 0, proc.stderr[-3000:]
  rows = read_csv(tmp_path / 'run/results.csv')
  assert {r['model'] for r in rows} == {'attention', 'mean_embed', 'irnn'}
  assert len(rows) == 3 * 2 * 2
  assert (tmp_path / 'run/tb/mean_embed_L006').is_dir()
  assert (tmp_path / 'run/tb/irnn_L006').is_dir()
  assert_figure(tmp_path / 'run/distance.png')
