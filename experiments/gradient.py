"""The direct bridge: does the signal from the output still reach position 0?

Command: `python run.py --exp=gradient` (about 4 minutes on a 2-core CPU).
For attention, the LSTM (Flax default and chrono), the GRU and a plain RNN
at lengths 5 to 80, eight seeds, measures sensitivity = ||d(logit_A -
logit_B) / d e_0||: the gradient of the output margin with respect to the
input vector at position 0, mean over 512 fixed strings (64 during
training). Raw norms depend on each model's embedding and logit scales, so
beside it the same norm at the last filler position, and their ratio
(`relative_sensitivity`), which is free of those scales. At
initialisation, after every 100 training steps (the same budget as
`distance`: 500 Adam steps of 32 strings), and at the end.

Expect: at initialisation a recurrent net's sensitivity falls exponentially
with the distance (one multiplication per step), so `log(sensitivity)` drops
linearly in L; attention's falls like a power of L (1/L: untrained weights
spread evenly over L positions). Each seed's decay is fitted both ways and
the better fit named. After training, attention's bridge reaches position 0
more strongly than the position next to the query, at every length.
"""

import dataclasses

import numpy as np

from src import models as models_lib
from src import probes
from src import record
from src import stats
from src import experiment
from src import tasks as tasks_lib
from src.config import Config

DEFAULTS = Config(
    exp='gradient',
    # lru: the bridge through a linear recurrence (Orvieto et al. 2023).
    models=('attention', 'lstm', 'lstm_chrono', 'gru', 'rnn', 'lru'),
    lengths=(5, 10, 20, 40, 80),  # doubling: a decay shows as a steady drop
    seeds=8,  # each seed's decay is fitted on its own
    steps=500,  # the distance experiment's budget
    batch_size=32,
    learning_rate=3e-3,
    chunk_steps=100,  # five probes of the bridge during training
    checkpoint_every=250,
)
# --quick: a first look in a fraction of the time (same code, fewer steps).
QUICK = dataclasses.replace(
    DEFAULTS, lengths=(5, 10, 20, 40), seeds=4, steps=200)
accepts = lambda spec: True
# The field flags it reads; run.py refuses the others.
FIELDS = ('models', 'lengths', 'seeds', 'seed', 'steps', 'batch_size',
          'learning_rate', 'learning_rates', 'd_model', 'num_heads',
          'num_layers', 'chrono_horizon', 'num_filler', 'chunk_steps',
          'checkpoint_every')
SECTION, FIGURE = '4. The direct bridge', 'gradient.png'  # in REPORT.md
COLUMNS = ['model', 'length', 'seed', 'phase', 'step', 'sensitivity',
           'pos0_mass', 'accuracy', 'sensitivity_last', 'relative_sensitivity']
PROBE_EXAMPLES = 512


def groups(config: Config) -> list:
  return [experiment.group(m, L, task_params={'num_filler': config.num_filler},
                           key=dict(model=m, length=L, phase='trained'),
                           probe=probes.margin_sensitivity, probe_examples=64)
          for m in config.models for L in config.lengths]

# TensorBoard's descriptions of the tags on_chunk logs.
TAGS = {
    r'bridge/sensitivity': ('sensitivity', '||d(logit_A - logit_B) / d e_0||, '
                            'the margin\'s gradient with respect to the input '
                            'vector at position 0, mean over the probe '
                            'strings; every chunk.'),
    r'bridge/relative_sensitivity': ('relative sensitivity', 'sensitivity '
                                     'over the same norm at the last filler '
                                     'position L-2: free of the model\'s '
                                     'scales, above 1 when position 0 reaches '
                                     'the output more strongly; every '
                                     'chunk.'),
    r'bridge/pos0_mass': ('position-0 mass', "The last query's attention "
                          'weight on position 0 (attention models); every '
                          'chunk.'),
}


