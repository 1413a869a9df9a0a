"""The searchlight: where does the last position's query look?

Command: `python run.py --exp=attention` (about 15 seconds on a 2-core CPU).
Trains the single-head, one-layer attention model on the memory task at
L=20, eight seeds, 600 Adam steps of 32 strings. Every 20 steps it measures
the last query's weights on a fixed probe batch, per first symbol; at the end,
on 2,048 fresh strings.

Expect: the beam forms on position 0 within the first hundred steps (scroll
the TensorBoard image slider), and the filler gets almost nothing. The
lesson adds that `A` strings put over 90% of the weight on position 0 while
`B` strings look more diffusely. A network may as well take either absence as
the default, so this experiment counts, seed by seed, which class ended up
with the dispersed beam. `--lengths=10,20,50` gives the masses against length.
"""

import dataclasses
import time

import numpy as np

from src import probes
from src import record
from src import sweep
from src import tasks as tasks_lib
from src import train as train_lib
from src.config import Config

DEFAULTS = Config(
    exp='attention',
    models=('attention',),
    lengths=(20,),  # the lesson's panel: a short string, the beam visible
    seeds=8,  # enough to see how seeds split on the asymmetry
    steps=600,
    batch_size=32,
    learning_rate=3e-3,
    chunk_steps=20,  # one heat-map row per 20 steps
    checkpoint_every=200,
)
# --quick: a first look in a fraction of the time (same code, fewer steps).
QUICK = dataclasses.replace(DEFAULTS, seeds=4, steps=300)
accepts = lambda spec: spec.has_attention  # the beam is its weights
# The field flags it reads; run.py refuses the others.
FIELDS = ('lengths', 'seeds', 'seed', 'steps', 'batch_size', 'learning_rate',
          'd_model', 'num_heads', 'num_layers', 'num_filler', 'eval_examples',
          'chunk_steps', 'checkpoint_every')

COLUMNS = ['length', 'seed', 'first_symbol', 'pos0_mass', 'entropy',
           'accuracy', 'steps', 'wall_s']
CLASSES = ('A', 'B')  # label 0 is A, label 1 is B
CONCENTRATED = 0.9  # the lesson's "over ninety per cent"
PROBE_EXAMPLES = 256  # per chunk, fixed strings (their own data stream)


def examples(model, tokens_BxL, labels_B):
  """A few single strings with their weights, for the figure."""
  logits, att_BxHxL = probes.last_query_attention(model, tokens_BxL[:16])
  return {'tokens': tokens_BxL[:16], 'labels': labels_B[:16],
          'weights': att_BxHxL.mean(1),
          'predicted': logits.argmax(-1)}


def run(config: Config, run_dir, *, stop=None) -> dict:
  results = record.ResultsCsv(run_dir.path / 'results.csv', COLUMNS)
  work = {L: sweep.group_work(config.steps, L, 'attention')
          for L in config.lengths}
  progress = record.Progress(sum(work.values()))
  finals = {}
  for length in config.lengths:
    name = f'attention_L{length:03d}'
    task = train_lib.memory_task(length, config.num_filler)
    ensemble = sweep.ensemble('attention', task, config,
                              probe=probes.searchlight,
                              probe_examples=PROBE_EXAMPLES)
    if results.has(length=length):
      progress.update(work[length], f'L={length} done')
      finals[length] = _final_measurements(ensemble, config, run_dir, name)
      continue
    history = _History(run_dir.path / 'tb' / name / 'history.npz')
    trained = sweep.train_group(
        run_dir, name, ensemble, config, progress=progress,
        work=work[length], stop=stop,
        on_chunk=lambda step, metrics, writer: history.log(
            step, metrics['probe'], writer, config))
    eval_start = time.perf_counter()
    final = ensemble.measure(trained.state['params'], probes.searchlight,
                             num_examples=config.eval_examples)
    wall_s = trained.wall_s + time.perf_counter() - eval_start
    rows = [dict(length=length, seed=s, first_symbol=CLASSES[c],
                 pos0_mass=final['pos0_mass'][s, c],
                 entropy=final['entropy'][s, c],
                 accuracy=final['accuracy'][s, c], steps=config.steps,
                 wall_s=wall_s)
            for s in range(config.seeds) for c in range(2)]
    if trained.writer is not None:
      for c, cls in enumerate(CLASSES):
        trained.writer.add_scalar(f'test/pos0_mass/{cls}',
                                  final['pos0_mass'][:, c].mean(),
                                  config.steps)
        trained.writer.add_scalar(f'test/accuracy/{cls}',
                                  final['accuracy'][:, c].mean(), config.steps)
    trained.close(config.steps)
    results.append(rows)
    finals[length] = _final_measurements(ensemble, config, run_dir, name,
                                         trained.state['params'])
    progress.say(
        f'L={length:<4d} pos0 mass A {final["pos0_mass"][:, 0].mean():.3f}  '
        f'B {final["pos0_mass"][:, 1].mean():.3f}  accuracy '
        f'{final["accuracy"].mean():.3f}  {wall_s:.1f}s '
        f'(compile {ensemble.compile_s:.1f}s)')
  return finish(config, run_dir, results.rows, finals)


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
    weights_SxCxL = np.asarray(probe['weights'])[:config.seeds]
    keep = [i for i, s in enumerate(self.steps) if s < step]
    self.steps = [self.steps[i] for i in keep] + [step]
    self.weights = [self.weights[i] for i in keep] + [weights_SxCxL.mean(0)]
    if writer is None:
      return
    with self.path.open('wb') as f:
      np.savez(f, steps=np.asarray(self.steps),
               weights=np.asarray(self.weights))
    for c, cls in enumerate(CLASSES):
      writer.add_scalar(f'pos0_mass/{cls}',
                        np.asarray(probe['pos0_mass'])[:config.seeds, c].mean(),
                        step)
      writer.add_scalar(f'entropy/{cls}',
                        np.asarray(probe['entropy'])[:config.seeds, c].mean(),
                        step)
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


