"""`--exp=gradient`: the sensitivity itself, and the experiment end to end."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from experiments import gradient
from src import experiment, models, probes, tasks
from tests.helpers import assert_figure, run_ok, scalars


@pytest.mark.parametrize('name', ['attention', 'rnn', 'lstm'])
def test_sensitivity_matches_finite_differences(name):
  model = models.make_model(name, vocab_size=11, length=6, d_model=8,
                            num_classes=2, rngs=nnx.Rngs(2))
  tokens, labels = tasks.memory_batch(jax.random.key(3), 3, 6, 8)
  out = probes.margin_sensitivity(model, tokens, labels)
  got = out['sensitivity']
  x = np.asarray(model.embed(tokens), np.float32)

  def margins(x):
    logits, _ = model.classify(jnp.asarray(x))
    return np.asarray(logits[:, 0] - logits[:, 1], np.float64)

  eps = 1e-2
  grad = np.zeros((3, 8))
  for d in range(8):
    up, down = x.copy(), x.copy()
    up[:, 0, d] += eps
    down[:, 0, d] -= eps
    grad[:, d] = (margins(up) - margins(down)) / (2 * eps)
  expected = np.linalg.norm(grad, axis=-1).mean()
  assert got == pytest.approx(expected, rel=2e-2)
  assert expected > 1e-4  # a real signal, not two zeros agreeing
  # The scale-free ratio: position 0 against the last filler position.
  grad_last = np.zeros((3, 8))
  for d in range(8):
    up, down = x.copy(), x.copy()
    up[:, -2, d] += eps
    down[:, -2, d] -= eps
    grad_last[:, d] = (margins(up) - margins(down)) / (2 * eps)
  last = np.linalg.norm(grad_last, axis=-1).mean()
  assert out['sensitivity_last'] == pytest.approx(last, rel=2e-2)
  assert out['relative_sensitivity'] == pytest.approx(expected / last,
                                                      rel=4e-2)


def test_end_to_end(tmp_path):
  _, rows, summary = run_ok(tmp_path, 'gradient', '--models=attention,rnn',
                           '--lengths=4,8', '--seeds=2', '--steps=20',
                           '--chunk_steps=10', '--batch_size=16')
  assert list(rows[0]) == experiment.with_rates(
      gradient.COLUMNS)
  assert len(rows) == 2 * 2 * 2 * 2  # model, length, seed, phase
  assert {r['phase'] for r in rows} == {'init', 'trained'}
  assert all(r['pos0_mass'] for r in rows if r['model'] == 'attention')
  assert not any(r['pos0_mass'] for r in rows if r['model'] == 'rnn')
  assert set(summary['models']) == {'attention', 'rnn'}
  assert 'init_log_decay_per_step' in summary['models']['rnn']
  fits = summary['models']['rnn']['init_fits_per_seed']
  assert set(fits) == {'0', '1'} and fits['0']['better'] in ('exponential',
                                                            'power')
  for r in rows:  # the ratio is the two sensitivities' quotient
    assert float(r['relative_sensitivity']) == pytest.approx(
        float(r['sensitivity']) / float(r['sensitivity_last']), rel=1e-5)
  assert_figure(tmp_path / 'run/gradient.png')
  _, sens = scalars(tmp_path / 'run/tb/attention_L004', 'bridge/sensitivity')
  _, rel = scalars(tmp_path / 'run/tb/attention_L004',
                   'bridge/relative_sensitivity')
  assert len(rel) == 2
  _, mass = scalars(tmp_path / 'run/tb/attention_L004', 'bridge/pos0_mass')
  assert [s for s, _ in sens] == [10, 20] and len(mass) == 2
