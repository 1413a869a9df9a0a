"""Distance: how far back can each model reach for the first symbol?

Command: `python run.py --exp=distance` (several minutes on a laptop CPU:
`--only_check_args` estimates it).
Trains attention, the LSTM with Flax's default initialisation and with
chrono initialisation, the GRU and a plain (Elman) RNN on the memory task
at lengths 10 to 100, 24 seeds each, under one budget for all: 500 Adam
steps of 32 fresh strings, lr 3e-3, d_model 32. Tests each seed on 2,048
fresh strings.

Expect: attention at 100% at every length; the recurrent nets, which must
carry the first symbol through L-1 multiplications, falling to chance (50%)
as the distance grows, each seed at its own length. The LSTM twice: its
limit under Flax's default (a forget gate that starts at 0.5) is its
initialisation's, not gating's (`--exp=gating` asks this for every
initialisation). Whether a limit is a wall or the budget, `--exp=budget`
asks.
"""

import dataclasses

import numpy as np

from experiments import memory_task as memory
from src import experiment
from src import gates as gates_lib
from src import models as models_lib
from src import record
from src import stats
from src.config import Config

DEFAULTS = Config(
    exp='distance',
    # The LSTM at Flax's default and at chrono init (Tallec & Ollivier 2018):
    # the first figure shows that the LSTM's limit is its initialisation.
    models=('attention', 'lstm', 'lstm_chrono', 'gru', 'rnn'),
    # The lesson's ~15 steps, then far past it (--exp=all's distance_long
    # part goes to 400).
    lengths=(10, 20, 50, 100),
    # Paired runs per group, on the vmap axis. 24: the power plan's 80% for
    # "stays at 100%" (a share of seeds above 4 in 5) and for the gating
    # comparisons (a family of 3), at their declared effects.
    seeds=24,
    steps=500,  # one budget for every model and length
    batch_size=32,  # the CPU's sweet spot for the recurrent scans
    learning_rate=3e-3,
    chunk_steps=50,  # ten log points (and test-curve points) per group
    checkpoint_every=250,
)
# --quick: a first look in a fraction of the time (same code, fewer steps).
QUICK = dataclasses.replace(
    DEFAULTS, lengths=(5, 20, 50), seeds=4, steps=300)


SECTION, FIGURE = '2. Distance', 'distance.png'  # in REPORT.md
COLUMNS = memory.COLUMNS
TIMING_COLUMNS = ('wall_s', 'compile_s')  # the only columns a rerun changes
OFFSET = 0.02  # each model's points shifted by this fraction of the log-L axis


