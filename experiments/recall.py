"""The summary that fills up: multi-query associative recall (MQAR).

Command: `python run.py --exp=recall` (Mamba's groups are most of its time
on a CPU), `--quick` for a first look; the Zoology-scale grid is
`--flagfile=configs/zoology_figure2_L064.flags` (and `_L128`, `_L256`, `_L512`: a cell each, for an accelerator).

Task (Arora et al. 2023, "Zoology", sec. 3): a string of L tokens opens
with P pairs `key value` (distinct keys, values drawn with replacement);
later, every key comes back once as a query, and the model must name its
value at the query's position (a loss and an accuracy at every query; chance
1/V). Attention can look every pair up in its KV cache, which grows with the
string. A recurrence must carry every pair in a state of fixed size: the
lesson's "intermediate summary that fills up quickly". So the claims: attention
recalls every pair at every width; a fixed-size state, at a fixed width, loses
pairs as P grows, and needs a width (a state) that grows with P.

Trains every model at every (P, width d_model) on one length, 2 layers where
the model stacks layers, several seeds each (seed i of every group draws the
same strings: the comparisons are paired by seed), and records each model's
state in floats (attention: its KV cache at L). What to expect: attention at
~100% everywhere; linear attention, the LRU, Mamba and the LSTM losing
accuracy as P grows at small widths, and the width they need rising with P.
"""

import dataclasses
import math

import numpy as np

from src import claims as claims_lib
from src import config as config_lib
from src import experiment
from src import gates as gates_lib
from src import models as models_lib
from src import record
from src import stats
from src import tasks as tasks_lib
from src.claims import Claim
from src.config import Config, ConfigError

@dataclasses.dataclass(frozen=True)
class RecallConfig(Config):
  pairs: tuple[int, ...] = config_lib.counts(
      (4, 8, 16), 'key-value pairs per string compared')
  widths: tuple[int, ...] = config_lib.counts(
      (16, 32, 64), 'model widths d_model compared')
  vocab: int = config_lib.integer(33, 'token vocabulary of the task', 3)
  recall_task: str = config_lib.choice(
      'recall', "the task: `recall` (Searchlight's variant: uniform query "
      'slots, the answer after each query, values with replacement, a '
      "read-out over the values) or `mqar` (Zoology's, as published: "
      'power-law query slots, the filler after each query, distinct values, '
      'a read-out tied to the embeddings over the vocabulary)',
      ('recall', 'mqar'))
  power_a: float = config_lib.unit(
      0.01, "the mqar task's query-slot power law a (p(slot i) ~ "
      '(i+1)^(a-1); 1 is uniform)')
  fixed = ('d_model', 'num_filler', 'decoys')  # --widths; its own task


DEFAULTS = RecallConfig(
    exp='recall',
    models=('attention', 'linear_attention', 'lru', 'mamba', 'lstm_chrono'),
    lengths=(32,),  # 4 x the most pairs: the pairs, then a query slot each
    pairs=(4, 8),  # see README section 10: 2 pairs learn too slowly here
    widths=(16, 32),
    vocab=33,  # 16 keys, 16 values (chance 1/16) and the filler
    num_layers=2,  # Zoology's 2-layer models
    num_heads=1,
    # The power plan the run prints says what 8 seeds give each claim.
    seeds=8,
    steps=1000,  # attention at d=32 reaches 99% by then (README section 10)
    batch_size=32,
    learning_rate=3e-3,
    eval_examples=512,  # x P queries each
    chunk_steps=100,
    checkpoint_every=500,
)
# --quick: a first look; Mamba left out (its groups are half a recall run's
# time on a CPU), one width, 2 seeds (every claim
# underpowered: inconclusive); one pair (single-query recall) at the easy
# end, which also fits the short strings of `--exp=all --quick`'s tests.
QUICK = dataclasses.replace(
    DEFAULTS, models=('attention', 'linear_attention', 'lru', 'lstm_chrono'),
    pairs=(1, 8), widths=(16,), seeds=2, steps=300, eval_examples=256)
accepts = lambda spec: spec.state_floats is not None and spec.sequence_outputs
SECTION, FIGURE = '9. The summary that fills up (recall)', 'recall.png'
COLUMNS = ['model', 'length', 'num_pairs', 'd_model', 'num_layers', 'seed',
           'accuracy', 'loss', 'state_floats', 'steps', 'wall_s',
           'compile_s', 'num_params', 'diverged']
