"""The runner: an experiment registered inside a test (its groups, one
measurement, one claim) runs end to end through run.py, and resumes."""

import json
import sys
import textwrap

from src import claims
from src import power
from tests.helpers import ROOT, assert_figure, read_csv, scalars, run_script

# A throwaway experiment: attention at two lengths; it measures the weight
# the last query puts on position 0, and claims it exceeds a half in every
# seed. Everything else is the runner's.
TOY = '''
import numpy as np
from src import claims, evaluation, experiment, probes, record
from src.claims import Claim
from src.config import Config


class Toy(experiment.Experiment):
  name, section, figure_file = 'toy', '9. A toy', 'toy.png'
  defaults = quick = Config(exp='toy', models=('attention',), lengths=(3, 6),
                            seeds=2, steps=30, batch_size=16, chunk_steps=10,
                            checkpoint_every=10, eval_examples=64)
  columns = ['model', 'length', 'seed', 'pos0_mass', 'accuracy']
  probe, probe_examples, final_test = probes.searchlight, 32, False

  def accepts(self, spec):
    return spec.has_attention

  def on_chunk(self, group, config, step, probe, writer):
    return {'toy/pos0_mass': probe['pos0_mass'].mean(axis=1)}

  def measure(self, group, ensemble, params, config):
    return evaluation.measure(ensemble, params, probes.searchlight,
                              num_examples=64)

  def rows(self, group, final, config, timing):
    return [dict(model=group.model, length=group.length, seed=s,
                 pos0_mass=final['pos0_mass'][s].mean(),
                 accuracy=final['accuracy'][s].mean())
            for s in range(config.seeds)]

  def summarize(self, config, rows, data):
    return {'claims': [Claim(
        'The beam finds position 0.', claims.THRESHOLD, 'beam',
        dict(values=[float(r['pos0_mass']) for r in rows], threshold=0.5),
        note='each seed: over half its weight there')]}

  def figure(self, config, summary, rows, data, folder, writer):
    plt = record.pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([float(r['pos0_mass']) for r in rows], 'o')
    record.save_figure(fig, folder / self.figure_file, writer, 'figures/toy')


EXPERIMENT = Toy()
'''


def test_an_experiment_registered_in_a_test_runs_end_to_end(tmp_path):
  (tmp_path / 'toy_exp.py').write_text(TOY)
  script = tmp_path / 'with_toy.py'
  script.write_text(textwrap.dedent(f'''
      import sys
      sys.path.insert(0, {str(ROOT)!r})
      sys.path.insert(0, {str(tmp_path)!r})
      from absl import app
      import experiments, toy_exp
      experiments.register(toy_exp.EXPERIMENT)
      import run
      app.run(run.main, flags_parser=run.parse_flags)
  '''))

  def toy(*args):
    return run_script(
        script, '--exp=toy', f'--workdir={tmp_path}/run',
        f'--checkpoint_dir={tmp_path}/ckpt', *args)

  proc = toy()
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert '- HELD' in proc.stdout or '- DID NOT HOLD' in proc.stdout or \
      'INCONCLUSIVE' in proc.stdout or 'HELD IN' in proc.stdout, proc.stdout
  run = tmp_path / 'run'
  rows = read_csv(run / 'results.csv')
  assert [(r['length'], r['seed']) for r in rows] == [
      ('3', '0'), ('3', '1'), ('6', '0'), ('6', '1')]
  summary = json.loads((run / 'summary.json').read_text())
  assert summary['claims'][0]['claim'] == 'The beam finds position 0.'
  assert_figure(run / 'toy.png', min_size=(200, 300))
  # The runner logged the per-chunk measurement: seed means in the group's
  # run, each seed in its own, and the final test accuracy.
  _, mean = scalars(run / 'tb/attention_L006', 'toy/pos0_mass')
  _, seed1 = scalars(run / 'tb/attention_L006/seed_1', 'toy/pos0_mass')
  assert [s for s, _ in mean] == [10, 20, 30] == [s for s, _ in seed1]
  _, test = scalars(run / 'tb/attention_L006', 'test/accuracy')
  assert test[-1][0] == 30
  groups = json.loads((run / 'groups.json').read_text())
  assert groups['attention_L003']['task'] == {'name': 'memory', 'length': 3,
                                              'num_filler': 8}
  # A bad value is refused with the experiment's accepted values, and the
  # same command again finds every group done.
  bad = toy('--lengths=2')
  assert bad.returncode == 2 and bad.stderr.startswith('error: --lengths:')
  again = toy()
  assert again.returncode == 0, again.stderr[-3000:]
  assert read_csv(run / 'results.csv') == rows
  assert 'step' not in again.stderr.replace('steps', '')


