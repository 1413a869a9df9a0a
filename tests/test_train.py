import functools

import jax
import numpy as np

from src import checkpoint, evaluation, models, optimizers, tasks, train
from src import members as members_lib
from src import programs as programs_lib
from tests.helpers import fit


def ensemble(model='attention', length=20, num_seeds=2, seed=0,
             batch_size=32, learning_rate=3e-3):
  task = tasks.memory_task(length, 8)
  fn = functools.partial(models.make_model, model,
                         vocab_size=task.vocab_size, length=length,
                         d_model=32, num_classes=2)
  return train.Ensemble(fn, task, num_seeds=num_seeds, seed=seed,
                        batch_size=batch_size, learning_rates=learning_rate)


def test_attention_learns_length_20():
  ens = ensemble()
  _, state = checkpoint.resume_or_init(ens)
  state = fit(ens, state, 0, steps=300, chunk_steps=100)
  test = evaluation.evaluate(ens, state['params'], num_examples=1024)
  assert test['accuracy'].shape == (2,)
  assert (test['accuracy'] >= 0.99).all(), test


def test_chance_before_training():
  ens = ensemble(model='lstm')
  test = evaluation.evaluate(ens, ens.init()['params'], num_examples=1024)
  assert (np.abs(test['accuracy'] - 0.5) < 0.1).all(), test


def test_seed_runs_do_not_depend_on_ensemble_size():
  """Seed i is the same run whether 2 or 3 seeds train (padding, sharding)."""
  finals = []
  for n in (2, 3):
    ens = ensemble(model='rnn', length=6, num_seeds=n)
    state = fit(ens, ens.init(), 0, steps=20, chunk_steps=10)
    finals.append(ens.members.unpad(state['params']))
  for a, b in zip(jax.tree.leaves(finals[0]), jax.tree.leaves(finals[1])):
    np.testing.assert_array_equal(a, b[:2])


def test_members_side_by_side_or_one_after_another_train_alike(
    monkeypatch):
  """The member axis as an accelerator runs it (`vmap`) and as a CPU does
  (a loop, `Members.on_cpu`): the same training to float rounding (XLA
  sums a matmul batched over members in another order), and at the same
  parameters the same test to the bit."""
  loops = []
  real_map = jax.lax.map
  monkeypatch.setattr(jax.lax, 'map', lambda *a, **k: (
      loops.append(1), real_map(*a, **k))[1])

  def trained_and_tested(on_cpu, params=None):
    monkeypatch.setattr(members_lib.Members, 'on_cpu', on_cpu)
    ens = ensemble(model='rnn', length=6, num_seeds=4)
    if params is None:
      params = fit(ens, ens.init(), 0, steps=10, chunk_steps=10)['params']
    return params, evaluation.evaluate(ens, params, num_examples=64)

  looped, _ = trained_and_tested(True)
  assert loops  # the CPU's loop ran
  del loops[:]
  vmapped, vmapped_test = trained_and_tested(False)
  assert not loops
  for a, b in zip(jax.tree.leaves(looped), jax.tree.leaves(vmapped)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
  _, again = trained_and_tested(True, vmapped)
  for key in ('loss', 'accuracy'):
    np.testing.assert_array_equal(again[key], vmapped_test[key])


def test_programs_compiled_ahead_are_the_ones_training_runs():
  """`compile_ahead` and `evaluation.compile_ahead` (the runner's thread,
  while another group trains) compile from the state's shapes the very
  programs `fit` and `evaluate` then run: nothing compiles again, and the
  run is the same bit for bit."""
  runs = []
  for ahead in (False, True):
    ens = ensemble(model='rnn', length=6)
    if ahead:
      state = ens.abstract_state()
      ens.compile_ahead(state, train.chunks(0, 25, 10))
      evaluation.compile_ahead(ens, state['params'], eval_examples=64)
      programs = {n: f.result() for n, f in ens.programs._compiled.items()}
      # The test curve's program (256 strings) and the final test's (64).
      assert {name[:2] for name in programs} == {
          ('train', 10), ('train', 5), ('test', 256), ('test', 64)}
    state = fit(ens, ens.init(), 0, steps=25, chunk_steps=10)
    runs.append((ens.members.unpad(state),
                 evaluation.evaluate(ens, state['params'], num_examples=64)))
    if ahead:
      assert {name: f.result() for name, f in ens.programs._compiled.items()} == (
          programs)
  for a, b in zip(jax.tree.leaves(runs[0]), jax.tree.leaves(runs[1])):
    np.testing.assert_array_equal(a, b)


def test_the_curve_is_the_same_from_the_final_tests_program():
  """With `eval_examples` the test curve runs the final test's program on
  the first chunk of its strings (one program fewer to compile): the curve
  is the one its own program gives, bit for bit, and so is the test."""
  runs = []
  for eval_examples in (None, 512):
    ens = train.Ensemble(ensemble(model='rnn', length=6).model_fn,
                         tasks.memory_task(6, 8), num_seeds=2, seed=0,
                         batch_size=32, learning_rates=3e-3,
                         eval_examples=eval_examples)
    assert evaluation.test_examples(ens) == (eval_examples
                                             or train.CURVE_EXAMPLES)
    curve = []
    fit(ens, ens.init(), 0, steps=20, chunk_steps=10,
              on_chunk=lambda step, m: curve.append(
                  ens.members.unpad(m['test_accuracy'])))
    runs.append(curve)
    assert {name[0] for name in ens.programs._compiled} == {'train', 'test'}
    assert len([n for n in ens.programs._compiled if n[0] == 'test']) == 1
  np.testing.assert_array_equal(runs[0], runs[1])
  assert 0 < np.mean(runs[0]) <= 1


def test_a_program_that_fails_ahead_fails_again_where_it_is_used():
  programs = programs_lib.Programs()
  broken = lambda *args: 1 / None
  assert programs.get('broken', broken, 1, ahead=True) is None
  try:
    programs.get('broken', broken, 1)
  except TypeError:
    pass
  else:
    raise AssertionError('the failure was swallowed')


def test_seeds_differ():
  ens = ensemble(model='gru', length=6)
  params = ens.members.unpad(ens.init()['params'])
  kernel = jax.tree.leaves(params)[0]
  assert not np.allclose(kernel[0], kernel[1])


def test_chunked_equals_unchunked():
  """Chunk boundaries (where checkpoints go) do not change the run."""
  outs = []
  for chunk in (5, 20):
    ens = ensemble(model='lstm', length=5)
    state = fit(ens, ens.init(), 0, steps=20, chunk_steps=chunk)
    outs.append(ens.members.unpad(state))
  for a, b in zip(jax.tree.leaves(outs[0]), jax.tree.leaves(outs[1])):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_divergence_is_flagged_not_fatal():
  ens = ensemble(model='rnn', length=6, learning_rate=1e38)
  state = fit(ens, ens.init(), 0, steps=30, chunk_steps=10)
  assert ens.members.unpad(state['diverged']).all()
  test = evaluation.evaluate(ens, state['params'], num_examples=64)
  assert test['accuracy'].shape == (2,)  # measured, whatever it is


def test_adam_matches_optax():
  """The trainer's Adam (explicit reciprocals) follows optax.adam."""
  import jax.numpy as jnp
  import optax
  params = {'w': jnp.linspace(-1, 1, 12).reshape(3, 4), 'b': jnp.ones(4)}
  loss = lambda p: jnp.sum(jnp.sin(3 * p['w']) * p['b']) + jnp.sum(p['b']**4)
  trajectories = []
  for tx in (optimizers.adam(0.01), optax.adam(0.01)):
    p, state = params, tx.init(params)
    for _ in range(50):
      updates, state = tx.update(jax.grad(loss)(p), state, p)
      p = optax.apply_updates(p, updates)
    trajectories.append(p)
  ours, theirs = trajectories
  for k in params:
    np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-6, atol=1e-7)
    assert not np.allclose(ours[k], params[k])  # it moved


