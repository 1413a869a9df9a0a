"""After the run: its results as DataFrames, and any trained seed as a module.

The way in for notebooks and scripts started at the repository root
(`notebooks/explore.py` shows them at work):

  run = analysis.load_run('runs/distance')   # config, results, curves, summary
  seed = analysis.load_seed(run, 'rnn_L100', 3)  # the trained NNX module
  seed.evaluate()             # its results.csv accuracy and loss, exactly
  tokens = seed.encode('A 3 1 4 ?')          # a memory-task string by hand
  seed.searchlight(tokens)    # attention: where the last query looks
  seed.hidden_states(tokens)  # recurrent: the state after every position

A seed is rebuilt from its group's recipe (`groups.json`, built by
`train.build` as the runner built it) and restored from the group's latest
checkpoint. Nothing here writes: a checkpoint that cannot be read is skipped where it lies, not
moved aside as the trainer would.

Shape legend: B batch, L length, D width, C classes.
"""

import dataclasses
import io
import json

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from flax import nnx

from src import checkpoint as checkpoint_lib
from src import evaluation
from src import models as models_lib
from src import probes
from src import rundir
from src import storage
from src import streams
from src import tasks as tasks_lib
from src import train as train_lib
from src.checkpoint import GroupCheckpoints
from src.config import ConfigError
from src.models import recurrent as recurrent_lib


class NotFound(LookupError):
  """A run file, group, seed or checkpoint that is not there (one line)."""


class Unanswerable(ValueError):
  """A question the loaded model cannot answer, such as the searchlight of
  an LSTM (one line)."""


# -- the run's files ----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Run:
  """One run folder as read back. `config` holds every field, `groups` each
  training group's recipe; `checkpoint_dir` is where the run saved them (a
  relative one is read from the current folder: start at the repository
  root, as run.py does)."""
  path: object  # etils.epath.Path: local or gs://
  config: dict
  command: str
  results: pd.DataFrame
  curves: pd.DataFrame | None
  summary: dict
  groups: dict
  checkpoint_dir: str

  def group_of(self, model: str, length: int) -> str:
    """The name of the one group that trained `model` at `length`."""
    names = [name for name, r in self.groups.items()
             if r['model'] == model and r['task']['length'] == int(length)]
    if len(names) != 1:
      raise NotFound(f'{len(names)} groups of {model} at L={length} in '
                     f'{self.path} ({", ".join(names) or "none"}); pass a '
                     f'group name: {", ".join(self.groups) or "none recorded"}')
    return names[0]


def load_run(workdir) -> Run:
  """Reads a run folder: config.json, results.csv, curves.csv (None when the
  experiment writes none), summary.json ({} until the run has finished) and
  groups.json ({} for experiments that train nothing)."""
  if isinstance(workdir, Run):
    return workdir
  path = storage.path(workdir)
  if not (path / 'config.json').exists():
    raise NotFound(f'{path}: no config.json here; expected the --workdir of '
                   'a run')
  meta = json.loads((path / 'config.json').read_text())
  if not (path / 'results.csv').exists():
    parts = sorted(p.name for p in path.iterdir()
                   if (p / 'results.csv').exists())
    hint = (f'; this run keeps its parts in sub-folders: {", ".join(parts)}'
            if parts else '')
    raise NotFound(f'{path}: no results.csv{hint}')
  config = meta['config']
  checkpoint_dir = rundir.recorded_checkpoint_dir(meta)
  if checkpoint_dir is None:
    raise NotFound(f'{path}: its config.json names no checkpoint folder (a '
                   'run stored by an older version); run it again')
  return Run(path=path, config=config, command=meta.get('command', ''),
             results=_csv(path / 'results.csv'),
             curves=_csv(path / 'curves.csv'),
             summary=_json(path / 'summary.json'),
             groups=_json(path / 'groups.json'),
             checkpoint_dir=checkpoint_dir)


def _csv(path) -> pd.DataFrame | None:
  if not path.exists():
    return None
  # pandas 3 reads every float back as the number the run wrote (tested).
  return pd.read_csv(io.StringIO(path.read_text()))


def _json(path) -> dict:
  return json.loads(path.read_text()) if path.exists() else {}


# -- a trained seed -----------------------------------------------------------------

