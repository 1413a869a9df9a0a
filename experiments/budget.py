"""Wall or budget? The per-seed critical distance of each model against
training steps.

Command: `python run.py --exp=budget` (an hour or more on a laptop CPU:
`--only_check_args` estimates it). Trains the recurrent nets
(the LSTM at Flax's default and at chrono initialisation, the GRU, the plain
RNN) at lengths 10, 20, 30, 40, 50 and 100, twenty seeds, and tests each
seed on 2,048 fresh strings after 250, 1,000 and 4,000 Adam steps. The
learning rate has no schedule, so the model tested after 250 steps of a
4,000-step run is exactly the one a 250-step run would give: one run per
group serves every budget.

Expect: a limit that moves with training is the budget's; a wall is one the
seeds stuck at it do not escape. The verdict reads as a bound: at L* (the
shortest length significantly fewer than half the seeds solve after 250
steps) "k of n stuck seeds escaped between 250 and 4000 steps: escape rate
below x% (one-sided 95%)"; held needs x below claims.MAX_ESCAPE (20%) and a
flat loss in the seeds still stuck, and a grid of learning rates (a wall
is a "cannot": each model at its best rate; at one rate, as by default,
held is out of reach and the plan says so); a significant rise is did not
hold; anything else `inconclusive`. Twenty seeds are what a wall needs to
be held at all (claims.wall_seeds_needed); fewer say `inconclusive
(underpowered: n seeds)`. A side claim: the lesson says nothing of budgets.
"""

import dataclasses

import numpy as np

from experiments import memory_task as memory
from src import claims as claims_lib
from src import gates as gates_lib
from src import models as models_lib
from src import record
from src import stats
from src.claims import Claim

DEFAULTS = memory.BudgetConfig(
    exp='budget',
    models=('lstm', 'lstm_chrono', 'gru', 'rnn'),  # attention: see distance
    # 30 and 40 resolve (20, 50], where the limits of the LSTM and the GRU
    # fell after 250 steps in the 8-seed run (L* must not hang on one gap)
    lengths=(10, 20, 30, 40, 50, 100),
    budgets=(250, 1000, 4000),  # each four times the last: two doublings
    # paired over budgets; 20 so that a wall can be held at all: L* leaves
    # at least 15 of 20 seeds stuck, and 0 escapes in 14 bound the escape
    # rate below claims.MAX_ESCAPE (claims.wall_seeds_needed)
    seeds=20,
    steps=4000,  # not read: a group trains to the largest of --budgets
    batch_size=32,
    learning_rate=3e-3,
    chunk_steps=50,
    checkpoint_every=500,
)
# --quick: a first look in a fraction of the time (same code, fewer steps).
QUICK = dataclasses.replace(
    DEFAULTS, lengths=(5, 20, 50), budgets=(100, 400), seeds=4, steps=400)
SECTION, FIGURE = '2. Distance: wall or budget?', 'budget.png'  # in REPORT.md
COLUMNS = memory.BUDGET_COLUMNS


