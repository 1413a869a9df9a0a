"""Gating at its best: does the gated net's advantage survive, or depend on,
its initialisation?

Command: `python run.py --exp=gating` (hours on a laptop CPU: an
accelerator's job; `--exp=all` runs a subset; `--quick` a first look).
Trains, on the memory task at lengths 10 to 100, twelve
seeds each at three learning rates (1e-3, 3e-3, 1e-2: each group judged at
the one with the best validation accuracy):
- `lstm`: Flax's default (forget-gate bias 0, the gate starts at 0.5);
- `lstm_fb1`: forget-gate bias 1 (Gers et al. 2000, Jozefowicz et al. 2015);
- `lstm_chrono`: chrono init (Tallec & Ollivier 2018), T_max --chrono_horizon
  (default: the longest length), the same at every length;
- `gru`, `gru_chrono`: Flax's default, and chrono for the update gate;
- `rnn`: Flax's default (orthogonal recurrent matrix);
- `rnn_uniform`: PyTorch's `nn.RNN` (every weight U(-1/sqrt(d), 1/sqrt(d))).
Each seed is tested on 2,048 fresh strings after 250, 500 and 1,000 Adam
steps of 32 strings (no schedule: one run per group serves every budget).
Seed i of every model trains on the same strings, so models are compared
seed by seed: per-seed critical distances, exact sign tests, Holm-adjusted
over the family of ten (every gated model against every plain one); a
verdict that a model fell short needs its loss flat (trained out).

Expect: whether "gating carries the symbol further than a plain RNN" holds
depends on the initialisation; this experiment says, for each
initialisation and each budget, which way it went and how surely.
"""

import dataclasses

import numpy as np

from experiments import memory_task as memory
from src import claims as claims_lib
from src import models as models_lib
from src import record
from src import stats

DEFAULTS = memory.BudgetConfig(
    exp='gating',
    models=('lstm', 'lstm_fb1', 'lstm_chrono', 'gru', 'gru_chrono', 'rnn',
            'rnn_uniform'),
    # 10 and 20 judge the lesson's ~15 steps; L=200 would double the time
    # of three rates x 12 seeds (configs/paper.flags goes to 200).
    lengths=(10, 20, 50, 100),
    budgets=(250, 500, 1000),  # doublings, one run per group
    # 5 gated x 2 plain = 10 comparisons in one family: the power plan the
    # run prints says what 12 seeds give them.
    seeds=12,
    # Every model at its best rate (per group, on validation strings): a
    # verdict that gating "did not carry further" is not one rate's.
    learning_rates=(1e-3, 3e-3, 1e-2),
    steps=1000,  # not read: a group trains to the largest of --budgets
    batch_size=32,
    learning_rate=3e-3,
    chunk_steps=50,
    checkpoint_every=250,
)
# --quick: a first look in a fraction of the time (same code, fewer steps).
QUICK = dataclasses.replace(
    DEFAULTS, models=('lstm', 'lstm_chrono', 'rnn'), lengths=(10, 20, 50),
    budgets=(150, 300), seeds=4, steps=300)
SECTION = '2. Distance: gating at its best (initialisations)'  # REPORT.md
FIGURE = 'gating.png'
COLUMNS = memory.BUDGET_COLUMNS


