"""What a program costs: FLOPs and bytes from XLA's cost analysis (with scans
counted at their trip count), peak temporary memory, and wall time.

XLA's cost analysis counts a loop body once, whatever its trip count. So
every `lax.scan` in the program (a recurrence over positions, Mamba's scan
over chunks, their backward passes) has its body compiled and analysed
alone, and the iterations XLA left out are added: `scan_corrections`.
"""

import math
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from src import models as models_lib
from src import tasks as tasks_lib


def programs(model: str, *, length: int, batch_size: int, d_model: int,
             num_heads: int = 1, num_layers: int = 1, num_filler: int = 8,
             learning_rate: float = 3e-3, per_position: bool = True,
             abstract: bool = False):
  """{'forward': (fn, args), 'train': (fn, args)} for one model (one seed).

  per_position=True: an output at every position, as a sequence model uses
  it, where the model's registry entry asks for it (`sequence_outputs`);
  False: the classifier's last position only. abstract=True: the arguments
  are shapes only (`jax.ShapeDtypeStruct`), enough to compile and count a
  program at any size without allocating it.
  """
  spec = models_lib.get(model)
  per_position = per_position and spec.sequence_outputs
  make = lambda: models_lib.make_model(
      model, vocab_size=tasks_lib.vocab_size(num_filler), length=length,
      d_model=d_model, num_classes=2, num_heads=num_heads,
      num_layers=num_layers, rngs=nnx.Rngs(0))
  graphdef, params = nnx.split(nnx.eval_shape(make) if abstract else make())
  tx = optax.adam(learning_rate)
  if abstract:
    tokens = jax.ShapeDtypeStruct((batch_size, length), jnp.int32)
    labels = jax.ShapeDtypeStruct((batch_size,), jnp.int32)
  else:
    tokens, labels = tasks_lib.memory_batch(jax.random.key(0), batch_size,
                                            length, num_filler)

  def logits_fn(params, tokens):
    # As the trainer calls it: no attention weights, so a model with a
    # cheaper form for training (linear attention's chunks) uses it.
    logits, _ = nnx.merge(graphdef, params)(tokens, per_position=per_position,
                                            weights=False)
    return logits

  def loss_fn(params, tokens, labels):
    logits = logits_fn(params, tokens)
    if per_position:  # every position predicts the first symbol
      labels = jnp.broadcast_to(labels[:, None], logits.shape[:2])
    return optax.softmax_cross_entropy_with_integer_labels(
        logits, labels).mean()

  def train_step(params, opt_state, tokens, labels):
    grads = jax.grad(loss_fn)(params, tokens, labels)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state

  opt_state = jax.eval_shape(tx.init, params) if abstract else tx.init(params)
  return {'forward': (logits_fn, (params, tokens)),
          'train': (train_step, (params, opt_state, tokens, labels))}


def flops_by_length(model: str, pass_name: str, lengths, **kwargs) -> list:
  """FLOPs of `pass_name` at each length, counted by XLA from the compiled
  program (scans at their trip count), never run: cheap at any width."""
  return [counted(model, pass_name, length=L, abstract=True,
                  **kwargs)['flops'] for L in lengths]


def quadratic_crossover(lengths, flops) -> dict:
  """FLOPs(L) fitted as c + a L + b L^2 (least squares relative to each
  value): the length a / b where the L^2 term (attention's L x L grids)
  overtakes the L-linear one (projections, embeddings, read-out), and the
  ratio of each doubling of L, FLOPs(2L) / FLOPs(L)."""
  L = np.asarray(lengths, float)
  f = np.asarray(flops, float)
  design = np.stack([np.ones_like(L), L, L * L], 1) / f[:, None]
  (c, a, b), *_ = np.linalg.lstsq(design, np.ones_like(f), rcond=None)
  doubling = [float(f[i + 1] / f[i]) for i in range(len(L) - 1)
              if L[i + 1] == 2 * L[i]]
  return {'constant': float(c), 'linear': float(a), 'quadratic': float(b),
          'crossover_length': float(a / b) if b > 0 else None,
          'ratio_per_doubling': doubling}


