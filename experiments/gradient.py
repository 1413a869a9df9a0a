"""The direct bridge: does the signal from the output still reach position 0?

Command: `python run.py --exp=gradient` (about 2.5 minutes on a 2-core CPU).
For attention, LSTM, GRU and a plain RNN at lengths 5 to 80, four seeds,
measures sensitivity = ||d(logit_A - logit_B) / d e_0||: the gradient of the
output margin with respect to the input vector at position 0, mean over 512
fixed strings (64 during training). At initialisation, after every 100
training steps (the same
budget as `distance`: 500 Adam steps of 32 strings), and at the end.

Expect: at initialisation a recurrent net's sensitivity falls exponentially
with the distance (one multiplication per step), so `log(sensitivity)` drops
linearly; attention's falls only like 1/L, because untrained weights spread
evenly over L positions. After training, attention's bridge carries the
signal at every length (its factor is the weight on position 0, logged
beside it), while a recurrent net that never learned to hold the symbol
keeps a vanishing one.
"""

import dataclasses

import numpy as np

from src import models as models_lib
from src import probes
from src import record
from src import sweep
from src import train as train_lib
from src.config import Config

DEFAULTS = Config(
    exp='gradient',
    models=('attention', 'lstm', 'gru', 'rnn'),
    lengths=(5, 10, 20, 40, 80),  # doubling: a decay shows as a steady drop
    seeds=4,
    steps=500,  # the distance experiment's budget
    batch_size=32,
    learning_rate=3e-3,
    chunk_steps=100,  # five probes of the bridge during training
    checkpoint_every=250,
)
# --quick: a first look in a fraction of the time (same code, fewer steps).
QUICK = dataclasses.replace(
    DEFAULTS, lengths=(5, 10, 20, 40), seeds=2, steps=200)
accepts = lambda spec: True
# The field flags it reads; run.py refuses the others.
FIELDS = ('models', 'lengths', 'seeds', 'seed', 'steps', 'batch_size',
          'learning_rate', 'd_model', 'num_heads', 'num_layers', 'num_filler',
          'chunk_steps', 'checkpoint_every')
COLUMNS = ['model', 'length', 'seed', 'phase', 'step', 'sensitivity',
           'pos0_mass', 'accuracy']
PROBE_EXAMPLES = 512
COLORS = {'attention': 'C3', 'lstm': 'C0', 'gru': 'C2', 'rnn': 'C7'}


def run(config: Config, run_dir, *, stop=None) -> dict:
  results = record.ResultsCsv(run_dir.path / 'results.csv', COLUMNS)
  groups = [(m, L) for m in config.models for L in config.lengths]
  work = {g: sweep.group_work(config.steps, g[1], g[0]) for g in groups}
  progress = record.Progress(sum(work.values()))
  for model, length in groups:
    if results.has(model=model, length=length, phase='trained'):
      progress.update(work[model, length], f'{model} L={length} done')
      continue
    name = f'{model}_L{length:03d}'
    task = train_lib.memory_task(length, config.num_filler)
    ensemble = sweep.ensemble(model, task, config,
                              probe=probes.margin_sensitivity,
                              probe_examples=64)

    def measure(params, phase, step):
      m = ensemble.measure(params, probes.margin_sensitivity,
                           stream=train_lib.tasks_lib.PROBE_STREAM,
                           num_examples=PROBE_EXAMPLES)
      return [dict(model=model, length=length, seed=s, phase=phase,
                   step=step, sensitivity=m['sensitivity'][s],
                   pos0_mass=m['pos0_mass'][s] if 'pos0_mass' in m else '',
                   accuracy=m['accuracy'][s]) for s in range(config.seeds)]

    init_rows = measure(ensemble.init()['params'], 'init', 0)

    def log_chunk(step, metrics, writer):
      if writer is None:
        return
      probe = metrics['probe']
      for key in ('sensitivity', 'pos0_mass'):
        if key in probe:
          values = np.asarray(probe[key])[:config.seeds]
          writer.add_scalar(f'bridge/{key}', float(np.mean(values)), step)

    trained = sweep.train_group(run_dir, name, ensemble, config,
                                progress=progress, work=work[model, length],
                                stop=stop, on_chunk=log_chunk)
    trained_rows = measure(trained.state['params'], 'trained', config.steps)
    if trained.writer is not None:
      init = np.mean([r['sensitivity'] for r in init_rows])
      trained.writer.add_scalar('bridge/sensitivity_at_init', init, 0)
    trained.close(config.steps)
    results.append(init_rows + trained_rows)
    progress.say(
        f'{model:>9s} L={length:<3d} sensitivity init '
        f'{np.mean([r["sensitivity"] for r in init_rows]):.2e}  trained '
        f'{np.mean([r["sensitivity"] for r in trained_rows]):.2e}  accuracy '
        f'{np.mean([r["accuracy"] for r in trained_rows]):.3f}')
  return finish(config, run_dir, results.rows)


def fit_slope(x, y):
  """Least-squares slope of y on x."""
  x, y = np.asarray(x, float), np.asarray(y, float)
  return float(np.polyfit(x, y, 1)[0]) if len(x) > 1 else float('nan')


