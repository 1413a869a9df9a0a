"""Everything at once, at a quadratic price: what one step costs at length L.

Command: `python run.py --exp=cost` (minutes on a laptop CPU).
For each model and length (64 to 8192), one forward pass and one training
step (Adam) on a batch of 2 strings, d_model 32: FLOPs and bytes from XLA's
cost analysis, peak temporary memory from the compiled executable, median
wall time over repeats after warm-up, and the sequential depth: the longest
chain of operations that must wait for one another, counted from the
program (`costs.sequential_depth`, the work-depth model: an elementwise
step counts 1, a sum or product of n terms ceil(log2 n), a scan its trip
count times its body), not assumed.

Every model is measured as a sequence model uses it: an output at every
position (`attention` computes every query against every key). The
classifier's exact shortcut, which computes only the last query, is measured
too as `attention_last`.

XLA's cost analysis counts a loop body once, whatever its trip count, so a
model that loops over positions is analysed twice, one and two steps per
loop iteration: the difference is one step's cost, and the total is rebuilt
as the rest plus L steps. Expect FLOPs ~ L^2 for attention (exponent near 2)
and ~ L for the recurrent nets (near 1); depth growing like log L for
attention (its sums over keys) and for an associative scan, like L for a
loop over positions (or over chunks of them); wall time, on a CPU, is where
the depth shows.
"""

import dataclasses

import numpy as np

from src import costs
from src import models as models_lib
from src import record
from src import stats
from src import claims as claims_lib
from src import config as config_lib
from src import experiment
from src.claims import Claim
from src.config import Config

@dataclasses.dataclass(frozen=True)
class CostConfig(Config):
  widths: tuple[int, ...] = config_lib.counts(
      (32, 512, 4096), "the widths d_model at which attention's price is "
      'counted (not run)')
  # It counts and times one step per model and length; it trains nothing.
  fixed = config_lib.TRAINING_ONLY + ('seeds', 'seed', 'steps',
                                       'chrono_horizon', 'chunk_steps')

  def check(self) -> None:
    """Its claims are how counts grow with L, a steady depth per doubling
    among them: that takes two steps of L, so three lengths."""
    super().check()
    if len(self.lengths) < 3:
      raise config_lib.ConfigError(
          '--lengths: --exp=cost fits how FLOPs and depth grow with L, so '
          'it needs at least three lengths, got '
          + ','.join(map(str, self.lengths)))
    if _full_attention(self) and len(width_lengths(self)) < 2:
      raise config_lib.ConfigError(
          f'--lengths: the price at --widths is counted over doublings of L '
          f'from the shortest, {min(self.lengths)}, up to '
          f'{WIDTH_REACH} x the widest width or the longest length: there '
          'is no doubling between them')


DEFAULTS = CostConfig(
    exp='cost',
    models=('attention', 'attention_last', 'lstm', 'gru', 'rnn',
            'linear_attention', 'lru', 'mamba'),
    lengths=(64, 128, 256, 512, 1024, 2048, 4096, 8192),  # doublings
    seeds=1,  # cost is per model; seeds do not enter
    steps=1,
    batch_size=2,  # the grid is per string; at 8192 one step is seconds
    learning_rate=3e-3,
    # The price at real widths: attention's FLOPs counted (not run) at each.
    widths=(32, 512, 4096),
)
# --quick: a first look in a fraction of the time (same code, fewer steps).
QUICK = dataclasses.replace(DEFAULTS, lengths=(64, 256, 1024, 2048),
                            widths=(32, 512))
SECTION, FIGURE = '5. Everything at once, at an N x N price', 'cost.png'
COLUMNS = ['model', 'length', 'pass', 'flops', 'bytes', 'peak_bytes',
           'wall_s', 'depth', 'compile_s']
