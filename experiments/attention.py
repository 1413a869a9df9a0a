"""The searchlight: where does the last position's query look?

Command: `python run.py --exp=attention`. Trains the one-layer attention
model on the memory task at L=20 (seeds, steps and models: DEFAULTS below).
After every chunk it measures the last query's weights on a fixed probe
batch, per first symbol; at the end, on fresh test strings.

Expect: the beam forms on position 0 within the first hundred steps (scroll
the TensorBoard image slider), and the filler gets almost nothing. The
lesson adds that `A` strings put over 90% of the weight on position 0 while
`B` strings look more diffusely. A network may as well take either absence as
the default, so this experiment counts, seed by seed, which class ended up
with the dispersed beam. `--lengths=10,20,50` gives the masses against length.
"""

import dataclasses
import io

import numpy as np

from experiments import memory_task as memory
from src import claims as claims_lib
from src import evaluation
from src import experiment
from src import probes
from src import record
from src import stats
from src import storage
from src import tasks as tasks_lib
from src.claims import Claim
from src.config import Config

@dataclasses.dataclass(frozen=True)
class AttentionConfig(Config):
  fixed = ('chrono_horizon',)  # attention models only (`accepts`)


DEFAULTS = AttentionConfig(
    exp='attention',
    # With learned positions and without (a position found by its content
    # only: the lesson's searchlight is a look-up by content).
    models=('attention', 'attention_content'),
    lengths=(20,),  # the lesson's panel: a short string, the beam visible
    # Cheap: 32 seeds give every claim's test its power (the power plan the
    # run prints first).
    seeds=32,
    steps=600,
    batch_size=32,
    learning_rate=3e-3,
    chunk_steps=20,  # one heat-map row per 20 steps
    checkpoint_every=200,
)
# --quick: a first look in a fraction of the time (same code, fewer steps).
# 6 seeds, the fewest at which every claim can conclude where all its seeds
# agree: the sign test's best case, 1/64, clears 0.05 after Holm over a
# family of 2 (5 seeds' 1/32 does not).
QUICK = dataclasses.replace(DEFAULTS, seeds=6, steps=300)
accepts = lambda spec: spec.has_attention  # the beam is its weights

SECTION, FIGURE = '3. The searchlight', 'attention.png'  # in REPORT.md
COLUMNS = ['model', 'length', 'seed', 'first_symbol', 'pos0_mass', 'entropy',
           'accuracy', 'steps', 'wall_s', 'accuracy_without_pos0',
           'accuracy_without_filler', 'accuracy_pos0_capped']
CLASSES = ('A', 'B')  # label 0 is A, label 1 is B
CONCENTRATED = 0.9  # the lesson's "over ninety per cent"
# A seed's beam is asymmetric when one class puts at least this much less
# weight on position 0 than the other (an effect size, fixed beforehand).
ASYMMETRY = 0.05
PROBE_EXAMPLES = 256  # per chunk, fixed strings (their own data stream)
# Fixed before any run. A seed's look is asymmetric ("one class gets the
# beam, the other a dispersed look") when the entropies of its last query's
# weights on A and on B strings differ by at least ENTROPY_GAP nats (a factor
# e^0.5 = 1.65 in the positions it effectively looks at).
ENTROPY_GAP = 0.5
# The beam is what a seed uses when, with position 0 removed from the
# read-out query's weights, its accuracy (mean over the classes) falls to
# CHANCE_BAND or below (chance is 0.5), while removing a filler position
# instead leaves it solved (>= stats.SOLVED).
CHANCE_BAND = 0.6


# The families: one lesson claim each, every model and length it is tested
# on (Holm within each).
A_FAMILY = ('for one class (A in the lesson), position 0 takes over 90% of '
            'the weight')
B_FAMILY = 'for B sequences, the weight is more dispersed than for A'
EITHER_FAMILY = 'one class gets the beam, the other a dispersed look'
ABLATION_FAMILY = 'without position 0 the answer is lost'
BEAM_FAMILY = 'the beam on position 0 is what the model uses'


def examples(model, tokens_BxL, labels_B):
  """A few single strings with their weights, for the figure."""
  logits, att_BxHxL = probes.last_query_attention(model, tokens_BxL[:16])
  return {'tokens': tokens_BxL[:16], 'labels': labels_B[:16],
          'weights': att_BxHxL.mean(1),
          'predicted': logits.argmax(-1)}