RECALLS = 0.99  # a seed "recalls every pair" at this query accuracy or above
ATTENTION_FAMILY = 'recall: attention recalls every pair'
FILLS_FAMILY = 'recall: a fixed-size summary fills up'


def layers_of(model: str, config: Config) -> int:
  return config.num_layers if models_lib.get(model).layered else 1


def state_floats(model: str, length: int, d_model: int, config) -> int:
  return int(models_lib.get(model).state_floats(
      length, d_model, config.num_heads, layers_of(model, config)))


def grid(config: Config) -> list[tuple[int, int]]:
  """The (length, pairs) cells: every pair count a length has room for (the
  others are left out at that length)."""
  return [(L, P) for L in config.lengths for P in config.pairs
          if 4 * P <= L]


def num_values(config: Config) -> int:
  """The values a query's answer is drawn from (chance is one over it)."""
  if config.recall_task == 'mqar':
    return config.vocab - config.vocab // 2
  return tasks_lib.recall_vocab(config.vocab)[0]


def task_params(config: Config, pairs: int) -> dict:
  if config.recall_task == 'mqar':
    return {'num_pairs': pairs, 'vocab': config.vocab,
            'power_a': config.power_a}
  return {'num_pairs': pairs, 'vocab': config.vocab}


def check(config: Config) -> None:
  """One-line errors naming the flag, before anything runs."""
  if config.recall_task == 'mqar':
    for L, P in grid(config):
      try:
        tasks_lib.check_mqar(L, P, config.vocab)
      except ValueError as e:
        raise ConfigError(f'--recall_task=mqar: {e}') from None
  keys = (config.vocab // 2 - 1 if config.recall_task == 'mqar'
          else tasks_lib.recall_vocab(config.vocab)[0])
  if max(config.pairs) > keys:
    raise ConfigError(f'--vocab: {max(config.pairs)} pairs need distinct '
                      f'keys; --vocab={config.vocab} has {keys} (use >= '
                      f'{2 * max(config.pairs) + 1})')
  if not grid(config):
    raise ConfigError(f'--pairs: {min(config.pairs)} pairs need a length >= '
                      f'{4 * min(config.pairs)} (the pairs, then a key and '
                      'value per query); the longest in --lengths is '
                      f'{max(config.lengths)}')
  for w in config.widths:
    if w % config.num_heads:
      raise ConfigError(f'--widths: each must be divisible by --num_heads='
                        f'{config.num_heads}, got {w}')


def group_name(model, length, pairs, width) -> str:
  return f'{model}_d{width:03d}_P{pairs:02d}_L{length:03d}'


# -- summary and claims --------------------------------------------------------

def accuracy_table(rows) -> dict:
  """{(model, length, pairs, width): {seed: accuracy}}."""
  out = {}
  for r in rows:
    key = (r['model'], int(r['length']), int(r['num_pairs']),
           int(r['d_model']))
    out.setdefault(key, {})[int(r['seed'])] = float(r['accuracy'])
  return out


def width_needed(table, model, length, pairs, widths, seed):
  """The smallest width at which the seed recalls (>= RECALLS); inf if none."""
  for w in sorted(widths):
    if stats.reaches(table[model, length, pairs, w][seed], RECALLS):
      return w
  return math.inf


def trained_out(curves, runs, steps) -> dict:
  """The shared trained-out rule (`gates_lib.trained_out`) over `runs` [(group
  name, seed)], each run's fall measured in its own group (no runs: nothing
  failed, nothing to check)."""
  checks = [gates_lib.trained_out(curves, [seed], steps, group=name)
            for name, seed in runs]
  escaped = sum(gates_lib.escapes(curves, steps, group=name)
                for name in dict.fromkeys(name for name, _ in runs))
  return gates_lib.checked([f for c in checks for f in c['falls']],
                           len(runs), steps, escaped)


def failing_runs(table, model, length, pairs, widths, seeds) -> list:
  """(group name, seed) of every run below RECALLS among `pairs` x `widths`."""
  return [(group_name(model, length, P, w), s) for P in pairs for w in widths
          for s in seeds
          if not stats.reaches(table[model, length, P, w][s], RECALLS)]


