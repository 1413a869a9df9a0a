"""`--exp=cost`: FLOP counts against the formula, scaling, end to end."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import cost
from src import costs, members, stats
from tests.helpers import assert_figure, run_ok, run_py

CONFIG = dataclasses.replace(cost.DEFAULTS, batch_size=1)


def flops(model, length, pass_name='forward'):
  return costs.counted(model, pass_name, length=length, batch_size=1,
                       d_model=CONFIG.d_model)['flops']


def test_attention_flops_match_the_formula():
  L, d = 512, CONFIG.d_model
  formula = 4 * 2 * L * d * d + 2 * 2 * L * L * d  # projections, grid x2
  assert flops('attention', L) == pytest.approx(formula, rel=0.1)
  # The shortcut computes one query: the grid shrinks to one row.
  short = 2 * 2 * L * d * d + 2 * 2 * d * d + 2 * 2 * L * d
  assert flops('attention_last', L) == pytest.approx(short, rel=0.25)


def test_scan_flops_scaled_by_trip_count():
  L, d = 256, CONFIG.d_model
  per_step = 2 * d * 4 * d * 2  # LSTM: input and recurrent products
  assert flops('lstm', L) == pytest.approx(L * per_step, rel=0.3)


@pytest.mark.parametrize('model,ratio', [('attention', 4.0), ('lstm', 2.0),
                                         ('rnn', 2.0)])
def test_doubling_the_length(model, ratio):
  r = flops(model, 1024, 'train') / flops(model, 512, 'train')
  assert r == pytest.approx(ratio, rel=0.08)


def test_crossover_of_a_known_polynomial():
  lengths = [16, 32, 64, 128, 256, 512]
  flops = [5 + 3 * L + 0.25 * L * L for L in lengths]
  fit = costs.quadratic_crossover(lengths, flops)
  assert fit['crossover_length'] == pytest.approx(12.0, rel=1e-6)
  assert fit['ratio_per_doubling'] == pytest.approx(
      [flops[i + 1] / flops[i] for i in range(5)])


@pytest.mark.parametrize('ratios,start', [
    ([2.9, 3.5, 3.4, 3.6, 3.9], 128),  # every doubling from 128 on
    ([3.6, 3.7, 3.9], 16),
    ([3.5, 3.6, 3.3], None),  # the last doubling is short of fourfold
    ([2.0, 2.1], None)])
def test_fourfold_from(ratios, start):
  lengths = [16 * 2**i for i in range(len(ratios) + 1)]
  assert cost.fourfold_from({'lengths': lengths,
                             'ratio_per_doubling': ratios}) == start


@pytest.mark.parametrize('ratios,held', [
    ([2.9, 3.0, 3.5, 3.6, 3.9], True),  # short below the window: not judged
    ([3.6, 3.7, 3.3, 3.9, 3.9], False),  # one doubling inside it short
    ([2.0, 2.1, 2.5], False),  # no doubling tested inside the window
])
def test_fourfold_past_the_declared_window(ratios, held):
  """Every doubling from the declared start (here 64) on, none before."""
  lengths = [16 * 2**i for i in range(len(ratios) + 1)]
  assert cost.fourfold_past({'lengths': lengths,
                             'ratio_per_doubling': ratios}, 64) == held


def test_abstract_count_equals_the_allocated_program():
  """Counting from shapes alone (the price at real widths) counts what the
  program with real arrays counts."""
  kwargs = dict(batch_size=2, d_model=16)
  real = costs.counted('attention', 'train', length=32, **kwargs)['flops']
  assert costs.flops_by_length('attention', 'train', [32], **kwargs) == [real]


def test_end_to_end(tmp_path):
  _, rows, summary = run_ok(tmp_path, 'cost', '--models=attention,lstm',
                           '--lengths=16,64,256', '--widths=16,32')
  assert list(rows[0]) == cost.COLUMNS
  assert len(rows) == 2 * 3 * 2
  for r in rows:
    assert float(r['flops']) > 0 and float(r['wall_s']) > 0
  depth = {(r['model'], r['pass'], int(r['length'])): int(r['depth'])
           for r in rows}
  for p in cost.PASSES:
    # Counted from the program: attention's chain grows by the same few
    # steps per doubling of L (its sums over keys: log2 L each); the LSTM's
    # by a fixed number of operations per position (and a few log2 L).
    quadrupling = [depth['attention', p, 64] - depth['attention', p, 16],
                   depth['attention', p, 256] - depth['attention', p, 64]]
    # (Within a step: ceil(log2 n) of sizes that are not all powers of two.)
    assert 0 < quadrupling[0] < 20 and abs(quadrupling[1] - quadrupling[0]) <= 1
    per_position = ((depth['lstm', p, 256] - depth['lstm', p, 64]) / 192)
    assert per_position == pytest.approx(
        (depth['lstm', p, 64] - depth['lstm', p, 16]) / 48, rel=0.01)
    assert per_position >= 1
    assert summary['models']['attention'][p]['depth_growth']['shape'] == \
        'logarithmic'
  held = {c['claim'][:40]: c['verdict'] for c in summary['claims']}
  assert held['Attention is one matrix product over all'] == stats.HELD, held
  assert summary['models']['lstm']['train']['depth_growth']['shape'] == \
      'linear'
  # Over L 16..256 at d_model 32, either side of the crossover near 2
  # d_model: between linear and quadratic.
  assert summary['models']['attention']['train']['flops_exponent'] > 1.4
  assert summary['models']['lstm']['train']['flops_exponent'] < 1.2
  # The price at real widths: counted at 16..32 x 32, crossing near 2
  # d_model, one counted claim per width.
  price = summary['price_at_widths']
  assert set(price) == {'16', '32'}
  for D, p in price.items():
    assert p['lengths'] == [16, 32, 64, 128, 256, 512, 1024]
    assert p['crossover_length'] == pytest.approx(2 * int(D), rel=0.1)
  quadratic = [c for c in summary['claims'] if c['claim'] == cost.PRICE_CLAIM]
  assert sorted(c['d_model'] for c in quadratic) == [16, 32]
  assert [c['model'] for c in quadratic] == ['attention', 'attention']
  assert_figure(tmp_path / 'run/cost.png')


def test_grid_too_large_is_refused(tmp_path):
  proc = run_py('--exp=cost', f'--workdir={tmp_path}/run',
                '--lengths=64,128,1000000', '--models=attention')
  assert proc.returncode == 2
  assert proc.stderr.startswith('error: --lengths') and 'GiB' in proc.stderr
  assert not (tmp_path / 'run').exists()


def test_throughput_end_to_end(tmp_path):
  run, rows, summary = run_ok(tmp_path, 'throughput', '--models=rnn',
                           '--lengths=8', '--seeds=2', '--steps=10',
                           '--chunk_steps=10', '--batch_size=8')
  assert list(rows[0])[:6] == ['model', 'length', 'seeds', 'batch_size',
                               'steps_per_s', 'seqs_per_s']
  # Speed itself is the benchmark's to measure, not a test's: here, that
  # each row's numbers are the right arithmetic of what was counted.
  for r in rows:
    step = costs.counted(r['model'], 'train', length=8, batch_size=8,
                         d_model=32, per_position=False)['flops']
    seeds, per_s = int(r['seeds']), float(r['steps_per_s'])
    # The work the machine does: 2 seeds padded to as many on every CPU
    # device, at least one each.
    devices = len(json.loads((run / 'config.json').read_text())[
        'provenance']['devices'])
    assert seeds == members.padded_seeds(2, devices,
                                         members.least_local('cpu'))
    assert float(r['flops_per_step']) == pytest.approx(step * seeds)
    assert float(r['seqs_per_s']) == pytest.approx(seeds * 8 * per_s)
    assert float(r['flops_per_s']) == pytest.approx(step * seeds * per_s)
    assert float(r['peak_fraction']) == pytest.approx(
        float(r['flops_per_s']) / summary['matmul_flops_per_s'])
  assert set(summary['ensemble_speedup_by_model']) == {'rnn'}
  assert_figure(tmp_path / 'run/throughput.png')


# -- the work-depth convention, on programs of known depth -------------------------

@pytest.mark.parametrize('n,steps', [(1, 1), (2, 1), (8, 3), (1000, 10),
                                     (1024, 10)])
def test_depth_of_a_sum_is_log2_n(n, steps):
  x = jnp.ones(n)
  assert costs.sequential_depth(jnp.sum, x) == steps
  assert costs.sequential_depth(jnp.max, x) == steps
  assert costs.sequential_depth(jnp.argmax, x) == steps
  assert costs.sequential_depth(jnp.cumsum, x) == steps


def test_depth_of_a_matmul_is_log2_of_its_contraction():
  a, b = jnp.ones((4, 64)), jnp.ones((64, 3))
  assert costs.sequential_depth(lambda a, b: a @ b, a, b) == 6
  # An elementwise step after it adds one.
  assert costs.sequential_depth(lambda a, b: jnp.tanh(a @ b), a, b) == 7


@pytest.mark.parametrize('n', [10, 100])
def test_depth_of_a_scan_is_its_trip_count_times_its_body(n):
  body = lambda c, _: (jnp.sin(c) * 2, None)  # two elementwise steps
  fn = lambda x: jax.lax.scan(body, x, None, length=n)[0]
  assert costs.sequential_depth(fn, jnp.ones(3)) == 2 * n


def test_depth_of_an_associative_scan_grows_by_levels():
  depth = [costs.sequential_depth(
      lambda x: jax.lax.associative_scan(jnp.add, x), jnp.ones(n))
      for n in (64, 128, 256, 512, 1024)]
  per_doubling = np.diff(depth)
  # O(log n): each doubling adds the same few steps (two levels of slices
  # and an add), not twice the previous depth.
  assert np.all(per_doubling == per_doubling[0]) and 0 < per_doubling[0] < 10
  assert cost.depth_shape([64, 128, 256, 512, 1024], depth)['shape'] == \
      'logarithmic'