class Gating(memory.BudgetExperiment):
  """Gating at its best: per initialisation, rate and budget."""
  summary_keys = (
      '`critical_distance{model}{steps}: per_seed, median, ci95, '
      'coverage`, `versus_rnn{model}{steps}{plain model}: wins, ties, '
      'losses, p`, `claims`')
  name, section, figure_file = 'gating', SECTION, FIGURE
  defaults, quick, columns = DEFAULTS, QUICK, COLUMNS

  def planned_claims(self, config):
    """Its claims (gated against plain, the plain nets giving way) on
    placeholder rows of the run's shape."""
    return [c for c in memory.memory_claims(
        memory.placeholder_table(config), config.models, config.lengths,
        trained=memory.conditions(config, max(config.budgets)))
            if c.family in (memory.GATING_FAMILY, memory.GIVES_WAY_FAMILY)]

  def summarize(self, config, rows, data):
    """The claims at the largest budget, each failure trained out there (the
    curves reach it); the smaller budgets' verdicts (raw p) beside them."""
    budgets, lengths = sorted(config.budgets), sorted(config.lengths)
    plain = [m for m in config.models
             if models_lib.get(m).family == models_lib.PLAIN]
    gated = [m for m in config.models
             if models_lib.get(m).family == models_lib.GATED]
    out = {'critical_distance': {}, 'versus_rnn': {}, 'claims': []}
    crit, by_budget, last = {}, {}, budgets[-1]
    for budget in budgets:
      table = memory.accuracy_table(rows, steps=budget)
      crit[budget] = {m: memory.per_seed_critical(table, m, lengths)
                      for m in config.models}
      for m in config.models:
        out['critical_distance'].setdefault(m, {})[str(budget)] = \
            memory.critical_summary(crit[budget][m])
        for p in plain:
          if p != m:
            c = memory.compare(m, p, crit[budget][m], crit[budget][p])
            out['versus_rnn'].setdefault(m, {}).setdefault(str(budget), {})[
                p] = {k: c[k] for k in ('wins', 'ties', 'losses', 'p')}
      final = data.curves if budget == budgets[-1] else None
      rates = memory.selected_rates(config, rows, steps=budget)
      seeds = sorted(table[config.models[0], lengths[0]])
      for g in gated:
        failed = {s: memory.first_failure(table, g, lengths, s)
                  for s in seeds}
        for p in plain:
          by_budget.setdefault((g, p), {})[budget] = \
              memory.gating_beats_plain(
                  g, p, crit[budget][g], crit[budget][p], lengths, failed,
                  final, memory.conditions(config, budget), rates)
      for p in plain:
        by_budget.setdefault((p,), {})[budget] = memory.plain_gives_way(
            table, p, lengths, curves=final, rates=rates)
    for key, verdicts in by_budget.items():
      raw = {b: claims_lib.test(c) for b, c in verdicts.items()}
      claim = verdicts[last]
      claim.evidence['by_budget'] = {b: (c.verdict, c.p)
                                     for b, c in raw.items()}
      claim.evidence['what'] = (f'after {last} steps: '
                                + claim.evidence['what'])
      claim.setting['steps'] = last
      out['claims'].append(claim)
    return out

  def print_table(self, config, summary):
    budgets = sorted(config.budgets)
    print(f'\nPer-seed critical distance: median [interval] and seeds, over '
          f'L in {sorted(config.lengths)}')
    print(record.table(
        [[m, models_lib.get(m).init_name] + [
            memory.fmt_median(summary['critical_distance'][m][str(b)])
            for b in budgets] + [' '.join(
                str(c) for c in summary['critical_distance'][m][str(
                    budgets[-1])]['per_seed'])]
         for m in config.models],
        ['model', 'initialisation'] + [f'{b} steps' for b in budgets]
        + [f'seeds at {budgets[-1]}']))
    plain = list(next(iter(summary['versus_rnn'].values()), {}).get(
        str(budgets[-1]), {}))
    if plain:
      print(f'\nPaired by seed against each plain RNN after {budgets[-1]} '
            'steps: further / tied / shorter (sign test p)')
      print(record.table(
          [[m] + [(lambda c: f'{c["wins"]}/{c["ties"]}/{c["losses"]} '
                   f'(p={stats.fmt_p(c["p"])})')(
                       summary['versus_rnn'][m][str(budgets[-1])][p])
                  if p in summary['versus_rnn'][m][str(budgets[-1])] else '-'
                  for p in plain]
           for m in summary['versus_rnn']], ['model'] + [f'vs {p}'
                                                          for p in plain]))

  def figure(self, config, summary, rows, data, folder, writer):
    """Per model and budget: each seed's critical distance (dots) and the
    median (bar); 'none' below the shortest length."""
    plt = record.pyplot()
    budgets = sorted(config.budgets)
    lengths = sorted(config.lengths)
    floor = lengths[0] / 2  # where "solved no length" is drawn
    fig, ax = plt.subplots(figsize=(1.3 * len(config.models) * len(budgets)
                                    / 2 + 3, 4.4))
    width = 0.8 / len(budgets)
    rng = np.random.default_rng(0)
    for i, model in enumerate(config.models):
      color = models_lib.get(model).color
      for j, b in enumerate(budgets):
        c = summary['critical_distance'][model][str(b)]
        x = i + (j - (len(budgets) - 1) / 2) * width
        y = np.maximum(np.asarray(c['per_seed'], float), floor)
        ax.scatter(x + rng.uniform(-0.25, 0.25, y.size) * width, y, s=14,
                   color=color, alpha=0.3 + 0.7 * (j + 1) / len(budgets),
                   edgecolors='none', zorder=3)
        ax.hlines(max(c['median'], floor), x - width / 2.2, x + width / 2.2,
                  color=color, lw=2.5, zorder=4)
        ax.text(x, floor * 0.72, str(b), ha='center', va='top', fontsize=6,
                rotation=90)
    ax.set_yscale('log')
    ax.set_yticks([floor] + lengths, ['none'] + [str(L) for L in lengths])
    ax.minorticks_off()
    ax.set_ylim(floor * 0.35, lengths[-1] * 1.5)
    ax.set_xticks(range(len(config.models)),
                  [f'{m}\n{models_lib.get(m).init_name}'
                   for m in config.models],
                  fontsize=7)
    ax.set_ylabel('critical distance (largest L solved, every shorter L too)')
    ax.grid(alpha=0.3, axis='y')
    ax.set_title(f'Initialisation decides: each seed (dots) and the median '
                 f'(bar) after {", ".join(map(str, budgets))} steps (labels '
                 f'under each column); {config.seeds} seeds', fontsize=9)
    record.save_figure(fig, folder / FIGURE, writer, 'figures/gating')


EXPERIMENT = Gating()
