"""The optimisers a recipe may name (`make`): Adam, AdamW with a constant or
cosine rate, and plain gradient descent, each as optax computes it, with a
`learning_rate` that may be a traced scalar (a member's rate on the
ensemble axis)."""

import jax
import jax.numpy as jnp
import optax


def adam(learning_rate, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-8) -> optax.GradientTransformation:
  """Adam as `optax.adam` computes it, with the bias corrections applied as
  explicit reciprocals. optax divides by a per-seed scalar, and XLA rewrites
  that division into a reciprocal multiply in some programs (one device) but
  not in others (several), which made 1-device and 4-device runs differ in the
  last bit. Tests check it against `optax.adam`. `learning_rate` may be a
  traced scalar (a member's rate on the ensemble axis)."""
  def init(params):
    zeros = lambda: jax.tree.map(jnp.zeros_like, params)
    return optax.ScaleByAdamState(count=jnp.zeros([], jnp.int32), mu=zeros(),
                                  nu=zeros())

  def update(grads, state, params=None):
    del params
    count = optax.safe_int32_increment(state.count)
    mu = jax.tree.map(lambda m, g: (1 - b1) * g + b1 * m, state.mu, grads)
    nu = jax.tree.map(lambda v, g: (1 - b2) * (g * g) + b2 * v, state.nu, grads)
    t = count.astype(jnp.float32)
    inv1, inv2 = 1 / (1 - b1**t), 1 / (1 - b2**t)
    updates = jax.tree.map(
        lambda m, v: -learning_rate * ((m * inv1) / (jnp.sqrt(v * inv2) + eps)),
        mu, nu)
    return updates, optax.ScaleByAdamState(count=count, mu=mu, nu=nu)

  return optax.GradientTransformation(init, update)


def adamw(learning_rate, weight_decay: float, *, schedule: str = 'constant',
          decay_steps: int = 1, b1: float = 0.9, b2: float = 0.999,
          eps: float = 1e-8) -> optax.GradientTransformation:
  """AdamW (Loshchilov & Hutter 2019) as `optax.adamw` computes it: the
  Adam direction plus `weight_decay` times the parameter, scaled by the
  rate; with schedule='cosine' the rate falls as optax's
  `cosine_decay_schedule(learning_rate, decay_steps)` from the first update
  to 0 at `decay_steps`. The bias corrections as in `adam`."""
  base = adam(1.0, b1, b2, eps)

  def rate(count):
    if schedule == 'constant':
      return learning_rate
    t = jnp.minimum(count.astype(jnp.float32), decay_steps) / decay_steps
    return learning_rate * 0.5 * (1 + jnp.cos(jnp.pi * t))

  def update(grads, state, params):
    lr = rate(state.count)  # the count before this update, as optax's
    direction, state = base.update(grads, state)
    updates = jax.tree.map(lambda d, p: lr * (d - weight_decay * p),
                           direction, params)
    return updates, state

  return optax.GradientTransformation(base.init, update)


def sgd(learning_rate) -> optax.GradientTransformation:
  """Plain gradient descent at a constant rate (LSTM'97's on-line
  updates): an Adam-shaped state, so every optimiser checkpoints alike."""
  base = adam(1.0)

  def update(grads, state, params=None):
    del params
    _, state = base.update(grads, state)  # the count, for the record
    return jax.tree.map(lambda g: -learning_rate * g, grads), state

  return optax.GradientTransformation(base.init, update)


def make(spec: dict | None,
                   learning_rate) -> optax.GradientTransformation:
  """The optimiser a recipe's `optimizer` names, at `learning_rate`: None is
  Adam at a constant rate; {'name': 'adamw', 'weight_decay', 'schedule',
  'decay_steps'} AdamW; {'name': 'sgd'} gradient descent."""
  name = (spec or {}).get('name', 'adam')
  if name == 'sgd':
    return sgd(learning_rate)
  if name == 'adam' and not (spec or {}).get('weight_decay') and (
      spec or {}).get('schedule', 'constant') == 'constant':
    return adam(learning_rate)
  return adamw(learning_rate, spec.get('weight_decay', 0.0),
               schedule=spec.get('schedule', 'constant'),
               decay_steps=spec.get('decay_steps', 1))