def _final_measurements(ensemble, config, run_dir, name, params=None):
  """Weights per position and example strings at the end of training, from
  the group's final checkpoint when the group finished in an earlier run."""
  if params is None:
    from src.checkpoint import GroupCheckpoints
    checkpoints = GroupCheckpoints(run_dir.checkpoint_dir / name)
    _, state = checkpoints.restore_latest(ensemble.abstract_state())
    checkpoints.close()
    if state is None:
      return None
    params = ensemble.place(state)['params']
  final = ensemble.measure(params, probes.searchlight,
                           num_examples=config.eval_examples)
  final['examples'] = ensemble.measure(params, examples, num_examples=16)
  return final


# -- the summary ----------------------------------------------------------------

def summarize(config: Config, rows: list[dict]) -> dict:
  out = {'lengths': {}, 'claims': []}
  for length in config.lengths:
    mass = {c: {} for c in CLASSES}
    ent = {c: {} for c in CLASSES}
    acc = {c: [] for c in CLASSES}
    for r in rows:
      if int(r['length']) == length:
        mass[r['first_symbol']][int(r['seed'])] = float(r['pos0_mass'])
        ent[r['first_symbol']][int(r['seed'])] = float(r['entropy'])
        acc[r['first_symbol']].append(float(r['accuracy']))
    seeds = sorted(mass['A'])
    classes = {}
    for c in CLASSES:
      m, lo, hi = record.mean_ci95([mass[c][s] for s in seeds])
      e, elo, ehi = record.mean_ci95([ent[c][s] for s in seeds], bounds=None)
      classes[c] = dict(pos0_mass=m, ci95=[lo, hi], entropy=e,
                        entropy_ci95=[elo, ehi],
                        accuracy=float(np.mean(acc[c])),
                        seeds_over_0_9=sum(mass[c][s] > CONCENTRATED
                                           for s in seeds))
    per_seed = []
    for s in seeds:
      dispersed = [c for c in CLASSES if not mass[c][s] > CONCENTRATED]
      per_seed.append(dict(
          seed=s, pos0_mass_A=mass['A'][s], pos0_mass_B=mass['B'][s],
          entropy_A=ent['A'][s], entropy_B=ent['B'][s],
          dispersed=('neither', *dispersed, 'both')[len(dispersed)]
          if len(dispersed) != 1 else dispersed[0]))
    counts = {k: sum(p['dispersed'] == k for p in per_seed)
              for k in ('A', 'B', 'neither', 'both')}
    out['lengths'][str(length)] = dict(classes=classes, per_seed=per_seed,
                                       dispersed_counts=counts)
    n = len(seeds)
    k_a = classes['A']['seeds_over_0_9']
    out['claims'].append(dict(
        claim='For sequences starting with A, position 0 takes over 90% of '
              "the last query's weight.",
        length=length,
        measured=f'A: mean position-0 mass {classes["A"]["pos0_mass"]:.3f} '
                 f'[{classes["A"]["ci95"][0]:.3f}, '
                 f'{classes["A"]["ci95"][1]:.3f}]; over 0.9 in {k_a} of {n} '
                 'seeds',
        verdict=_k_of_n(k_a, n)))
    k_b = sum(ent['B'][s] > ent['A'][s] for s in seeds)
    out['claims'].append(dict(
        claim="For sequences starting with B, the weight is more dispersed "
              'than for A.',
        length=length,
        measured=f'B entropy above A entropy in {k_b} of {n} seeds; mean '
                 f'entropy A {classes["A"]["entropy"]:.3f}, B '
                 f'{classes["B"]["entropy"]:.3f} nats; dispersed beam (mass '
                 f'<= 0.9) on A in {counts["A"]}, B in {counts["B"]}, both '
                 f'in {counts["both"]}, neither in {counts["neither"]} seeds',
        verdict=_k_of_n(k_b, n)))
  return out