def attention_recalls(table, model, length, pairs, widths, config,
                      curves) -> Claim:
  """Per seed: its lowest query accuracy over pairs and widths reaches
  RECALLS; the share of seeds against claims.RELIABLE_RATE (a failure
  trained out before did not hold)."""
  seeds = sorted(table[model, length, pairs[0], widths[0]])
  lowest = [min(table[model, length, P, w][s] for P in pairs for w in widths)
            for s in seeds]
  flat = trained_out(curves, failing_runs(table, model, length, pairs,
                                          widths, seeds), config.steps)
  return Claim(
      f'Attention ({model}) recalls every pair at every width tested.',
      claims_lib.RELIABILITY, ATTENTION_FAMILY,
      dict(successes=[stats.reaches(x, RECALLS) for x in lowest],
           values=lowest,
           what=f'at >= {RECALLS:.0%} of the queries at every P in '
                f'{min(pairs)}..{max(pairs)} and d_model {min(widths)}..'
                f'{max(widths)} (its lowest per seed below)'),
      dict(model=model, length=length),
      gates=gates_lib.learning_gate(stats.NOT_HELD, flat),
      note=f'a seed recalls every pair when its lowest accuracy over pairs '
           f'and widths reaches {RECALLS:.0%}')


def _mean_over_widths(table, model, length, P, widths, s) -> float:
  return float(np.mean([table[model, length, P, w][s] for w in widths]))


def fills_up(table, model, attention, length, pairs, widths, config,
             curves) -> list[Claim]:
  """A fixed-size summary fills up, against attention (whose cache grows
  with the string), paired by seed, at a fixed width (the mean over the
  widths tested), from the fewest pairs lo to the most hi: in the fraction
  of queries recalled, the recurrence loses more than attention; in pairs
  recalled (fraction x P), it gains fewer than attention. Held needs the
  recurrence's runs below RECALLS at hi trained out."""
  lo, hi = min(pairs), max(pairs)
  seeds = sorted(table[model, length, lo, widths[0]])
  acc = lambda m, P: [_mean_over_widths(table, m, length, P, widths, s)
                      for s in seeds]
  fall = lambda m: [a - b for a, b in zip(acc(m, lo), acc(m, hi))]
  gain = lambda m: [b * hi - a * lo for a, b in zip(acc(m, lo), acc(m, hi))]
  flat = trained_out(curves, failing_runs(table, model, length, [hi],
                                          widths, seeds), config.steps)
  gates = gates_lib.learning_gate(stats.HELD, flat)
  setting = dict(model=model, length=length, versus=attention)
  # In pairs, a recurrence that never learned gains fewer than attention by
  # default: that comparison is judged on the seeds that learned the
  # fewest pairs (`not applicable` where none did).
  learned = [i for i, a in enumerate(acc(model, lo)) if stats.solved(a)]
  pick = lambda v: [v[i] for i in learned]
  by_width = '; '.join(
      f'd={w}: ' + ' -> '.join(
          f'{np.mean(list(table[model, length, P, w].values())):.3f}'
          for P in pairs) for w in widths)
  alone = {w: [s for s in seeds if stats.solved(table[model, length, lo, w][s])]
           for w in widths}
  at_lo = trained_out(curves, failing_runs(table, model, length, [lo], widths,
                                           seeds), config.steps)
  never = (f'not applicable: {model} learned the task at P={lo} in no seed, '
           f'on the mean over d_model {", ".join(map(str, widths))} '
           '(accuracy per seed ' + ' '.join(
               f'{a:.3f}' for a in acc(model, lo)) + ')' + ''.join(
               f'; at d_model {w} alone, seeds {", ".join(map(str, v))}'
               for w, v in alone.items() if v) + '; '
           + ('its failing runs trained out' if at_lo['flat'] else
              gates_lib.still_learning(at_lo) + ': it may yet learn it'))
  return [
      Claim(f'At a fixed width, {model} recalls a smaller share of the pairs '
            f'as they grow, more so than attention ({attention}): its '
            'summary fills up.', claims_lib.COMPARISON, FILLS_FAMILY,
            dict(x=pick(fall(model)), y=pick(fall(attention)), x_name=model,
                 y_name=attention,
                 what=f'fall in the fraction recalled from P={lo} to P={hi} '
                      f'(mean over d_model {", ".join(map(str, widths))}; '
                      f'{model} by width, P {"->".join(map(str, pairs))}: '
                      f'{by_width})'),
            setting, gates=gates,
            note='per seed, the accuracy at the fewest pairs minus at the '
                 'most, mean over the widths; an interaction: the '
                 'recurrence\'s fall against attention\'s, seed by seed; '
                 f'judged on the {len(learned)} of {len(seeds)} seeds in '
                 f'which {model} learned the task at P={lo}: a summary that '
                 'never held the fewest pairs cannot be said to fill up',
            not_applicable='' if learned else never),
      Claim(f'At a fixed width, {model} recalls fewer additional pairs than '
            f'attention ({attention}) as the pairs grow: its summary fills '
            'up.', claims_lib.COMPARISON, FILLS_FAMILY,
            dict(x=pick(gain(attention)), y=pick(gain(model)),
                 x_name=attention, y_name=model,
                 what=f'pairs recalled at P={hi} minus at P={lo} (fraction x '
                      'P, mean over the widths)'),
            setting, gates=gates,
            note='counted in pairs recalled, not in the fraction: a summary '
                 'that fills up gains fewer pairs when more are asked; '
                 f'judged on the {len(learned)} of {len(seeds)} seeds in '
                 f'which {model} learned the task at P={lo} (accuracy >= '
                 f'{stats.SOLVED}): one that never learned it gains fewer '
                 'pairs whatever its summary',
            not_applicable='' if learned else never)]