def summarize(config: Config, rows: list[dict]) -> dict:
  lengths = sorted(config.lengths)
  out = {'models': {}, 'claims': []}
  for model in config.models:
    mean = {}
    for phase in ('init', 'trained'):
      for L in lengths:
        v = [float(r['sensitivity']) for r in rows if r['model'] == model
             and int(r['length']) == L and r['phase'] == phase]
        mean[phase, L] = record.mean_ci95(v, bounds=None)
    log_init = [np.log(mean['init', L][0]) for L in lengths]
    entry = {
        'init_sensitivity': {str(L): mean['init', L][0] for L in lengths},
        'trained_sensitivity': {str(L): mean['trained', L][0]
                                for L in lengths},
        'trained_ci95': {str(L): list(mean['trained', L][1:])
                         for L in lengths},
        # d log(sensitivity) / d(distance): exponential decay if the claim
        # holds for recurrence; e^slope is the factor lost per step.
        'init_log_decay_per_step': fit_slope(lengths, log_init),
        'init_factor_per_step': float(np.exp(fit_slope(lengths, log_init))),
        # d log(sensitivity) / d log(L): -1 is a 1/L fall.
        'init_loglog_slope': fit_slope(np.log(lengths), log_init),
        'trained_ratio_longest_to_shortest':
            mean['trained', lengths[-1]][0] / mean['trained', lengths[0]][0],
    }
    if model == 'attention':
      entry['trained_pos0_mass'] = {
          str(L): float(np.mean([float(r['pos0_mass']) for r in rows
                                 if r['model'] == model and
                                 int(r['length']) == L and
                                 r['phase'] == 'trained']))
          for L in lengths}
    out['models'][model] = entry
  m = out['models']
  recurrent = [x for x in config.models if x != 'attention']
  if 'attention' in m and recurrent:
    att = m['attention']
    worst = min(recurrent, key=lambda x: m[x]['trained_ratio_longest_to_shortest'])
    out['claims'].append(dict(
        claim='Through recurrence the signal to position 0 dies away with '
              'distance (exponentially, at initialisation).',
        measured='; '.join(
            f'{x}: x{m[x]["init_factor_per_step"]:.3f} per step at init'
            for x in recurrent) + f'; attention: log-log slope '
            f'{att["init_loglog_slope"]:.2f} (1/L is -1)',
        verdict='held' if all(m[x]['init_log_decay_per_step'] < 0
                              for x in recurrent) else 'did not hold'))
    att_ratio = att['trained_ratio_longest_to_shortest']
    strong = att_ratio > max(m[x]['trained_ratio_longest_to_shortest']
                             for x in recurrent)
    out['claims'].append(dict(
        claim='After training, attention keeps a strong bridge to position 0 '
              'at every length.',
        measured=f'trained sensitivity at L={lengths[-1]} / L={lengths[0]}: '
                 f'attention {att_ratio:.3g}, ' + ', '.join(
                     f'{x} {m[x]["trained_ratio_longest_to_shortest"]:.3g}'
                     for x in recurrent) + f' (weakest: {worst})',
        verdict='held' if strong else 'did not hold'))
  return out


def finish(config, run_dir, rows) -> dict:
  summary = summarize(config, rows)
  record.publish(run_dir, config, summary, lambda writer: plot(
      config, summary, run_dir.path / 'gradient.png', writer))
  lengths = sorted(config.lengths)
  table = []
  for model, e in summary['models'].items():
    table.append([model, f'{e["init_factor_per_step"]:.3f}',
                  f'{e["init_loglog_slope"]:.2f}'] + [
                      f'{e["trained_sensitivity"][str(L)]:.2e}'
                      for L in lengths] + [
                          f'{e["trained_ratio_longest_to_shortest"]:.3g}'])
  print('\nMargin sensitivity to position 0 (mean over seeds)')
  print(record.table(table, ['model', 'init x/step', 'init loglog'] + [
      f'trained L={L}' for L in lengths] + ['ratio']))
  sweep.print_claims(summary)
  return summary


def plot(config, summary, path, writer=None):
  plt = record.pyplot()
  fig, ax = plt.subplots(figsize=(7, 4.2))
  lengths = sorted(config.lengths)
  for model, e in summary['models'].items():
    color = COLORS.get(model)
    ax.plot(lengths, [e['init_sensitivity'][str(L)] for L in lengths], '--',
            color=color, marker='o', mfc='none')
    ax.plot(lengths, [e['trained_sensitivity'][str(L)] for L in lengths],
            '-', color=color, marker='o', label=model)
  ax.plot([], [], 'k--', label='at initialisation')
  ax.plot([], [], 'k-', label=f'trained ({config.steps} steps)')
  ax.set_yscale('log')
  ax.set_xlabel('sequence length L (steps from position 0 to the output)')
  ax.set_ylabel('||d margin / d e_0||')
  ax.set_title('The direct bridge: how much the output still feels '
               'position 0', fontsize=10)
  ax.legend(fontsize=8, ncol=2)
  ax.grid(alpha=0.3, which='both')
  record.save_figure(fig, path, writer, 'figures/gradient')