# TensorBoard's descriptions of the tags on_chunk and final_scalars log.
TAGS = {
    r'pos0_mass/.*': ('position-0 mass', "The last query's mean attention "
                      'weight on position 0 (the first symbol),'
                      ' heads averaged, '
                      'on the probe strings whose first symbol is the class in '
                      'the tag; every chunk.'),
    r'entropy/.*': ('attention entropy', "The mean entropy of the last query's "
                    'attention weights on the probe strings of the class in '
                    'the tag; every chunk.'),
    r'test/pos0_mass/.*': ('final position-0 mass', 'pos0_mass after training, '
                           'on the final test strings of the class in the tag.'),
}


def rows_for(group, final, steps, wall_s) -> list[dict]:
  """results.csv rows of one group from `probes.searchlight`'s per-seed,
  per-class measurements (class axis: label 0 is A, label 1 is B)."""
  num_seeds = np.asarray(final['pos0_mass']).shape[0]
  return [dict(model=group.model, length=group.length, seed=s,
               first_symbol=CLASSES[c], pos0_mass=final['pos0_mass'][s, c],
               entropy=final['entropy'][s, c],
               accuracy=final['accuracy'][s, c], steps=steps, wall_s=wall_s,
               accuracy_without_pos0=final['without_pos0'][s, c],
               accuracy_without_filler=final['without_filler'][s, c],
               accuracy_pos0_capped=final['pos0_capped'][s, c])
          for s in range(num_seeds) for c in range(len(CLASSES))]


