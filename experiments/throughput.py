"""Speed, measured: how fast does the ensemble trainer run on this machine?

Command: `python run.py --exp=throughput` (minutes on a laptop CPU).
For each model (the lesson's four and the linear recurrences) at lengths 10,
50 and 200, four seeds, batch 32: training
sequences per second over all seeds (after compiling and one warm-up chunk),
achieved FLOP/s (XLA's count of one training step, scans counted at their
trip count, times the steps run), that rate as a fraction of this machine's
float32 matrix-multiply rate measured in the same run, compile seconds, and
for the models that loop over positions the time per scan iteration. Then,
for each model, the ensemble of 8 seeds in one program against the same 8
seeds trained one after another, each alone, at L=20.

Expect, on a CPU: the recurrent nets far from the matmul rate (each scan
iteration multiplies a 32-wide state, and the gate nonlinearities on slices
of it cost more than the product), attention closer; the ensemble faster
than the same seeds trained one after another (each alone as a plain
one-device program), by the cores it keeps busy (a CPU device loops over its
seeds: `Members.on_cpu`) and the per-step overhead it shares.
"""

import dataclasses
import time

import jax

from src import costs
from src import models as models_lib
from src import record
from src import config as config_lib
from src import experiment
from src import members as members_lib
from src.config import Config

@dataclasses.dataclass(frozen=True)
class ThroughputConfig(Config):
  fixed = config_lib.TRAINING_ONLY  # it times steps; it tests nothing


DEFAULTS = ThroughputConfig(
    exp='throughput',
    models=('attention', 'lstm', 'gru', 'rnn', 'linear_attention', 'lru',
            'mamba'),
    lengths=(10, 50, 200),
    seeds=4,
    steps=40,  # timed steps per group, after a warm-up chunk
    batch_size=32,
    learning_rate=3e-3,
    chunk_steps=20,
)
# --quick: a first look in a fraction of the time (same code, fewer steps).
QUICK = dataclasses.replace(DEFAULTS, lengths=(10, 50), steps=20)
SECTION, FIGURE = 'Speed', 'throughput.png'  # not a part of --exp=all
COLUMNS = ['model', 'length', 'seeds', 'batch_size', 'steps_per_s',
           'seqs_per_s', 'flops_per_step', 'flops_per_s', 'peak_fraction',
           'scan_iter_us', 'compile_s', 'wall_s']
ENSEMBLE_SEEDS, ENSEMBLE_LENGTH = 8, 20


def ensemble(model, config, length, num_seeds, **kwargs):
  group = experiment.group(model, length,
                           task_params={'num_filler': config.num_filler})
  # No test curve: only training is timed.
  return experiment.build(group, dataclasses.replace(config, seeds=num_seeds),
                          curve_examples=0, **kwargs)


def time_training(ens, config):
  """Seconds per step after compiling and a warm-up chunk."""
  state = ens.init()
  chunk = config.chunk_steps
  state, m = ens.train_chunk(state, 0, chunk)
  jax.block_until_ready(m)
  start, step = time.perf_counter(), chunk
  while step < chunk + config.steps:
    state, m = ens.train_chunk(state, step, chunk)
    step += chunk
  jax.block_until_ready(m)
  return (time.perf_counter() - start) / (step - chunk)


def plot(config, rows, matmul, path, writer=None):
  plt = record.pyplot()
  fig, axes = plt.subplots(1, 2, figsize=(11, 4))
  for model in config.models:
    sub = sorted((r for r in rows if r['model'] == model),
                 key=lambda r: int(r['length']))
    L = [int(r['length']) for r in sub]
    axes[0].plot(L, [float(r['seqs_per_s']) for r in sub], 'o-',
                 color=models_lib.get(model).color, label=model)
    axes[1].plot(L, [100 * float(r['peak_fraction']) for r in sub], 'o-',
                 color=models_lib.get(model).color, label=model)
  axes[0].set_ylabel('training sequences per second (all seeds)')
  axes[1].set_ylabel(f'% of measured matmul rate ({matmul:.2e} FLOP/s)')
  for ax in axes:
    ax.set_xscale('log')
    ax.set_yscale('log')
    ax.set_xlabel('sequence length L')
    ax.grid(alpha=0.3, which='both')
    ax.legend(fontsize=8)
  fig.suptitle(f'Throughput on {jax.devices()[0].platform}: {config.seeds} '
               f'seeds x batch {config.batch_size}, d_model {config.d_model}',
               fontsize=10)
  record.save_figure(fig, path, writer, 'figures/throughput')