def analyse(fn, args):
  """(compiled, flops, bytes, memory analysis, compile seconds), loops
  counted once."""
  start = time.perf_counter()
  compiled = jax.jit(fn).lower(*args).compile()
  compile_s = time.perf_counter() - start
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return (compiled, float(cost.get('flops', 0.0)),
          float(cost.get('bytes accessed', 0.0)), compiled.memory_analysis(),
          compile_s)


def counted(model: str, pass_name: str, **kwargs):
  """Like `analyse`, with every scan counted at its trip count."""
  fn, args = programs(model, **kwargs)[pass_name]
  compiled, flops, bytes_, memory, compile_s = analyse(fn, args)
  start = time.perf_counter()
  extra_flops, extra_bytes = scan_corrections(jax.make_jaxpr(fn)(*args).jaxpr)
  return {'compiled': compiled, 'args': args, 'flops': flops + extra_flops,
          'bytes': bytes_ + extra_bytes, 'memory': memory,
          'compile_s': compile_s + time.perf_counter() - start,
          'depth': sequential_depth(fn, *args)}


def scan_corrections(jaxpr) -> tuple[float, float]:
  """(FLOPs, bytes) that XLA's cost analysis of `jaxpr` leaves out. A scan of
  n iterations, u of them unrolled into its loop body (all of them when
  unroll is True), is counted for u + n mod u; each one left out costs what
  its body costs alone (`analyse`d), and the body's own scans are corrected
  the same way in every one of its n iterations."""
  flops = bytes_ = 0.0
  for eqn in jaxpr.eqns:
    if eqn.primitive.name == 'scan':
      body, n = eqn.params['jaxpr'], eqn.params['length']
      unroll = eqn.params['unroll']
      u = n if unroll is True else max(1, min(int(unroll), n))
      inner_flops, inner_bytes = scan_corrections(body.jaxpr)
      flops += n * inner_flops
      bytes_ += n * inner_bytes
      missing = n - (u + n % u)
      if missing > 0:
        body_flops, body_bytes = _body_cost(body)
        flops += missing * body_flops
        bytes_ += missing * body_bytes
      continue
    for sub in _sub_jaxprs(eqn):
      inner_flops, inner_bytes = scan_corrections(sub)
      flops += inner_flops
      bytes_ += inner_bytes
  return flops, bytes_


def _sub_jaxprs(eqn):
  """The jaxprs a primitive calls (a jit, a custom derivative, a cond's
  branches: counted as XLA counts them, every branch)."""
  from jax.extend import core as jax_core
  for sub in jax_core.jaxprs_in_params(eqn.params):
    yield getattr(sub, 'jaxpr', sub)


_BODY_COSTS = {}  # a scan body's text (shapes included) -> its cost


def _body_cost(closed) -> tuple[float, float]:
  """XLA's FLOPs and bytes of one iteration of a scan body, alone; a body
  seen before (the same chunk at another length) is not compiled again."""
  from jax.extend import core as jax_core
  key = str(closed)
  if key not in _BODY_COSTS:
    shapes = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype)
              for v in closed.jaxpr.invars]
    _, flops, bytes_, _, _ = analyse(jax_core.jaxpr_as_fun(closed), shapes)
    _BODY_COSTS[key] = (flops, bytes_)
  return _BODY_COSTS[key]


def median_seconds(fn, args, *, budget_s: float = 0.5, min_runs: int = 3,
                   max_runs: int = 50) -> float:
  """Median wall time of fn(*args) after one warm-up call."""
  jax.block_until_ready(fn(*args))
  times = []
  while len(times) < min_runs or (sum(times) < budget_s
                                  and len(times) < max_runs):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def matmul_flops_per_s(n: int = 1024, budget_s: float = 1.0) -> float:
  """This machine's float32 matrix-multiply rate, measured now."""
  a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
  f = jax.jit(lambda a: a @ a)
  return 2 * n ** 3 / median_seconds(f, (a,), budget_s=budget_s)


# -- sequential depth, counted from the program ------------------------------------

# Parameters holding the jaxpr of a primitive that calls one (pjit, custom
# derivatives, checkpointing, shard_map, closed calls); scan and cond are
# handled on their own.
_CALLED = ('jaxpr', 'call_jaxpr', 'fun_jaxpr')


