"""The training options of the published settings: AdamW on a cosine
schedule, plain gradient descent, a fixed training set reshuffled every
epoch, a seed that stops early, and a head tied to the embeddings."""

import jax
import numpy as np
import optax
import pytest
from flax import nnx

from src import models, optimizers, streams, tasks, train
from tests.helpers import fit


def params_and_grads(seed=0):
  k = jax.random.split(jax.random.key(seed), 4)
  params = {'w': jax.random.normal(k[0], (3, 4)), 'b': jax.random.normal(
      k[1], (4,))}
  grads = [jax.tree.map(lambda x, i=i: jax.random.normal(
      jax.random.fold_in(k[2], i), x.shape), params) for i in range(6)]
  return params, grads


def run(tx, params, grads):
  state = tx.init(params)
  for g in grads:
    updates, state = tx.update(g, state, params)
    params = optax.apply_updates(params, updates)
  return params


@pytest.mark.parametrize('schedule', ['constant', 'cosine'])
def test_adamw_is_optaxs(schedule):
  params, grads = params_and_grads()
  rate = (3e-3 if schedule == 'constant'
          else optax.cosine_decay_schedule(3e-3, 5))
  ours = run(optimizers.make(
      {'name': 'adamw', 'weight_decay': 0.1, 'schedule': schedule,
       'decay_steps': 5}, 3e-3), params, grads)
  theirs = run(optax.adamw(rate, weight_decay=0.1), params, grads)
  for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_sgd_and_default_adam():
  params, grads = params_and_grads(1)
  ours = run(optimizers.make({'name': 'sgd'}, 0.5), params, grads)
  expected = jax.tree.map(lambda p, *g: p - 0.5 * sum(g), params, *grads)
  for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(expected)):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
  ours = run(optimizers.make(None, 1e-2), params, grads)
  theirs = run(optax.adam(1e-2), params, grads)
  for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_fixed_training_set_is_reshuffled_every_epoch():
  task = tasks.make_task('memory', 8, num_filler=4)
  key = jax.random.key(3)
  N, B = 12, 4  # 3 steps an epoch
  rows = lambda step: [tuple(r) for r in np.asarray(
      train.training_strings(task, key, step, B, N)[0])]
  epochs = [sum((rows(s) for s in range(e * 3, e * 3 + 3)), [])
            for e in range(3)]
  base = streams.stream_key(key, streams.TRAIN_STREAM)
  the_set = sorted(tuple(np.asarray(task.sample(streams.fold_in(base, i), 1)[0]
                                    )[0]) for i in range(N))
  for strings in epochs:
    assert sorted(strings) == the_set  # every string once an epoch
  assert epochs[0] != epochs[1] != epochs[2]  # each epoch its own order
  fresh = train.training_strings(task, key, 0, B, 0)[0]
  np.testing.assert_array_equal(
      fresh, task.sample(streams.train_key(key, 0), B)[0])


def test_a_seed_stops_at_the_threshold_and_the_others_go_on():
  task = tasks.make_task('memory', 6, num_filler=4)
  ensemble = train.Ensemble(
      lambda rngs: models.make_model('attention', vocab_size=task.vocab_size,
                                     length=6, d_model=16, num_classes=2,
                                     rngs=rngs),
      task, num_seeds=2, seed=0, batch_size=16, learning_rates=[1e-2, 1e-9],
      curve_examples=256, early_stop=0.9)
  state = ensemble.init()
  state = fit(ensemble, state, 0, steps=400, chunk_steps=100)
  stopped = np.asarray(state['stopped'])[:4]
  np.testing.assert_array_equal(stopped, [True, True, False, False])
  frozen = jax.tree.map(lambda x: np.asarray(x)[:2], state['params'])
  state = fit(ensemble, state, 400, steps=500, chunk_steps=100)
  for a, b in zip(jax.tree.leaves(frozen), jax.tree.leaves(
      jax.tree.map(lambda x: np.asarray(x)[:2], state['params']))):
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize('name', ['attention', 'mamba', 'lstm_chrono'])
def test_tied_head_scores_by_the_embedding(name):
  model = models.make_model(name, vocab_size=20, length=12, d_model=16,
                            num_classes=20, num_layers=2, tied_head=True,
                            rngs=nnx.Rngs(0))
  tokens = jax.random.randint(jax.random.key(1), (2, 12), 0, 20)
  logits = model(tokens, per_position=True)[0]
  assert logits.shape == (2, 12, 20)
  graph, params = nnx.split(model)
  table = [p for path, p in jax.tree_util.tree_leaves_with_path(params)
           if p.shape == (20, 16)]
  assert len(table) == 1  # one matrix embeds and reads out