@dataclasses.dataclass(repr=False)
class Seed:
  """Seed `seed` of `group`, trained for `step` steps: `model` is its NNX
  module. `ensemble` and `state` are the whole group's (seed axis padded
  for this process's devices), for the trainer's own compiled programs."""
  model: nnx.Module
  task: tasks_lib.Task
  spec: models_lib.ModelSpec
  group: str
  seed: int
  step: int
  ensemble: train_lib.Ensemble
  state: dict
  run: Run

  def __repr__(self):
    return (f'Seed({self.group!r}, seed {self.seed}, step {self.step}: '
            f'{self.spec.name} on the {self.task.name} task, '
            f'L={self.task.length})')

  # What the run measured, measured again.

  def evaluate(self, num_examples: int | None = None) -> dict:
    """{'accuracy', 'loss'} on the run's own test strings, by the ensemble's
    compiled evaluation: what results.csv holds, bit for bit."""
    out = evaluation.evaluate(self.ensemble, self.state['params'],
                              num_examples=self._num_examples(num_examples))
    return {k: float(v[self.seed]) for k, v in out.items()}

  def eval_strings(self, num_examples: int | None = None):
    """(tokens_BxL, labels_B): the test strings the run scored this seed on
    (its data key's evaluation stream, as `evaluation.measure` draws them)."""
    _, data_keys = train_lib.seed_keys(self.run.groups[self.group]['seed'],
                                       self.seed + 1)
    key = streams.stream_key(data_keys[self.seed], streams.EVAL_STREAM)
    tokens, labels = self.task.sample(key, self._num_examples(num_examples))
    return np.asarray(tokens), np.asarray(labels)

  def _num_examples(self, n):
    return n or self.run.config['eval_examples']

  # Probes on strings: one string (L) or a batch (BxL) of token ids.

  def logits(self, tokens):
    """logits_BxC (C for one string)."""
    tokens, one = self._tokens(tokens)
    logits_BxC, _ = self.model(tokens, weights=False)
    return _out(logits_BxC, one)

  def margin(self, tokens):
    """logit_A - logit_B per string: positive says A."""
    if self.task.name != 'memory':
      raise Unanswerable(f'the margin A vs B is a memory-task question; '
                         f'{self.group} learned the {self.task.name} task')
    tokens, one = self._tokens(tokens)
    logits_BxC, _ = self.model(tokens, weights=False)
    return _out(logits_BxC[:, tasks_lib.A] - logits_BxC[:, tasks_lib.B], one)

  def searchlight(self, tokens):
    """The last query's attention weights over the positions, heads
    averaged: weights_BxL (L for one string)."""
    if not self.spec.has_attention:
      raise Unanswerable(f'{self.spec.name} has no attention weights; '
                         'searchlight needs an attention model (a recurrent '
                         'one has hidden_states)')
    tokens, one = self._tokens(tokens)
    _, att_BxHxL = probes.last_query_attention(self.model, tokens)
    return _out(att_BxHxL.mean(axis=1), one)

  def hidden_states(self, tokens, *, cell: bool = False):
    """The state after every position, h_BxLxD (LxD for one string); with
    cell=True, an LSTM's cell state c instead."""
    tokens, one = self._tokens(tokens)
    x_BxLxD = self.model.embed(tokens)
    if cell:
      if not getattr(self.model, 'has_cell_state', False):
        raise Unanswerable(f'{self.spec.name} has no cell state; cell=True '
                           'needs an LSTM')
      states = self.model.cell_states(x_BxLxD)
    elif hasattr(self.model, 'hidden_states'):
      states = self.model.hidden_states(x_BxLxD)
    else:
      raise Unanswerable(f'{self.spec.name} has no hidden states; a '
                         'recurrent model has (attention has searchlight)')
    if isinstance(self.model, recurrent_lib.RecurrentClassifier):
      states = jnp.swapaxes(states, 0, 1)  # its scan yields h_LxBxD
    return _out(states, one)

  # Strings by hand.

  def encode(self, text: str) -> np.ndarray:
    """A memory-task string typed as the figures print it, 'A 3 1 4 ?': the
    first symbol A or B, filler digits 0..num_filler-1, the query ?."""
    if self.task.name != 'memory':
      raise ValueError(f'encode reads memory-task strings; {self.group} '
                       f'learned the {self.task.name} task')
    num_filler = self.task.params['num_filler']
    words = text.split()
    if len(words) < tasks_lib.MIN_LENGTH or words[0] not in ('A', 'B') or (
        words[-1] != '?'):
      raise ValueError(f'expected a string like "A 3 1 4 ?" (A or B, '
                       f'filler, ?), got {text!r}')
    filler = []
    for w in words[1:-1]:
      if not (w.isdigit() and int(w) < num_filler):
        raise ValueError(f'filler {w!r} in {text!r}: expected a number in '
                         f'0..{num_filler - 1}')
      filler.append(tasks_lib.FIRST_FILLER + int(w))
    first = tasks_lib.A if words[0] == 'A' else tasks_lib.B
    tokens = np.array([first, *filler, tasks_lib.QUERY], np.int32)
    return self._tokens(tokens)[0][0]

  def decode(self, tokens) -> str:
    """Token ids back to text ('A 3 1 4 ?'), for titles and printing."""
    names = {tasks_lib.A: 'A', tasks_lib.B: 'B', tasks_lib.QUERY: '?'}
    return ' '.join(names.get(int(t), str(int(t) - tasks_lib.FIRST_FILLER))
                    for t in np.asarray(tokens).reshape(-1))

  def _tokens(self, tokens):
    """(tokens_BxL, whether one string was given), checked: a token past
    the vocabulary or a string longer than the position table would be
    clipped by the embedding without a word."""
    tokens = np.asarray(tokens)
    one = tokens.ndim == 1
    if tokens.ndim not in (1, 2) or not np.issubdtype(tokens.dtype,
                                                      np.integer):
      raise ValueError(f'expected token ids, shape L or BxL; got '
                       f'{tokens.dtype} {tokens.shape}')
    if tokens.size and not 0 <= tokens.min() <= tokens.max() < (
        self.task.vocab_size):
      raise ValueError(f'token ids must be in 0..{self.task.vocab_size - 1}')
    table = getattr(self.model, 'position_embed', None)
    if table is not None and tokens.shape[-1] > table.num_embeddings:
      raise ValueError(f'{self.spec.name} learned positions up to L='
                       f'{table.num_embeddings}; got a string of '
                       f'{tokens.shape[-1]}')
    return jnp.asarray(tokens[None] if one else tokens, jnp.int32), one