def width_grows(table, model, length, pairs, widths, config,
                curves) -> Claim | None:
  """Per seed, the smallest width reaching RECALLS at the most pairs
  against at the fewest (none: past the grid, censored), claims.COMPARISON;
  made only where the grid lets the recurrence reach the bar at the fewest
  pairs in some seed (else the widths cannot say how much it needs: None)."""
  lo, hi = min(pairs), max(pairs)
  seeds = sorted(table[model, length, lo, widths[0]])
  need = {P: [width_needed(table, model, length, P, widths, s)
              for s in seeds] for P in pairs}
  if not any(np.isfinite(w) for w in need[lo]):
    return None
  past = 2 * max(widths)  # "none of the grid" stands past its widest
  clip = lambda v: [w if np.isfinite(w) else past for w in v]
  flat = trained_out(curves, failing_runs(table, model, length, [hi],
                                          widths, seeds), config.steps)
  return Claim(
      f'The width {model} needs to recall every pair grows with the pairs.',
      claims_lib.COMPARISON, FILLS_FAMILY,
      dict(x=clip(need[hi]), y=clip(need[lo]), x_name=f'P={hi}',
           y_name=f'P={lo}', ceiling=past, digits=0,
           what=f'width needed ({past}: none of {min(widths)}..'
                f'{max(widths)})'),
      dict(model=model, length=length),
      gates=gates_lib.learning_gate(stats.HELD, flat),
      note=f'width needed: the smallest tested d_model at >= {RECALLS:.0%}; '
           'a seed that needs none of them at either count is censored')


def summarize(config: Config, rows, curves=()) -> dict:
  table = accuracy_table(rows)
  out = {'accuracy': [], 'width_needed': [], 'chance':
         1 / num_values(config), 'claims': []}
  widths = sorted(config.widths)
  for (m, L, P, w), by_seed in sorted(table.items()):
    v = [by_seed[s] for s in sorted(by_seed)]
    out['accuracy'].append(dict(
        model=m, length=L, num_pairs=P, d_model=w,
        state_floats=state_floats(m, L, w, config),
        **dict(zip(('mean', 'ci95_low', 'ci95_high'), stats.mean_ci95(v))),
        seeds=v))
  for m in config.models:
    for L in config.lengths:
      pairs = sorted(P for L2, P in grid(config) if L2 == L
                     and all((m, L, P, w) in table for w in widths))
      if not pairs:
        continue
      seeds = sorted(table[m, L, pairs[0], widths[0]])
      for P in pairs:
        need = [width_needed(table, m, L, P, widths, s) for s in seeds]
        med = float(np.median(need))
        out['width_needed'].append(dict(
            model=m, length=L, num_pairs=P,
            per_seed=[None if not np.isfinite(w) else int(w) for w in need],
            median=None if not np.isfinite(med) else med,
            state_floats=(None if not np.isfinite(med) else state_floats(
                m, L, int(min(w for w in widths if w >= med)), config))))
      spec = models_lib.get(m)
      attention = [a for a in config.models
                   if models_lib.get(a).family == models_lib.ATTENTION
                   and all((a, L, P, w) in table for P in pairs
                           for w in widths)]
      if spec.family == models_lib.ATTENTION:
        out['claims'].append(attention_recalls(table, m, L, pairs, widths,
                                               config, curves))
      elif spec.family.recurrent and len(pairs) > 1:
        if attention:
          out['claims'] += fills_up(table, m, attention[0], L, pairs, widths,
                                    config, curves)
        grows = width_grows(table, m, L, pairs, widths, config, curves)
        if grows is not None:
          out['claims'].append(grows)
        else:
          out.setdefault('not_judged', []).append(
              f'the width {m} needs (L={L}): it reaches {RECALLS:.0%} at no '
              f'width of {widths} even at P={min(pairs)}')
  return out


