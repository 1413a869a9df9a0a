"""Many looks: do several heads divide the labour without being told?

Command: `python run.py --exp=heads`.

The task needs two relations at once. Position 0 holds A or B; one C or D
sits at a random position in the filler; the answer is the pair (4 classes).
The filler also holds A and B decoys, so the first symbol can only be found
by its position, while the second can only be found by its content. The two
lookups use different kinds of key, and the targets sit at different places,
so one head serves both only by splitting its weight between them and
receiving a blend of both values. Nothing in the loss says which head should
do what.

Trains the one-layer attention model with 1, 2 and 4 heads at equal d_model,
L=16 (seeds and steps: DEFAULTS below). Per head, on a probe
batch: the last query's weight on position 0 (mass_first) and on the second
symbol (mass_second), and the accuracy on each half of the answer with that
head's output zeroed. Expect: with two heads, the relations split onto
different heads, each head's ablation breaking its own half.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from src import evaluation
from src import record
from src import stats
from src import claims as claims_lib
from src import config as config_lib
from src import experiment
from src import tasks as tasks_lib
from src.claims import Claim
from src.config import Config

@dataclasses.dataclass(frozen=True)
class HeadsConfig(Config):
  heads: tuple[int, ...] = config_lib.head_counts(
      (1, 2, 4), 'head counts compared')
  # One layer of --heads heads on its two-symbol task.
  fixed = ('num_heads', 'num_layers', 'chrono_horizon', 'decoys')


DEFAULTS = HeadsConfig(
    exp='heads',
    models=('attention',),
    lengths=(16,),
    heads=(1, 2, 4),
    seeds=16,  # cheap: the share of seeds that specialise, well powered
    steps=800,
    batch_size=32,
    learning_rate=3e-3,
    num_filler=6,
    chunk_steps=40,
    checkpoint_every=400,
)
# --quick: a first look in a fraction of the time (same code, fewer steps).
QUICK = dataclasses.replace(DEFAULTS, heads=(1, 2), seeds=2, steps=400)
ONE_LENGTH = True  # its summary and claims are of one length
accepts = lambda spec: spec.has_attention  # heads are attention's
SECTION, FIGURE = '6. Heads', 'heads.png'  # in REPORT.md
COLUMNS = ['model', 'num_heads', 'length', 'seed', 'head', 'mass_first',
           'mass_second',
           'ablated_acc_first', 'ablated_acc_second', 'accuracy']
SPECIALISED = 0.5  # a head "holds" a relation with over half its weight on it
PROBE_EXAMPLES = 512


def head_roles(model, tokens_BxL, labels_B):
  """Per head: weight on each relation's target, and the halves' accuracy
  with that head ablated. Also the maps of 16 strings, for pictures."""
  logits, aux = model(tokens_BxL)
  att_BxHxL = aux['attention'][-1][:, :, -1, :]
  H = att_BxHxL.shape[1]
  second_B = tasks_lib.second_symbol_position(tokens_BxL)
  mass_second_BxH = jnp.take_along_axis(
      att_BxHxL, second_B[:, None, None], axis=2)[..., 0]

  def halves(logits):
    pred = jnp.argmax(logits, -1)
    return ((pred // 2 == labels_B // 2).mean(),
            (pred % 2 == labels_B % 2).mean())

  ablated = [halves(model(tokens_BxL, head_masks=[1.0 - jax.nn.one_hot(h, H)])[0])
             for h in range(H)]
  return {
      'mass_first': att_BxHxL[:, :, 0].mean(0),
      'mass_second': mass_second_BxH.mean(0),
      'ablated_first': jnp.stack([a[0] for a in ablated]),
      'ablated_second': jnp.stack([a[1] for a in ablated]),
      'accuracy': (jnp.argmax(logits, -1) == labels_B).mean(),
      'maps': att_BxHxL[:16],
      'second_position': second_B[:16],
  }


def groups(config: Config) -> list:
  return [experiment.group(m, L, name=f'{m}_heads{h}_L{L:03d}',
                           task='two_symbol',
                           task_params={'num_filler': config.num_filler},
                           probe=head_roles, probe_examples=PROBE_EXAMPLES,
                           num_heads=h)
          for m in config.models for h in config.heads
          for L in config.lengths]

# TensorBoard's descriptions of the tags on_chunk logs.
TAGS = {
    r'mass_first/head\d+': ('weight on the first symbol', "The head's "
                            "last-query attention weight on the first symbol, "
                            'mean over the probe strings; every chunk.'),
    r'mass_second/head\d+': ('weight on the second symbol', "The head's "
                             "last-query attention weight on the second "
                             'symbol, mean over the probe strings; every '
                             'chunk.'),
}


def _map_image(map_NxL, second_N):
  """Strings down, positions across; the second symbol's cell outlined."""
  from matplotlib import colormaps
  rgb = colormaps['magma'](np.asarray(map_NxL))[..., :3]
  rgb[np.arange(len(second_N)), second_N] = [0.2, 0.9, 0.2]
  s = max(1, 320 // map_NxL.shape[1])
  return (np.repeat(np.repeat(rgb, s, 0), s, 1) * 255).astype(np.uint8)


def summarize(config: Config, rows: list[dict]) -> dict:
  out = {'models': {}, 'claims': []}
  for model in config.models:
    by_heads = {}
    for length in config.lengths:
      for h_count in config.heads:
        sub = [r for r in rows if r['model'] == model
               and int(r['num_heads']) == h_count
               and int(r['length']) == length]
        by_heads[str(h_count)] = summarize_group(sub, length)
    out['models'][model] = {'num_heads': by_heads}
    if '2' in by_heads:
      out['claims'].append(claim(model, by_heads))
  return out


def summarize_group(rows, length) -> dict:
  """Per seed: which heads hold each relation (over SPECIALISED of their
  weight), and whether the two relations sit on different heads."""
  seeds = sorted({int(r['seed']) for r in rows})
  acc = [float(next(r['accuracy'] for r in rows if int(r['seed']) == s))
         for s in seeds]
  mean, lo, hi = stats.mean_ci95(acc)
  per_seed = []
  for s in seeds:
    heads = [r for r in rows if int(r['seed']) == s]
    first = [int(r['head']) for r in heads
             if float(r['mass_first']) > SPECIALISED]
    second = [int(r['head']) for r in heads
              if float(r['mass_second']) > SPECIALISED]
    separate = bool(first and second and set(first) != set(second))
    per_seed.append(dict(seed=s, first_heads=first, second_heads=second,
                         separate=separate, accuracy=acc[seeds.index(s)]))
  return dict(length=length, accuracy=mean, ci95=[lo, hi],
              per_seed=per_seed,
              seeds_specialised=sum(p['separate'] for p in per_seed))


FAMILY = 'several heads specialise on different relations without being told'


# Heads specialise "spontaneously": in most seeds, not in some (declared).
SPECIALISE_RATE = 0.5


def claim(model, by_heads) -> Claim:
  """Judged on the 2-head seeds that solved the task: how heads share a
  solution is a question only where there is one."""
  two = by_heads['2']
  solved, never = stats.solving(f'{model} with 2 heads', two['per_seed'])
  return Claim(
      f'Several heads ({model}) specialise on different relations without '
      'being told.',
      claims_lib.RELIABILITY, FAMILY,
      dict(successes=[p['separate'] for p in solved],
           rate=SPECIALISE_RATE,
           what=f'with 2 heads, the two relations ended on different heads '
                f'(each with over {SPECIALISED} of its weight; accuracy by '
                'head count: ' + ', '.join(
                    f'{h}: {v["accuracy"]:.3f}' for h, v in by_heads.items()
                    if 'accuracy' in v) + ')'),
      dict(model=model),
      note=f'a seed specialises when one head holds over {SPECIALISED} of '
           f'its weight on the first symbol, another over {SPECIALISED} on '
           f'the second; "spontaneously" is read as in most seeds (rate '
           f'{SPECIALISE_RATE}); judged on the {len(solved)} of '
           f'{len(two["per_seed"])} seeds that solved the task (test accuracy '
           f'>= {stats.SOLVED})', not_applicable=never)


def plot(config, rows, maps, path, writer=None):
  """Per-head maps of seed 0 (the largest head count), and the ablation
  table of every head count."""
  plt = record.pyplot()
  shown = max(maps) if maps else None
  n_maps = shown[0] if shown else 0
  fig, axes = plt.subplots(1, n_maps + 1, figsize=(3.4 * (n_maps + 1), 3.6),
                           squeeze=False, gridspec_kw={'wspace': 0.5})
  axes = axes[0]
  if shown:
    final = maps[shown]
    for h in range(n_maps):
      ax = axes[h]
      ax.imshow(np.asarray(final['maps'])[0, :, h], cmap='magma', vmin=0,
                vmax=1, aspect='auto')
      second = np.asarray(final['second_position'])[0]
      ax.scatter(second, np.arange(len(second)), marker='s', s=30,
                 facecolors='none', edgecolors='lime')
      ax.set_title(f'head {h}: first {final["mass_first"][0, h]:.2f}, '
                   f'second {final["mass_second"][0, h]:.2f}', fontsize=8)
      ax.set_xlabel('position (green: second symbol)')
      ax.set_ylabel('probe string' if h == 0 else '')
  table, labels = [], []
  for r in rows:
    if r['seed'] == '0':
      table.append([float(r['ablated_acc_first']),
                    float(r['ablated_acc_second'])])
      labels.append(f'{r["num_heads"]}h: head {r["head"]}')
  ax = axes[-1]
  if table:
    im = ax.imshow(np.asarray(table), cmap='viridis', vmin=0.4, vmax=1,
                   aspect='auto')
    for i, row in enumerate(table):
      for j, v in enumerate(row):
        ax.text(j, i, f'{v:.2f}', ha='center', va='center', fontsize=7,
                color='w' if v < 0.75 else 'k')
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set_xticks([0, 1], ['first half', 'second half'], fontsize=8)
    ax.set_title('seed 0: accuracy with one head zeroed', fontsize=8)
    fig.colorbar(im, ax=ax, fraction=0.05)
  fig.suptitle(f'Heads (L={config.lengths[0]}, d_model {config.d_model}): '
               'last query weights per head', fontsize=10)
  record.save_figure(fig, path, writer, 'figures/heads')


class Heads(experiment.Experiment):
  """Many looks: do heads specialise without being told?"""
  summary_keys = (
      '`models{model}{num_heads}{h: accuracy, ci95, per_seed, '
      'seeds_specialised}`, `claims`')
  name, section, figure_file = 'heads', SECTION, FIGURE
  defaults, quick, columns, tags = DEFAULTS, QUICK, COLUMNS, TAGS
  one_length, final_test, keeps = ONE_LENGTH, False, True
  accepts = staticmethod(accepts)
  groups = staticmethod(groups)

  def summarize(self, config, rows, data):
    return summarize(config, rows)

  def figure(self, config, summary, rows, data, folder, writer):
    maps = {(g.hparams['num_heads'], g.length): data.kept[g.name]
            for g in groups(config) if g.name in data.kept}
    plot(config, rows, maps, folder / FIGURE, writer)

  def measure(self, group, ensemble, params, config):
    return evaluation.measure(ensemble, params, head_roles,
                              num_examples=config.eval_examples)

  def line(self, group, final, config, timing) -> str:
    num_heads = group.hparams['num_heads']
    return (f'{group.model} {num_heads} head(s) L={group.length}: accuracy '
            f'{final["accuracy"].mean():.3f}  ' + '  '.join(
                f'h{h} first {final["mass_first"][:, h].mean():.2f} '
                f'second {final["mass_second"][:, h].mean():.2f}'
                for h in range(num_heads)))

  def print_table(self, config, summary) -> None:
    print('\nAccuracy by head count (4 classes, chance 0.25)')
    print(record.table(
        [[m, h, f'{v["accuracy"]:.3f}', ' '.join(
            f'{p["accuracy"]:.2f}' for p in v['per_seed']),
          f'{v["seeds_specialised"]}/{len(v["per_seed"])}']
         for m, e in summary['models'].items()
         for h, v in e['num_heads'].items()],
        ['model', 'heads', 'accuracy', 'seeds', 'seeds split']))

  def planned_claims(self, config) -> list:
    """The claim per model (with 2 heads), on placeholder seeds that all
    solve the task (it is judged on those that do)."""
    two = {'per_seed': [dict(separate=False, accuracy=1.0)] * config.seeds}
    return [claim(m, {'2': two}) for m in config.models if 2 in config.heads]

  keep = measure  # the maps and masses of seed 0's heads, for the figure

  def rows(self, group, final, config, timing) -> list[dict]:
    num_heads = group.hparams['num_heads']
    return [dict(model=group.model, num_heads=num_heads, length=group.length,
                 seed=s, head=h,
                 mass_first=final['mass_first'][s, h],
                 mass_second=final['mass_second'][s, h],
                 ablated_acc_first=final['ablated_first'][s, h],
                 ablated_acc_second=final['ablated_second'][s, h],
                 accuracy=final['accuracy'][s])
            for s in range(config.seeds) for h in range(num_heads)]

  def on_chunk(self, group, config, step, probe, writer):
    """Each head's weight on the two targets; seed 0's maps as images."""
    if writer is not None:
      for h in range(probe['mass_first'].shape[1]):
        writer.add_image(f'seed0_head{h}', _map_image(
            probe['maps'][0, :, h], probe['second_position'][0]), step,
                         dataformats='HWC')
    return {f'{key}/head{h}': probe[key][:, h]
            for h in range(probe['mass_first'].shape[1])
            for key in ('mass_first', 'mass_second')}


EXPERIMENT = Heads()