PASSES = ('forward', 'train')
TIME_BUDGET_S = 0.5  # per measurement, after a warm-up call
# What the exponents are read as: FLOPs ~ L^2 within QUADRATIC, ~ L within
# LINEAR; a depth that grows by the same amount per doubling (largest step
# within LOG_STEADY times the smallest) is logarithmic.
QUADRATIC, LINEAR, LOG_STEADY = (1.8, 2.2), (0.8, 1.2), 1.5
# "Doubling the words multiplies the computations fourfold": a doubling of L
# whose FLOPs grow by at least 2^1.8 (the exponent QUADRATIC accepts).
FOURFOLD = 2 ** QUADRATIC[0]
# The price at real widths is counted up to this many times the widest
# d_model: attention's L x L term overtakes the rest near L = 2 d_model
# (Kaplan et al. 2020, sec. 2.1), and a doubling costs 3.48x (2^1.8) only
# once that term is several times the rest, past 8 d_model: counting stops
# where the claim can be judged at every width.
WIDTH_REACH = 32
# The price claim's window, in its sentence: from L = FOURFOLD_FROM x d_model
# on. With the crossover near 2 d_model, a doubling costs (2 + 4x) / (1 + x)
# at x = L / crossover, FOURFOLD from x = 2.85 (L near 5.7 d_model) on.
FOURFOLD_FROM = 8
PRICE_CLAIM = ('Attention pays an N x N price: from a length of '
               f'{FOURFOLD_FROM} times the width on, each doubling of the '
               f'length multiplies the work by at least {FOURFOLD:.2f} '
               '(2^1.8), nearing fourfold.')


def width_lengths(config: Config) -> list[int]:
  """Doublings of L from the shortest --lengths to WIDTH_REACH x the widest
  d_model (or the longest --lengths, if longer)."""
  top = max(max(config.lengths), WIDTH_REACH * max(config.widths))
  out = [min(config.lengths)]
  while out[-1] * 2 <= top:
    out.append(out[-1] * 2)
  return out


def _full_attention(config: Config) -> list[str]:
  """The models that compute every query against every key."""
  spec = models_lib.get
  return [m for m in config.models if spec(m).family == models_lib.ATTENTION
          and spec(m).sequence_outputs]


def fourfold_from(price: dict) -> int | None:
  """The shortest length from which every doubling tested costs at least
  FOURFOLD times the one before (None: the last doubling does not)."""
  ratios, lengths = price['ratio_per_doubling'], price['lengths']
  start = None
  for L, r in zip(lengths, ratios):
    start = (start or L) if r >= FOURFOLD else None
  return start


def fourfold_past(price: dict, start: int) -> bool:
  """Whether every doubling tested from length `start` on costs at least
  FOURFOLD times the one before (and at least one was tested)."""
  judged = [r for L, r in zip(price['lengths'], price['ratio_per_doubling'])
            if L >= start]
  return bool(judged) and all(r >= FOURFOLD for r in judged)


def depth_shape(lengths, depths) -> dict:
  """How the depth grows with L: 'constant' (not at all), 'linear' (a
  log-log slope of at least LINEAR[0]), 'logarithmic' (by the same amount
  per doubling of L, within LOG_STEADY), else 'other'. `per_doubling`: the
  growth between tested lengths divided by the doublings between them."""
  doublings = np.diff(np.log2(np.asarray(lengths, float)))
  steps = np.diff(np.asarray(depths, float)) / doublings
  slope = stats.loglog_slope(lengths, np.maximum(depths, 1))
  if np.all(steps == 0):
    shape = 'constant'
  elif slope >= LINEAR[0]:
    shape = 'linear'
  elif np.all(steps > 0) and steps.max() <= LOG_STEADY * steps.min():
    shape = 'logarithmic'
  else:
    shape = 'other'
  return {'shape': shape, 'loglog_slope': slope,
          'per_doubling': steps.tolist()}


