"""Everything at once, at a quadratic price: what one step costs at length L.

Command: `python run.py --exp=cost` (about 2.5 minutes on a 2-core CPU).
For each model and length (64 to 8192), one forward pass and one training
step (Adam) on a batch of 2 strings, d_model 32: FLOPs and bytes from XLA's
cost analysis, peak temporary memory from the compiled executable, median
wall time over repeats after warm-up, and the sequential depth.

Every model is measured as a sequence model uses it: an output at every
position (`attention` computes every query against every key). The
classifier's exact shortcut, which computes only the last query, is measured
too as `attention_last`.

XLA's cost analysis counts a loop body once, whatever its trip count, so a
recurrent scan is analysed twice, one and two steps per loop iteration: the
difference is one step's cost, and the total is rebuilt as the rest plus L
steps. Expect FLOPs ~ L^2 for attention (exponent near 2) and ~ L for the
recurrent nets (near 1); wall time, on a CPU, is where the sequential depth
(L dependent steps against one) shows.
"""

import dataclasses

import numpy as np

from src import costs
from src import record
from src import sweep
from src.checkpoint import Preempted
from src.config import Config

DEFAULTS = Config(
    exp='cost',
    models=('attention', 'attention_last', 'lstm', 'gru', 'rnn'),
    lengths=(64, 128, 256, 512, 1024, 2048, 4096, 8192),
    seeds=1,  # cost is per model; seeds do not enter
    steps=1,
    batch_size=2,  # the grid is per string; at 8192 one step is seconds
    learning_rate=3e-3,
)
# --quick: a first look in a fraction of the time (same code, fewer steps).
QUICK = dataclasses.replace(DEFAULTS, lengths=(64, 256, 1024, 2048))
accepts = lambda spec: True
# The field flags it reads; run.py refuses the others.
FIELDS = ('models', 'lengths', 'batch_size', 'learning_rate', 'd_model',
          'num_heads', 'num_layers', 'num_filler')
COLUMNS = ['model', 'length', 'pass', 'flops', 'bytes', 'peak_bytes',
           'wall_s', 'depth', 'compile_s']
PASSES = ('forward', 'train')
TIME_BUDGET_S = 0.5  # per measurement, after a warm-up call
COLORS = {'attention': 'C3', 'attention_last': 'C1', 'lstm': 'C0',
          'gru': 'C2', 'rnn': 'C7'}


def estimate_bytes(config: Config) -> int:
  """The attention training step's L x L grids (scores, weights and their
  gradients, per head) dominate; float32."""
  if not any(m == 'attention' for m in config.models):
    return 0
  L = max(config.lengths)
  return 4 * 4 * config.batch_size * config.num_heads * L * L


def measure(model: str, config: Config, length: int) -> list[dict]:
  rows = []
  for pass_name in PASSES:
    c = costs.counted(model, pass_name, length=length,
                      batch_size=config.batch_size, d_model=config.d_model,
                      num_heads=config.num_heads,
                      num_layers=config.num_layers,
                      num_filler=config.num_filler,
                      learning_rate=config.learning_rate)
    rows.append(dict(
        model=model, length=length, **{'pass': pass_name}, flops=c['flops'],
        bytes=c['bytes'], peak_bytes=int(c['memory'].temp_size_in_bytes),
        wall_s=costs.median_seconds(c['compiled'], c['args'],
                                    budget_s=TIME_BUDGET_S),
        depth=config.num_layers if model.startswith('attention') else length,
        compile_s=c['compile_s']))
  return rows


def run(config: Config, run_dir, *, stop=None) -> dict:
  results = record.ResultsCsv(run_dir.path / 'results.csv', COLUMNS)
  groups = [(m, L) for m in config.models for L in config.lengths]
  # Cost grows with L for every model: weight the ETA by L (L^2 above 1024
  # for the full attention grid).
  work = {(m, L): L * (max(1, L / 1024) if m == 'attention' else 1)
          for m, L in groups}
  progress = record.Progress(sum(work.values()))
  for model, length in groups:
    if stop is not None and stop.requested:
      raise Preempted(stop.signum, f'{model} L={length}')
    if not results.has(model=model, length=length):
      rows = measure(model, config, length)
      results.append(rows)
      progress.say(
          f'{model:>14s} L={length:<5d} ' + '  '.join(
              f'{r["pass"]}: {r["flops"]:.2e} FLOP {r["wall_s"] * 1e3:7.2f} ms '
              f'{r["peak_bytes"] / 2**20:7.1f} MiB' for r in rows))
    progress.update(work[model, length], f'{model} L={length}')
  return finish(config, run_dir, results.rows)


def loglog_slope(lengths, values):
  x, y = np.log(np.asarray(lengths, float)), np.log(np.asarray(values, float))
  return float(np.polyfit(x, y, 1)[0]) if len(x) > 1 else float('nan')


