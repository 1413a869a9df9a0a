"""The ensemble trainer: all seeds of one (model, task) group in one program.

Seeds and learning rates ride one axis (the members: every (rate, seed)
pair, rate-major; its layout is `src/members.py`) sharded over the devices,
side by side (`vmap`) on an accelerator and one after another (`lax.map`)
on a CPU, steps run in `lax.scan` chunks, training strings are drawn on the
device from `fold_in(key, step)`, and the train state is donated. Member
(r, s) starts from seed s's initialisation and draws seed s's strings, so
the rates of a seed are paired. The training loop
(`runner.train_and_evaluate`) runs the chunks (`chunks`).

Shape legend: S members (seeds, or (rate, seed) pairs: the ensemble axis), B
batch, L length, T steps in a chunk.
"""

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

from src import members as members_lib
from src import models as models_lib
from src import optimizers
from src import programs as programs_lib
from src import scoring
from src import streams
from src import tasks as tasks_lib

# Fresh test strings at the end of every chunk: the test curve, drawn and
# tested on the device (`evaluation.after_chunk`).
CURVE_EXAMPLES = 256


def seed_keys(seed: int, num_seeds: int,
              index=None) -> tuple[jax.Array, jax.Array]:
  """(init_keys_S, data_keys_S): seed i's keys depend only on (seed, i), so
  padding or sharding the ensemble never changes a seed's run. `index`: the
  seed index of each member (default 0..num_seeds-1)."""
  base = jax.random.key(seed)
  index = jnp.arange(num_seeds) if index is None else jnp.asarray(index)
  keys = jax.vmap(lambda i: jax.random.split(jax.random.fold_in(base, i)))(
      index)
  return keys[:, 0], keys[:, 1]


# Multipliers of the per-epoch shuffle of a fixed training set (primes below
# 2^15: `_mulmod` stays inside int32 for sets up to 2^20 strings).
_SHUFFLE_PRIMES = (7919, 7927, 7933, 7937, 7949, 7951, 7963, 7993, 8009,
                   8011, 8017, 8039, 8053, 8059, 8069, 8081)
MAX_TRAIN_STRINGS = 2**20


def _mulmod(a, p, n):
  """a p mod n in int32, for a < 2^15 and p < n <= 2^20."""
  hi, lo = p >> 10, p & 1023
  return ((a * hi % n) * 1024 % n + a * lo % n) % n


def training_strings(task: tasks_lib.Task, data_key, step_index,
                     batch_size: int, train_strings: int):
  """The strings of one training step: fresh ones (train_strings 0), or
  from a fixed set of `train_strings` strings, string i drawn from its own
  key (fold_in(train stream, i)), each epoch in its own order (the
  permutation i -> a i + c mod N, a prime coprime to N and c set by the
  epoch)."""
  if not train_strings:
    return task.sample(streams.train_key(data_key, step_index), batch_size)
  N = train_strings
  primes = jnp.asarray([q for q in _SHUFFLE_PRIMES if N % q], jnp.int32)
  seen = step_index * batch_size + jnp.arange(batch_size)
  epoch, position = seen // N, seen % N
  a = primes[epoch % len(primes)]
  c = streams.randint(streams.fold_in(data_key, 0x5EED + epoch), (), 0, N)
  index = (_mulmod(a, position, N) + c) % N
  base = streams.stream_key(data_key, streams.TRAIN_STREAM)
  keys = jax.vmap(lambda i: streams.fold_in(base, i))(index)
  tokens, labels = jax.vmap(lambda k: task.sample(k, 1))(keys)
  return tokens[:, 0], labels[:, 0]


def train_step(graphdef, tx, task: tasks_lib.Task, batch_size: int, carry,
               step_index, *, data_key, train_strings: int = 0,
               stopped=None):
  """One optimiser step of one seed on `batch_size` strings drawn from
  (data_key, step_index) (`training_strings`): carry (params, opt_state,
  diverged) -> (carry, (loss, accuracy)). A member `stopped` early keeps
  its parameters. A plain function of its inputs, as `lax.scan` wants it;
  the ensemble vmaps it over seeds."""
  params, opt_state, diverged = carry
  tokens_BxL, labels_B = training_strings(task, data_key, step_index,
                                          batch_size, train_strings)

  def loss_fn(params):
    logits = scoring.logits_for(nnx.merge(graphdef, params), tokens_BxL,
                                labels_B, weights=False)
    return scoring.cross_entropy(logits, labels_B)

  (loss, acc), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
  updates, new_opt_state = tx.update(grads, opt_state, params)
  new_params = optax.apply_updates(params, updates)
  if stopped is None:
    params, opt_state = new_params, new_opt_state
  else:
    keep = lambda old, new: jax.tree.map(
        lambda o, n: jnp.where(stopped, o, n), old, new)
    params = keep(params, new_params)
    opt_state = keep(opt_state, new_opt_state)
  diverged = diverged | ~jnp.isfinite(loss)
  return (params, opt_state, diverged), (loss, acc)