def on_chunk(group, config, step, probe, writer):
  return {f'bridge/{key}': probe[key] for key in (
      'sensitivity', 'relative_sensitivity', 'pos0_mass') if key in probe}


def measure(group, ensemble, params, config):
  """The bridge at initialisation (the same initial state training started
  from) and after training, on the probe strings."""
  bridge = lambda params: ensemble.measure(
      params, probes.margin_sensitivity, stream=tasks_lib.PROBE_STREAM,
      num_examples=PROBE_EXAMPLES)
  init, trained = bridge(ensemble.init()['params']), bridge(params)
  return {'init': init, 'trained': trained, 'accuracy': trained['accuracy']}


def final_scalars(group, config, final):
  return {'bridge/sensitivity_at_init': (0, final['init']['sensitivity'])}


def rows(group, final, config, timing) -> list[dict]:
  return [dict(model=group.model, length=group.length, seed=s, phase=phase,
               step=step, sensitivity=m['sensitivity'][s],
               pos0_mass=m['pos0_mass'][s] if 'pos0_mass' in m else '',
               accuracy=m['accuracy'][s],
               sensitivity_last=m['sensitivity_last'][s],
               relative_sensitivity=m['relative_sensitivity'][s])
          for phase, step in (('init', 0), ('trained', timing.steps))
          for m in (final[phase],) for s in range(config.seeds)]


def line(group, final, config, timing) -> str:
  init, trained = final['init'], final['trained']
  return (f'{group.model:>12s} L={group.length:<3d} sensitivity init '
          f'{np.mean(init["sensitivity"]):.2e}  trained '
          f'{np.mean(trained["sensitivity"]):.2e}  relative '
          f'{np.median(trained["relative_sensitivity"]):.3g}'
          f'  accuracy {np.mean(trained["accuracy"]):.3f}')


def summarize(config: Config, rows: list[dict]) -> dict:
  lengths = sorted(config.lengths)
  out = {'models': {}, 'claims': []}

  def values(model, phase, key, L):
    return {int(r['seed']): float(r[key]) for r in rows if r['model'] == model
            and int(r['length']) == L and r['phase'] == phase}

  for model in config.models:
    mean = {(p, L): float(np.mean(list(values(model, p, 'sensitivity',
                                              L).values())))
            for p in ('init', 'trained') for L in lengths}
    # The seed mean's decay, fitted in L and in log L.
    mean_fits = stats.decay_fits(lengths, [mean['init', L] for L in lengths])
    seeds = sorted(values(model, 'init', 'sensitivity', lengths[0]))
    fits = {s: stats.decay_fits(lengths, [values(model, 'init', 'sensitivity',
                                                 L)[s] for L in lengths])
            for s in seeds}
    relative = {p: {str(L): [values(model, p, 'relative_sensitivity', L)[s]
                             for s in seeds] for L in lengths}
                for p in ('init', 'trained')}
    entry = {
        'init_sensitivity': {str(L): mean['init', L] for L in lengths},
        'trained_sensitivity': {str(L): mean['trained', L] for L in lengths},
        # d log(sensitivity) / d(distance) of the seed mean: exponential
        # decay if the claim holds for recurrence; e^slope is the factor
        # lost per step.
        'init_log_decay_per_step': mean_fits['exponential']['slope'],
        'init_factor_per_step': float(np.exp(
            mean_fits['exponential']['slope'])),
        # d log(sensitivity) / d log(L): -1 is a 1/L fall.
        'init_loglog_slope': mean_fits['power']['slope'],
        'trained_ratio_longest_to_shortest':
            mean['trained', lengths[-1]] / mean['trained', lengths[0]],
        # Each seed's decay at init fitted both ways (log-linear in L, and
        # in log L); the better fit by residual sum of squares.
        'init_fits_per_seed': {str(s): f for s, f in fits.items()},
        'relative_sensitivity': relative,
    }
    if models_lib.get(model).has_attention:
      entry['trained_pos0_mass'] = {
          str(L): float(np.mean(list(values(model, 'trained', 'pos0_mass',
                                            L).values()))) for L in lengths}
    out['models'][model] = entry
  out['claims'] = claims(config, out['models'], lengths)
  return out


