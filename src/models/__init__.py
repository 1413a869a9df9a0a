"""The model registry: the one place that knows models.

Every model is a sequence classifier in Flax NNX that maps tokens_BxL to
logits_BxC read at the last position, in two halves so that experiments can
differentiate with respect to the inputs: `embed(tokens) -> x_BxLxD` and
`classify(x_BxLxD, *, per_position=False, weights=True, ...) -> (logits,
aux)`; `aux['attention']` holds the attention weights where it has them.

A registered name maps to a `ModelSpec`: its family, how to build it, its
initialisation (in words, with the source), its colour, and what the
experiments need to know of it. Experiments ask the registry; none of them
names a model. Adding a model is one class and one `register(ModelSpec(...))`
(the README's "Add a model" walks through one).
"""

import dataclasses
import functools
from typing import Callable

import jax
from flax import nnx

from src.models import attention as attention_lib
from src.models import footprint
from src.models import linear_attention as linear_attention_lib
from src.models import lru as lru_lib
from src.models import mamba as mamba_lib
from src.models import recurrent as recurrent_lib


@dataclasses.dataclass(frozen=True)
class Family:
  """What a kind of model is, as the lesson's claims need it.

  recurrent: carries a fixed-size state from position to position (the
    claims about recurrence are about these).
  sequential: its forward pass is L dependent steps (a loop over positions),
    not one parallel product.
  work: a training step's cost per value it keeps, over attention's (the
    ETA's and the estimates' units, `ModelSpec.step_work`): fitted on the
    groups of a full run as they ran (docs/ENGINEERING.md has the fit).
  """
  name: str
  recurrent: bool
  sequential: bool
  work: float = 1.0


# A loop over positions' small steps keep a CPU's vector units part idle;
# the linear recurrences' scans and chunked sums cost more per value kept.
ATTENTION = Family('attention', recurrent=False, sequential=False)
GATED = Family('gated recurrent', recurrent=True, sequential=True, work=1.6)
PLAIN = Family('plain recurrent', recurrent=True, sequential=True, work=1.6)
LINEAR = Family('linear recurrent', recurrent=True, sequential=False,
                work=1.7)


@dataclasses.dataclass(frozen=True)
class ModelSpec:
  """Everything the rest of the code needs about one registered model.

  build(*, vocab_size, length, d_model, num_classes, num_heads, num_layers,
    rngs) -> nnx.Module.
  architecture: models that differ only in their initialisation share it
    (`lstm`, `lstm_fb1`, `lstm_chrono`); claims compare initialisations
    within it.
  activations(length, d_model, num_heads, num_layers): float32 values a
    training step keeps per string for its backward pass (the memory check
    before anything runs).
  loops_over_positions: its forward pass is a `lax.scan` over positions
    whose body XLA's cost analysis counts once; the model then has an
    `unroll` attribute, and `costs` counts the body at its trip count.
  sequence_outputs: `cost` measures it with an output at every position, as
    a sequence model is used (False: the classifier's last position only).
  layered: it stacks `num_layers` layers (`induction` compares depths).
  state_floats(length, d_model, num_heads, num_layers): the floats it
    carries from one position to the next when it generates, per string:
    a recurrence's state (all layers), attention's KV cache at `length`
    (`recall` compares them).
  takes_horizon: its initialisation spreads time constants up to a horizon
    T_max (chrono); `build` then also takes `chrono_horizon`, the run's
    `--chrono_horizon`, which its recipe and HParams record.
  log_depth: its form's sequential depth grows like log L (an associative
    scan, running sums over chunks), which `cost` checks (a side claim
    about the implementation); a form that walks the positions has none.
  """
  name: str
  family: Family
  build: Callable[..., nnx.Module]
  init: str
  color: str
  architecture: str
  activations: Callable[[int, int, int, int], float]
  init_name: str = 'Flax default'  # the initialisation in two words (HParams)
  about: str = ''  # what it is, a sentence (docs/REFERENCE.md's table)
  form: str = ''  # how it computes over positions, in a few words
  has_attention: bool = False
  loops_over_positions: bool = False
  sequence_outputs: bool = True
  layered: bool = False
  state_floats: Callable[[int, int, int, int], float] | None = None
  takes_horizon: bool = False
  log_depth: bool = False
  work: float | None = None  # its own, where its family's `work` is not it

  def step_work(self, length: int) -> float:
    """Relative cost of a training step at `length`, for the progress ETA
    and the estimates: the values it keeps per string (at d_model 32),
    times its `work` (its family's unless it has its own)."""
    work = self.family.work if self.work is None else self.work
    return self.activations(length, 32, 1, 1) * work