def summarize(config: Config, rows: list[dict]) -> dict:
  lengths = sorted(config.lengths)
  upper = lengths[len(lengths) // 2:] if len(lengths) > 2 else lengths
  get = lambda m, p, L, k: next(float(r[k]) for r in rows if r['model'] == m
                                and r['pass'] == p and int(r['length']) == L)
  out = {'models': {}, 'fit_lengths': upper, 'claims': []}
  for m in config.models:
    out['models'][m] = {
        p: {'flops_exponent': loglog_slope(upper, [get(m, p, L, 'flops')
                                                   for L in upper]),
            'wall_exponent': loglog_slope(upper, [get(m, p, L, 'wall_s')
                                                  for L in upper]),
            'peak_bytes_exponent': loglog_slope(
                upper, [max(get(m, p, L, 'peak_bytes'), 1) for L in upper])}
        for p in PASSES}
    out['models'][m]['depth'] = {str(L): int(get(m, 'forward', L, 'depth'))
                                 for L in lengths}
  for att in ('attention', 'attention_last'):
    if att in config.models and 'lstm' in config.models:
      cross = {}
      for p in PASSES:
        over = [L for L in lengths
                if get(att, p, L, 'wall_s') > get('lstm', p, L, 'wall_s')]
        cross[p] = over[0] if over else None
      out[f'{att}_overtakes_lstm_wall_at'] = cross
  m = out['models']
  if 'attention' in m:
    rec = [x for x in ('lstm', 'gru', 'rnn') if x in m]
    fe = m['attention']['train']['flops_exponent']
    out['claims'].append(dict(
        claim='Attention pays an N x N price: doubling the length quadruples '
              'the work.',
        measured=f'FLOPs ~ L^{fe:.2f} for attention (train step), ' + ', '.join(
            f'{x} L^{m[x]["train"]["flops_exponent"]:.2f}' for x in rec),
        verdict='held' if 1.8 <= fe <= 2.2 else 'did not hold'))
    # Parallel work keeps the chip busy; N dependent steps leave it waiting.
    longest = lengths[-1]
    rate = {x: get(x, 'train', longest, 'flops') / get(x, 'train', longest,
                                                       'wall_s') for x in m}
    out['flops_per_s_at_longest'] = rate
    out['claims'].append(dict(
        claim='Attention is one matrix product over all pairs and runs in '
              'parallel; recurrence is N dependent steps.',
        measured=f'sequential depth at L={longest}: ' + ', '.join(
            f'{x} {m[x]["depth"][str(longest)]}' for x in m)
        + f'; achieved FLOP/s of a training step at L={longest}: ' + ', '.join(
            f'{x} {rate[x]:.2e}' for x in m) + (
                '; attention overtakes the LSTM in wall time at L='
                f'{out.get("attention_overtakes_lstm_wall_at", {}).get("train")}'
                ' (train) on this machine' if 'lstm' in m else ''),
        verdict='held' if all(rate['attention'] > rate[x] for x in rec)
        else 'did not hold',
        note='held = full attention keeps the hardware busier (higher '
             'FLOP/s) than every recurrent net at the longest length'))
  return out


def finish(config, run_dir, rows) -> dict:
  summary = summarize(config, rows)

  def draw(writer):
    for r in rows:
      writer.add_scalar(f'{r["pass"]}_wall_s/{r["model"]}',
                        float(r['wall_s']), int(r['length']))
      writer.add_scalar(f'{r["pass"]}_flops/{r["model"]}', float(r['flops']),
                        int(r['length']))
    plot(config, summary, rows, run_dir.path / 'cost.png', writer)

  record.publish(run_dir, config, summary, draw)
  table = [[m] + [f'{e[p][k]:.2f}' for p in PASSES
                  for k in ('flops_exponent', 'wall_exponent')]
           for m, e in summary['models'].items()]
  print(f'\nLog-log exponents over L in {summary["fit_lengths"]}')
  print(record.table(table, ['model', 'fwd FLOPs', 'fwd wall', 'train FLOPs',
                             'train wall']))
  for k, v in summary.items():
    if k.endswith('_overtakes_lstm_wall_at'):
      print(f'{k}: {v}')
  sweep.print_claims(summary)
  return summary


def plot(config, summary, rows, path, writer=None):
  plt = record.pyplot()
  fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
  lengths = sorted(config.lengths)
  for ax, key, label in zip(axes, ('flops', 'peak_bytes', 'wall_s'),
                            ('FLOPs per training step',
                             'peak temporary memory (bytes)',
                             'wall time per training step (s)')):
    for m in config.models:
      v = [next(float(r[key]) for r in rows if r['model'] == m and
                r['pass'] == 'train' and int(r['length']) == L)
           for L in lengths]
      exponent = {'flops': 'flops_exponent', 'wall_s': 'wall_exponent',
                  'peak_bytes': 'peak_bytes_exponent'}[key]
      slope = summary['models'][m]['train'][exponent]
      name = m + (' (last query only)' if m == 'attention_last' else '')
      ax.plot(lengths, np.maximum(v, 1e-12), 'o-', color=COLORS.get(m),
              label=f'{name}: slope {slope:.2f}')
    ax.set_xscale('log', base=2)
    ax.set_yscale('log')
    ax.set_xlabel('sequence length L')
    ax.set_title(label, fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which='both')
  fig.suptitle(f'The price of looking everywhere: batch {config.batch_size}, '
               f'd_model {config.d_model}; slopes fitted over L >= '
               f'{summary["fit_lengths"][0]}', fontsize=10)
  record.save_figure(fig, path, writer, 'figures/cost')
