"""How a model's answers on a task's strings are scored: the loss and
accuracy that training minimises (`train.train_step`) and every test
reports (`src/evaluation.py`), read where the task's labels are, and a
function of a model on strings drawn from one of a member's streams.
"""

import jax.numpy as jnp
import optax

from src import streams


def cross_entropy(logits_BxC, labels_B):
  """Mean loss and accuracy: one label per string (labels_B, logits_BxC), or
  one per position (labels_BxL, logits_BxLxC) with -1 where the task asks
  nothing, averaged over the positions asked (multi-query recall)."""
  if labels_B.ndim == 1:
    loss = optax.softmax_cross_entropy_with_integer_labels(logits_BxC,
                                                           labels_B)
    accuracy = (jnp.argmax(logits_BxC, -1) == labels_B).astype(jnp.float32)
    return loss.mean(), accuracy.mean()
  asked = (labels_B >= 0).astype(jnp.float32)
  loss = optax.softmax_cross_entropy_with_integer_labels(
      logits_BxC, jnp.maximum(labels_B, 0))
  correct = (jnp.argmax(logits_BxC, -1) == labels_B).astype(jnp.float32)
  count = jnp.maximum(asked.sum(), 1.0)
  return (loss * asked).sum() / count, (correct * asked).sum() / count


def logits_for(model, tokens_BxL, labels_B, **kwargs):
  """The model's logits where the labels are: the last position, or every
  position when the task labels positions (labels_BxL)."""
  if labels_B.ndim == 2:
    kwargs['per_position'] = True
  return model(tokens_BxL, **kwargs)[0]


def loss_and_accuracy(model, tokens_BxL, labels_B) -> dict:
  """{'loss', 'accuracy'} of `model` on the strings, as a test reports
  them."""
  logits = logits_for(model, tokens_BxL, labels_B, weights=False)
  loss, acc = cross_entropy(logits, labels_B)
  return {'loss': loss, 'accuracy': acc}


def on_strings(model, task, data_key, fn, stream: int, num_examples: int):
  """fn(model, tokens, labels) on `num_examples` strings of `task` drawn
  from stream `stream` of `data_key`: a probe inside the training chunk, an
  experiment's measurement (`evaluation.measure`)."""
  tokens_BxL, labels_B = task.sample(streams.stream_key(data_key, stream),
                                     num_examples)
  return fn(model, tokens_BxL, labels_B)