_REGISTRY: dict[str, ModelSpec] = {}


def register(spec: ModelSpec) -> ModelSpec:
  if spec.name in _REGISTRY:
    raise ValueError(f'model {spec.name!r} is already registered')
  _REGISTRY[spec.name] = spec
  return spec


def get(name: str) -> ModelSpec:
  try:
    return _REGISTRY[name]
  except KeyError:
    raise KeyError(f'unknown model {name!r}; registered: '
                   f'{", ".join(_REGISTRY)}') from None


def names(where: Callable[[ModelSpec], bool] = lambda spec: True
          ) -> tuple[str, ...]:
  """Registered names, in registration order, whose spec satisfies `where`."""
  return tuple(n for n, spec in _REGISTRY.items() if where(spec))


class TiedHead(nnx.Module):
  """A read-out tied to the token embedding, over the whole vocabulary:
  logits = h E^T, no bias (Zoology's `lm_head`, whose weight is the word
  embeddings'): a value's own embedding already scores it. The embedding
  is shared, not copied: one parameter, trained by both uses."""

  def __init__(self, embed: nnx.Embed):
    self.embed = embed

  def __call__(self, h_BxD):
    return self.embed.attend(h_BxD)


def make_model(name: str, *, vocab_size: int, length: int, d_model: int,
               num_classes: int, num_heads: int = 1, num_layers: int = 1,
               chrono_horizon: int | None = None, tied_head: bool = False,
               rngs: nnx.Rngs) -> nnx.Module:
  """`chrono_horizon`: T_max of a model that `takes_horizon` (None: T_max =
  L); refused for any other, which has no use for it. `tied_head`: the
  read-out is the token embedding's transpose (`TiedHead`), so the classes
  are the vocabulary."""
  spec = get(name)
  extra = {}
  if chrono_horizon is not None:
    if not spec.takes_horizon:
      raise ValueError(f'model {name!r} takes no chrono_horizon')
    extra['chrono_horizon'] = chrono_horizon
  if tied_head and num_classes != vocab_size:
    raise ValueError(f'a tied head reads the vocabulary: num_classes '
                     f'({num_classes}) must equal vocab_size ({vocab_size})')
  model = spec.build(vocab_size=vocab_size, length=length, d_model=d_model,
                     num_classes=num_classes, num_heads=num_heads,
                     num_layers=num_layers, rngs=rngs, **extra)
  if tied_head:
    model.classifier = TiedHead(model.token_embed)
  return model


def takes_any_length(name: str, **build_kwargs) -> bool:
  """Whether model `name` (built with `build_kwargs`, `length` among them)
  has the same parameters at twice the length: no learned position
  embedding, so it reads strings longer than those it trained on."""
  def shapes(length):
    kwargs = dict(build_kwargs, length=length)
    return jax.tree.map(
        lambda x: x.shape, nnx.state(nnx.eval_shape(
            lambda: make_model(name, rngs=nnx.Rngs(0), **kwargs))))
  return shapes(build_kwargs['length']) == shapes(2 * build_kwargs['length'])


def count_params(params) -> int:
  return sum(x.size for x in jax.tree.leaves(params))


# -- the registered models ---------------------------------------------------------

def _attention(*, vocab_size, length, d_model, num_classes, num_heads,
               num_layers, rngs, positions=True):
  return attention_lib.AttentionClassifier(
      vocab_size=vocab_size, length=length, d_model=d_model,
      num_heads=num_heads, num_layers=num_layers, num_classes=num_classes,
      rngs=rngs, positions=positions)


def _transformer(*, vocab_size, length, d_model, num_classes, num_heads,
                 num_layers, rngs):
  return attention_lib.TransformerClassifier(
      vocab_size=vocab_size, length=length, d_model=d_model,
      num_heads=num_heads, num_layers=num_layers, num_classes=num_classes,
      rngs=rngs)


_SCAN = 'a lax.scan over positions: L dependent steps'
# Flax's cells; a variant is a `functools.partial` of one (another
# activation_fn, say) and an init.
LSTM, GRU, RNN = nnx.OptimizedLSTMCell, nnx.GRUCell, nnx.SimpleCell


def cell_model(cell, init=None):
  """A registry factory for `RecurrentClassifier(cell, init=init)`: `cell`
  a Flax cell class or a `functools.partial` of one."""
  def build(*, vocab_size, length, d_model, num_classes, num_heads,
            num_layers, rngs):
    del num_heads, num_layers  # one cell, no heads
    return recurrent_lib.RecurrentClassifier(
        cell, vocab_size=vocab_size, length=length, d_model=d_model,
        num_classes=num_classes, rngs=rngs, init=init)
  return build


