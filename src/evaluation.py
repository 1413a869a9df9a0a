"""A group's members tested on fresh strings: the test curve after every
training chunk, the final test, the validation strings that choose a rate,
and an experiment's own measurements.

Every test draws its strings on the device from each member's data key
and runs in one compiled program per (group, number of strings), the
stream, the curve's step and the number of chunks being its arguments:
one program serves the curve, the final test and the validation strings.
It runs the model EVAL_CHUNK strings at a time (a forward pass over all of
them at once can need gigabytes: Mamba's scan states). The training loop
(`runner.train_and_evaluate`) calls `after_chunk` and `evaluate`; an
experiment calls `measure` with its own function.
"""

import jax
import jax.numpy as jnp
import numpy as np

from src import scoring
from src import streams

EVAL_CHUNK = 256  # test strings per forward pass


def eval_chunk(num_examples: int) -> int:
  """Strings per forward pass of a test on `num_examples`: the largest
  divisor up to EVAL_CHUNK."""
  return max(c for c in range(1, min(num_examples, EVAL_CHUNK) + 1)
             if num_examples % c == 0)


def test_examples(ensemble) -> int:
  """The strings the test program draws: the final test's
  `eval_examples`, whose first chunks the curve evaluates too (the first n
  strings of a draw are the n strings a smaller draw gives), so one
  program compiles for both; else the curve's own."""
  curve, final = ensemble.curve_examples, ensemble.eval_examples
  if final and curve % eval_chunk(final) == 0 and curve <= final:
    return final
  return curve


def chunked_loss_and_accuracy(model, tokens_BxL, labels_B, chunks=None):
  """Mean loss and accuracy over the first `chunks` (default: all) equal
  chunks of the strings, of `eval_chunk` strings each: the mean of the
  chunks' means is the mean (the accuracy exactly, the loss up to float
  rounding; with labels per position, when every string asks as many, as
  multi-query recall's do). `chunks` may be traced: one program for any."""
  B = tokens_BxL.shape[0]
  chunk = eval_chunk(B)
  M = B // chunk
  tokens_MxCxL = tokens_BxL.reshape(M, chunk, -1)
  labels_MxC = labels_B.reshape(M, chunk, *labels_B.shape[1:])

  def one(i, out_M):
    result = scoring.loss_and_accuracy(model, tokens_MxCxL[i],
                                       labels_MxC[i])
    return jax.tree.map(lambda o, r: o.at[i].set(r), out_M, result)

  zeros = {'loss': jnp.zeros(M), 'accuracy': jnp.zeros(M)}
  chunks = M if chunks is None else chunks
  # Chunks not run stay 0: the sum over all M is the sum over those run.
  per_chunk = jax.lax.fori_loop(0, chunks, one, zeros)
  return jax.tree.map(lambda x: x.sum(0) / chunks, per_chunk)


def _test_program(ensemble, num_examples, task):
  """Loss and accuracy on the first `chunks` chunks of `num_examples` fresh
  strings, every member: of stream `stream`, or where `curve`, the test
  curve's at `step`."""
  def one(params, data_key, stream, step, curve, chunks):
    key = jax.random.wrap_key_data(jnp.where(
        curve, jax.random.key_data(streams.curve_key(data_key, step)),
        jax.random.key_data(streams.stream_key(data_key, stream))))
    tokens_BxL, labels_B = (task or ensemble.task).sample(key, num_examples)
    return chunked_loss_and_accuracy(ensemble.model(params), tokens_BxL,
                                     labels_B, chunks)

  def run(params, keys, *scalars):
    return ensemble.members.each(one, params, jax.random.wrap_key_data(keys),
                                 shared=scalars)
  return (('test', num_examples, task and (task.name, task.length)),
          ensemble.per_device(run, 2))


def _test(ensemble, params, num_examples, *, task=None,
          stream=streams.EVAL_STREAM, curve_step=None, chunks=None,
          ahead=False):
  """Runs (or, `ahead`, only compiles) the test program of `num_examples`
  strings on `stream`, or on the test curve's strings at `curve_step`;
  every chunk by default."""
  scalars = (np.int32(stream), np.int32(curve_step or 0),
             np.bool_(curve_step is not None),
             np.int32(chunks or num_examples // eval_chunk(num_examples)))
  members = ensemble.members
  compiled = ensemble.programs.get(
      *_test_program(ensemble, num_examples, task),
      *members.per_slice(params, ensemble.data_keys), *scalars, ahead=ahead)
  return None if ahead else members.by_slice(
      lambda p, k: compiled(p, k, *scalars), params, ensemble.data_keys)


def compile_ahead(ensemble, params, eval_examples=None) -> None:
  """Compiles the test programs the group's test curve and
  `evaluate(num_examples=eval_examples)` will ask for, from the params'
  shapes alone (`Ensemble.compile_ahead`'s twin for the tests)."""
  for n in {test_examples(ensemble) if ensemble.curve_examples else None,
            eval_examples} - {None, 0}:
    _test(ensemble, params, n, ahead=True)


def after_chunk(ensemble, state, metrics, step: int):
  """After a chunk that ends at `step`: the test curve's point
  (`test_accuracy`, per member) on fresh strings, and with an early stop,
  the members at its threshold stop training. Returns (state, metrics)."""
  if not ensemble.curve_examples:
    return state, metrics
  n = test_examples(ensemble)
  accuracy = _test(ensemble, state['params'], n, curve_step=step,
                   chunks=ensemble.curve_examples // eval_chunk(n))['accuracy']
  metrics = {**metrics, 'test_accuracy': accuracy}
  if ensemble.early_stop:
    reached = jnp.asarray(accuracy) >= ensemble.early_stop
    state = {**state, 'stopped': state['stopped'] | jax.device_put(
        reached, state['stopped'].sharding)}
  return state, metrics


def evaluate(ensemble, params, *, stream=streams.EVAL_STREAM,
             num_examples: int = 2048, task=None) -> dict[str, np.ndarray]:
  """Per-seed loss and accuracy on fresh strings training never sees (of
  `task`, default the group's), on the host without the padding seeds."""
  return ensemble.members.unpad(_test(ensemble, params, num_examples,
                                      task=task, stream=stream))


def measure(ensemble, params, fn, *, stream=streams.EVAL_STREAM,
            num_examples: int = 2048, task=None) -> dict:
  """fn(model, tokens, labels) on fresh strings of `stream`, every seed;
  the result is on the host without the padding seeds. `task`: strings of
  another task than the group's (e.g. longer ones), for a model whose
  parameters do not depend on the length."""
  run = lambda params, keys: ensemble.members.each(
      lambda p, k: scoring.on_strings(ensemble.model(p), task or
                                      ensemble.task, k, fn, stream,
                                      num_examples),
      params, jax.random.wrap_key_data(keys))
  name = ('measure', fn, stream, num_examples,
          task and (task.name, task.length))
  members, keys = ensemble.members, ensemble.data_keys
  compiled = ensemble.programs.get(name, ensemble.per_device(run, 2),
                                   *members.per_slice(params, keys))
  return members.unpad(members.by_slice(compiled, params, keys))
