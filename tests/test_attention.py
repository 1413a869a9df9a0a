"""`--exp=attention`: the exported beam, and the experiment end to end."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from experiments import attention
from src import models, probes, runner, stats, tasks
from tests.helpers import read_csv, run_py, scalars


def test_exported_weights_match_recomputation_from_parameters():
  model = models.make_model('attention', vocab_size=11, length=12,
                            d_model=32, num_classes=2, rngs=nnx.Rngs(5))
  tokens, labels = tasks.memory_batch(jax.random.key(1), 64, 12, 8)
  _, att = probes.last_query_attention(model, tokens)
  assert att.shape == (64, 1, 12)
  np.testing.assert_allclose(att.sum(-1), 1.0, atol=1e-6)
  # Independently: embeddings, the last query against every key, softmax.
  layer = model.layers[0]
  x = (np.asarray(model.token_embed.embedding[...])[tokens]
       + np.asarray(model.position_embed.embedding[...])[None])
  q = x[:, -1] @ np.asarray(layer.query.kernel[...])
  k = x @ np.asarray(layer.key.kernel[...])
  s = np.einsum('bd,bld->bl', q, k) / np.sqrt(32)
  ref = np.exp(s - s.max(-1, keepdims=True))
  ref /= ref.sum(-1, keepdims=True)
  np.testing.assert_allclose(att[:, 0], ref, atol=1e-5)
  # Per-class summaries are the plain means over that class's strings.
  out = probes.searchlight(model, tokens, labels)
  for c in (0, 1):
    mask = np.asarray(labels) == c
    np.testing.assert_allclose(out['weights'][c], ref[mask].mean(0),
                               atol=1e-5)
    np.testing.assert_allclose(out['pos0_mass'][c], ref[mask, 0].mean(),
                               atol=1e-5)
    ent = -(ref[mask] * np.log(ref[mask])).sum(-1).mean()
    np.testing.assert_allclose(out['entropy'][c], ent, atol=1e-4)


class LooksAtFirstOnlyForA:
  """A hand-built model: its last query puts all its weight on position 0
  when the string starts with A, and spreads it evenly when it starts with
  B; its logits say the right class."""

  def __call__(self, tokens_BxL, **unused):
    L = tokens_BxL.shape[1]
    is_a = (tokens_BxL[:, 0] == tasks.A)[:, None]
    uniform = jnp.full((tokens_BxL.shape[0], L), 1.0 / L)
    first = jax.nn.one_hot(jnp.zeros(tokens_BxL.shape[0], int), L)
    att_BxL = jnp.where(is_a, first, uniform)
    logits = jax.nn.one_hot(jnp.where(is_a[:, 0], 0, 1), 2)
    return logits, {'attention': [att_BxL[:, None, None, :]]}


def test_rows_label_the_classes_by_their_first_symbol():
  """The rows written with first_symbol=A carry A's measurements: the
  hand-built model looks at position 0 only on A strings."""
  tokens, labels = tasks.memory_batch(jax.random.key(0), 256, 10, 8)
  final = probes.searchlight(LooksAtFirstOnlyForA(), tokens, labels)
  final = jax.tree.map(lambda x: np.stack([np.asarray(x)] * 2), final)
  # The ablation's accuracies of a model that reads position 0 only.
  final.update(without_pos0=np.full((2, 2), 0.5),
               without_filler=np.ones((2, 2)), pos0_capped=np.full((2, 2), 0.5))
  group = attention.experiment.group('attention', 10)
  rows = attention.rows_for(group, final, steps=5, wall_s=1.0)
  mass = {(r['seed'], r['first_symbol']): float(r['pos0_mass']) for r in rows}
  assert mass[0, 'A'] == pytest.approx(1.0) and mass[1, 'A'] == pytest.approx(
      1.0)
  assert mass[0, 'B'] == pytest.approx(0.1)
  # Through the summary and the claims: A concentrated, B dispersed.
  config = dataclasses.replace(attention.DEFAULTS, models=('attention',),
                               lengths=(10,), seeds=2)
  summary = attention.summarize(config, [{k: str(v) for k, v in r.items()}
                                         for r in rows])
  entry = summary['models']['attention']['10']
  assert [p['dispersed'] for p in entry['per_seed']] == ['B', 'B']
  a_claim, b_claim, either, ablation, capped = runner.judged(
      summary['claims'])
  # Both seeds hold each claim, which 2 seeds cannot make significant.
  two = stats.underpowered(2)
  assert 'above 0.9 in 2 of 2' in a_claim['measured']
  assert a_claim['verdict'] == two
  assert 'B ahead in 2, tied in 0, behind in 0 of 2 seeds' in \
      b_claim['measured']
  # Either direction: B's look is ln 10 nats wider than A's in both seeds.
  assert either['verdict'] == two and 'above 0.5 in 2 of 2' in \
      either['measured']
  assert [p['uses_beam'] for p in entry['per_seed']] == [True, True]
  assert capped['verdict'] == two and ablation['role'] == 'sanity'


def test_the_searchlight_is_judged_on_the_seeds_that_solve():
  """Seed 1 guesses (accuracy 0.5): the claims read seed 0 alone; with no
  seed solving, every claim is `not applicable`, with the accuracies."""
  rows = lambda acc: [dict(model='attention', length='10', seed=str(s),
                           first_symbol=c, pos0_mass='0.99' if c == 'A'
                           else '0.2', entropy='0.05' if c == 'A' else '1.5',
                           accuracy=str(acc[s]), steps='5', wall_s='1',
                           accuracy_without_pos0='0.5',
                           accuracy_without_filler='1.0',
                           accuracy_pos0_capped='0.5')
                      for s in range(2) for c in 'AB']
  config = dataclasses.replace(attention.DEFAULTS, models=('attention',),
                               lengths=(10,), seeds=2)
  one = runner.judged(attention.summarize(config, rows([1.0, 0.5]))['claims'])
  assert all(c['seeds'] == 1 for c in one)
  assert 'judged on the 1 of 2 seeds that solved' in one[0]['note']
  none = runner.judged(attention.summarize(config, rows([0.6, 0.5]))['claims'])
  assert {c['verdict'] for c in none} == {stats.NOT_APPLICABLE}
  assert 'did not learn the task' in none[0]['measured']
  assert '0.600 0.500' in none[0]['measured']


@pytest.mark.parametrize('name', ['attention', 'transformer',
                                  'linear_attention'])
def test_a_removed_key_renormalises_the_read_out_weights(name):
  """read_out_key_mask removes a key from the last layer's weights and
  renormalises the rest: the weights are the intact ones over 1 - w_0."""
  model = models.make_model(name, vocab_size=11, length=9, d_model=16,
                            num_classes=2, num_layers=2, rngs=nnx.Rngs(3))
  tokens, _ = tasks.memory_batch(jax.random.key(1), 4, 9, 8)
  x = model.embed(tokens)
  _, aux = model.classify(x)
  keep = jnp.arange(9) != 0
  _, masked = model.classify(x, read_out_key_mask=keep)
  w = np.asarray(aux['attention'][-1][:, :, -1, :])
  v = np.asarray(masked['attention'][-1][:, :, -1, :])
  np.testing.assert_allclose(v[..., 0], 0, atol=1e-7)
  np.testing.assert_allclose(v[..., 1:], w[..., 1:] / (1 - w[..., :1]),
                             rtol=2e-4, atol=1e-6)
  # Layers below the last are untouched.
  np.testing.assert_allclose(masked['attention'][0], aux['attention'][0])


@pytest.mark.parametrize('without_pos0,without_filler,uses,default', [
    ((1.0, 0.0), (1.0, 1.0), True, 'A'),  # B found by the beam, A inferred
    ((0.0, 1.0), (1.0, 1.0), True, 'B'),
    ((1.0, 1.0), (1.0, 1.0), False, None),  # position 0 not needed
    ((1.0, 0.0), (0.6, 0.6), False, 'A'),  # any removal hurts: no control
    ((0.7, 0.6), (1.0, 1.0), False, None)])  # 0.65 > CHANCE_BAND
def test_uses_the_beam_rule(without_pos0, without_filler, uses, default):
  rows = [dict(seed='0', first_symbol=c, accuracy='1.0',
               accuracy_without_pos0=str(a), accuracy_without_filler=str(f),
               accuracy_pos0_capped='0.5')
          for c, a, f in zip(attention.CLASSES, without_pos0, without_filler)]
  out = attention._ablation(rows, [0])[0]
  assert out['uses_beam'] is uses and out['default_class'] == default


@pytest.fixture(scope='module')
def tiny_run(tmp_path_factory):
  root = tmp_path_factory.mktemp('attention')
  proc = run_py('--exp=attention', f'--workdir={root}/run',
                f'--checkpoint_dir={root}/ckpt', '--models=attention',
                '--lengths=8', '--seeds=2',
                '--steps=60', '--chunk_steps=20', '--batch_size=16',
                '--eval_examples=128')
  assert proc.returncode == 0, proc.stderr[-3000:]
  return root / 'run', proc


def test_end_to_end_files(tiny_run):
  run, proc = tiny_run
  rows = read_csv(run / 'results.csv')
  assert list(rows[0]) == runner.with_rates(
      attention.COLUMNS)
  assert {r['model'] for r in rows} == {'attention'}
  assert [(r['seed'], r['first_symbol']) for r in rows] == [
      ('0', 'A'), ('0', 'B'), ('1', 'A'), ('1', 'B')]
  for r in rows:
    assert 0 <= float(r['pos0_mass']) <= 1
    assert 0 <= float(r['entropy']) <= np.log(8) + 1e-5
  summary = json.loads((run / 'summary.json').read_text())
  s = summary['models']['attention']['8']
  mean_a = np.mean([float(r['pos0_mass']) for r in rows
                    if r['first_symbol'] == 'A'])
  assert s['classes']['A']['pos0_mass'] == pytest.approx(mean_a)
  assert len(s['per_seed']) == 2 and len(summary['claims']) == 5
  for r in rows:  # the ablations, per seed and class
    assert 0 <= float(r['accuracy_without_pos0']) <= 1
    assert 0 <= float(r['accuracy_without_filler']) <= 1
    assert 0 <= float(r['accuracy_pos0_capped']) <= 1
  assert 'without position 0' in summary['claims'][3]['measured']
  assert 'capped at 1/L' in summary['claims'][4]['measured']
  assert (run / 'attention.png').read_bytes()[:4] == b'\x89PNG'
  assert 'last query weight on position 0' in proc.stdout


def test_tensorboard_images_and_scalars(tiny_run):
  run, _ = tiny_run
  acc, mass = scalars(run / 'tb' / 'attention_L008', 'pos0_mass/A')
  assert [s for s, _ in mass] == [20, 40, 60]
  assert {'searchlight/A', 'searchlight/B'} <= set(acc.Tags()['images'])
  images = acc.Images('searchlight/A')
  assert [im.step for im in images] == [20, 40, 60]
  assert images[-1].width > 100 and images[-1].height > 50
  _, ent = scalars(run / 'tb' / 'attention_L008', 'entropy/B')
  assert len(ent) == 3


def test_a_model_without_positions_finds_position_0_by_content():
  """attention_content has no position table: the same parameters at any
  length (it reads strings longer than it trained on), and an embedding
  that depends on the token alone."""
  kwargs = dict(vocab_size=11, length=12, d_model=16, num_classes=2,
                num_heads=1, num_layers=1)
  assert models.takes_any_length('attention_content', **kwargs)
  assert not models.takes_any_length('attention', **kwargs)
  model = models.make_model('attention_content', rngs=nnx.Rngs(0), **kwargs)
  tokens = jnp.array([[0, 5, 5, 2]])
  x = model.embed(tokens)
  np.testing.assert_array_equal(x[0, 1], x[0, 2])  # same token, same vector



def test_quick_can_conclude_where_every_seed_agrees():
  """--quick's first look is not underpowered by construction: every claim's
  best case (all its seeds agreeing) clears alpha after Holm."""
  from src import experiment
  plan = experiment.power_plan(attention.EXPERIMENT, attention.QUICK)
  assert plan and all(r['power'] > 0 for r in plan), plan