# What a recurrent model keeps per string for its backward pass and carries
# from position to position, by its kind of cell (`recurrent.cell_kind`).
_CELL_FOOTPRINT = {
    'lstm': (footprint.recurrent_activations(4), footprint.lstm_state),
    'gru': (footprint.recurrent_activations(3), footprint.hidden_state),
    'rnn': (footprint.recurrent_activations(1), footprint.hidden_state),
}


def cell_spec(name: str, family: Family, cell, init_fn=None,
              **fields) -> ModelSpec:
  """The registry entry of a recurrent model, `cell` (a Flax cell class or a
  `functools.partial` of one) initialised by `init_fn(cell, length, key)`;
  with `takes_horizon=True`, by `init_fn(chrono_horizon)`'s (`_chrono`).
  What follows from its kind of cell is filled in: its architecture, what a
  training step keeps and the state it carries, its scan over positions.
  `fields`: the rest of its ModelSpec (init, color, about, ...)."""
  kind = recurrent_lib.cell_kind(cell)
  activations, state_floats = _CELL_FOOTPRINT[kind]
  build = (_chrono(cell, init_fn) if fields.get('takes_horizon')
           else cell_model(cell, init_fn))
  return ModelSpec(name, family, build, **{
      'architecture': kind, 'activations': activations,
      'state_floats': state_floats, 'loops_over_positions': True,
      'form': _SCAN, **fields})


def _chrono(cell, chrono):
  """A chrono model whose T_max is the run's horizon, the same at every
  length. Without one (a recipe written before the horizon was a setting,
  or a caller that only counts or compiles) T_max = L, as such a run was
  trained."""
  def build(*, length, chrono_horizon=None, **kwargs):
    return cell_model(cell, chrono(chrono_horizon))(length=length, **kwargs)
  return build


_FLAX_DEFAULT = ('Flax default: LeCun-normal input kernels, orthogonal '
                 'recurrent kernels, zero biases')

register(ModelSpec(
    'attention', ATTENTION, _attention,
    about='token and learned position embeddings, causal multi-head '
          'self-attention with a residual, a linear read-out; the last layer '
          'computes only the read-out query (an exact shortcut the tests '
          'check)',
    init='Flax default: LeCun-normal projections, embeddings normal with '
         'std 1/sqrt(d_model)',
    color='#d62728', architecture='attention', form='every query against '
    'every key, one parallel product (L x L)',
    activations=footprint.attention_activations, has_attention=True,
    layered=True, state_floats=footprint.kv_cache))
register(ModelSpec(
    'attention_last', ATTENTION, _attention,
    about='the same classifier; `cost` measures only its read-out query',
    init='as attention (the same classifier; `cost` measures only its '
         'read-out query, the exact shortcut the classifier uses)',
    color='#ff7f0e', architecture='attention',
    form='the read-out query against every key (1 x L)',
    activations=footprint.attention_activations, has_attention=True,
    layered=True,
    sequence_outputs=False, state_floats=footprint.kv_cache))
register(ModelSpec(
    'attention_content', ATTENTION,
    functools.partial(_attention, positions=False),
    about='`attention` without position embeddings: it can find position 0 '
          "only by content (the searchlight's control: learned positions let a "
          'model find position 0 without reading it)',
    init='as attention, with no position embedding: a position is found by '
         'its content only (learned absolute positions let a model find '
         'position 0 by its place)',
    init_name='no positions',
    color='#bcbd22', architecture='attention',
    form='every query against every key (L x L), no position embedding',
    activations=footprint.attention_activations, has_attention=True,
    layered=True, state_floats=footprint.kv_cache))
register(ModelSpec(
    'attention_rope', ATTENTION,
    functools.partial(_attention, positions='rope'),
    about='`attention` with rotary positions (RoPE, Su et al. 2021, base '
          "10,000) rotating each head's queries and keys, no position "
          'embedding: a score depends on the offset only, and it reads any '
          "length (the Mamba paper's MHA-RoPE)",
    init='as attention, with rotary positions (RoPE, Su et al. 2021, base '
         '10,000) in place of the position embedding: it reads any length '
         "(the Mamba paper's MHA-RoPE)",
    init_name='RoPE',
    color='#fdae6b', architecture='attention',
    form='every query against every key (L x L), rotary positions',
    activations=footprint.attention_activations, has_attention=True,
    layered=True, state_floats=footprint.kv_cache))
