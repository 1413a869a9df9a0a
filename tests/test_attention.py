"""`--exp=attention`: the exported beam, and the experiment end to end."""

import json

import jax
import numpy as np
import pytest
from flax import nnx

from experiments import attention
from src import models, probes, tasks
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


def test_claims_counted_seed_by_seed():
  config = attention.DEFAULTS
  import dataclasses
  config = dataclasses.replace(config, lengths=(20,), seeds=3)
  rows = []
  for seed, (a, b) in enumerate([(0.97, 0.95), (0.5, 0.99), (0.99, 0.3)]):
    for cls, mass in (('A', a), ('B', b)):
      rows.append(dict(length='20', seed=str(seed), first_symbol=cls,
                       pos0_mass=str(mass), entropy=str(1 - mass),
                       accuracy='1.0'))
  summary = attention.summarize(config, rows)
  per_seed = summary['lengths']['20']['per_seed']
  assert [p['dispersed'] for p in per_seed] == ['neither', 'A', 'B']
  a_claim, b_claim = summary['claims']
  assert a_claim['verdict'] == 'held in 2 of 3 seeds'
  assert b_claim['verdict'] == 'held in 2 of 3 seeds'  # seeds 0 and 2


@pytest.fixture(scope='module')
def tiny_run(tmp_path_factory):
  root = tmp_path_factory.mktemp('attention')
  proc = run_py('--exp=attention', f'--workdir={root}/run',
                f'--checkpoint_dir={root}/ckpt', '--lengths=8', '--seeds=2',
                '--steps=60', '--chunk_steps=20', '--batch_size=16',
                '--eval_examples=128')
  assert proc.returncode == 0, proc.stderr[-3000:]
  return root / 'run', proc


def test_end_to_end_files(tiny_run):
  run, proc = tiny_run
  rows = read_csv(run / 'results.csv')
  assert list(rows[0]) == attention.COLUMNS
  assert [(r['seed'], r['first_symbol']) for r in rows] == [
      ('0', 'A'), ('0', 'B'), ('1', 'A'), ('1', 'B')]
  for r in rows:
    assert 0 <= float(r['pos0_mass']) <= 1
    assert 0 <= float(r['entropy']) <= np.log(8) + 1e-5
  summary = json.loads((run / 'summary.json').read_text())
  s = summary['lengths']['8']
  mean_a = np.mean([float(r['pos0_mass']) for r in rows
                    if r['first_symbol'] == 'A'])
  assert s['classes']['A']['pos0_mass'] == pytest.approx(mean_a)
  assert len(s['per_seed']) == 2 and len(summary['claims']) == 2
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