class Ensemble:
  """One group's members (`src/members.py`) and its compiled training:
  init, train a chunk.

  `model_fn(rngs)` builds one seed's NNX model. Params are split from the
  graph once; the hot loop runs plain `jax.jit` over the stacked state. Its
  tests on fresh strings (the curve, the final test) are
  `src/evaluation.py`'s.
  """

  def __init__(self, model_fn: Callable[[nnx.Rngs], nnx.Module],
               task: tasks_lib.Task,
               *, num_seeds: int, seed: int, batch_size: int,
               learning_rates, mesh: jax.sharding.Mesh | None = None,
               probe: Callable | None = None, probe_examples: int = 512,
               curve_examples: int = CURVE_EXAMPLES,
               eval_examples: int | None = None,
               min_local_seeds: int | None = None,
               optimizer: dict | None = None, train_strings: int = 0,
               early_stop: float = 0.0, slice_members: int | None = None):
    self.task = task
    # The optimiser (None: Adam, constant rate), a fixed training set of
    # `train_strings` strings (0: fresh strings every step), and the test
    # accuracy at which a member stops training (0: never), checked on the
    # test curve's strings at the end of every chunk (`evaluation.after_chunk`
    # sets the member's `stopped`; `train_step` then keeps its parameters).
    self.optimizer, self.train_strings = optimizer, train_strings
    self.early_stop = early_stop
    # Test accuracy on `curve_examples` fresh strings at the end of every
    # chunk: the test curve (0: none), and the final test's strings
    # (`evaluation.test_examples`).
    self.curve_examples = curve_examples
    self.eval_examples = eval_examples
    # probe(model, tokens, labels) -> pytree, measured on a fixed batch at the
    # end of every chunk, inside the compiled program.
    self.probe, self.probe_examples = probe, probe_examples
    # The member axis: seed s at rate r is member r * num_seeds + s.
    self.members = members_lib.Members(
        num_seeds, learning_rates, mesh, min_local_seeds=min_local_seeds,
        slice_members=slice_members)
    self.batch_size = batch_size
    self.graphdef, abstract_params = nnx.split(
        nnx.eval_shape(lambda: model_fn(rngs=nnx.Rngs(0))))
    self.num_params = sum(x.size for x in jax.tree.leaves(abstract_params))
    # Its state: the same at any rate.
    self.tx = optimizers.make(optimizer, self.learning_rates[0])
    self.model_fn = model_fn
    self.init_keys, data_keys = seed_keys(seed, self.members.padded,
                                          self.members.seed_index)
    # Raw key data on the seed axis; programs wrap it back into typed keys.
    self.data_keys = self.members.place(jax.random.key_data(data_keys))
    self._rates = self.members.place(self.members.rates())
    self.programs = programs_lib.Programs()

  @property
  def num_seeds(self) -> int:
    return self.members.num_seeds

  @property
  def learning_rates(self) -> tuple[float, ...]:
    return self.members.learning_rates

  def model(self, params) -> nnx.Module:
    return nnx.merge(self.graphdef, params)

  def init_one(self, key):
    """One member's state, from its initialisation key."""
    params = nnx.state(self.model_fn(rngs=nnx.Rngs(key)))
    state = {'params': params, 'opt_state': self.tx.init(params),
             'diverged': jnp.zeros((), bool)}
    if self.early_stop:
      state['stopped'] = jnp.zeros((), bool)
    return state

  def init(self):
    """Flax's initialisers, one seed at a time, op by op: each op compiles
    once per shape and is reused by every later group, where compiling the
    whole vmapped init would cost seconds per group. The seeds are stacked
    on the host, where `place` reads them from: a stack on the device would
    compile once per leaf shape."""
    seeds = [self.init_one(key) for key in self.init_keys]
    return self.members.place(jax.tree.map(lambda *x: np.stack(x), *seeds))

  def abstract_state(self, num_seeds: int | None = None):
    """Shapes and shardings of the state, for compiling ahead and restoring
    checkpoints. A checkpoint saved with another seed-axis size (by a run
    on another number of devices: the padding differs) is restored whole on
    every device, for `checkpoint.repad`."""
    num_seeds = num_seeds or self.members.padded
    shapes = jax.eval_shape(jax.vmap(self.init_one),
                            jnp.stack([self.init_keys[0]] * num_seeds))
    sharding = (self.members.sharding if num_seeds == self.members.padded
                else NamedSharding(self.members.mesh, P()))
    return jax.tree.map(
        lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding),
        shapes)

  # -- the training program ----------------------------------------------------

  def _train_chunk(self, state, data_keys_S, rates_S, start_step, num_steps):
    def one_seed(seed_state, data_key, rate):
      step = functools.partial(
          train_step, self.graphdef, optimizers.make(self.optimizer, rate),
          self.task, self.batch_size, data_key=data_key,
          train_strings=self.train_strings,
          stopped=seed_state.get('stopped'))
      carry = (seed_state['params'], seed_state['opt_state'],
               seed_state['diverged'])
      steps_T = start_step + jnp.arange(num_steps)
      (params, opt_state, diverged), (loss_T, acc_T) = jax.lax.scan(
          step, carry, steps_T)
      metrics = {'loss': loss_T, 'accuracy': acc_T}
      if self.probe is not None:
        metrics['probe'] = scoring.on_strings(
            self.model(params), self.task, data_key, self.probe,
            streams.PROBE_STREAM, self.probe_examples)
      out = {'params': params, 'opt_state': opt_state, 'diverged': diverged}
      if 'stopped' in seed_state:
        out['stopped'] = seed_state['stopped']
      return out, metrics

    return self.members.each(one_seed, state,
                             jax.random.wrap_key_data(data_keys_S), rates_S)

  def per_device(self, fn, num_seed_args):
    """Runs `fn` on each device's own block of seeds (`shard_map`): the
    program a device runs is the single-device program, not a partitioned
    one, so results do not depend on how many devices share the seeds."""
    def wrapped(*args):
      in_specs = tuple(P(members_lib.SEED_AXIS) if i < num_seed_args else P()
                       for i in range(len(args)))
      return jax.shard_map(fn, mesh=self.members.mesh, in_specs=in_specs,
                           out_specs=P(members_lib.SEED_AXIS),
                           check_vma=False)(*args)
    return wrapped

  def _train_program(self, num_steps, state, ahead=False):
    return self.programs.get(
        ('train', num_steps),
        self.per_device(functools.partial(self._train_chunk,
                                          num_steps=num_steps), 3),
        *self.members.per_slice(state, self.data_keys, self._rates),
        np.int32(0), donate=(0,), ahead=ahead)

  def compile_ahead(self, state, chunk_sizes=()) -> None:
    """Compiles the training programs for chunks of each of `chunk_sizes`
    steps from the state's shapes alone (`abstract_state`): the runner
    calls it in a thread for the next group while this one trains. A
    program that fails to compile here is compiled (and fails) again when
    it is asked for."""
    for n in chunk_sizes:
      self._train_program(n, state, ahead=True)

  def train_chunk(self, state, start_step: int, num_steps: int):
    """Trains every member for `num_steps` steps from `start_step`; returns
    (state, metrics_SxT)."""
    fn = self._train_program(num_steps, state)
    start = np.int32(start_step)
    return self.members.by_slice(lambda *a: fn(*a, start), state,
                                 self.data_keys, self._rates)


def build(recipe: dict, **kwargs) -> Ensemble:
  """The ensemble a recipe describes (a group's, as groups.json keeps it:
  model, model_kwargs, task, num_seeds, seed, batch_size, learning_rates).
  The runner trains from it and `analysis.load_seed` rebuilds from it;
  `kwargs` are the ensemble's own (probe, mesh, ...)."""
  task = dict(recipe['task'])
  task = tasks_lib.make_task(task.pop('name'), task.pop('length'), **task)
  return Ensemble(
      lambda rngs: models_lib.make_model(recipe['model'],
                                         **recipe['model_kwargs'], rngs=rngs),
      task, num_seeds=recipe['num_seeds'], seed=recipe['seed'],
      batch_size=recipe['batch_size'],
      learning_rates=recipe['learning_rates'],
      optimizer=recipe.get('optimizer'),
      train_strings=recipe.get('train_strings', 0),
      early_stop=recipe.get('early_stop', 0.0), **kwargs)


def chunks(start_step: int, steps: int, chunk_steps: int) -> list[int]:
  """The steps of each chunk that trains from `start_step` to `steps`."""
  return [min(chunk_steps, steps - step)
          for step in range(start_step, steps, chunk_steps)]
