"""The direct bridge: does the signal from the output still reach position 0?

Command: `python run.py --exp=gradient` (`--only_check_args` estimates its
time). Per model and seed (DEFAULTS: which, and `distance`'s budget), the
gradient of the output margin logit_A - logit_B with respect to the input
vectors (token plus position embedding), mean over fixed strings, at
initialisation, after every chunk of training and at the end.

Along one string (the basis of the decay claims): at `--bridge_length`
(a model trained at that length), the sensitivity
||d margin / d x_t|| to every position t of the same strings, from one
backward pass, at initialisation and trained; d = L-1-t is the distance
from the query. Each seed's profile is fitted against d (exponential) and
against log d (power law) over d = 1 to the last distance before it falls
to 1e-30 or below (float32 has lost it there), and the better fit named.

Across lengths (a second view, a model built for each of `--lengths`):
sensitivity = ||d margin / d e_0|| at position 0; raw norms depend on each
model's embedding and logit scales, so beside it the same norm at the last
filler position, and their ratio (`relative_sensitivity`), free of those
scales.

Expect: at initialisation a recurrent net's sensitivity falls exponentially
with the distance (one multiplication per step), so log(sensitivity) drops
linearly along the string; attention's profile is flat-ish (every position
one step from the output). After training, attention's bridge reaches
position 0 more strongly than the position next to the query, at every
length.
"""

import dataclasses

import numpy as np

from experiments import gradient_figure
from src import evaluation
from src import models as models_lib
from src import probes
from src import record
from src import stats
from src import experiment
from src import claims as claims_lib
from src import config as config_lib
from src import streams
from src.claims import Claim
from src.config import Config


@dataclasses.dataclass(frozen=True)
class GradientConfig(Config):
  bridge_length: int = config_lib.integer(
      200, 'the length at which the sensitivity to every position of the '
      'same strings is measured (a model trained at that length, one more '
      'group per model unless it is one of --lengths; at least 4: the '
      'decay along it is fitted on its distances 1..L-1)',
      stats.FIT_POINTS + 1)
  fixed = ('decoys', 'eval_examples')  # its own strings, no decoys

  def check(self) -> None:
    """The decay across lengths is fitted on the lengths."""
    super().check()
    if len(self.lengths) < stats.FIT_POINTS:
      raise config_lib.ConfigError(
          '--lengths: --exp=gradient fits how the signal decays with L, so '
          f'it needs at least {stats.FIT_POINTS} lengths, got '
          + ','.join(map(str, self.lengths)))


DEFAULTS = GradientConfig(
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
    bridge_length=200,  # long enough for 0.9 per step to fall 1e-9
)
# --quick: a first look in a fraction of the time (same code, fewer steps).
QUICK = dataclasses.replace(
    DEFAULTS, lengths=(5, 10, 20, 40), seeds=4, steps=200,
    bridge_length=100)  # half the default's: still 1e-22 at x0.6 per step
SECTION, FIGURE = '4. The direct bridge', 'gradient.png'  # in REPORT.md
COLUMNS = ['model', 'length', 'seed', 'phase', 'step', 'sensitivity',
           'pos0_mass', 'accuracy', 'sensitivity_last', 'relative_sensitivity']
# The sensitivity to every position t of the bridge length's strings
# (distance d = L-1-t from the query), init and trained.
BRIDGE_COLUMNS = ['model', 'length', 'seed', 'phase', 'position', 'distance',
                  'sensitivity']
TABLES = {'bridge.csv': BRIDGE_COLUMNS}
PROBE_EXAMPLES = 512
# The decay along one string, one test per recurrent model.
FAMILY = 'the signal dies away exponentially along one string'
ACROSS_FAMILY = ('across lengths, the signal through recurrence dies away '
                 'exponentially with L')
BRIDGE_FAMILY = 'after training, attention keeps a strong bridge to position 0'
# The lesson's "unhindered" against recurrence's "successive
# multiplications", one test per recurrent model.
REACH_FAMILY = ('at initialisation, the signal from position 0 loses less '
                'over the string through attention than through recurrence')


