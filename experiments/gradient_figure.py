"""The gradient experiment's figure (`experiments/gradient.py`): the
sensitivity to position 0 across lengths (raw, and relative to the last
filler position), and each model's profile along one string."""

import numpy as np

from src import models as models_lib
from src import record
from src import stats


def plot(config, summary, rows, path, writer=None, profiles=None):
  """Across lengths above (raw, and relative to the last filler
  position); below, one panel per model with `profiles` along one string."""
  plt = record.pyplot()
  models = [m for m in summary['models'] if m in (profiles or {})]
  columns = min(3, len(models)) or 1
  below = -(-len(models) // columns)  # rows of profile panels
  fig = plt.figure(figsize=(12, 4.2 + 3.3 * below))
  grid = fig.add_gridspec(1 + below, 2 * columns,
                          height_ratios=[4.2] + [3.3] * below, hspace=0.6,
                          wspace=0.9)
  axes = [fig.add_subplot(grid[0, :columns]),
          fig.add_subplot(grid[0, columns:])]
  across_lengths(config, summary, rows, axes)
  for i, model in enumerate(models):
    ax = fig.add_subplot(grid[1 + i // columns,
                              2 * (i % columns):2 * (i % columns) + 2])
    along_the_string(ax, model, profiles[model], config,
                     summary['models'][model].get('bridge'))
  fig.suptitle('The direct bridge: how much the output still feels position '
               '0' + (f' (below: every position of one string, '
                      f'L={config.bridge_length})' if models else ''),
               fontsize=11)
  record.save_figure(fig, path, writer, 'figures/gradient')


def along_the_string(ax, model, by_phase, config, bridge=None):
  """One model's sensitivity to every position against its distance from
  the query: seeds thin, their median thick; init dashed, trained solid;
  the title gives the median factor per step of the exponential fits."""
  color = models_lib.get(model).color
  title = model
  for phase in ('init', 'trained') if bridge else ():
    factors = [x for x in bridge[phase]['factor_per_step'].values()
               if x is not None]
    k = sum(stats.decays(f) for f in bridge[phase]['fits_per_seed'].values())
    if factors:
      title += (f'\n{phase}: x{np.median(factors):.3g}/step, exponential '
                f'decay in {k} of {len(factors)}')
  lowest = np.inf
  for phase, style in (('init', '--'), ('trained', '-')):
    by_seed = by_phase.get(phase, {})
    if not by_seed:
      continue
    profiles_SxD = np.stack([by_seed[s] for s in sorted(by_seed)])
    shown = lambda v: np.where(v > 0, v, np.nan)  # log axis: 0 is off it
    lowest = min(lowest, np.nanmin(shown(profiles_SxD), initial=np.inf))
    d = np.arange(profiles_SxD.shape[1])
    for v in profiles_SxD:
      ax.plot(d, shown(v), style, color=color, lw=0.5, alpha=0.35)
    ax.plot(d, shown(np.median(profiles_SxD, axis=0)), style, color=color,
            lw=1.8, label=f'{phase}, median of {len(by_seed)} seeds')
  if lowest < 1e6 * stats.FLOOR:  # near the floor: show where fits stop
    ax.axhline(stats.FLOOR, color='k', ls=':', lw=0.8,
               label=f'{stats.FLOOR:g}: not fitted below')
  ax.set_yscale('log')
  ax.set_title(title, fontsize=8)
  ax.set_xlabel(f'distance d = {config.bridge_length - 1} - t from the query '
                '(position t)', fontsize=8)
  ax.set_ylabel('||d margin / d x_t||', fontsize=8)
  ax.tick_params(labelsize=7)
  ax.legend(fontsize=6)
  ax.grid(alpha=0.3)


def across_lengths(config, summary, rows, axes):
  lengths = sorted(config.lengths)
  n = len(summary['models'])
  for i, (model, e) in enumerate(summary['models'].items()):
    color = models_lib.get(model).color
    offset = 0.02 * (i - (n - 1) / 2)
    for phase, style in (('init', '--'), ('trained', '-')):
      per_seed = [[float(r['sensitivity']) for r in rows
                   if r['model'] == model and r['phase'] == phase
                   and int(r['length']) == L] for L in lengths]
      axes[0].plot(lengths, [e[f'{phase}_sensitivity'][str(L)]
                             for L in lengths], style, color=color,
                   label=model if phase == 'trained' else None)
      if phase == 'init':
        record.seed_dots(axes[0], lengths, per_seed, color, offset=offset)
    rel = e['relative_sensitivity']['trained']
    axes[1].plot(lengths, [np.median(rel[str(L)]) for L in lengths], '-',
                 color=color, label=model)
    record.seed_dots(axes[1], lengths, [rel[str(L)] for L in lengths], color,
                     offset=offset)
  axes[0].plot([], [], 'k--', label='at initialisation (dots: seeds)')
  axes[0].plot([], [], 'k-', label=f'trained ({config.steps} steps)')
  axes[0].set_ylabel('||d margin / d e_0||, mean over seeds')
  axes[0].set_title('Raw sensitivity to position 0', fontsize=10)
  axes[1].axhline(1.0, color='k', ls=':', lw=1)
  axes[1].set_ylabel('sensitivity to position 0 / to position L-2')
  axes[1].set_title(f'Trained, scale-free: median (line) and seeds (dots)',
                    fontsize=10)
  for ax in axes:
    ax.set_yscale('log')
    ax.set_xscale('log')
    ax.set_xticks(lengths, [str(L) for L in lengths])
    ax.minorticks_off()
    ax.set_xlabel('sequence length L (steps from position 0 to the output)')
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3, which='both')