register(ModelSpec(
    'transformer', ATTENTION, _transformer,
    about='the Transformer brick: each layer x + attention(LayerNorm(x)), then '
          'x + MLP(LayerNorm(x)), the MLP Linear(D, 4D), GELU, Linear(4D, D) '
          '(pre-LayerNorm, no final norm); the same embeddings, attention and '
          'read-out as `attention` (a subclass that changes only the layer)',
    init='Flax default, as attention; LayerNorm scale 1, bias 0; MLP '
         'LeCun-normal kernels, zero biases',
    color='#8c564b', architecture='transformer', form='every query against '
    'every key (L x L), then a position-wise MLP (hidden 4 x d_model, GELU); '
    'pre-LayerNorm residuals',
    activations=footprint.transformer_activations, has_attention=True,
    layered=True, state_floats=footprint.kv_cache))
register(cell_spec(
    'lstm', GATED, LSTM,
    about="Flax's `OptimizedLSTMCell`, run by `lax.scan` (the input matmul of "
          'every step hoisted before it)',
    init=_FLAX_DEFAULT + ' (forget-gate bias 0: the gate starts at 0.5)',
    color='#1f77b4'))
register(cell_spec(
    'lstm_fb1', GATED, LSTM, recurrent_lib.forget_bias(1.0),
    about='the same cell',
    init='forget-gate bias 1 (Gers et al. 2000; Jozefowicz et al. 2015; '
         'Keras, TensorFlow and Haiku default), the rest Flax default',
    init_name='forget bias 1', color='#6baed6'))
register(cell_spec(
    'lstm_chrono', GATED, LSTM, recurrent_lib.lstm_chrono,
    about='the same cell',
    init='chrono (Tallec & Ollivier 2018): forget-gate bias '
         'log U(1, T_max - 1), input-gate bias its negative; T_max the '
         "run's --chrono_horizon (default: the longest of --lengths), the "
         'same at every length',
    init_name='chrono', color='#08306b', takes_horizon=True))
register(cell_spec(
    'lstm_chrono_L', GATED, LSTM, recurrent_lib.lstm_chrono(),
    about='the same cell',
    init='chrono as lstm_chrono, but T_max = L, each group its own length '
         '(Tallec & Ollivier 2018; lstm_chrono before --chrono_horizon)',
    init_name='chrono, T_max = L', color='#4a1486'))
register(cell_spec(
    'gru', GATED, GRU, init=_FLAX_DEFAULT,
    about="Flax's `GRUCell` (`h' = (1-z) n + z h`)", color='#2ca02c'))
register(cell_spec(
    'gru_chrono', GATED, GRU, recurrent_lib.gru_chrono,
    about='the same cell',
    init='chrono for the update gate (after Tallec & Ollivier 2018): '
         "z-bias log U(1, T_max - 1); T_max the run's --chrono_horizon "
         '(default: the longest of --lengths), the same at every length',
    init_name='chrono', color='#00441b', takes_horizon=True))
register(cell_spec(
    'rnn', PLAIN, RNN, init=_FLAX_DEFAULT,
    about="Flax's `SimpleCell` (Elman, tanh)", color='#7f7f7f'))
register(cell_spec(
    'rnn_uniform', PLAIN, RNN, recurrent_lib.pytorch_uniform,
    about='the same cell',
    init="PyTorch nn.RNN's: every weight and bias U(-1/sqrt(d), 1/sqrt(d))",
    init_name='PyTorch uniform', color='#252525'))


def _lstm97(*, vocab_size, length, d_model, num_classes, num_heads,
            num_layers, rngs):
  del num_heads, num_layers  # one layer of cells
  return recurrent_lib.LSTM97Classifier(
      vocab_size=vocab_size, length=length, d_model=d_model,
      num_classes=num_classes, rngs=rngs)


register(ModelSpec(
    'lstm97', GATED, _lstm97,
    about='the LSTM of Hochreiter & Schmidhuber (1997), Experiment 2: memory '
          'cells with input gates, no forget and no output gate (s_t = s_{t-1} '
          '+ y_in g(net)), g the logistic sigmoid, h the identity, no biases, '
          'one-hot input, the output reading the input and the cells; the '
          "gradient truncated as the paper's (error flows back in time through "
          's alone)',
    init='Hochreiter & Schmidhuber 1997 (Neural Computation 9(8), sec. 5.2, '
         'Experiment 2): memory cells with input gates, no forget gate and '
         'no output gate, g sigmoid, h identity, no biases, one-hot input; '
         'every weight U(-0.2, 0.2)',
    init_name='1997: no forget gate',
    color='#e6550d', architecture='lstm97',
    activations=footprint.recurrent_activations(2), loops_over_positions=True,
    form=_SCAN, state_floats=footprint.hidden_state))

