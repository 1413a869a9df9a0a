# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Explore a run: the distance figure again, then its worst seed up close
#
# Three ways to open this file (percent format: `# %%` starts a cell):
# - as a script, from the repository root: `python notebooks/explore.py`
#   (it writes its figures and says where);
# - in VS Code: "Run Cell" above each `# %%` (the Python and Jupyter
#   extensions);
# - in Jupyter: `pip install jupytext`, then
#   `jupytext --to notebook notebooks/explore.py` and open
#   `notebooks/explore.ipynb` (neither is part of the requirements).
#
# `SEARCHLIGHT_RUN` names the run folder (default `runs/distance`, what
# `python run.py --exp=distance` writes); `SEARCHLIGHT_OUT` the folder for
# the figures (default `runs/explore`); `SEARCHLIGHT_SEED=group:seed` picks a
# seed instead of the worst one.

# %%
import os
import sys
from pathlib import Path

# The repository root: on the path for `src`, and the current folder, where
# run.py left the run and its checkpoints (a notebook starts in notebooks/).
ROOT = (Path(__file__).resolve().parents[1] if '__file__' in globals()
        else Path.cwd().resolve())
if not (ROOT / 'src').is_dir():
  ROOT = ROOT.parent
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)

import matplotlib.pyplot as plt
import numpy as np

from src import analysis
from src import models
from src import record

RUN = os.environ.get('SEARCHLIGHT_RUN', 'runs/distance')
OUT = Path(os.environ.get('SEARCHLIGHT_OUT', 'runs/explore'))
OUT.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## The run: its config and one row per seed

# %%
run = analysis.load_run(RUN)
print(run.command)
results = run.results
if 'steps' in results:  # a budget run tests each seed at several budgets
  results = results[results.steps == results.steps.max()]
# One test accuracy per seed (the attention run keeps a row per class).
per_seed = results.groupby(['model', 'length', 'seed'], as_index=False,
                           sort=False)['accuracy'].mean()
per_seed.head()

# %% [markdown]
# ## The distance figure, from the DataFrame: the mean (line), each seed (dots)

# %%
fig, ax = plt.subplots(figsize=(7.5, 4.4))
lengths = sorted(per_seed.length.unique())
names = list(per_seed.model.unique())
for i, name in enumerate(names):
  rows = per_seed[per_seed.model == name]
  color = models.get(name).color
  by_length = [rows[rows.length == L].accuracy.to_numpy() for L in lengths]
  ax.plot(lengths, [a.mean() for a in by_length], '-', lw=2, color=color,
          label=name)
  record.seed_dots(ax, lengths, by_length, color,
                   offset=0.025 * (i - (len(names) - 1) / 2))
ax.axhline(0.5, color='k', ls=':', lw=1, label='chance')
ax.set_xscale('log')
ax.set_xticks(lengths, [str(L) for L in lengths])
ax.minorticks_off()
ax.set_ylim(-0.03, 1.03)
ax.set_xlabel('sequence length L')
ax.set_ylabel('test accuracy (fresh strings)')
ax.legend(loc='lower left', fontsize=8)
ax.grid(alpha=0.3)
fig.savefig(OUT / 'distance.png', dpi=110, bbox_inches='tight')
print(f'wrote {OUT / "distance.png"}')

# %% [markdown]
# ## The worst seed, loaded from its checkpoint
#
# Its test accuracy again, from the loaded parameters on the run's own test
# strings: the number in results.csv, exactly.

# %%
if 'SEARCHLIGHT_SEED' in os.environ:
  group, number = os.environ['SEARCHLIGHT_SEED'].rsplit(':', 1)
  number = int(number)
else:
  worst = per_seed.loc[per_seed.accuracy.idxmin()]
  group, number = run.group_of(worst.model, worst.length), int(worst.seed)
seed = analysis.load_seed(run, group, number)
print(seed, seed.evaluate())

# %% [markdown]
# ## One string typed by hand
#
# Edit `text`: the first symbol (A or B), filler digits, the query `?`. An
# attention model takes at most the length it learned; a recurrent one any.

# %%
num_filler = seed.task.params['num_filler']
text = ' '.join(['A'] + [str(i % num_filler) for i in range(3, seed.task.length + 1)]
                + ['?'])
tokens = seed.encode(text)
print(f'{text!r}: margin logit_A - logit_B = {seed.margin(tokens):+.3f}; as '
      f'B: {seed.margin(seed.encode("B" + text[1:])):+.3f}')

# %% [markdown]
# What the model does with it: an attention model's searchlight (the last
# query's weights over the positions), or a recurrent model's hidden state
# after every position (and an LSTM's cell state, which carries the memory).

# %%
labels = seed.decode(tokens).split()
if seed.spec.has_attention:
  fig, ax = plt.subplots(figsize=(7, 2.8))
  weights = seed.searchlight(tokens)
  ax.bar(np.arange(len(labels)), weights, color=seed.spec.color)
  ax.set_ylim(0, 1.02)
  ax.set_ylabel("last query's weight")
  axes = [ax]
else:
  panels = {'hidden state h': seed.hidden_states(tokens)}
  if getattr(seed.model, 'has_cell_state', False):
    panels['cell state c'] = seed.hidden_states(tokens, cell=True)
  fig, axes = plt.subplots(len(panels), 1, figsize=(7, 2.6 * len(panels)),
                           squeeze=False)
  axes = list(axes[:, 0])
  for ax, (name, states_LxD) in zip(axes, panels.items()):
    bound = np.abs(states_LxD).max()
    image = ax.imshow(states_LxD.T, aspect='auto', cmap='RdBu_r',
                      vmin=-bound, vmax=bound)
    ax.set_ylabel(f'{name}\n(unit)')
    fig.colorbar(image, ax=ax)
for ax in axes:
  ax.set_xticks(np.arange(len(labels)), labels)
axes[-1].set_xlabel('position: the string typed above')
axes[0].set_title(f'{seed.group}, seed {seed.seed} (test accuracy '
                  f'{seed.evaluate()["accuracy"]:.3f})', fontsize=9)
fig.savefig(OUT / 'seed.png', dpi=110, bbox_inches='tight')
print(f'wrote {OUT / "seed.png"}')
