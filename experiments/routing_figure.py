"""The routing experiment's figure (`experiments/routing.py`): accuracy per
task and model, the one-head models' weight on the two symbols, and the
heads' read-out by symbol pair on xor_fixed."""

import numpy as np

from src import models as models_lib
from src import record
from src import stats


def plot(config, summary, xor, path, writer=None, *, link: float):
  """Accuracy per task and model (bars: mean; dots: seeds); the one-head
  models' weight on the two symbols per seed; `xor` = (heads, measured):
  seed 0's weight of each head on each symbol by symbol pair, xor_fixed;
  `link`: the weight at which a head follows a symbol (dashed)."""
  plt = record.pyplot()
  fig, axes = plt.subplots(1, 3, figsize=(17, 4.4),
                           gridspec_kw={'width_ratios': [3, 1.3, 1.3]})
  ax = axes[0]
  tasks = list(summary['accuracy'])
  names = list(dict.fromkeys(n for t in tasks
                             for n in summary['accuracy'][t]))
  width = 0.8 / max(len(names), 1)
  for j, name in enumerate(names):
    model = name.split(' ')[0]
    color = models_lib.get(model).color
    x = [i + (j - len(names) / 2 + 0.5) * width for i in range(len(tasks))]
    v = [summary['accuracy'][t].get(name) for t in tasks]
    alpha = 0.35 + 0.5 * (j + 1) / len(names)
    ax.bar([xi for xi, vi in zip(x, v) if vi],
           [vi['mean'] for vi in v if vi], width, color=color, alpha=alpha,
           label=name, hatch='//' if ' d' in name else None)
    for xi, vi in zip(x, v):
      if vi:
        ax.scatter([xi] * len(vi['seeds']), vi['seeds'], s=6, color='k',
                   zorder=3)
  for i, t in enumerate(tasks):
    chance = next(iter(summary['accuracy'][t].values()))['chance']
    ax.hlines(chance, i - 0.45, i + 0.45, colors='k', linestyles=':', lw=1)
  ax.set_xticks(range(len(tasks)), tasks, fontsize=8)
  ax.set_ylim(0, 1.02)
  ax.set_ylabel('test accuracy (bars: mean; dots: seeds; dotted: chance)')
  ax.legend(fontsize=6, ncol=2, loc='lower left')
  ax.set_title('attention alone against the dense block', fontsize=9)
  ax = axes[1]
  for i, (task, seeds) in enumerate(summary['one_head'].items()):
    solved = [stats.solved(r['accuracy']) for r in seeds]
    ax.scatter([r['mass_first'] for r in seeds],
               [r['mass_second'] for r in seeds], s=18, edgecolors=f'C{i}',
               label=task, facecolors=[f'C{i}' if s else 'none'
                                       for s in solved])
  ax.plot([0, 1], [1, 0], ls=':', color='k', lw=1)
  ax.axvline(link, ls='--', color='grey', lw=0.7)
  ax.axhline(link, ls='--', color='grey', lw=0.7)
  ax.set_xlim(0, 1)
  ax.set_ylim(0, 1)
  ax.set_xlabel('weight on the first symbol')
  ax.set_ylabel('weight on the second symbol')
  if summary['one_head']:
    ax.legend(fontsize=6)
  ax.set_title('one head, per seed (filled: solved)', fontsize=9)
  ax = axes[2]
  if xor:
    heads, shown = xor
    first = np.asarray(shown['first_by_pair'])[0]  # seed 0: H x pairs
    second = np.asarray(shown['second_by_pair'])[0]
    for h in range(heads):
      ax.plot(range(4), first[h], '-o', color=f'C{h}', label=f'head {h}: on a')
      ax.plot(range(4), second[h], '--s', color=f'C{h}',
              label=f'head {h}: on b')
    ax.set_xticks(range(4), ['a0 b0', 'a0 b1', 'a1 b0', 'a1 b1'], fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel('read-out weight, mean over strings')
    ax.legend(fontsize=6)
    acc = float(np.asarray(shown['accuracy'])[0])
    ax.set_title(f'xor_fixed, attention h{heads} seed 0 (accuracy '
                 f'{acc:.2f}):\neach head\'s weight by symbol pair',
                 fontsize=9)
  fig.suptitle(f'Routing and the dense block (L={config.lengths[0]}, '
               f'd_model {config.d_model}, {config.steps} steps)', fontsize=10)
  record.save_figure(fig, path, writer, 'figures/routing')