def _k_of_n(k, n):
  if k == n:
    return 'held'
  return 'did not hold' if k == 0 else f'held in {k} of {n} seeds'


def finish(config, run_dir, rows, finals) -> dict:
  summary = summarize(config, rows)
  walls = {int(r['length']): float(r['wall_s']) for r in rows}
  summary['wall_s'] = sum(walls.values())

  def draw(writer):
    first = config.lengths[0]
    if finals.get(first) is not None:
      plot(config, first, finals[first], run_dir.path / 'attention.png',
           writer)
    if len(config.lengths) > 1:
      plot_lengths(config, summary, run_dir.path / 'attention_lengths.png',
                   writer)

  record.publish(run_dir, config, summary, draw)
  for length, s in summary['lengths'].items():
    print(f'\nL={length}: last query weight on position 0 (mean over '
          f'{config.seeds} seeds, 95% interval)')
    print(record.table(
        [[c, f'{s["classes"][c]["pos0_mass"]:.3f}',
          f'[{s["classes"][c]["ci95"][0]:.3f}, '
          f'{s["classes"][c]["ci95"][1]:.3f}]',
          f'{s["classes"][c]["entropy"]:.3f}',
          f'{s["classes"][c]["accuracy"]:.3f}', s['dispersed_counts'][c]]
         for c in CLASSES],
        ['class', 'pos0_mass', 'ci95', 'entropy', 'accuracy',
         'seeds dispersed']))
  sweep.print_claims(summary)
  return summary


_TOKEN_TEXT = {tasks_lib.A: 'A', tasks_lib.B: 'B', tasks_lib.QUERY: '?'}


def plot(config, length, final, path, writer=None):
  plt = record.pyplot()
  fig = plt.figure(figsize=(10, 6.2))
  grid = fig.add_gridspec(2 + 4, 2, height_ratios=[4, 0.5, 1, 1, 1, 1])
  pos = np.arange(length)
  for c, cls in enumerate(CLASSES):
    ax = fig.add_subplot(grid[0, c])
    w_SxL = np.asarray(final['weights'])[:, c]
    ax.bar(pos, w_SxL.mean(0), color='C3' if c == 0 else 'C0', alpha=0.85)
    ax.errorbar(pos, w_SxL.mean(0), yerr=[w_SxL.mean(0) - w_SxL.min(0),
                                         w_SxL.max(0) - w_SxL.mean(0)],
                fmt='none', ecolor='k', lw=0.8, capsize=2)
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
  fig.suptitle(f'The searchlight at L={length}: mean over {config.seeds} '
               'seeds and fresh strings, bars span the seeds. Below: seed 0 '
               'on four strings (filler as digits, query as ?)', fontsize=9)
  record.save_figure(fig, path, writer, 'figures/attention')


def plot_lengths(config, summary, path, writer=None):
  plt = record.pyplot()
  fig, ax = plt.subplots(figsize=(6, 3.8))
  lengths = sorted(config.lengths)
  for c, cls in enumerate(CLASSES):
    g = [summary['lengths'][str(L)]['classes'][cls] for L in lengths]
    ax.errorbar(lengths, [x['pos0_mass'] for x in g],
                yerr=[[x['pos0_mass'] - x['ci95'][0] for x in g],
                      [x['ci95'][1] - x['pos0_mass'] for x in g]],
                fmt='o-', label=cls, color='C3' if c == 0 else 'C0')
  ax.axhline(CONCENTRATED, ls=':', color='k', lw=1, label='0.9')
  ax.set_xscale('log')
  ax.set_xlabel('sequence length L')
  ax.set_ylabel('weight on position 0')
  ax.set_ylim(0, 1.02)
  ax.legend(fontsize=8)
  record.save_figure(fig, path, writer, 'figures/attention_lengths')