# Primitives that combine n values into one (or n running values): a tree of
# ceil(log2 n) steps. Their reduced size is read from their parameters.
_REDUCTIONS = ('reduce_sum', 'reduce_max', 'reduce_min', 'reduce_prod',
               'reduce_and', 'reduce_or', 'reduce_xor', 'argmax', 'argmin',
               'reduce')
_CUMULATIVE = ('cumsum', 'cumprod', 'cumlogsumexp', 'cummax', 'cummin')


def sequential_depth(fn, *args) -> int:
  """The longest chain of dependent steps in `fn`'s program, the depth of
  the work-depth model: the number of steps that must wait for one another,
  whatever the hardware's width.

  The convention: an elementwise operation (and any data movement) is one
  step; a reduction of n values into one (`reduce_sum`, `reduce_max`,
  `argmax`, ...), a running reduction over an axis of n (`cumsum`,
  `cummax`, ...) and a `dot_general` or convolution whose contraction has n
  terms are ceil(log2 n) steps (at least 1), a balanced tree; a call counts
  its body's chain, a `lax.scan` its body's chain times its trip count, a
  `cond` its longest branch. Then attention's depth grows like log L (its
  sums over keys), a recurrence's like L, an associative scan's like log L
  times its levels' work, a scan over chunks like L / C.
  """
  closed = jax.make_jaxpr(fn)(*args)
  return max(_depths(closed.jaxpr, [0] * len(closed.jaxpr.invars)),
             default=0)


def _log2_steps(n) -> int:
  return max(1, math.ceil(math.log2(max(int(n), 1))))


def _step_depth(eqn) -> int:
  """Steps of one primitive that calls nothing, by the convention above."""
  name, params = eqn.primitive.name, eqn.params
  shape = lambda i: eqn.invars[i].aval.shape
  if name in _REDUCTIONS:
    return _log2_steps(math.prod(shape(0)[a] for a in params['axes']))
  if name in _CUMULATIVE:
    return _log2_steps(shape(0)[params['axis']])
  if name == 'dot_general':
    (contracting, _), _ = params['dimension_numbers']
    return _log2_steps(math.prod(shape(0)[a] for a in contracting))
  if name == 'conv_general_dilated':
    # Each output sums input features (of its group) times the window.
    rhs = shape(1)
    spec = params['dimension_numbers'].rhs_spec  # (out, in, *spatial)
    return _log2_steps(math.prod(rhs[d] for d in spec[1:]))
  return 1


def _depths(jaxpr, in_depths) -> list[int]:
  from jax.extend import core as jax_core
  env = dict(zip(jaxpr.invars, in_depths))

  def read(v):
    return 0 if isinstance(v, jax_core.Literal) else env.get(v, 0)

  for eqn in jaxpr.eqns:
    ins = [read(v) for v in eqn.invars]
    start = max(ins, default=0)
    name = eqn.primitive.name
    if name == 'scan':
      body = eqn.params['jaxpr'].jaxpr
      step = max(_depths(body, [0] * len(body.invars)), default=0)
      outs = [start + eqn.params['length'] * max(step, 1)] * len(eqn.outvars)
    elif name == 'while':
      raise ValueError('a while loop has no static trip count; use lax.scan')
    elif name == 'cond':
      outs = [start + max(max(_depths(b.jaxpr, ins[1:]), default=0)
                          for b in eqn.params['branches'])] * len(eqn.outvars)
    elif any(k in eqn.params for k in _CALLED):
      sub = next(eqn.params[k] for k in _CALLED if k in eqn.params)
      sub = getattr(sub, 'jaxpr', sub)
      if len(sub.invars) == len(ins):
        outs = _depths(sub, ins)
      else:  # a call that prepends or drops arguments: be conservative
        outs = [start + max(_depths(sub, [0] * len(sub.invars)),
                            default=0)] * len(eqn.outvars)
    else:
      outs = [start + _step_depth(eqn)] * len(eqn.outvars)
    for v, d in zip(eqn.outvars, outs):
      env[v] = d
  return [read(v) for v in jaxpr.outvars]
