"""Distance: how far back can each model reach for the first symbol?

Command: `python run.py --exp=distance` (about 3 minutes on a 2-core CPU).
Trains attention, LSTM, GRU and a plain (Elman) RNN on the memory task at
lengths 10 to 200, four seeds each, under one budget for all: 500 Adam steps
of 32 fresh strings, lr 3e-3, d_model 32. Tests each on 2,048 fresh strings.

Expect: attention at 100% at every length; the recurrent nets, which must
carry the first symbol through L-1 multiplications, falling to chance (50%)
as the distance grows. Whether that is a wall or the budget, `--exp=budget`
asks; here `critical_distance` says where each model gave way.
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
    exp='distance',
    models=('attention', 'lstm', 'gru', 'rnn'),
    lengths=(10, 20, 50, 100, 200),  # the lesson's ~15 steps, then far past it
    seeds=4,  # paired runs per group, on the vmap axis
    steps=500,  # one budget for every model and length
    batch_size=32,  # the CPU's sweet spot for the recurrent scans
    learning_rate=3e-3,
    chunk_steps=50,  # ten log points per group
    checkpoint_every=250,
)
# --quick: a first look in a fraction of the time (same code, fewer steps).
QUICK = dataclasses.replace(
    DEFAULTS, lengths=(5, 20, 50), seeds=2, steps=300)

accepts = lambda spec: True  # which registered models --models takes
# The field flags it reads; run.py refuses the others.
FIELDS = ('models', 'lengths', 'seeds', 'seed', 'steps', 'batch_size',
          'learning_rate', 'd_model', 'num_heads', 'num_layers', 'num_filler',
          'eval_examples', 'chunk_steps', 'checkpoint_every')

COLUMNS = ['model', 'length', 'seed', 'accuracy', 'loss', 'steps', 'diverged',
           'num_params', 'wall_s', 'compile_s']
TIMING_COLUMNS = ('wall_s', 'compile_s')  # the only columns a rerun changes
SOLVED = 0.95  # a seed "solved" a length at this test accuracy
HUNDRED_PERCENT = 0.99  # what "stays at 100%" is taken to mean
LESSON_RNN_RANGE = (10, 20)  # "gives way after about fifteen steps"


def run(config: Config, run_dir, *, stop=None) -> dict:
  results = record.ResultsCsv(run_dir.path / 'results.csv', COLUMNS)
  groups = [(m, L) for m in config.models for L in config.lengths]
  work = {g: sweep.group_work(config.steps, g[1], g[0]) for g in groups}
  progress = record.Progress(sum(work.values()))
  for model, length in groups:
    if results.has(model=model, length=length):
      progress.update(work[model, length], f'{model} L={length} done')
      continue
    name = f'{model}_L{length:03d}'
    task = train_lib.memory_task(length, config.num_filler)
    ensemble = sweep.ensemble(model, task, config)
    trained = sweep.train_group(run_dir, name, ensemble, config,
                                progress=progress, work=work[model, length],
                                stop=stop)
    eval_start = time.perf_counter()
    test = ensemble.evaluate(trained.state['params'],
                             num_examples=config.eval_examples)
    wall_s = trained.wall_s + time.perf_counter() - eval_start
    diverged = ensemble.unpad(trained.state['diverged'])
    rows = [dict(model=model, length=length, seed=s,
                 accuracy=test['accuracy'][s], loss=test['loss'][s],
                 steps=config.steps, diverged=diverged[s],
                 num_params=ensemble.num_params, wall_s=wall_s,
                 compile_s=ensemble.compile_s) for s in range(config.seeds)]
    mean, lo, hi = record.mean_ci95(test['accuracy'])
    if trained.writer is not None:
      record.write_hparams(
          trained.writer,
          {'model': model, 'length': length, 'd_model': config.d_model,
           'steps': config.steps, 'batch_size': config.batch_size,
           'learning_rate': config.learning_rate,
           'num_params': ensemble.num_params},
          {'hparam/test_accuracy': mean,
           'hparam/solved_fraction': float(np.mean(test['accuracy'] >= SOLVED))})
    trained.close(config.steps, test['accuracy'])
    results.append(rows)
    progress.say(
        f'{model:>9s} L={length:<4d} acc {mean:.3f} [{lo:.3f}, {hi:.3f}]  '
        f'solved {int(np.sum(test["accuracy"] >= SOLVED))}/{config.seeds}  '
        f'{wall_s:5.1f}s (compile {ensemble.compile_s:.1f}s)'
        + (f'  DIVERGED {int(diverged.sum())}' if diverged.any() else ''))
  return finish(config, run_dir, results.rows)


# -- the summary ----------------------------------------------------------------

def summarize(config: Config, rows: list[dict]) -> dict:
  groups = []
  for model in config.models:
    for length in config.lengths:
      acc = [float(r['accuracy']) for r in rows
             if r['model'] == model and int(r['length']) == length]
      div = [int(r['diverged']) for r in rows
             if r['model'] == model and int(r['length']) == length]
      mean, lo, hi = record.mean_ci95(acc)
      groups.append(dict(model=model, length=length, mean_accuracy=mean,
                         ci95=[lo, hi], solved_fraction=float(
                             np.mean(np.asarray(acc) >= SOLVED)),
                         seeds=len(acc), diverged=int(sum(div))))
  critical = {m: record.critical_distance(
      [(g['length'], g['mean_accuracy']) for g in groups if g['model'] == m],
      SOLVED) for m in config.models}
  return {'groups': groups, 'critical_distance': critical,
          'diverged_seeds': int(sum(g['diverged'] for g in groups)),
          'claims': claims(config, groups, critical),
          'budget': {k: getattr(config, k) for k in (
              'steps', 'batch_size', 'learning_rate', 'd_model', 'seeds')}}


def claims(config, groups, critical) -> list[dict]:
  out = []
  lengths = sorted(config.lengths)
  by = {(g['model'], g['length']): g['mean_accuracy'] for g in groups}
  if 'attention' in config.models:
    worst = min(by['attention', L] for L in lengths)
    out.append(dict(
        claim='Attention stays at 100% at every distance.',
        measured=f'lowest mean test accuracy {worst:.4f} over lengths '
                 f'{lengths[0]}..{lengths[-1]}',
        verdict='held' if worst >= HUNDRED_PERCENT else 'did not hold'))
  if 'rnn' in config.models:
    c = critical['rnn']
    failed = [L for L in lengths if not by['rnn', L] >= SOLVED]
    first_fail = failed[0] if failed else None
    lo, hi = LESSON_RNN_RANGE
    if first_fail is None:
      where = f'solved every length up to {lengths[-1]}'
      verdict = 'did not hold' if lengths[-1] > hi else 'untested'
    else:
      # The RNN gave way somewhere in (c, first_fail]: does that reach ~15?
      low = c if c is not None else 0
      verdict = 'held' if low < hi and first_fail >= lo else 'partly'
      where = (f'solved up to L={c}, failed at L={first_fail} '
               f'(mean accuracy {by["rnn", first_fail]:.3f})')
    out.append(dict(
        claim='A plain recurrent net gives way after about 15 steps.',
        measured=where, verdict=verdict,
        note=f'"about 15" is read as giving way between L={lo} and L={hi}; '
             'partly = it gave way, but elsewhere'))
  for gated in ('lstm', 'gru'):
    if gated in config.models and 'rnn' in config.models:
      g, r = critical[gated], critical['rnn']
      if r == lengths[-1]:
        verdict = 'untested'  # the plain RNN never gave way: nothing to beat
      else:
        verdict = 'held' if (g or 0) > (r or 0) else 'did not hold'
      out.append(dict(
          claim=f'Gating ({gated.upper()}) carries the symbol further than a '
                'plain RNN.',
          measured=f'critical distance {gated}={g}, rnn={r}',
          verdict=verdict))
  return out


def finish(config: Config, run_dir, rows: list[dict]) -> dict:
  summary = summarize(config, rows)
  walls = {}
  for r in rows:
    walls[r['model'], r['length']] = (float(r['wall_s']), float(r['compile_s']))
  wall = sum(w for w, _ in walls.values())
  compile_s = sum(c for _, c in walls.values())
  summary['wall_s'] = wall
  summary['compile_s'] = compile_s
  summary['compile_share'] = compile_s / wall if wall else None
  record.publish(run_dir, config, summary, lambda writer: plot(
      config, summary, run_dir.path / 'distance.png', writer))
  print_table(config, summary)
  return summary


def plot(config, summary, path, writer=None):
  plt = record.pyplot()
  fig, ax = plt.subplots(figsize=(7, 4.2))
  colors = {'attention': 'C3', 'lstm': 'C0', 'gru': 'C2', 'rnn': 'C7'}
  for model in config.models:
    g = sorted((x for x in summary['groups'] if x['model'] == model),
               key=lambda x: x['length'])
    L = [x['length'] for x in g]
    mean = [x['mean_accuracy'] for x in g]
    lo = [max(x['ci95'][0], 0.0) for x in g]
    hi = [min(x['ci95'][1], 1.0) for x in g]
    ax.plot(L, mean, 'o-', color=colors.get(model), label=model, lw=2)
    ax.fill_between(L, lo, hi, color=colors.get(model), alpha=0.15)
  ax.axhline(0.5, color='k', ls=':', lw=1, label='chance')
  ax.set_xscale('log')
  ax.set_xticks(list(config.lengths))
  ax.set_xticklabels([str(L) for L in config.lengths])
  ax.set_ylim(0.4, 1.03)
  ax.set_xlabel('sequence length L (distance from the first symbol to the '
                'query = L - 1)')
  ax.set_ylabel('test accuracy (fresh strings)')
  ax.set_title(f'Memory task: {config.seeds} seeds, mean and 95% interval; '
               f'{config.steps} steps x {config.batch_size} strings',
               fontsize=9)
  ax.legend(loc='lower left', fontsize=8)
  ax.grid(alpha=0.3)
  record.save_figure(fig, path, writer, 'figures/distance')


def print_table(config, summary):
  by = {(g['model'], g['length']): g for g in summary['groups']}
  rows = []
  for model in config.models:
    rows.append([model] + [
        f'{by[model, L]["mean_accuracy"]:.3f}' for L in config.lengths
    ] + [str(summary['critical_distance'][model])])
  print('\nMean test accuracy by length (' f'{config.seeds} seeds):')
  print(record.table(rows, ['model'] + [f'L={L}' for L in config.lengths]
                     + ['critical']))
  sweep.print_claims(summary)
  if summary.get('wall_s'):
    print(f'Training wall time {summary["wall_s"]:.0f}s, of which compile '
          f'{summary["compile_s"]:.0f}s ({100 * summary["compile_share"]:.0f}%)')