class Distance(experiment.Experiment):
  """How far back each model reaches for the first symbol."""
  summary_keys = (
      '`groups[{model,length,mean_accuracy,accuracy_per_seed,'
      'solved_fraction,solved_ci95,seeds,diverged}]`, '
      '`critical_distance{model: per_seed, median, ci95, coverage}`, '
      '`paired[{model,versus,wins,ties,losses,p}]`, `diverged_seeds`, '
      '`claims`, `budget`, `wall_s`, `compile_s`, `compile_share`')
  name, section, figure_file = 'distance', SECTION, FIGURE
  defaults, quick, columns = DEFAULTS, QUICK, COLUMNS
  groups = staticmethod(memory.groups)
  rows = staticmethod(memory.rows)
  line = staticmethod(memory.line)

  def planned_claims(self, config):
    """The claims `summarize` makes, on placeholder rows of the run's
    shape."""
    return memory.memory_claims(memory.placeholder_table(config),
                                config.models, config.lengths,
                                trained=memory.conditions(config))

  def summarize(self, config, rows, data):
    lengths = sorted(config.lengths)
    table = memory.accuracy_table(rows)
    groups = []
    for model in config.models:
      for length in lengths:
        sub = [r for r in rows
               if r['model'] == model and int(r['length']) == length]
        acc = [float(r['accuracy']) for r in sub]
        solved = stats.solved_fraction(acc)
        groups.append(dict(
            model=model, length=length, mean_accuracy=float(np.mean(acc)),
            accuracy_per_seed=acc, solved_fraction=solved['fraction'],
            solved_ci95=solved['ci95'], seeds=len(acc),
            diverged=int(sum(int(r['diverged']) for r in sub))))
    crit = {m: memory.per_seed_critical(table, m, lengths)
            for m in config.models}
    return {'groups': groups,
            'critical_distance': {m: memory.critical_summary(c)
                                  for m, c in crit.items()},
            'paired': memory.paired_table(crit),
            'diverged_seeds': int(sum(g['diverged'] for g in groups)),
            'claims': memory.memory_claims(
                table, config.models, lengths, data.curves,
                memory.conditions(config),
                memory.selected_rates(config, rows)),
            'budget': {k: getattr(config, k) for k in (
                'steps', 'batch_size', 'd_model', 'seeds')},
            'tuning': (f'one learning rate ({config.rates[0]:g}): a failure '
                       'is a failure at that rate (trained out: its loss '
                       'flat); --learning_rates tunes each group'
                       if len(config.rates) == 1 else
                       f'each group at its best of {len(config.rates)} rates'
                       ' on validation strings (learning_rates)')}

  def figure(self, config, summary, rows, data, folder, writer):
    plt = record.pyplot()
    from matplotlib.lines import Line2D
    fig, ax = plt.subplots(figsize=(9.5, 5.4))
    lengths = sorted(config.lengths)
    n = len(config.models)
    handles, learning = [], 0
    for i, model in enumerate(config.models):
      color = models_lib.get(model).color
      style = record.LINE_STYLES[i % len(record.LINE_STYLES)]
      marker = record.MARKERS[i % len(record.MARKERS)]
      g = {x['length']: x for x in summary['groups'] if x['model'] == model}
      offset = OFFSET * (i - (n - 1) / 2)
      x = record.offset_x(lengths, offset)
      # The mean a line, each seed a mark above it: no seed hides; the
      # models in their order, the first (the headline's) drawn on top.
      ax.plot(x, [g[L]['mean_accuracy'] for L in lengths], color=color,
              lw=2.0 if i == 0 else 1.2, ls=style, zorder=2 + (n - i) / n)
      for L, xi in zip(lengths, x):
        acc = np.asarray(g[L]['accuracy_per_seed'], float)
        moving = still_learning(data.curves, model, L, config.steps)
        still = np.array([s in moving for s in range(acc.size)], bool) | (
            acc < below_chance(config.eval_examples))
        learning += int(still.sum())
        ax.scatter(np.full(int((~still).sum()), xi), acc[~still], s=18,
                   color=color, alpha=0.6, marker=marker, edgecolors='none',
                   zorder=5)
        ax.scatter(np.full(int(still.sum()), xi), acc[still], s=30,
                   facecolors='none', edgecolors=color, marker=marker,
                   linewidths=1.2, zorder=5)
      handles.append(Line2D([], [], color=color, ls=style, marker=marker,
                            lw=2.0 if i == 0 else 1.2, label=model))
    ax.axhline(0.5, color='k', ls=':', lw=1)
    handles.append(Line2D([], [], color='k', ls=':', lw=1,
                          label='chance (0.5)'))
    if learning:
      handles.append(Line2D([], [], color='gray', ls='', marker='o',
                            markerfacecolor='none', label=(
                                f'open: not settled at the end ({learning}:'
                                ' loss still falling, or below chance)')))
    ax.set_xscale('log')
    ax.set_xticks(lengths)
    ax.set_xticklabels([str(L) for L in lengths])
    ax.minorticks_off()
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel('sequence length L (the first symbol is L - 1 steps back);'
                  f' models side by side, {100 * OFFSET:g}% of the axis apart')
    ax.set_ylabel('test accuracy (fresh strings)')
    ax.set_title(f'Memory task: each of {config.seeds} seeds (marks) and the '
                 f'mean (line); {config.steps} steps x {config.batch_size} '
                 'strings', fontsize=10)
    ax.legend(handles=handles, loc='lower left', fontsize=8)
    ax.grid(alpha=0.3)
    record.save_figure(fig, folder / FIGURE, writer, 'figures/distance')

  def print_table(self, config, summary):
    by = {(g['model'], g['length']): g for g in summary['groups']}
    lengths = sorted(config.lengths)
    rows = []
    for model in config.models:
      c = summary['critical_distance'][model]
      rows.append([model] + [
          f'{by[model, L]["mean_accuracy"]:.3f} '
          f'{round(by[model, L]["solved_fraction"] * by[model, L]["seeds"])}/'
          f'{by[model, L]["seeds"]}' for L in lengths
      ] + [memory.fmt_median(c)])
    print(f'\nMean test accuracy and seeds solved (>= {stats.SOLVED}) by '
          f'length ({config.seeds} seeds):')
    print(record.table(rows, ['model'] + [f'L={L}' for L in lengths]
                       + ['critical (median, 95% interval)']))


def below_chance(strings: int) -> float:
  """An accuracy this far under 0.5 on `strings` test strings (three
  standard errors) is no coin: the seed answers the other symbol, in
  transition."""
  return 0.5 - 3 * np.sqrt(0.25 / strings)


def still_learning(curves, model: str, length: int, steps: int) -> set:
  """The seeds of a group that did not solve it and were still learning at
  its end: their loss fell by FLAT or more over the last doubling of steps
  (`gates.trained_out`, seed by seed; none where no curve is recorded)."""
  mine = [r for r in curves if r['model'] == model
          and int(r['length']) == length]
  out = set()
  for s in sorted({int(r['seed']) for r in mine}):
    last = [r for r in mine if int(r['seed']) == s and int(r['step']) == steps]
    if last and last[0]['test_accuracy'] != '' and stats.solved(
        float(last[0]['test_accuracy'])):
      continue
    if not gates_lib.trained_out(mine, [s], steps)['flat']:
      out.add(s)
  return out


EXPERIMENT = Distance()