def summarize(config: Config, rows: list[dict], context=None) -> dict:
  lengths = sorted(config.lengths)
  # The longer half, where the FLOPs are, but three lengths at least: a
  # steady depth per doubling takes two doublings.
  upper = lengths[max(0, min(len(lengths) // 2, len(lengths) - 3)):]
  get = lambda m, p, L, k: next(float(r[k]) for r in rows if r['model'] == m
                                and r['pass'] == p and int(r['length']) == L)
  out = {'models': {}, 'fit_lengths': upper, 'claims': []}
  for m in config.models:
    out['models'][m] = {
        p: {'flops_exponent': stats.loglog_slope(
                upper, [get(m, p, L, 'flops') for L in upper]),
            'wall_exponent': stats.loglog_slope(
                upper, [get(m, p, L, 'wall_s') for L in upper]),
            'peak_bytes_exponent': stats.loglog_slope(
                upper, [max(get(m, p, L, 'peak_bytes'), 1) for L in upper]),
            # Judged where the FLOPs are, at the longer lengths: a chunked
            # form has a single chunk at the shortest ones.
            'depth_growth': depth_shape(
                upper, [int(get(m, p, L, 'depth')) for L in upper]),
            'depth_per_doubling': depth_shape(
                lengths, [int(get(m, p, L, 'depth'))
                          for L in lengths])['per_doubling']}
        for p in PASSES}
    out['models'][m]['depth'] = {str(L): int(get(m, 'forward', L, 'depth'))
                                 for L in lengths}
    out['models'][m]['train_depth'] = {
        str(L): int(get(m, 'train', L, 'depth')) for L in lengths}
  longest = lengths[-1]
  wall = {m: get(m, 'train', longest, 'wall_s') for m in config.models}
  out['flops_per_s_at_longest'] = {
      m: get(m, 'train', longest, 'flops') / wall[m] for m in config.models}
  # Every model's training step against every other's at the longest length.
  out['train_step_ratio_at_longest'] = {
      m: {o: wall[m] / wall[o] for o in config.models if o != m}
      for m in config.models}
  spec = models_lib.get
  full = [m for m in config.models if spec(m).family == models_lib.ATTENTION
          and spec(m).sequence_outputs]
  sequential = [m for m in config.models if spec(m).family.sequential]
  for a in full:
    for r in sequential:
      over = [L for L in lengths
              if get(a, 'train', L, 'wall_s') > get(r, 'train', L, 'wall_s')]
      out.setdefault('overtakes_wall_at', {}).setdefault(a, {})[r] = (
          over[0] if over else None)
  out['claims'] = claims(out, full, sequential, config, lengths)
  widths = (context or {}).get('widths')
  if widths:
    out['price_at_widths'] = widths
    out['claims'] += width_claims(widths)
  return out


def _doublings(price: dict) -> str:
  """What each doubling of L cost at one width, in words."""
  start, ratios = fourfold_from(price), price['ratio_per_doubling']
  cross, top = price['crossover_length'], price['lengths'][-1]
  return (f'L = {price["lengths"][0]}..{top}, each doubling {min(ratios):.2f}'
          f'x to {max(ratios):.2f}x, '
          + (f'every doubling from L = {start} on >= {FOURFOLD:.2f}x'
             if start else f'the last doubling still short of '
             f'{FOURFOLD:.2f}x at L = {top}')
          + (f'; the L x L term overtakes the rest at L = {cross:.0f} '
             f'({cross / price.get("d_model", 1):.1f} x d_model)'
             if cross else ''))


PRICE_FAMILY = f'the N x N price (from L = {FOURFOLD_FROM} d_model on)'
DEPTH_FAMILY = 'all at once'
LINEAR_FAMILY = 'a linear recurrence: work linear in L'
# A side claim: how deep an implementation's program is, not the lesson's.
FORM_DEPTH_FAMILY = 'a linear recurrence\'s form: depth like log L'


def _counted(sentence, family, held: bool, what: str, setting: dict,
             test: str, note: str, role: str = claims_lib.LESSON) -> Claim:
  """A claim about counted FLOPs or depth: exact, decided by its rule."""
  return Claim(sentence, claims_lib.SHAPE, family,
               dict(shows=[held], exact=True, what=what, test=test),
               setting, note=note, role=role)


def width_claims(widths: dict) -> list[Claim]:
  """The lesson's "doubling the words multiplies the computations
  fourfold", judged at each width over the window its sentence declares:
  every doubling tested from FOURFOLD_FROM x d_model on costs >= FOURFOLD
  x."""
  return [_counted(
      PRICE_CLAIM, PRICE_FAMILY, fourfold_past(p, FOURFOLD_FROM * int(D)),
      f'training-step FLOPs counted at d_model {D}: ' + _doublings(p),
      dict(model=p['model'], d_model=int(D)),
      'FLOPs counted by XLA (compiled, not run), ratio per doubling',
      f'held = every doubling of L tested from L = {FOURFOLD_FROM} x d_model '
      f'on costs at least {FOURFOLD:.2f}x (2^{QUADRATIC[0]}); counted to '
      f'{WIDTH_REACH} x d_model; below the window the L x L term, which '
      'overtakes the rest near 2 x d_model, does not yet dominate')
          for D, p in widths.items()]


def claims(out, full, sequential, config, lengths) -> list[Claim]:
  m, res = out['models'], []
  longest = lengths[-1]
  for a in full:
    fe = m[a]['train']['flops_exponent']
    res.append(_counted(
        f'Attention ({a}) pays an N x N price in the run: its training '
        'step\'s FLOPs grow like L^2.', PRICE_FAMILY,
        QUADRATIC[0] <= fe <= QUADRATIC[1],
        f'FLOPs ~ L^{fe:.2f} for {a} (train step, L >= '
        f'{out["fit_lengths"][0]}, d_model {config.d_model})' + ''.join(
            f', {x} L^{m[x]["train"]["flops_exponent"]:.2f}'
            for x in m if x != a), dict(model=a, d_model=config.d_model),
        'log-log slope of the counted FLOPs',
        f'held = the FLOPs exponent of a training step lies in '
        f'{QUADRATIC[0]}..{QUADRATIC[1]}'))
  if full and sequential:
    a = full[0]
    shapes = {x: m[x]['train']['depth_growth'] for x in m}
    held = (shapes[a]['shape'] == 'logarithmic' and
            all(shapes[x]['shape'] == 'linear' for x in sequential))
    # Models grouped by how they compute over positions, each group with the
    # depth growth its members' counts give.
    groups = {}
    for x in m:
      spec = models_lib.get(x)
      kind = ('attention' if spec.family == models_lib.ATTENTION else
              'recurrence' if spec.family.sequential else spec.form)
      groups.setdefault(kind, []).append(x)
    growth = '; '.join(
        f'{kind} ({", ".join(xs)}): ' + '/'.join(
            sorted({shapes[x]['shape'] for x in xs}))
        for kind, xs in groups.items())
    res.append(_counted(
        'Attention is one matrix product over all pairs and runs in '
        'parallel (its depth grows only like log L, its sums over keys); '
        'recurrence is N dependent steps.', DEPTH_FAMILY, held,
        f'depth growth of a training step: {growth}; depth at L={longest}: '
        + ', '.join(f'{x} {m[x]["train_depth"][str(longest)]}' for x in m)
        + '; achieved FLOP/s: ' + ', '.join(
            f'{x} {out["flops_per_s_at_longest"][x]:.2e}' for x in m)
        + ''.join(f'; {a} overtakes {r} in wall time at L='
                  f'{out["overtakes_wall_at"][a][r]}' for r in sequential)
        + ' on this machine', dict(model=a),
        'depth counted from the program (work-depth model)',
        f'held = the dependent chain of a training step grows '
        f'logarithmically in L for {a} (a steady amount per doubling) and '
        f'linearly (log-log slope >= {LINEAR[0]}) for every model that loops '
        'over positions'))
  for x in m:
    spec = models_lib.get(x)
    if spec.family != models_lib.LINEAR:
      continue
    fe = m[x]['train']['flops_exponent']
    shape = m[x]['train']['depth_growth']
    form = models_lib.get(x).form
    res.append(_counted(
        f'A linear recurrence ({x}) costs work linear in L.',
        LINEAR_FAMILY, LINEAR[0] <= fe <= LINEAR[1],
        f'FLOPs ~ L^{fe:.2f} (train step, L >= {out["fit_lengths"][0]})',
        dict(model=x), 'log-log slope of the counted FLOPs',
        f'held = FLOPs exponent in {LINEAR[0]}..{LINEAR[1]}'))
    if not spec.log_depth:  # its form walks the positions: depth ~L
      continue
    res.append(_counted(
        f'Computed as {form}, {x}\'s sequential depth grows only like log L.',
        FORM_DEPTH_FAMILY, shape['shape'] == 'logarithmic',
        f'depth {shape["shape"]} over L >= {out["fit_lengths"][0]}: +'
        + ', +'.join(f'{d:g}' for d in m[x]['train']['depth_per_doubling'])
        + f' per doubling of L from {lengths[0]}', dict(model=x, form=form),
        'depth counted from the program (work-depth model)',
        'held = the depth grows by a steady amount per doubling of L (the '
        f'largest increment within {LOG_STEADY}x the smallest), over L >= '
        f'{out["fit_lengths"][0]}; the depth is this form\'s, not every '
        'form\'s: a scan over positions is as deep as the positions it '
        'walks, an associative scan as deep as log L. A side claim: an '
        'implementation\'s depth, not the lesson\'s',
        role=claims_lib.SIDE))
  return res


def plot(config, summary, rows, path, writer=None):
  plt = record.pyplot()
  widths = summary.get('price_at_widths')
  fig, axes = plt.subplots(1, 5 if widths else 4,
                           figsize=(22.5 if widths else 18, 4.2))
  lengths = sorted(config.lengths)
  for ax, key, label in zip(axes, ('flops', 'peak_bytes', 'wall_s', 'depth'),
                            ('FLOPs per training step',
                             'peak temporary memory (bytes)',
                             'wall time per training step (s)',
                             'sequential depth of a training step')):
    for m in config.models:
      v = [next(float(r[key]) for r in rows if r['model'] == m and
                r['pass'] == 'train' and int(r['length']) == L)
           for L in lengths]
      if key == 'depth':
        text = summary['models'][m]['train']['depth_growth']['shape']
      else:
        exponent = {'flops': 'flops_exponent', 'wall_s': 'wall_exponent',
                    'peak_bytes': 'peak_bytes_exponent'}[key]
        text = f'slope {summary["models"][m]["train"][exponent]:.2f}'
      name = m + (' (last query only)'
                  if not models_lib.get(m).sequence_outputs else '')
      ax.plot(lengths, np.maximum(v, 1e-12), 'o-',
              color=models_lib.get(m).color, label=f'{name}: {text}')
    ax.set_xscale('log', base=2)
    ax.set_yscale('log')
    ax.set_xlabel('sequence length L')
    ax.set_title(label, fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which='both')
  if widths:  # the price at real widths: the cost of each doubling of L
    ax = axes[4]
    for i, (D, p) in enumerate(widths.items()):
      ax.plot(p['lengths'][1:], p['ratio_per_doubling'], 'o-',
              color=plt.cm.viridis(i / max(len(widths) - 1, 1)),
              label=f'd_model {D}: L x L overtakes at L = '
                    f'{p["crossover_length"]:.0f}')
    ax.axhline(4, color='k', lw=0.8, ls='--')
    ax.axhline(FOURFOLD, color='gray', lw=0.8, ls=':',
               label=f'{FOURFOLD:.2f}x: read as fourfold')
    ax.set_xscale('log', base=2)
    ax.set_xlabel('sequence length L (after the doubling)')
    ax.set_title(f'{next(iter(widths.values()))["model"]}: FLOPs(L) / '
                 'FLOPs(L/2), counted', fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which='both')
  fig.suptitle(f'The price of looking everywhere: batch {config.batch_size}, '
               f'd_model {config.d_model}; slopes fitted over L >= '
               f'{summary["fit_lengths"][0]}', fontsize=10)
  record.save_figure(fig, path, writer, 'figures/cost')


class Cost(experiment.Cells):
  """Everything at once, at an N x N price: FLOPs, depth and wall time."""
  summary_keys = (
      '`models{m: forward/train {flops_exponent, wall_exponent, '
      'peak_bytes_exponent, depth_growth}, depth, train_depth}`, '
      '`overtakes_wall_at{attention model}{sequential model}`, '
      '`flops_per_s_at_longest`, '
      '`train_step_ratio_at_longest{m}{other}`, '
      '`price_at_widths{d_model: {model, d_model, num_heads, lengths, '
      'flops, ratio_per_doubling, crossover_length, constant, linear, '
      'quadratic}}`, `claims` (the N x N claim once per width, with '
      '`d_model`)')
  name, section, figure_file = 'cost', SECTION, FIGURE
  defaults, quick, columns = DEFAULTS, QUICK, COLUMNS

  def cell_line(self, cell, rows):
    return (f'{cell.key["model"]:>16s} L={cell.key["length"]:<5d} '
            + '  '.join(
                f'{r["pass"]}: {r["flops"]:.2e} FLOP '
                f'{r["wall_s"] * 1e3:7.2f} ms '
                f'{r["peak_bytes"] / 2**20:7.1f} MiB depth {r["depth"]}'
                for r in rows))

  def figure(self, config, summary, rows, data, folder, writer):
    if writer is not None:
      for r in rows:
        writer.add_scalar(f'{r["pass"]}_wall_s/{r["model"]}',
                          float(r['wall_s']), int(r['length']))
        writer.add_scalar(f'{r["pass"]}_flops/{r["model"]}',
                          float(r['flops']), int(r['length']))
        writer.add_scalar(f'{r["pass"]}_depth/{r["model"]}',
                          float(r['depth']), int(r['length']))
      for D, p in summary.get('price_at_widths', {}).items():
        for L, ratio in zip(p['lengths'][1:], p['ratio_per_doubling']):
          writer.add_scalar(f'price_per_doubling/d_model_{D}', ratio, L)
    plot(config, summary, rows, folder / FIGURE, writer)

  def summarize(self, config, rows, data):
    return summarize(config, rows, data.context)

  def cells(self, config: Config) -> list:
    # Cost grows with L for every model: weight the ETA by L (L^2 above 1024
    # for a full attention grid).
    def work(m, L):
      spec = models_lib.get(m)
      return L * (max(1, L / 1024) if spec.family == models_lib.ATTENTION
                  and spec.sequence_outputs else 1)
    return [experiment.Cell(f'{m} L={L}', dict(model=m, length=L), work(m, L))
            for m in config.models for L in config.lengths]

  def measure_cell(self, cell, config, context) -> list[dict]:
    model, length = cell.key['model'], cell.key['length']
    rows = []
    for pass_name in PASSES:
      c = costs.counted(model, pass_name, length=length,
                        batch_size=config.batch_size, d_model=config.d_model,
                        num_heads=config.num_heads,
                        num_layers=config.num_layers,
                        num_filler=config.num_filler,
                        learning_rate=config.learning_rate)
      rows.append(dict(
          model=model, length=length, **{'pass': pass_name},
          flops=c['flops'], bytes=c['bytes'],
          peak_bytes=int(c['memory'].temp_size_in_bytes),
          wall_s=costs.median_seconds(c['compiled'], c['args'],
                                      budget_s=TIME_BUDGET_S),
          depth=c['depth'], compile_s=c['compile_s']))
    return rows

  def after_work(self, config: Config) -> int:
    return len(config.widths) if _full_attention(config) else 0

  def print_table(self, config, summary) -> None:
    table = [[m] + [f'{e[p][k]:.2f}' for p in PASSES
                    for k in ('flops_exponent', 'wall_exponent')]
             + [e['train']['depth_growth']['shape']]
             for m, e in summary['models'].items()]
    print(f'\nLog-log exponents over L in {summary["fit_lengths"]}; depth of '
          'a training step')
    print(record.table(table, ['model', 'fwd FLOPs', 'fwd wall', 'train FLOPs',
                               'train wall', 'depth']))
    widths = summary.get('price_at_widths')
    if widths:
      lengths = next(iter(widths.values()))['lengths']
      print(f'\nFLOPs of a training step, x per doubling of L (the price at '
            f'real widths, {next(iter(widths.values()))["model"]}, counted)')
      print(record.table(
          [[D] + [f'{r:.2f}' for r in p['ratio_per_doubling']]
           + [f'{p["crossover_length"]:.0f}' if p['crossover_length'] else '-',
              fourfold_from(p) or '-'] for D, p in widths.items()],
          ['d_model'] + [f'{L}->{2 * L}' for L in lengths[:-1]]
          + ['L x L overtakes at', 'fourfold from']))

  def estimate_bytes(self, config: Config) -> int:
    """The largest training step over the models at the longest length: what
    each keeps per string (its registry entry) for 2 strings, with full
    L x L grids for attention's every-position pass; float32, a few times
    over for the gradients."""
    L = max(config.lengths)
    worst = 0
    for m in config.models:
      spec = models_lib.get(m)
      layers = config.num_layers + (1 if spec.sequence_outputs else 0)
      worst = max(worst, spec.activations(L, config.d_model, config.num_heads,
                                          layers))
    return int(4 * 4 * config.batch_size * worst)

  def after(self, config, rows, context, progress) -> dict:
    """The price at real widths: the first full-attention model's training
    step counted by XLA at every --widths d_model over `width_lengths`, and
    where its L x L term overtakes the rest."""
    full = _full_attention(config)
    if not full:
      return {}
    model, lengths, widths = full[0], width_lengths(config), {}
    for D in config.widths:
      heads = config.num_heads if D % config.num_heads == 0 else 1
      flops = costs.flops_by_length(
          model, 'train', lengths, batch_size=config.batch_size, d_model=D,
          num_heads=heads, num_layers=config.num_layers,
          num_filler=config.num_filler, learning_rate=config.learning_rate)
      widths[str(D)] = {'model': model, 'd_model': D, 'num_heads': heads,
                        'lengths': lengths,
                        'flops': flops,
                        **costs.quadratic_crossover(lengths, flops)}
      progress.update(1, f'{model} d_model {D}')
    return {'widths': widths}


EXPERIMENT = Cost()