def plot(config, summary, path, writer=None):
  """Zoology's Figure 2 (Arora et al. 2023): query accuracy against the
  width d_model, one panel per (length, pairs) cell, a line per model (its
  seed mean) and a mark per seed; then the state (floats) each model needs
  to recall 99% against the pairs, at the longest length."""
  plt = record.pyplot()
  cells = grid(config)
  models = [m for m in config.models
            if any(r['model'] == m for r in summary['accuracy'])]
  widths = sorted(config.widths)
  fig, axes = plt.subplots(1, len(cells) + 1,
                           figsize=(2.8 * (len(cells) + 1) + 0.6, 3.3))
  axes = np.atleast_1d(axes)
  found = {(r['model'], r['length'], r['num_pairs'], r['d_model']): r
           for r in summary['accuracy']}
  for ax, (L, P) in zip(axes, cells):
    for i, m in enumerate(models):
      color = models_lib.get(m).color
      here = [(w, found[m, L, P, w]) for w in widths if (m, L, P, w) in found]
      if not here:
        continue
      ax.plot([w for w, _ in here], [r['mean'] for _, r in here], color=color,
              lw=1.2, ls=record.LINE_STYLES[i % len(record.LINE_STYLES)],
              zorder=2, label=m)
      record.seed_dots(ax, [w for w, _ in here], [r['seeds'] for _, r in here],
                       color, offset=0.015 * (i - (len(models) - 1) / 2),
                       marker=record.MARKERS[i % len(record.MARKERS)])
    ax.axhline(summary['chance'], color='k', ls=':', lw=1)
    ax.set_xscale('log', base=2)
    ax.set_xticks(widths, widths)
    ax.minorticks_off()
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel('d_model')
    ax.set_title(f'L={L}, {P} pairs', fontsize=9)
    ax.grid(alpha=0.3)
  axes[0].set_ylabel('query accuracy')
  axes[0].legend(fontsize=6, loc='lower right')
  ax, L = axes[-1], max(config.lengths)
  for m in models:
    points = [(r['num_pairs'], r['state_floats'])
              for r in summary['width_needed']
              if r['model'] == m and r['length'] == L
              and r['state_floats'] is not None]
    if points:
      ax.plot(*zip(*points), marker='o', color=models_lib.get(m).color,
              label=m)
  pairs = sorted(P for L2, P in cells if L2 == L)
  ax.set_xscale('log', base=2)
  ax.set_xticks(pairs, pairs)
  ax.set_yscale('log')
  ax.set_xlabel('key-value pairs')
  ax.set_ylabel(f'state floats to recall {RECALLS:.0%}')
  ax.set_title(f'state needed (median seed), L={L}', fontsize=9)
  task = ("Zoology's MQAR" if config.recall_task == 'mqar'
          else 'associative recall (Searchlight\'s variant)')
  fig.suptitle(f'{task}: query accuracy against width (line: seed mean; '
               f'marks: each of {config.seeds} seeds; dotted: chance '
               f'{summary["chance"]:.3f}), {config.steps} steps; cf. Arora '
               'et al. 2023, Figure 2', fontsize=9)
  fig.subplots_adjust(wspace=0.45, top=0.82, bottom=0.17)
  record.save_figure(fig, path, writer, 'figures/recall')