def trained_lengths(config: Config) -> tuple[int, ...]:
  """--lengths, and the bridge length when it is not one of them."""
  return tuple(dict.fromkeys((*config.lengths, config.bridge_length)))


# TensorBoard's descriptions of the tags on_chunk logs.
TAGS = {
    r'bridge/sensitivity': ('sensitivity', '||d(logit_A - logit_B) / d e_0||, '
                            'the margin\'s gradient with respect to the input '
                            'vector at position 0, mean over the probe '
                            'strings; every chunk.'),
    r'bridge/relative_sensitivity': (
        'relative sensitivity', 'sensitivity over the same norm at the last '
        'filler position L-2: free of the model\'s scales, above 1 when '
        'position 0 reaches the output more strongly; every chunk.'),
    r'bridge/pos0_mass': ('position-0 mass', "The last query's attention "
                          'weight on position 0 (attention models); every '
                          'chunk.'),
}


def summarize(config: Config, rows: list[dict], tables=None) -> dict:
  lengths = sorted(config.lengths)
  out = {'models': {}, 'claims': []}
  profiles = bridge_profiles((tables or {}).get('bridge.csv', []),
                             config.bridge_length)

  def values(model, phase, key, L):
    return {int(r['seed']): float(r[key]) for r in rows if r['model'] == model
            and int(r['length']) == L and r['phase'] == phase}

  for model in config.models:
    mean = {(p, L): float(np.mean(list(values(model, p, 'sensitivity',
                                              L).values())))
            for p in ('init', 'trained') for L in lengths}
    # The seed mean's decay, fitted in L and in log L above stats.FLOOR.
    mean_fits = stats.fits_above_floor(lengths, [mean['init', L]
                                                 for L in lengths])
    seeds = sorted(values(model, 'init', 'sensitivity', lengths[0]))
    fits = {s: stats.fits_above_floor(lengths, [values(
        model, 'init', 'sensitivity', L)[s] for L in lengths]) for s in seeds}
    exp_slope = (mean_fits['exponential'] or {}).get('slope')
    relative = {p: {str(L): [values(model, p, 'relative_sensitivity', L)[s]
                             for s in seeds] for L in lengths}
                for p in ('init', 'trained')}
    entry = {
        'init_sensitivity': {str(L): mean['init', L] for L in lengths},
        'trained_sensitivity': {str(L): mean['trained', L] for L in lengths},
        # d log(sensitivity) / d(distance) of the seed mean: exponential
        # decay if the claim holds for recurrence; e^slope is the factor
        # lost per step (null: too few lengths above the floor).
        'init_log_decay_per_step': exp_slope,
        'init_factor_per_step': (None if exp_slope is None
                                 else float(np.exp(exp_slope))),
        # d log(sensitivity) / d log(L): -1 is a 1/L fall.
        'init_loglog_slope': (mean_fits['power'] or {}).get('slope'),
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
    if model in profiles:
      entry['bridge'] = bridge_summary(profiles[model], config.bridge_length)
    out['models'][model] = entry
  out['claims'] = claims(config, out['models'], lengths)
  return out


def bridge_profiles(rows, length) -> dict:
  """bridge.csv's rows at `length` as {model: {phase: {seed: sensitivity
  indexed by distance}}}."""
  out = {}
  for r in rows:
    if int(r['length']) != length:
      continue
    seeds = out.setdefault(r['model'], {}).setdefault(r['phase'], {})
    profile = seeds.setdefault(int(r['seed']), np.full(length, np.nan))
    profile[int(r['distance'])] = float(r['sensitivity'])
  return out


def bridge_summary(by_phase, length) -> dict:
  """Per phase and seed: the profile's fits (`stats.profile_fits`), the
  factor per step of the exponential one, and position 0's sensitivity
  over that at distance 1 (null where that is 0)."""
  out = {'length': length, 'floor': stats.FLOOR}
  for phase, by_seed in by_phase.items():
    fits = {s: stats.profile_fits(v) for s, v in sorted(by_seed.items())}
    out[phase] = {
        'fits_per_seed': {str(s): f for s, f in fits.items()},
        'factor_per_step': {
            str(s): (float(np.exp(f['exponential']['slope']))
                     if f['exponential'] else None) for s, f in fits.items()},
        'far_over_near': {
            str(s): float(v[-1] / v[1]) if v[1] > 0 else None
            for s, v in sorted(by_seed.items())}}
  return out


def _along(phase: dict) -> tuple[int, int, str]:
  """(seeds whose profile decays, seeds, what the fits say) of one phase."""
  fits = list(phase['fits_per_seed'].values())
  factors = [f for f in phase['factor_per_step'].values() if f is not None]
  far = [x for x in phase['far_over_near'].values() if x is not None]
  last = [f['range'][1] for f in fits]
  text = (f'{_factors(factors)}, fitted over distances 1 to {min(last)}'
          + (f'-{max(last)}' if max(last) > min(last) else ''))
  if far:
    text += f'; position 0 over distance 1: median {np.median(far):.3g}'
  return sum(stats.decays(f) for f in fits), len(fits), text


def _factors(factors) -> str:
  """The fitted factors per step, in words: their median and range."""
  return (f'median factor x{np.median(factors):.3f} per step (seeds '
          f'{min(factors):.3f} to {max(factors):.3f})' if factors
          else 'no seed fitted')


def _shows(fits, points: str) -> tuple[list, str]:
  """(per fitted seed, whether it shows the decay; why the claim is not
  applicable, or ''). A seed with fewer than stats.FIT_POINTS `points`
  above stats.FLOOR has no fit: its signal fell too fast to tell the two
  shapes apart, so it is no evidence either way and is left out."""
  fitted = [f for f in fits if f['better'] is not None]
  return [stats.decays(f) for f in fitted], '' if fitted else (
      f'no seed has {stats.FIT_POINTS} {points} above {stats.FLOOR:g} to '
      'fit: too few points to tell an exponential from a power law')


def claims(config, m, lengths) -> list[Claim]:
  out = []
  recurrent = [x for x in config.models if models_lib.get(x).family.recurrent]
  attention = [x for x in config.models
               if models_lib.get(x).family == models_lib.ATTENTION]
  out += [along_one_string(config, model, m[model]['bridge'])
          for model in recurrent if 'bridge' in m[model]]
  for model in recurrent:
    fits = list(m[model]['init_fits_per_seed'].values())
    factors = [np.exp(f['exponential']['slope']) for f in fits
               if f['exponential']]
    shows, not_applicable = _shows(fits, 'lengths')
    out.append(Claim(
        f'Across lengths (the second view: a model built for each L), the '
        f'signal to position 0 through recurrence ({model}) dies away '
        'exponentially with L (at initialisation).',
        claims_lib.SHAPE, ACROSS_FAMILY,
        dict(shows=shows,
             what='exponential fits better than a power law, with a falling '
                  'slope (' + (f'median factor x{np.median(factors):.3f} per '
                               f'step, seeds {min(factors):.3f} to '
                               f'{max(factors):.3f}' if factors
                               else 'no seed fitted') + ''.join(
                      f'; {a}: log-log slope {m[a]["init_loglog_slope"]:.2f}, '
                      '1/L is -1' for a in attention
                      if m[a]['init_loglog_slope'] is not None) + ')'),
        dict(model=model),
        note='the second view (the fit along one string is the basis): '
             'each seed: log(sensitivity to position 0) at initialisation '
             f'at L = {", ".join(map(str, lengths))} fitted against L '
             '(exponential) and against log L (power law), two parameters '
             'each, over the lengths before the first value at or below '
             f'{stats.FLOOR:g}; the smaller residual sum of squares names the '
             f'shape (a seed with fewer than {stats.FIT_POINTS} such lengths '
             'is left out: no evidence either way)',
        not_applicable=not_applicable))
  for model in attention:
    rel = m[model]['relative_sensitivity']['trained']
    seeds = len(rel[str(lengths[0])])
    lowest = [min(rel[str(L)][s] for L in lengths) for s in range(seeds)]
    along = ''
    if 'bridge' in m[model]:
      b = m[model]['bridge']
      along = ''.join(
          f'; along one string (L={b["length"]}) {phase}: exponential fits '
          f'better with a falling slope in {k_} of {n_} seeds, {text}'
          for phase in ('init', 'trained') for k_, n_, text in (
              _along(b[phase]),))
    out.append(Claim(
        f'After training, attention ({model}) keeps a strong bridge to '
        'position 0 at every length.', claims_lib.THRESHOLD, BRIDGE_FAMILY,
        dict(values=lowest, threshold=1.0, bounds=None,
             what='the lowest over the lengths of the sensitivity to '
                  'position 0 over that to the last filler position (median '
                  f'at L={lengths[-1]}: {model} '
                  f'{np.median(rel[str(lengths[-1])]):.3g}' + ''.join(
                      f', {x} {np.median(m[x]["relative_sensitivity"]["trained"][str(lengths[-1])]):.3g}'
                      for x in recurrent) + along + ')'),
        dict(model=model),
        note='scale-free: the sensitivity to position 0 divided by the '
             'sensitivity to the last filler position (L-2), per seed; the '
             'bridge is strong where the ratio exceeds 1 at every tested '
             'length. A sanity check: a one-layer model that solves the task '
             'by its searchlight on position 0 has that ratio above 1 by '
             'construction', role=claims_lib.SANITY))
    if 'bridge' in m[model]:
      out += [reaches_further(model, x, m[model]['bridge'],
                              m[x]['bridge'])
              for x in recurrent if 'bridge' in m[x]]
  return out


def reaches_further(attention: str, model: str, bridge_a, bridge_r) -> Claim:
  """Seed i of attention against seed i of a recurrence, at
  initialisation, along one string: position 0's sensitivity over that at
  distance 1 (log10), the larger ahead (claims.COMPARISON)."""
  far = lambda b: b['init']['far_over_near']
  seeds = sorted(set(far(bridge_a)) & set(far(bridge_r)), key=int)
  log = lambda v: (float('nan') if v is None else
                   float(np.log10(v)) if v > 0 else float('-inf'))
  return Claim(
      f'At initialisation, the signal from position 0, against that from the '
      f'nearest filler position, is stronger through attention ({attention}) '
      f'than through recurrence ({model}): it loses less over the string.',
      claims_lib.COMPARISON, REACH_FAMILY,
      dict(x=[log(far(bridge_a)[s]) for s in seeds],
           y=[log(far(bridge_r)[s]) for s in seeds], x_name=attention,
           y_name=model, digits=2,
           what=f'log10 of the sensitivity to position 0 over that at '
                f'distance 1, along one string (L={bridge_a["length"]})'),
      dict(model=attention, versus=model, length=bridge_a['length']),
      note='seed i of each on the same strings, at initialisation (where '
           'the recurrences\' decay is judged): ||d margin / d x_0|| over '
           '||d margin / d x_{L-2}||, the farthest position against the '
           'nearest filler; the lesson\'s "unhindered" bridge against its '
           '"successive multiplications". A ratio, free of each model\'s '
           'scale: the sensitivities themselves are not compared (the LRU\'s '
           'to position 0, say, is larger than attention\'s at '
           'initialisation, as its sensitivity everywhere is)')


def along_one_string(config, model, bridge) -> Claim:
  """The decay along one string at initialisation, seed by seed
  (claims.SHAPE), one test of FAMILY."""
  _, n, init = _along(bridge['init'])
  k_trained, _, trained = _along(bridge['trained'])
  shows, not_applicable = _shows(
      bridge['init']['fits_per_seed'].values(), 'distances')
  return Claim(
      f'Through recurrence ({model}) the signal dies away exponentially with '
      f'distance along one string, over distances 1 to {bridge["length"] - 1} '
      '(at initialisation).', claims_lib.SHAPE,
      FAMILY,
      dict(shows=shows,
           what=f'exponential fits better than a power law, with a falling '
                f'slope ({init}; trained, {config.steps} steps: in '
                f'{k_trained} of {n} seeds, {trained})'),
      dict(model=model, length=bridge['length']),
      note='per seed: the sensitivity ||d margin / d x_t|| to every position '
           f't of the same strings (one backward pass, mean over '
           f'{PROBE_EXAMPLES} strings), log-fitted against the distance d = '
           'L-1-t (exponential) and against log d (power law), two '
           'parameters each, over d = 1 to the last distance before the '
           f'first value at or below {stats.FLOOR:g} (float32 underflow); '
           'the smaller residual sum of squares names the shape; a seed '
           'counts when the exponential wins with a falling slope (one with '
           f'fewer than {stats.FIT_POINTS} distances to fit is left out: no '
           'evidence either way). Over a window shorter '
           'than a model\'s slowest time constants (the LRU\'s |lambda| up '
           'to 0.999: about 1,000 steps) a spread of decay rates sums to a '
           'power law, so the verdict is the window\'s',
      not_applicable=not_applicable)


class Gradient(experiment.Experiment):
  """The direct bridge: the signal from the output back to position 0."""
  columns_note = (
      ' (`phase` = `init`/`trained`; rows at `--lengths` and at '
      '`--bridge_length`); `bridge.csv`: '
      '`model,length,seed,phase,position,distance,sensitivity` (every '
      "position of the bridge length's strings, `distance` = "
      'L-1-`position`)')
  summary_keys = (
      '`models{m: init_sensitivity, trained_sensitivity, '
      'init_log_decay_per_step, init_factor_per_step, init_loglog_slope, '
      'trained_ratio_longest_to_shortest, init_fits_per_seed{s: exponential, '
      'power, better, points}, relative_sensitivity{init,trained}{L: per seed},'
      ' bridge{length, floor, init,trained{fits_per_seed{s: exponential, power,'
      ' better, range, points}, factor_per_step, far_over_near}}}` (the '
      '`init_*` and `trained_ratio_*` keys: across `--lengths`, the second '
      'view; a fit null: too few points above `floor`), `claims` (the decay '
      'along one string with `p`, `p_min`, `if_significant`, `family`)')
  name, section, figure_file = 'gradient', SECTION, FIGURE
  defaults, quick, columns = DEFAULTS, QUICK, COLUMNS
  tables, tags, final_test = TABLES, TAGS, False


  def summarize(self, config, rows, data):
    return summarize(config, rows, data.tables)

  def figure(self, config, summary, rows, data, folder, writer):
    profiles = bridge_profiles(data.tables.get('bridge.csv', []),
                               config.bridge_length)
    gradient_figure.plot(config, summary, rows, folder / FIGURE, writer,
                         profiles)

  def groups(self, config: Config) -> list:
    # Its init and trained rows are written together: model and length find
    # both, in results.csv and in bridge.csv.
    return [experiment.group(m, L,
                             task_params={'num_filler': config.num_filler},
                             key=dict(model=m, length=L),
                             probe=probes.margin_sensitivity,
                             probe_examples=64)
            for m in config.models for L in trained_lengths(config)]

  def measure(self, group, ensemble, params, config):
    """The bridge at initialisation (the same initial state training started
    from) and after training, on the probe strings; at the bridge length, to
    every position (one compiled program for both)."""
    probe = (probes.margin_profile if group.length == config.bridge_length
             else probes.margin_sensitivity)
    bridge = lambda params: evaluation.measure(
        ensemble, params, probe, stream=streams.PROBE_STREAM,
        num_examples=PROBE_EXAMPLES)
    init, trained = bridge(ensemble.init()['params']), bridge(params)
    return {'init': init, 'trained': trained, 'accuracy': trained['accuracy']}

  def print_table(self, config, summary) -> None:
    lengths = sorted(config.lengths)
    table = []
    for model, e in summary['models'].items():
      rel = e['relative_sensitivity']['trained']
      factor, loglog = e['init_factor_per_step'], e['init_loglog_slope']
      table.append([model, '-' if factor is None else f'{factor:.3f}',
                    '-' if loglog is None else f'{loglog:.2f}'] + [
                        f'{np.median(rel[str(L)]):.3g}' for L in lengths])
    print('\nAcross lengths, at initialisation: factor per step and log-log '
          'slope of the mean sensitivity; trained: median over seeds of the '
          'sensitivity to position 0 relative to the last filler position')
    print(record.table(table, ['model', 'init x/step', 'init loglog'] + [
        f'trained L={L}' for L in lengths]))
    along = []
    for model, e in summary['models'].items():
      for phase in ('init', 'trained'):
        if 'bridge' not in e:
          continue
        b = e['bridge'][phase]
        fits = list(b['fits_per_seed'].values())
        factors = [x for x in b['factor_per_step'].values() if x is not None]
        far = [x for x in b['far_over_near'].values() if x is not None]
        power = [f['power']['slope'] for f in fits if f['power']]
        last = [f['range'][1] for f in fits]
        along.append([
            model, phase, f'{sum(stats.decays(f) for f in fits)}/'
            f'{len(fits)}',
            f'{np.median(factors):.3f}' if factors else '-',
            f'{np.median(power):.2f}' if power else '-',
            f'1..{min(last)}' + (f'-{max(last)}' if max(last) > min(last)
                                 else ''),
            f'{np.median(far):.3g}' if far else '-'])
    if along:
      print(f'\nAlong one string (L={config.bridge_length}): seeds whose '
            'profile decays exponentially, medians over seeds of the factor '
            'per step and the log-log slope, the distances fitted, and '
            'position 0 over distance 1')
      print(record.table(along, ['model', 'phase', 'exp. decay', 'x/step',
                                 'loglog', 'fitted d', 'pos 0 / d=1']))

  def planned_claims(self, config) -> list:
    """The claims `claims` makes, on placeholder fits of the run's shape."""
    fit = {'better': 'exponential', 'exponential': {'slope': -0.1},
           'range': [1, 2]}
    phase = {'fits_per_seed': {str(s): fit for s in range(config.seeds)},
             'factor_per_step': {}, 'far_over_near': {}}
    bridge = {'length': config.bridge_length, 'init': phase, 'trained': phase}
    m = {x: {'init_fits_per_seed': phase['fits_per_seed'],
             'init_loglog_slope': -1.0, 'bridge': bridge,
             'relative_sensitivity': {'trained': {
                 str(L): [1.0] * config.seeds for L in config.lengths}}}
         for x in config.models}
    return claims(config, m, sorted(config.lengths))

  def final_scalars(self, group, config, final):
    return {'bridge/sensitivity_at_init': (0, final['init']['sensitivity'])}

  def estimate_bytes(self, config: Config) -> int:
    return config_lib.estimate_bytes(dataclasses.replace(
        config, lengths=trained_lengths(config)))

  def rows(self, group, final, config, timing) -> dict:
    L = group.length
    return {
        'results.csv': [
            dict(model=group.model, length=L, seed=s, phase=phase, step=step,
                 sensitivity=m['sensitivity'][s],
                 pos0_mass=m['pos0_mass'][s] if 'pos0_mass' in m else '',
                 accuracy=m['accuracy'][s],
                 sensitivity_last=m['sensitivity_last'][s],
                 relative_sensitivity=m['relative_sensitivity'][s])
            for phase, step in (('init', 0), ('trained', timing.steps))
            for m in (final[phase],) for s in range(config.seeds)],
        'bridge.csv': [
            dict(model=group.model, length=L, seed=s, phase=phase, position=t,
                 distance=L - 1 - t, sensitivity=m['profile'][s][t])
            for phase in ('init', 'trained') for m in (final[phase],)
            if 'profile' in m for s in range(config.seeds) for t in range(L)]}

  def line(self, group, final, config, timing) -> str:
    init, trained = final['init'], final['trained']
    return (f'{group.model:>12s} L={group.length:<3d} sensitivity init '
            f'{np.mean(init["sensitivity"]):.2e}  trained '
            f'{np.mean(trained["sensitivity"]):.2e}  relative '
            f'{np.median(trained["relative_sensitivity"]):.3g}'
            f'  accuracy {np.mean(trained["accuracy"]):.3f}')

  def on_chunk(self, group, config, step, probe, writer):
    return {f'bridge/{key}': probe[key] for key in (
        'sensitivity', 'relative_sensitivity', 'pos0_mass') if key in probe}


EXPERIMENT = Gradient()