class _History:
  """Per-chunk probe results of one group, kept beside its events so a
  resumed run redraws the whole heat map."""

  def __init__(self, path):
    self.path = path
    self.steps, self.weights = [], []  # weights: [chunks, class, L]
    if path.exists():
      with path.open('rb') as f:  # through epath: the workdir may be a bucket
        saved = np.load(f)
        self.steps, self.weights = list(saved['steps']), list(saved['weights'])

  def log(self, step, probe, writer, config):
    weights_SxCxL = np.asarray(probe['weights'])
    keep = [i for i, s in enumerate(self.steps) if s < step]
    self.steps = [self.steps[i] for i in keep] + [step]
    self.weights = [self.weights[i] for i in keep] + [weights_SxCxL.mean(0)]
    if writer is None:
      return
    saved = io.BytesIO()  # written whole: a full disk leaves the old one
    np.savez(saved, steps=np.asarray(self.steps),
             weights=np.asarray(self.weights))
    storage.write_whole(self.path, saved.getvalue())
    for c, cls in enumerate(CLASSES):
      grid_TxL = np.asarray(self.weights)[:, c]
      writer.add_image(f'searchlight/{cls}', heat_map(
          grid_TxL, config.steps // config.chunk_steps), step,
                       dataformats='HWC')


def heat_map(grid_TxL, total_rows):
  """Positions across, training steps down; one colour per weight in [0, 1]."""
  from matplotlib import colormaps
  T, L = grid_TxL.shape
  full = np.full((max(total_rows, T), L), np.nan)
  full[:T] = grid_TxL
  rgb = colormaps['magma'](np.nan_to_num(full, nan=0.0))[..., :3]
  rgb[T:] = 0.15  # the rows still to come
  sx = max(1, 480 // L)
  sy = max(1, 240 // full.shape[0])
  return (np.repeat(np.repeat(rgb, sy, 0), sx, 1) * 255).astype(np.uint8)


# -- the summary ----------------------------------------------------------------

def dispersed_class(mass_a: float, mass_b: float) -> str:
  """Which classes have a dispersed beam in one seed (position-0 mass not
  over CONCENTRATED): 'neither', 'A', 'B' or 'both'."""
  dispersed = [c for c, m in zip(CLASSES, (mass_a, mass_b))
               if not m > CONCENTRATED]
  if len(dispersed) == 1:
    return dispersed[0]
  return 'both' if dispersed else 'neither'


def more_dispersed(mass_a: float, mass_b: float) -> str:
  """Which class looks more diffusely in one seed, by an effect size: the
  one with at least ASYMMETRY less weight on position 0; 'neither' when
  the difference is smaller."""
  if abs(mass_a - mass_b) < ASYMMETRY:
    return 'neither'
  return 'A' if mass_a < mass_b else 'B'


def summarize(config: Config, rows: list[dict]) -> dict:
  out = {'models': {}, 'claims': []}
  for model in config.models:
    for length in config.lengths:
      entry = summarize_group([r for r in rows if r['model'] == model
                               and int(r['length']) == length])
      out['models'].setdefault(model, {})[str(length)] = entry
      out['claims'] += group_claims(model, length, entry)
  return out


def summarize_group(rows) -> dict:
  """Per class and per seed, from one group's rows."""
  mass = {c: {} for c in CLASSES}
  ent = {c: {} for c in CLASSES}
  acc = {c: [] for c in CLASSES}
  seed_acc = {c: {} for c in CLASSES}
  for r in rows:
    mass[r['first_symbol']][int(r['seed'])] = float(r['pos0_mass'])
    ent[r['first_symbol']][int(r['seed'])] = float(r['entropy'])
    acc[r['first_symbol']].append(float(r['accuracy']))
    seed_acc[r['first_symbol']][int(r['seed'])] = float(r['accuracy'])
  seeds = sorted(mass['A'])
  classes = {}
  for c in CLASSES:
    m, lo, hi = stats.mean_ci95([mass[c][s] for s in seeds])
    e, elo, ehi = stats.mean_ci95([ent[c][s] for s in seeds], bounds=None)
    classes[c] = dict(pos0_mass=m, ci95=[lo, hi], entropy=e,
                      entropy_ci95=[elo, ehi],
                      accuracy=float(np.mean(acc[c])),
                      seeds_over_0_9=sum(mass[c][s] > CONCENTRATED
                                         for s in seeds))
  per_seed = [dict(seed=s, pos0_mass_A=mass['A'][s], pos0_mass_B=mass['B'][s],
                   entropy_A=ent['A'][s], entropy_B=ent['B'][s],
                   dispersed=dispersed_class(mass['A'][s], mass['B'][s]),
                   more_dispersed=more_dispersed(mass['A'][s], mass['B'][s]),
                   accuracy=float(np.mean([seed_acc[c][s] for c in CLASSES])))
              for s in seeds]
  gaps = {s: ent['A'][s] - ent['B'][s] for s in seeds}
  for p in per_seed:  # either direction: which class looks more widely
    gap = gaps[p['seed']]
    p['entropy_gap_A_minus_B'] = gap
    p['asymmetric'] = ('neither' if abs(gap) < ENTROPY_GAP
                       else 'A' if gap > 0 else 'B')
  ablation = _ablation(rows, seeds)
  for p in per_seed:
    p.update(ablation[p['seed']])
  counts = {k: sum(p['dispersed'] == k for p in per_seed)
            for k in ('A', 'B', 'both', 'neither')}
  more = {k: sum(p['more_dispersed'] == k for p in per_seed)
          for k in ('A', 'B', 'neither')}
  return dict(classes=classes, per_seed=per_seed, dispersed_counts=counts,
              more_dispersed_counts=more,
              asymmetric_counts={k: sum(p['asymmetric'] == k
                                        for p in per_seed)
                                 for k in ('A', 'B', 'neither')})


def _ablation(rows, seeds) -> dict:
  """Per seed, the accuracy (mean over the classes) intact, without
  position 0 and without a filler position; whether the seed uses the beam;
  and its default class, the one still answered right without position 0
  (the class inferred from the beam finding nothing)."""
  out = {}
  for s in seeds:
    mine = {r['first_symbol']: r for r in rows if int(r['seed']) == s}
    mean = lambda key: float(np.mean([float(mine[c][key]) for c in CLASSES]))
    without = {c: float(mine[c]['accuracy_without_pos0']) for c in CLASSES}
    kept = [c for c in CLASSES if stats.solved(without[c])]
    intact, no_pos0 = mean('accuracy'), mean('accuracy_without_pos0')
    no_filler = mean('accuracy_without_filler')
    out[s] = dict(accuracy=intact, accuracy_without_pos0=no_pos0,
                  accuracy_without_filler=no_filler,
                  accuracy_pos0_capped=mean('accuracy_pos0_capped'),
                  default_class=kept[0] if len(kept) == 1 else None,
                  uses_beam=bool(stats.solved(intact)
                                 and no_pos0 <= CHANCE_BAND
                                 and stats.solved(no_filler)))
  return out


def group_claims(model, length, entry) -> list[Claim]:
  """The searchlight's claims for one group, judged on the seeds that solved
  the task (how a model looks when it answers, not when it guesses); a
  group none of whose seeds solved it makes them `not applicable`."""
  every = entry['per_seed']
  seeds, never = stats.solving(model, every)
  setting = dict(model=model, length=length)
  out = _claims(model, seeds, setting)
  solving = (f'judged on the {len(seeds)} of {len(every)} seeds that solved '
             f'the task (test accuracy >= {stats.SOLVED}; every seed\'s '
             'values are in summary.json\'s models)')
  for c in out:
    c.note = f'{c.note}; {solving}'
    if never:
      c.not_applicable = never
  return out


def _claims(model, seeds, setting) -> list[Claim]:
  """The searchlight's claims on per-seed entries `seeds`."""
  beamed = [max(p['pos0_mass_A'], p['pos0_mass_B']) for p in seeds]
  out = [Claim(
      f'For the sequences of one class (A in the lesson), position 0 takes '
      f"over 90% of the last query's weight ({model}).", claims_lib.THRESHOLD,
      A_FAMILY,
      dict(values=beamed, threshold=CONCENTRATED,
           what="the class with the larger beam: the last query's mean "
                'weight on position 0'),
      setting, note='per seed, the larger of its mean weights on position 0 '
                    f'over A and over B test strings, against {CONCENTRATED}: '
                    'nothing in the task or the initialisation tells A from '
                    'B, so which class a seed beams on is its own (the '
                    "lesson's A)")]
  out.append(Claim(
      f'For sequences starting with B, the weight is more dispersed than for '
      f'A ({model}).', claims_lib.COMPARISON, B_FAMILY,
      dict(x=[p['entropy_B'] for p in seeds],
           y=[p['entropy_A'] for p in seeds], x_name='B', y_name='A',
           what="entropy of the last query's weights (nats)"),
      setting, note='every seed, paired: its entropy on B strings against '
                    'its entropy on A strings. A side claim: A and B are '
                    'exchangeable here, so across seeds its null holds by '
                    'symmetry (which class gets the beam is each seed\'s '
                    'own); the lesson\'s contrast is judged by "one class '
                    'gets the beam, the other a dispersed look"',
      role=claims_lib.SIDE))
  out.append(Claim(
      f'One class gets the beam, the other a dispersed look ({model}; either '
      'class: A and B are exchangeable here).', claims_lib.THRESHOLD,
      EITHER_FAMILY,
      dict(values=[abs(p['entropy_gap_A_minus_B']) for p in seeds],
           threshold=ENTROPY_GAP, bounds=None,
           what='the gap between the entropies on A and on B strings '
                '(nats, either sign)'),
      setting, note=f'per seed, either direction, against {ENTROPY_GAP} '
                    'nats (fixed before the run): nothing in the task or '
                    'the initialisation tells A from B'))
  # A sanity check: one layer reads the label only there.
  out.append(Claim(
      f'Without position 0 the answer is lost: the model ({model}) reads '
      'the first symbol from position 0 and from nowhere else (removing '
      'one filler position instead leaves it solved).',
      claims_lib.RELIABILITY, ABLATION_FAMILY,
      dict(successes=[p['uses_beam'] for p in seeds], rate=0.5,
           values=[p['accuracy_without_pos0'] for p in seeds],
           what=f'accuracy without position 0 at or below {CHANCE_BAND} '
                f'and without a filler position at >= {stats.SOLVED} '
                '(accuracy without position 0 below)'),
      setting, note='position 0 removed from the read-out query\'s weights '
                    '(renormalised over the rest). In a one-layer model '
                    'only position 0 carries the label, so this shows '
                    'where the answer comes from, not that a concentrated '
                    'beam is needed: the capped beam asks that. A '
                    'sanity check, shown and not counted: it cannot fail '
                    'in a model that solves the task',
      role=claims_lib.SANITY))
  capped = [p['accuracy_pos0_capped'] for p in seeds]
  out.append(Claim(
      f'The beam on position 0 is what the model ({model}) uses: dimmed '
      'to a uniform look (its weight capped at 1/L), the answer is lost.',
      claims_lib.THRESHOLD, BEAM_FAMILY,
      dict(values=capped, threshold=CHANCE_BAND, above=False,
           what='accuracy with position 0\'s weight capped at 1/L (the '
                'rest handed to the other positions)'),
      setting, note=f'against {CHANCE_BAND} (chance is 0.5): a model '
                    'whose answer survives a beam dimmed to a uniform '
                    'look does not need the beam; one that loses it '
                    'does'))
  return out


_TOKEN_TEXT = {tasks_lib.A: 'A', tasks_lib.B: 'B', tasks_lib.QUERY: '?'}


def plot(config, group, final, path, writer=None):
  plt = record.pyplot()
  length = group.length
  fig = plt.figure(figsize=(10, 6.2))
  grid = fig.add_gridspec(2 + 4, 2, height_ratios=[4, 0.5, 1, 1, 1, 1])
  pos = np.arange(length)
  for c, cls in enumerate(CLASSES):
    ax = fig.add_subplot(grid[0, c])
    w_SxL = np.asarray(final['weights'])[:, c]
    ax.bar(pos, w_SxL.mean(0), color='C3' if c == 0 else 'C0', alpha=0.6)
    record.seed_dots(ax, pos, w_SxL.T, 'k', log_x=False)
    m = np.asarray(final['pos0_mass'])[:, c]
    ax.set_title(f'{cls} strings: position 0 takes {m.mean():.2f} '
                 f'(seeds {m.min():.2f} to {m.max():.2f})', fontsize=9)
    ax.set_xlabel('position (0 = first symbol, last = query)')
    ax.set_ylim(0, 1.02)
    if c == 0:
      ax.set_ylabel("last query's attention weight")
  ex = final['examples']
  tokens, labels = np.asarray(ex['tokens'])[0], np.asarray(ex['labels'])[0]
  weights = np.asarray(ex['weights'])[0]
  picks = [i for i in range(len(labels)) if labels[i] == 0][:2] + [
      i for i in range(len(labels)) if labels[i] == 1][:2]
  for row, i in enumerate(picks):
    ax = fig.add_subplot(grid[2 + row, :])
    ax.imshow(weights[i][None], cmap='magma', vmin=0, vmax=1, aspect='auto')
    for p, tok in enumerate(tokens[i]):
      text = _TOKEN_TEXT.get(int(tok), str(int(tok) - tasks_lib.FIRST_FILLER))
      ax.text(p, 0, text, ha='center', va='center', fontsize=8,
              color='w' if weights[i][p] < 0.5 else 'k')
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_ylabel(f'{CLASSES[labels[i]]}', rotation=0, labelpad=10)
  fig.suptitle(f'The searchlight of {group.model} at L={length}: mean over '
               f'{config.seeds} '
               'seeds and fresh strings (bars),'
               ' each seed (dots). Below: seed 0 '
               'on four strings (filler as digits, query as ?)', fontsize=9)
  record.save_figure(fig, path, writer, 'figures/attention')


def plot_lengths(config, summary, path, writer=None):
  plt = record.pyplot()
  fig, ax = plt.subplots(figsize=(6, 3.8))
  lengths = sorted(config.lengths)
  by_length = summary['models'][config.models[0]]
  for c, cls in enumerate(CLASSES):
    color = 'C3' if c == 0 else 'C0'
    ax.plot(lengths, [by_length[str(L)]['classes'][cls]['pos0_mass']
                      for L in lengths], '-', label=cls, color=color)
    record.seed_dots(ax, lengths, [
        [p[f'pos0_mass_{cls}'] for p in by_length[str(L)]['per_seed']]
        for L in lengths], color, offset=0.02 * (c - 0.5))
  ax.axhline(CONCENTRATED, ls=':', color='k', lw=1, label='0.9')
  ax.set_xscale('log')
  ax.set_xlabel('sequence length L')
  ax.set_ylabel('weight on position 0')
  ax.set_ylim(0, 1.02)
  ax.legend(fontsize=8)
  record.save_figure(fig, path, writer, 'figures/attention_lengths')


class Attention(experiment.Experiment):
  """The searchlight: where the last position's query looks."""
  summary_keys = (
      '`models{model}{L}: classes{A,B: '
      'pos0_mass,ci95,entropy,accuracy,seeds_over_0_9}, '
      'per_seed[{seed,pos0_mass_A,pos0_mass_B,entropy_A,entropy_B,'
      'dispersed,more_dispersed,entropy_gap_A_minus_B,asymmetric,'
      'accuracy,accuracy_without_pos0,accuracy_without_filler,'
      'accuracy_pos0_capped,default_class,uses_beam}], '
      'dispersed_counts, more_dispersed_counts, asymmetric_counts, '
      '`claims`')
  name, section, figure_file = 'attention', SECTION, FIGURE
  defaults, quick, columns, tags = DEFAULTS, QUICK, COLUMNS, TAGS
  final_test, keeps = False, True
  accepts = staticmethod(accepts)

  def summarize(self, config, rows, data):
    return summarize(config, rows)

  def figure(self, config, summary, rows, data, folder, writer):
    first = experiment.group(config.models[0], config.lengths[0])
    if data.kept.get(first.name) is not None:
      plot(config, first, data.kept[first.name], folder / FIGURE, writer)
    if len(config.lengths) > 1:
      plot_lengths(config, summary, folder / 'attention_lengths.png', writer)

  def groups(self, config: Config) -> list:
    return [experiment.group(m, L, task_params=memory.memory_params(config),
                             probe=probes.searchlight,
                             probe_examples=PROBE_EXAMPLES)
            for m in config.models for L in config.lengths]

  def measure(self, group, ensemble, params, config):
    """Where the last query looks, and what removing position 0 (or a filler
    position, the control) from its weights does to the accuracy."""
    return evaluation.measure(ensemble, params,
                              probes.searchlight_with_ablation,
                              num_examples=config.eval_examples)

  def line(self, group, final, config, timing) -> str:
    return (f'{group.model} L={group.length:<4d} pos0 mass A '
            f'{final["pos0_mass"][:, 0].mean():.3f}  B '
            f'{final["pos0_mass"][:, 1].mean():.3f}  accuracy '
            f'{final["accuracy"].mean():.3f}  {timing.wall_s:.1f}s '
            f'({timing.compile_text})')

  def print_table(self, config, summary) -> None:
    for model, by_length in summary['models'].items():
      for length, s in by_length.items():
        print(f'\n{model} L={length}: last query weight on position 0 (mean '
              f'over {config.seeds} seeds, 95% interval)')
        print(record.table(
            [[c, f'{s["classes"][c]["pos0_mass"]:.3f}',
              f'[{s["classes"][c]["ci95"][0]:.3f}, '
              f'{s["classes"][c]["ci95"][1]:.3f}]',
              f'{s["classes"][c]["entropy"]:.3f}',
              f'{s["classes"][c]["accuracy"]:.3f}', s['dispersed_counts'][c]]
             for c in CLASSES],
            ['class', 'pos0_mass', 'ci95', 'entropy', 'accuracy',
             'seeds dispersed']))
        print('per seed (position-0 mass A / B, the more dispersed class): '
              + ', '.join(f'{p["seed"]}: {p["pos0_mass_A"]:.2f}/'
                          f'{p["pos0_mass_B"]:.2f} {p["more_dispersed"]}'
                          for p in s['per_seed']))

  def planned_claims(self, config) -> list:
    """The claims `summarize` makes, on placeholder rows of the run's shape."""
    rows = [dict(model=m, length=L, seed=s, first_symbol=c, pos0_mass=0.5,
                 entropy=1.0, accuracy=1.0, accuracy_without_pos0=0.5,
                 accuracy_without_filler=1.0, accuracy_pos0_capped=0.5)
            for m in config.models for L in config.lengths
            for s in range(config.seeds) for c in CLASSES]
    return summarize(config, rows)['claims']

  def rows(self, group, final, config, timing) -> list[dict]:
    return rows_for(group, final, timing.steps, timing.wall_s)

  def on_chunk(self, group, config, step, probe, writer):
    """The heat map's new row (kept beside the events, so a resumed run
    redraws it whole) and the position-0 mass and entropy per class."""
    if writer is None:
      return None
    _History(storage.path(writer.logdir) / 'history.npz').log(
        step, probe, writer, config)
    return {f'{key}/{cls}': np.asarray(probe[key])[:, c]
            for c, cls in enumerate(CLASSES) for key in ('pos0_mass', 'entropy')}

  def final_scalars(self, group, config, final):
    return {f'test/pos0_mass/{cls}': final['pos0_mass'][:, c]
            for c, cls in enumerate(CLASSES)}

  def keep(self, group, ensemble, params, config):
    """Weights per position and example strings at the end of training, for
    the figure."""
    final = evaluation.measure(ensemble, params, probes.searchlight,
                               num_examples=config.eval_examples)
    final['examples'] = evaluation.measure(ensemble, params, examples,
                                           num_examples=16)
    return final


EXPERIMENT = Attention()