# The README's "Add an experiment", whole: attention at two lengths, four
# seeds, and one claim on its probe, measured at step 0 and at the end.
ENTROPY = '''
from src import claims, experiment, probes
from src.claims import Claim
from src.config import Config


def last_query_entropy(model, tokens_BxL, labels_B):
  _, att_BxHxL = probes.last_query_attention(model, tokens_BxL)
  return {'entropy': probes.entropy(att_BxHxL.mean(1)).mean()}


class Entropy(experiment.Experiment):
  name = 'entropy'
  defaults = quick = Config(exp='entropy', models=('attention',),
                            lengths=(8, 16), seeds=6, steps=200)
  probe, probe_at_start = last_query_entropy, True

  def summarize(self, config, rows, data):
    at = lambda step, L: data.measurements.values('entropy', step=step,
                                                  length=L)
    return {'claims': [Claim(
        "The last query's attention entropy falls during training.",
        claims.COMPARISON, 'entropy falls',
        dict(x=at(0, L), y=at(config.steps, L), x_name='at step 0',
             y_name=f'after {config.steps} steps', what='entropy (nats)'),
        dict(length=L)) for L in config.lengths]}


EXPERIMENT = Entropy()
'''


def test_the_readmes_entropy_experiment_is_forty_lines_and_runs(tmp_path):
  """What a new experiment writes: its config, its probe and its claim; the
  runner gives the rest (groups, rows, the measurement table with step 0,
  TensorBoard, the summary, resume)."""
  lines = [l for l in ENTROPY.strip().splitlines() if l.strip()]
  assert len(lines) <= 40, len(lines)
  (tmp_path / 'entropy_exp.py').write_text(ENTROPY)
  script = tmp_path / 'with_entropy.py'
  script.write_text(textwrap.dedent(f'''
      import sys
      sys.path.insert(0, {str(ROOT)!r})
      sys.path.insert(0, {str(tmp_path)!r})
      from absl import app
      import experiments, entropy_exp
      experiments.register(entropy_exp.EXPERIMENT)
      import run
      app.run(run.main, flags_parser=run.parse_flags)
  '''))
  run = lambda *args: run_script(script, '--exp=entropy',
                                 f'--workdir={tmp_path}/run', '--steps=40',
                                 '--lengths=4,6', '--seeds=2', *args)
  proc = run()
  assert proc.returncode == 0, proc.stderr[-3000:]
  rows = read_csv(tmp_path / 'run/measurements.csv')
  steps = sorted({int(r['step']) for r in rows if r['key'] == 'entropy'})
  assert steps[0] == 0 and steps[-1] == 40
  summary = json.loads((tmp_path / 'run/summary.json').read_text())
  assert [c['length'] for c in summary['claims']] == [4, 6]
  assert all(c['kind'] == 'comparison' and len(c['evidence']['x']) == 2
             for c in summary['claims'])
  results = read_csv(tmp_path / 'run/results.csv')
  assert {r['length'] for r in results} == {'4', '6'} and len(results) == 4
  _, curve = scalars(tmp_path / 'run/tb/attention_L004', 'entropy')
  assert curve and curve[-1][0] == 40
  # Its own seeds can conclude: all agreeing, each claim's sign test
  # clears alpha after Holm over the two lengths.
  sys.path.insert(0, str(tmp_path))
  import entropy_exp  # pylint: disable=import-outside-toplevel
  config = entropy_exp.EXPERIMENT.defaults
  assert power.power(claims.COMPARISON, config.seeds,
                      len(config.lengths)) > 0
  before = (tmp_path / 'run/measurements.csv').read_text()
  proc = run()  # nothing left to do: nothing measured twice
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert (tmp_path / 'run/measurements.csv').read_text() == before



