"""Wall or budget? The critical distance of each model against training steps.

Command: `python run.py --exp=budget` (about 4 minutes on a 2-core CPU).
Trains every model at lengths 10 to 100, four seeds, and tests each on 2,048
fresh strings after 250, 1,000 and 4,000 Adam steps. The learning rate has no
schedule, so the model tested after 250 steps of a 4,000-step run is exactly
the one a 250-step run would give: one run per group serves every budget.

Expect: attention solves every length at every budget. If a recurrent net's
critical distance grows with the budget, its failure in `distance` was a
matter of training time; if it stays put, it is a wall.
"""

import dataclasses
import time

import numpy as np

from src import models as models_lib
from src import record
from src import sweep
from src import train as train_lib
from src.config import Config

DEFAULTS = Config(
    exp='budget',
    models=('attention', 'lstm', 'gru', 'rnn'),
    lengths=(10, 20, 50, 100),
    budgets=(250, 1000, 4000),
    seeds=4,
    steps=4000,  # the largest budget; set from --budgets
    batch_size=32,
    learning_rate=3e-3,
    chunk_steps=50,
    checkpoint_every=500,
)
# --quick: a first look in a fraction of the time (same code, fewer steps).
QUICK = dataclasses.replace(
    DEFAULTS, lengths=(5, 20, 50), budgets=(100, 400), seeds=2, steps=400)
accepts = lambda spec: True
# The field flags it reads; run.py refuses the others.
FIELDS = ('models', 'lengths', 'budgets', 'seeds', 'seed', 'batch_size',
          'learning_rate', 'd_model', 'num_heads', 'num_layers', 'num_filler',
          'eval_examples', 'chunk_steps', 'checkpoint_every')
COLUMNS = ['model', 'steps', 'length', 'seed', 'accuracy', 'loss', 'diverged',
           'wall_s']
SOLVED = 0.95


def run(config: Config, run_dir, *, stop=None) -> dict:
  budgets = sorted(config.budgets)
  results = record.ResultsCsv(run_dir.path / 'results.csv', COLUMNS)
  groups = [(m, L) for m in config.models for L in config.lengths]
  work = {g: sweep.group_work(budgets[-1], g[1], g[0]) for g in groups}
  progress = record.Progress(sum(work.values()))
  for model, length in groups:
    name = f'{model}_L{length:03d}'
    task = train_lib.memory_task(length, config.num_filler)
    ensemble = sweep.ensemble(model, task, config)
    previous = 0
    for budget in budgets:
      segment = work[model, length] * (budget - previous) / budgets[-1]
      previous = budget
      if results.has(model=model, length=length, steps=budget):
        progress.update(segment, f'{name} {budget} done')
        continue
      trained = sweep.train_group(run_dir, name, ensemble, config,
                                  progress=progress, work=segment, stop=stop,
                                  steps=budget)
      start = time.perf_counter()
      test = ensemble.evaluate(trained.state['params'],
                               num_examples=config.eval_examples)
      diverged = ensemble.unpad(trained.state['diverged'])
      wall_s = trained.wall_s + time.perf_counter() - start
      trained.close(budget, test['accuracy'])
      results.append([dict(model=model, steps=budget, length=length, seed=s,
                           accuracy=test['accuracy'][s], loss=test['loss'][s],
                           diverged=diverged[s], wall_s=wall_s)
                      for s in range(config.seeds)])
      progress.say(f'{model:>9s} L={length:<4d} after {budget:>5d} steps: '
                   f'accuracy {test["accuracy"].mean():.3f}')
  return finish(config, run_dir, results.rows)


def summarize(config: Config, rows) -> dict:
  budgets = sorted(config.budgets)
  out = {'critical_distance': {}, 'mean_accuracy': {}, 'claims': []}
  for model in config.models:
    out['critical_distance'][model] = {}
    out['mean_accuracy'][model] = {}
    for budget in budgets:
      means = {}
      for length in config.lengths:
        acc = [float(r['accuracy']) for r in rows if r['model'] == model
               and int(r['steps']) == budget and int(r['length']) == length]
        means[length] = float(np.mean(acc)) if acc else float('nan')
      out['mean_accuracy'][model][str(budget)] = {str(L): v
                                                  for L, v in means.items()}
      out['critical_distance'][model][str(budget)] = record.critical_distance(
          means.items(), SOLVED)
  for model in [m for m in config.models if m != 'attention']:
    c = out['critical_distance'][model]
    first, last = c[str(budgets[0])] or 0, c[str(budgets[-1])] or 0
    out['claims'].append(dict(
        claim=f'The {model.upper()}\'s limit is a wall: more training does '
              'not carry it further.',
        measured='critical distance by budget: ' + ', '.join(
            f'{b} steps: {c[str(b)]}' for b in budgets),
        verdict='held' if last <= first else 'did not hold',
        note='held = the critical distance at the largest budget is no '
             'larger than at the smallest'))
  return out


def finish(config, run_dir, rows) -> dict:
  summary = summarize(config, rows)
  record.publish(run_dir, config, summary, lambda writer: plot(
      config, summary, run_dir.path / 'budget.png', writer))
  budgets = sorted(config.budgets)
  print('\nCritical distance by training budget')
  print(record.table(
      [[m] + [str(summary['critical_distance'][m][str(b)]) for b in budgets]
       for m in config.models], ['model'] + [f'{b} steps' for b in budgets]))
  sweep.print_claims(summary)
  return summary


def plot(config, summary, path, writer=None):
  plt = record.pyplot()
  budgets = sorted(config.budgets)
  fig, axes = plt.subplots(1, len(config.models),
                           figsize=(3.3 * len(config.models), 3.4),
                           sharey=True, squeeze=False)
  lengths = sorted(config.lengths)
  for ax, model in zip(axes[0], config.models):
    for i, b in enumerate(budgets):
      acc = summary['mean_accuracy'][model][str(b)]
      ax.plot(lengths, [acc[str(L)] for L in lengths], 'o-',
              color=plt.cm.viridis(i / max(len(budgets) - 1, 1)),
              label=f'{b} steps')
    ax.axhline(0.5, ls=':', color='k', lw=1)
    ax.set_xscale('log')
    ax.set_title(f'{model}', fontsize=9)
    ax.set_xlabel('length L')
    ax.set_ylim(0.4, 1.03)
  axes[0][0].set_ylabel('test accuracy')
  axes[0][0].legend(fontsize=7)
  fig.suptitle('Wall or budget: accuracy against length after each training '
               'budget', fontsize=10)
  record.save_figure(fig, path, writer, 'figures/budget')
