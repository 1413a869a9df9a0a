"""`--exp=gradient`: the sensitivity itself, and the experiment end to end."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from experiments import gradient
from src import models, probes, runner, tasks
from tests.helpers import assert_figure, read_csv, run_ok, scalars


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
  # Along the string, from the same backward pass: position 0 and L-2 are
  # the sensitivities above.
  profile = probes.margin_profile(model, tokens, labels)
  assert profile['profile'].shape == (6,)
  assert float(profile['profile'][0]) == pytest.approx(float(got), rel=1e-5)
  assert float(profile['profile'][-2]) == pytest.approx(
      float(out['sensitivity_last']), rel=1e-5)


def test_scaled_norm_survives_what_squaring_underflows():
  x = jnp.array([[3e-30, 4e-30], [0.0, 0.0], [3.0, 4.0]], jnp.float32)
  assert np.asarray(jnp.linalg.norm(x[:1], axis=-1))[0] == 0  # the trap
  np.testing.assert_allclose(probes.scaled_norm(x), [5e-30, 0.0, 5.0],
                             rtol=1e-6)


def _decay_rows(truth, lengths):
  return [dict(model='rnn', length=L, seed=s, phase=phase, sensitivity=v,
               relative_sensitivity=1.0)
          for s, values in truth.items() for L, v in zip(lengths, values)
          for phase in ('init', 'trained')]


def test_across_lengths_fits_only_what_has_not_underflowed(capsys):
  """Known truth: seed 0 falls by x0.3 per step and flushes to 0 at L=80
  (float32's fate); seed 1 flushes from L=20 on, two lengths left, too few
  to fit; seed 2 falls as 3/L. The first fits x0.3 exactly over L 5..40,
  the second is no evidence either way, the third a power law. With every
  seed flushed from L=20 on, nothing is fitted and the claim is not
  applicable."""
  lengths = (5, 10, 20, 40, 80)
  truth = {0: [0.3 ** L if L < 80 else 0.0 for L in lengths],
           1: [0.3 ** L if L < 20 else 0.0 for L in lengths],
           2: [3.0 / L for L in lengths]}
  config = dataclasses.replace(gradient.DEFAULTS, models=('rnn',),
                               lengths=lengths, seeds=3)
  summary = gradient.summarize(config, _decay_rows(truth, lengths))
  fits = summary['models']['rnn']['init_fits_per_seed']
  assert [fits[s]['points'] for s in '012'] == [4, 2, 5]
  assert np.exp(fits['0']['exponential']['slope']) == pytest.approx(0.3)
  assert fits['1']['better'] is None and fits['2']['better'] == 'power'
  across, = [c for c in summary['claims'] if c.family ==
             gradient.ACROSS_FAMILY]
  assert across.evidence['shows'] == [True, False]
  assert not across.not_applicable
  flushed = {s: truth[1] for s in range(3)}
  summary = gradient.summarize(config, _decay_rows(flushed, lengths))
  assert summary['models']['rnn']['init_factor_per_step'] is None
  across, = [c for c in summary['claims'] if c.family ==
             gradient.ACROSS_FAMILY]
  assert across.evidence['shows'] == []
  assert across.not_applicable.startswith('no seed has 3 lengths above')
  gradient.EXPERIMENT.print_table(config, summary)
  assert 'rnn            -' in capsys.readouterr().out


def test_along_one_string_leaves_out_a_profile_too_short_to_fit():
  """Seed 0 falls x0.8 per step over 199 distances; seed 1 underflows past
  distance 2 (two points): left out, not counted against the decay."""
  d = np.arange(200.0)
  profiles = {0: 0.8 ** d, 1: np.where(d < 3, 0.5 ** d, 0.0)}
  bridge = gradient.bridge_summary({'init': profiles, 'trained': profiles},
                                   200)
  config = dataclasses.replace(gradient.DEFAULTS, models=('rnn',), seeds=2)
  claim = gradient.along_one_string(config, 'rnn', bridge)
  assert claim.evidence['shows'] == [True] and not claim.not_applicable
  bridge = gradient.bridge_summary({'init': {1: profiles[1]},
                                    'trained': {1: profiles[1]}}, 200)
  claim = gradient.along_one_string(config, 'rnn', bridge)
  assert claim.evidence['shows'] == []
  assert claim.not_applicable.startswith('no seed has 3 distances above')


def test_end_to_end(tmp_path):
  # The bridge length one of --lengths: no group more to train.
  run, rows, summary = run_ok(tmp_path, 'gradient', '--models=attention,rnn',
                              '--lengths=4,6,8', '--seeds=2', '--steps=20',
                              '--chunk_steps=10', '--batch_size=16',
                              '--bridge_length=8')
  assert list(rows[0]) == runner.with_rates(
      gradient.COLUMNS)
  assert len(rows) == 2 * 3 * 2 * 2  # model, length, seed, phase
  bridge = read_csv(run / 'bridge.csv')
  assert list(bridge[0]) == runner.with_rates(gradient.BRIDGE_COLUMNS)
  assert len(bridge) == 2 * 2 * 2 * 8  # model, seed, phase, position
  assert all(int(r['distance']) == 7 - int(r['position']) for r in bridge)
  at_pos0 = {(r['model'], r['seed'], r['phase']): float(r['sensitivity'])
             for r in bridge if r['position'] == '0'}
  for r in rows:  # position 0 along the string is the sensitivity
    if r['length'] == '8':
      assert at_pos0[r['model'], r['seed'], r['phase']] == pytest.approx(
          float(r['sensitivity']), rel=1e-5)
  along = summary['models']['rnn']['bridge']['init']['fits_per_seed']
  assert along['0']['range'][0] == 1 and along['0']['better'] in (
      'exponential', 'power')
  claim, = [c for c in summary['claims'] if 'along one string' in c['claim']]
  assert claim['family'] == gradient.FAMILY and claim['length'] == 8
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