# A headline run's groups (python run.py --exp=distance, 24 seeds x 500
# steps) as they ran, each its wall time in seconds: the known truth the
# ETA is proven on.
HEADLINE_GROUPS = [
    ('attention', 10, 7.0), ('attention', 20, 4.5), ('attention', 50, 7.6),
    ('attention', 100, 14.3), ('lstm', 10, 7.1), ('lstm', 20, 11.8),
    ('lstm', 50, 25.5), ('lstm', 100, 48.6), ('lstm_chrono', 10, 6.6),
    ('lstm_chrono', 20, 11.7), ('lstm_chrono', 50, 27.7),
    ('lstm_chrono', 100, 51.7), ('gru', 10, 6.7), ('gru', 20, 9.4),
    ('gru', 50, 19.3), ('gru', 100, 37.5), ('rnn', 10, 3.7), ('rnn', 20, 4.1),
    ('rnn', 50, 8.0), ('rnn', 100, 12.9)]


def test_the_eta_is_within_a_quarter_from_a_tenth_of_the_run_on():
  """The progress line's ETA, fed the headline's groups as they ran, in the
  registry's units: '?' until a tenth of the work is done; from then on,
  elapsed + ETA within 25% of the run's real time at every group's end."""
  import io
  from src import models
  from src import record
  now = [0.0]
  work = [models.get(m).step_work(L) * 500 for m, L, _ in HEADLINE_GROUPS]
  progress = record.Progress(sum(work), stream=io.StringIO(),
                             clock=lambda: now[0])
  total = sum(t for *_, t in HEADLINE_GROUPS)
  shown = []
  for (model, length, seconds), w in zip(HEADLINE_GROUPS, work):
    now[0] += seconds
    progress.update(w, f'{model}_L{length}')
    eta = progress.eta(now[0])
    done = progress.done / progress.total
    if eta is None:
      assert done < record.ETA_AFTER + w / progress.total
      continue
    shown.append(done)
    assert abs(now[0] + eta - total) <= 0.25 * total, (model, length, eta)
  assert shown and shown[0] < 0.25  # shown early, not only near the end


# The recall part of docs/REPORT.md's full run (17 seeds, 1,000 steps), each
# group's wall time in seconds as it ran: the known truth the estimate that
# --only_check_args prints is proven on (Mamba's groups a third of the part).
RECALL_GROUPS = {
    'attention_d016_P04_L032': 20.2, 'attention_d032_P04_L032': 26.0,
    'attention_d016_P08_L032': 16.4, 'attention_d032_P08_L032': 30.1,
    'linear_attention_d016_P04_L032': 25.0,
    'linear_attention_d032_P04_L032': 42.3,
    'linear_attention_d016_P08_L032': 23.1,
    'linear_attention_d032_P08_L032': 47.0,
    'lru_d016_P04_L032': 27.1, 'lru_d032_P04_L032': 55.2,
    'lru_d016_P08_L032': 30.6, 'lru_d032_P08_L032': 62.8,
    'mamba_d016_P04_L032': 83.4, 'mamba_d032_P04_L032': 134.6,
    'mamba_d016_P08_L032': 79.8, 'mamba_d032_P08_L032': 121.6,
    'lstm_chrono_d016_P04_L032': 13.8, 'lstm_chrono_d032_P04_L032': 22.5,
    'lstm_chrono_d016_P08_L032': 14.0, 'lstm_chrono_d032_P08_L032': 18.9}


def test_the_estimate_is_within_a_quarter_of_a_part_as_it_ran():
  """`launch.estimate_seconds` over recall's groups at the full run's 17
  seeds: the part's total within 25% of its groups' wall times, and so is
  Mamba's share (its chunked scan costs more per value kept than its
  family's other scans: its registry entry says by how much)."""
  import experiments
  from src import experiment, launch
  module = experiments.load('recall')
  config = launch.parse_for(module, {'seeds': '17'}, False)
  groups = [experiment.with_settings(g, config) for g in module.groups(config)]
  assert {g.name for g in groups} == set(RECALL_GROUPS)
  for model in ('', 'mamba'):
    estimate = sum(launch.estimate_seconds(g, config) for g in groups
                   if g.model.startswith(model))
    ran = sum(t for name, t in RECALL_GROUPS.items()
              if name.startswith(model))
    assert abs(estimate - ran) <= 0.25 * ran, (model, estimate, ran)