class Throughput(experiment.Cells):
  """Training throughput: sequences per second, per model and length."""
  summary_keys = (
      '`matmul_flops_per_s`, `ensemble_speedup`, '
      '`ensemble_speedup_by_model`, `compile_share`, `groups`')
  name, section, figure_file = 'throughput', SECTION, FIGURE
  defaults, quick, columns = DEFAULTS, QUICK, COLUMNS

  def cell_line(self, cell, rows):
    row = rows[0]
    return (f'{row["model"]:>9s} L={row["length"]:<4d} '
            f'{row["seqs_per_s"]:9.0f} seq/s {row["flops_per_s"]:.2e} FLOP/s '
            f'({100 * row["peak_fraction"]:.1f}% of matmul)  compile '
            f'{row["compile_s"]:.1f}s')

  def figure(self, config, summary, rows, data, folder, writer):
    if writer is not None:
      for r in rows:
        writer.add_scalar(f'seqs_per_s/{r["model"]}', float(r['seqs_per_s']),
                          int(r['length']))
        writer.add_scalar(f'peak_fraction/{r["model"]}',
                          float(r['peak_fraction']), int(r['length']))
    plot(config, rows, data.context['matmul'], folder / FIGURE, writer)

  def summarize(self, config, rows, data):
    matmul = data.context['matmul']
    speedups = data.context.get('speedups', {})
    wall = sum(float(r['wall_s']) for r in rows)
    compile_s = sum(float(r['compile_s']) for r in rows)
    return {
        'matmul_flops_per_s': matmul,
        'ensemble_speedup': min(speedups.values()) if speedups else None,
        'ensemble_speedup_by_model': speedups,
        'ensemble': {'seeds': ENSEMBLE_SEEDS, 'length': ENSEMBLE_LENGTH},
        'compile_share': compile_s / wall if wall else None,
        'devices': [str(d) for d in jax.devices()],
        'groups': [{k: r[k] for k in ('model', 'length', 'seqs_per_s',
                                      'flops_per_s', 'peak_fraction',
                                      'scan_iter_us', 'compile_s')}
                   for r in rows],
    }

  def cells(self, config: Config) -> list:
    return [experiment.Cell(f'{m} L={L}', dict(model=m, length=L))
            for m in config.models for L in config.lengths]

  def measure_cell(self, cell, config, context) -> list[dict]:
    model, length = cell.key['model'], cell.key['length']
    start = time.perf_counter()
    ens = ensemble(model, config, length, config.seeds)
    per_step = time_training(ens, config)
    flops = costs.counted(model, 'train', length=length,
                          batch_size=config.batch_size,
                          d_model=config.d_model, num_filler=config.num_filler,
                          per_position=False)['flops']
    seeds = ens.members.padded  # the work the machine does, padding included
    return [dict(
        model=model, length=length, seeds=seeds,
        batch_size=config.batch_size, steps_per_s=1 / per_step,
        seqs_per_s=seeds * config.batch_size / per_step,
        flops_per_step=flops * seeds, flops_per_s=flops * seeds / per_step,
        peak_fraction=flops * seeds / per_step / context['matmul'],
        scan_iter_us=1e6 * per_step / (2 * length)  # forward and backward
        if models_lib.get(model).loops_over_positions else '',
        compile_s=ens.programs.compile_s,
        wall_s=time.perf_counter() - start)]

  def after_work(self, config: Config) -> int:
    return len(config.models)

  def print_table(self, config, summary) -> None:
    rows = summary['groups']
    print('\n' + record.table(
        [[r['model'], r['length'], f'{float(r["seqs_per_s"]):.0f}',
          f'{float(r["flops_per_s"]):.2e}',
          f'{100 * float(r["peak_fraction"]):.2f}%',
          f'{float(r["scan_iter_us"]):.0f}' if r['scan_iter_us'] else '-',
          f'{float(r["compile_s"]):.1f}'] for r in rows],
        ['model', 'L', 'seq/s', 'FLOP/s', 'of matmul', 'us/iter',
         'compile s']))
    print(f'matmul {summary["matmul_flops_per_s"]:.3e} FLOP/s; ensemble '
          f'speed-up {summary["ensemble_speedup_by_model"]}; compile share '
          f'{summary["compile_share"]:.0%}')

  def after(self, config, rows, context, progress) -> dict:
    """Each model's ensemble against its seeds one after another."""
    speedups = {}
    for model in config.models:
      together = time_training(
          ensemble(model, config, ENSEMBLE_LENGTH, ENSEMBLE_SEEDS), config)
      # One seed as a user would train it alone: a plain one-device program
      # (no padding seeds), with the whole machine's intra-op threads.
      alone = time_training(
          ensemble(model, config, ENSEMBLE_LENGTH, 1, min_local_seeds=1,
                   mesh=members_lib.seed_mesh(jax.local_devices()[:1])),
          config)
      speedups[model] = ENSEMBLE_SEEDS * alone / together
      progress.say(f'{model}: {ENSEMBLE_SEEDS} seeds in one program '
                   f'{speedups[model]:.1f}x faster than one after another')
      progress.update(1, f'ensemble {model}')
    return {'speedups': speedups}

  def context(self, config: Config) -> dict:
    matmul = costs.matmul_flops_per_s()
    print(f'float32 matmul rate on this machine: {matmul:.3e} FLOP/s',
          flush=True)
    return {'matmul': matmul}


EXPERIMENT = Throughput()