def claims(config, m, lengths) -> list[dict]:
  out = []
  recurrent = [x for x in config.models if models_lib.get(x).family.recurrent]
  attention = [x for x in config.models
               if models_lib.get(x).family == models_lib.ATTENTION]
  for model in recurrent:
    fits = m[model]['init_fits_per_seed'].values()
    k = sum(f['better'] == 'exponential' and f['exponential']['slope'] < 0
            for f in fits)
    factors = [np.exp(f['exponential']['slope']) for f in fits]
    out.append(dict(
        claim=f'Through recurrence ({model}) the signal to position 0 dies '
              'away exponentially with distance (at initialisation).',
        model=model,
        measured=f'exponential fits better than a power law, with a falling '
                 f'slope, in {k} of {len(factors)} seeds; median factor '
                 f'x{np.median(factors):.3f} per step (seeds '
                 f'{min(factors):.3f} to {max(factors):.3f})' + ''.join(
                     f'; {a}: log-log slope '
                     f'{m[a]["init_loglog_slope"]:.2f} (1/L is -1)'
                     for a in attention),
        verdict=stats.k_of_n(k, len(factors)), test='per seed',
        note='each seed: log(sensitivity) at initialisation fitted against '
             'L (exponential) and against log L (power law), two '
             'parameters each; the smaller residual sum of squares names '
             'the shape'))
  for model in attention:
    rel = m[model]['relative_sensitivity']['trained']
    seeds = len(rel[str(lengths[0])])
    lowest = [min(rel[str(L)][s] for L in lengths) for s in range(seeds)]
    k = sum(x > 1 for x in lowest)
    others = [x for x in recurrent]
    out.append(dict(
        claim=f'After training, attention ({model}) keeps a strong bridge to '
              'position 0 at every length.',
        model=model,
        measured=f'position 0 reaches the output more strongly than the '
                 f'last filler position at every length in {k} of {seeds} '
                 f'seeds (lowest per-seed ratio {min(lowest):.3g}); median '
                 f'ratio at L={lengths[-1]}: {model} '
                 f'{np.median(rel[str(lengths[-1])]):.3g}' + ''.join(
                     f', {x} {np.median(m[x]["relative_sensitivity"]["trained"][str(lengths[-1])]):.3g}'
                     for x in others),
        verdict=stats.k_of_n(k, seeds), test='per seed',
        note='scale-free: the sensitivity to position 0 divided by the '
             'sensitivity to the last filler position (L-2), per seed; the '
             'bridge is strong where the ratio exceeds 1 at every tested '
             'length'))
  return out


def print_table(config, summary) -> None:
  lengths = sorted(config.lengths)
  table = []
  for model, e in summary['models'].items():
    rel = e['relative_sensitivity']['trained']
    table.append([model, f'{e["init_factor_per_step"]:.3f}',
                  f'{e["init_loglog_slope"]:.2f}'] + [
                      f'{np.median(rel[str(L)]):.3g}' for L in lengths])
  print('\nAt initialisation: factor per step and log-log slope of the mean '
        'sensitivity; trained: median over seeds of the sensitivity to '
        'position 0 relative to the last filler position')
  print(record.table(table, ['model', 'init x/step', 'init loglog'] + [
      f'trained L={L}' for L in lengths]))


def figure(config, summary, rows, kept, folder, writer=None):
  plot(config, summary, rows, folder / FIGURE, writer)


def plot(config, summary, rows, path, writer=None):
  plt = record.pyplot()
  fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
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
  fig.suptitle('The direct bridge: how much the output still feels position '
               '0', fontsize=11)
  record.save_figure(fig, path, writer, 'figures/gradient')