class Budget(memory.BudgetExperiment):
  """Wall or budget: a limit more training does not move."""
  summary_keys = (
      '`critical_distance{model}{steps}`, '
      '`mean_accuracy{model}{steps}{L}`, '
      '`solved_fraction{model}{steps}{L}`, `claims`')
  name, section, figure_file = 'budget', SECTION, FIGURE
  defaults, quick, columns = DEFAULTS, QUICK, COLUMNS

  def planned_claims(self, config):
    """The wall claim of each recurrent model, on the fewest seeds L* may
    leave stuck (it lets up to stats.most_below_half(seeds) solve it): the
    plan's worst case."""
    stuck = config.seeds - max(stats.most_below_half(config.seeds), 0)
    return [Claim(f'The limit of {m} is a wall.', claims_lib.RELIABILITY,
                  memory.WALL_FAMILY, dict(successes=[True] * stuck,
                                           rate=1 - memory.MAX_ESCAPE),
                  gates=gates_lib.grid_gate(stats.HELD, config.rates),
                  role=claims_lib.SIDE)
            for m in config.models if models_lib.get(m).family.recurrent]

  def summarize(self, config, rows, data):
    budgets, lengths = sorted(config.budgets), sorted(config.lengths)
    out = {'critical_distance': {}, 'mean_accuracy': {},
           'solved_fraction': {}, 'claims': []}
    for budget in budgets:
      table = memory.accuracy_table(rows, steps=budget)
      for model in config.models:
        out['critical_distance'].setdefault(model, {})[str(budget)] = \
            memory.critical_summary(
                memory.per_seed_critical(table, model, lengths))
        out['mean_accuracy'].setdefault(model, {})[str(budget)] = {
            str(L): v for L, v in memory.mean_by_length(
                table, model, lengths).items()}
        out['solved_fraction'].setdefault(model, {})[str(budget)] = {
            str(L): stats.solved_fraction(list(table[model, L].values()))[
                'fraction']
            for L in lengths}
    for model in config.models:
      if models_lib.get(model).family.recurrent:
        # A wall is a "cannot": held only with the model at its best rate
        # of a grid, inside it at L*. A side claim: the lesson says nothing
        # of budgets.
        wall = memory.limit_is_a_wall(rows, data.curves, model, lengths,
                                      budgets)
        wall.gates = gates_lib.merged(
            gates_lib.grid_gate(stats.HELD, config.rates), wall.gates,
            memory.selected_rates(config, rows, steps=budgets[-1]).gate(
                stats.HELD, model, [wall.setting.get('length')]))
        wall.role = claims_lib.SIDE
        out['claims'].append(wall)
    return out

  def print_table(self, config, summary):
    budgets = sorted(config.budgets)
    print('\nCritical distance by training budget: median [interval] over '
          f'{config.seeds} seeds')
    print(record.table(
        [[m] + [memory.fmt_median(summary['critical_distance'][m][str(b)])
                for b in budgets] for m in config.models],
        ['model'] + [f'{b} steps' for b in budgets]))

  def figure(self, config, summary, rows, data, folder, writer):
    """Per model: the solved fraction against length after each budget."""
    plt = record.pyplot()
    budgets = sorted(config.budgets)
    fig, axes = plt.subplots(1, len(config.models),
                             figsize=(3.3 * len(config.models), 3.4),
                             sharey=True, squeeze=False)
    lengths = sorted(config.lengths)
    for ax, model in zip(axes[0], config.models):
      for i, b in enumerate(budgets):
        frac = summary['solved_fraction'][model][str(b)]
        ax.plot(lengths, [frac[str(L)] for L in lengths], 'o-',
                color=plt.cm.viridis(i / max(len(budgets) - 1, 1)),
                label=f'{b} steps')
        crit = summary['critical_distance'][model][str(b)]['per_seed']
        ax.scatter([max(c, lengths[0] * 0.7) for c in crit],
                   np.full(len(crit), -0.06 - 0.04 * i), marker='|', s=60,
                   color=plt.cm.viridis(i / max(len(budgets) - 1, 1)))
      ax.set_xscale('log')
      ax.set_xticks(lengths, [str(L) for L in lengths])
      ax.minorticks_off()
      ax.set_title(f'{model}', fontsize=9, color=models_lib.get(model).color)
      ax.set_xlabel('length L')
      ax.set_ylim(-0.1 - 0.04 * len(budgets), 1.05)
      ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f'fraction of {config.seeds} seeds solved '
                          '(ticks: each seed\'s critical distance)')
    axes[0][0].legend(fontsize=7)
    fig.suptitle('Wall or budget: seeds that solve each length after each '
                 'training budget', fontsize=10)
    record.save_figure(fig, folder / FIGURE, writer, 'figures/budget')


EXPERIMENT = Budget()