def _out(x, one):
  x = np.asarray(x)
  return x[0] if one else x


def load_seed(run, group: str, seed: int, checkpoint_dir=None,
              learning_rate: float | None = None) -> Seed:
  """Seed `seed` of `group` in the run at `run` (a workdir or a `Run`),
  restored from the group's latest checkpoint in `checkpoint_dir` (default:
  the one the run used); with a grid of learning rates, at
  `learning_rate` (default: the rate selected for the group, from
  summary.json)."""
  run = load_run(run)
  if group not in run.groups:
    raise NotFound(f'no group {group!r} in {run.path}; its groups: '
                   f'{", ".join(run.groups) or "none recorded"}')
  recipe = run.groups[group]
  if not (isinstance(seed, (int, np.integer))
          and 0 <= seed < recipe['num_seeds']):
    raise NotFound(f'{group} has seeds 0..{recipe["num_seeds"] - 1}; got '
                   f'{seed!r}')
  folder = storage.path(checkpoint_dir or run.checkpoint_dir) / group
  if not folder.exists():
    raise NotFound(f'no checkpoint of {group}: {folder} does not exist '
                   '(pass checkpoint_dir= if they moved)')
  try:  # never another recipe's checkpoints, read as this group's
    rundir.check_recipe(folder, recipe, run.path)
  except ConfigError as e:
    raise NotFound(str(e).split(': ', 1)[1].split('; --overwrite')[0]) from None
  checkpoints = GroupCheckpoints(folder, read_only=True)
  try:
    steps = checkpoints.steps()
    if not steps:
      raise NotFound(f'no checkpoint of {group} in {folder}')
    ensemble = train_lib.build(recipe)
    step, state = checkpoint_lib.restore(ensemble, checkpoints)
  finally:
    checkpoints.close()
  if state is None:
    raise NotFound(f'no readable checkpoint of {group} in {folder} (tried '
                   f'steps {", ".join(map(str, steps))})')
  rates = list(ensemble.learning_rates)
  if learning_rate is None:  # the selection (at the largest budget)
    selected = run.summary.get('learning_rates', {}).get('selected', {})
    keys = sorted((int(k.partition('@')[2] or 0), k) for k in selected
                  if k == group or k.startswith(group + '@'))
    learning_rate = (selected[keys[-1][1]]['learning_rate'] if keys
                     else rates[0])
  if float(learning_rate) not in rates:
    raise NotFound(f'{group} trained at learning rates '
                   f'{", ".join(f"{r:g}" for r in rates)}; got '
                   f'{learning_rate!r}')
  member = rates.index(float(learning_rate)) * ensemble.num_seeds + seed
  params = jax.tree.map(lambda x: x[member], state['params'])
  return Seed(model=nnx.merge(ensemble.graphdef, params), task=ensemble.task,
              spec=models_lib.get(recipe['model']), group=group,
              seed=int(seed), step=step, ensemble=ensemble, state=state,
              run=run)