def test_train_step_is_a_plain_function_the_ensemble_scans():
  """`train.train_step` alone, scanned over 30 steps on one seed, gives that
  seed's run in the ensemble (which vmaps it over seeds)."""
  ens = ensemble(model='rnn', length=6)
  state = ens.init()
  seed0 = jax.tree.map(lambda x: np.asarray(x)[0], state)
  step = functools.partial(
      train.train_step, ens.graphdef, ens.tx, ens.task, ens.batch_size,
      data_key=jax.random.wrap_key_data(np.asarray(ens.data_keys)[0]))
  carry = (seed0['params'], seed0['opt_state'], seed0['diverged'])
  (params, _, diverged), (loss_T, _) = jax.lax.scan(
      step, carry, jax.numpy.arange(30))
  assert not diverged and loss_T[-1] < loss_T[0]
  trained = fit(ens, state, 0, steps=30, chunk_steps=30)
  np.testing.assert_allclose(
      jax.tree.leaves(ens.members.unpad(trained['params']))[0][0],
      jax.tree.leaves(params)[0], rtol=1e-5, atol=1e-6)


def test_a_group_trained_in_slices_of_members_is_the_same():
  """Six seeds at two rates (12 members) trained in slices of at most 4
  (three programs one after another, each device a part of each slice):
  every member's parameters, training curve, test curve and final accuracy
  are those of the group trained at once, bit for bit; the final test's
  mean loss to its last bit (a device holding fewer members, XLA may sum
  its 64 strings in another order)."""
  for model in ('attention',):
    runs = []
    for slice_members in (None, 4):
      task = tasks.memory_task(6, 8)
      fn = functools.partial(models.make_model, model,
                             vocab_size=task.vocab_size, length=6,
                             d_model=16, num_classes=2)
      ens = train.Ensemble(fn, task, num_seeds=6, seed=3, batch_size=16,
                           learning_rates=(1e-3, 3e-3), eval_examples=64,
                           slice_members=slice_members)
      logged = []
      state = fit(ens, ens.init(), 0, steps=20, chunk_steps=10,
                        on_chunk=lambda step, m: logged.append(
                            ens.members.unpad(m)))
      runs.append((ens.members.slices, ens.members.unpad(state['params']), logged,
                   evaluation.evaluate(ens, state['params'],
                                       num_examples=64)))
    (one, *whole), (several, *sliced) = runs
    assert one == 1 and several == 3
    whole[2], sliced[2] = dict(whole[2]), dict(sliced[2])
    np.testing.assert_allclose(whole[2].pop('loss'), sliced[2].pop('loss'),
                               rtol=2e-7)
    for a, b in zip(jax.tree.leaves(whole), jax.tree.leaves(sliced)):
      np.testing.assert_array_equal(a, b)