# -- linear recurrences, computed in parallel ----------------------------------
# (src/models/linear_attention.py, lru.py, mamba.py)
# Their constructors take the registry's keywords: the class is the factory.

register(ModelSpec(
    'linear_attention', LINEAR, linear_attention_lib.LinearAttentionClassifier,
    about='causal linear attention, feature map elu + 1, post-norm residual '
          '(Katharopoulos et al. 2020); trained in its chunked form (64 x 64 '
          'products within a chunk, running sums of phi(K)^T V and phi(K) '
          'between chunks: cost ~L), the L x L weights only when a probe asks '
          'for them',
    init='Flax default (LeCun-normal projections, embeddings normal with '
         'std 1/sqrt(d_model), LayerNorm 1 and 0), as attention; feature '
         'map elu + 1 '
         '(Katharopoulos et al. 2020)',
    color='#9467bd', architecture='linear_attention',
    form='chunks of 64: C x C feature products within a chunk, running '
    'sums between chunks (the L x L grid only when weights are asked for)',
    log_depth=True,
    activations=footprint.linear_attention_activations, has_attention=True,
    layered=True, state_floats=footprint.linear_attention_state))
register(ModelSpec(
    'lru', LINEAR, lru_lib.LRUClassifier,
    about='the Linear Recurrent Unit (Orvieto et al. 2023): a diagonal complex '
          'recurrence with exponential parameterisation, gamma normalisation, '
          'GLU block, by `lax.associative_scan`',
    init='Orvieto et al. 2023: lambda uniform on the ring r_min 0.9, r_max '
         '0.999, phase U(0, pi/10), gamma = sqrt(1 - |lambda|^2), B and C '
         'complex Glorot-normal, D N(0, 1); GLU Flax default',
    init_name='ring', color='#e377c2', architecture='lru',
    form='an associative scan over positions', log_depth=True,
    activations=footprint.lru_activations, layered=True,
    state_floats=footprint.lru_state))
register(ModelSpec(
    'lru_disk', LINEAR,
    functools.partial(lru_lib.LRUClassifier, ring=lru_lib.LRU_DISK),
    about='the LRU, initialised over the whole unit disk: fast units beside '
          'slow ones (not in `--exp=all`, whose linear parts run each '
          "architecture at its paper's initialisation)",
    init='as lru, but lambda uniform on the whole unit disk: r_min 0, r_max '
         '1, phase U(0, 2 pi) (the defaults of Orvieto et al. 2023\'s '
         'appendix code and of minimal-LRU): fast units beside slow ones',
    init_name='unit disk',
    color='#f7b6d2', architecture='lru',
    form='an associative scan over positions', log_depth=True,
    activations=footprint.lru_activations, layered=True,
    state_floats=footprint.lru_state))
register(ModelSpec(
    'mamba', LINEAR, mamba_lib.MambaClassifier,
    about='a selective SSM block (Gu & Dao 2023): input-dependent Delta, B, C, '
          'a short causal convolution and a gate, RMSNorm pre-norm; on a '
          'CPU its selective scan runs over chunks of positions (a '
          "`lax.scan` carrying the state, each chunk's positions unrolled), "
          'keeping only the state entering each chunk, which its own VJP '
          'recomputes from (no (B, L, I, N) tensor); on an accelerator as an '
          'associative scan over positions',
    init='state-spaces/mamba (Gu & Dao 2023): A = -(1..N) (S4D-real), D = 1, '
         'softplus(dt bias) log-uniform [0.001, 0.1], projections and conv '
         'PyTorch default U(+-1/sqrt(fan_in)), out_proj / sqrt(layers); '
         'embeddings Flax default, normal with std 1/sqrt(d_model) '
         '(PyTorch\'s nn.Embedding: N(0, 1))',
    color='#17becf', architecture='mamba',
    form=f'on a CPU a lax.scan over chunks of {mamba_lib.SCAN_CHUNK} '
         'positions, each unrolled; on an accelerator an associative scan',
    activations=footprint.mamba_activations, layered=True,
    state_floats=footprint.mamba_state,
    # On a CPU its chunked scan's passes over the (N, I) state cost more per
    # value kept than the family's other scans: 1.66 times the family's
    # work, the median over its 8 groups of the full run that
    # docs/ENGINEERING.md fits the estimates on.
    work=2.8))