class Recall(experiment.Experiment):
  """The summary that fills up: multi-query associative recall."""
  summary_keys = (
      '`accuracy[{model,length,num_pairs,d_model,state_floats,mean,'
      'ci95_low,ci95_high,seeds}]`, '
      '`width_needed[{model,length,num_pairs,per_seed,median,state_floats}]`, '
      '`chance`, `claims` (with `p_min`, `if_significant`, `family`), '
      '`wall_s`, `compile_s`, `compile_share`')
  name, section, figure_file = 'recall', SECTION, FIGURE
  defaults, quick, columns = DEFAULTS, QUICK, COLUMNS
  accepts = staticmethod(accepts)

  def summarize(self, config, rows, data):
    return summarize(config, rows, data.curves)

  def figure(self, config, summary, rows, data, folder, writer):
    plot(config, summary, folder / FIGURE, writer)

  def print_table(self, config, summary) -> None:
    print(f'\nRecall: query accuracy (chance {summary["chance"]:.3f}), '
          f'{config.seeds} seeds, {config.steps} steps')
    print(record.table(
        [[r['model'], r['length'], r['num_pairs'], r['d_model'],
          r['state_floats'], f'{r["mean"]:.3f}',
          ' '.join(f'{a:.3f}' for a in r['seeds'])]
         for r in summary['accuracy']],
        ['model', 'L', 'pairs', 'd_model', 'state floats', 'accuracy',
         'seeds']))
    print(f'\nWidth needed to recall >= {RECALLS:.0%} (per seed; -: none '
          'tested)')
    print(record.table(
        [[r['model'], r['length'], r['num_pairs'],
          ' '.join('-' if w is None else str(w) for w in r['per_seed']),
          '-' if r['state_floats'] is None else r['state_floats']]
         for r in summary['width_needed']],
        ['model', 'L', 'pairs', 'width per seed', 'state floats (median)']))

  def planned_claims(self, config) -> list:
    """The claims `summarize` makes, on placeholder rows of the run's shape
    (every run at the bar, so that `width_grows` is planned too)."""
    rows = [dict(model=m, length=L, num_pairs=P, d_model=w, seed=s,
                 accuracy=1.0)
            for m in config.models for L, P in grid(config)
            for w in config.widths for s in range(config.seeds)]
    return summarize(config, rows)['claims']

  def estimate_bytes(self, config: Config) -> int:
    """The runner's memory check at the widest width, plus the logits at every
    position and their gradient (and the flag checks, which must come before
    anything is written)."""
    check(config)
    values = (config.vocab if config.recall_task == 'mqar'
              else tasks_lib.recall_vocab(config.vocab)[0])
    logits = 2 * 4 * config.members * max(2 * config.batch_size, 256) * max(
        config.lengths) * values
    return logits + config_lib.estimate_bytes(
        dataclasses.replace(config, d_model=max(config.widths)))

  def groups(self, config: Config) -> list:
    check(config)
    # Zoology's models read the whole vocabulary through a head tied to the
    # embeddings (zoology/model.py's lm_head): with its task, so do these.
    tied = {'tied_head': True} if config.recall_task == 'mqar' else {}
    return [experiment.group(
        m, L, name=group_name(m, L, P, w), task=config.recall_task,
        task_params=task_params(config, P),
        key=dict(model=m, length=L, num_pairs=P, d_model=w),
        work_scale=w / 32 * layers_of(m, config), d_model=w, num_pairs=P,
        **tied)
            for m in config.models for L, P in grid(config)
            for w in config.widths]

  def rows(self, group, final, config, timing) -> list[dict]:
    d, P = group.hparams['d_model'], group.hparams['num_pairs']
    return [dict(model=group.model, length=group.length, num_pairs=P,
                 d_model=d, num_layers=layers_of(group.model, config), seed=s,
                 accuracy=final['accuracy'][s], loss=final['loss'][s],
                 state_floats=state_floats(group.model, group.length, d,
                                           config),
                 steps=timing.steps, wall_s=timing.wall_s,
                 compile_s=timing.compile_s, num_params=timing.num_params,
                 diverged=bool(timing.diverged[s]))
            for s in range(config.seeds)]

  def line(self, group, final, config, timing) -> str:
    return (f'{group.name}: query accuracy {final["accuracy"].mean():.3f} '
            '(seeds ' + ' '.join(f'{a:.3f}' for a in final['accuracy']) + ')')


EXPERIMENT = Recall()
