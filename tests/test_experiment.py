"""The runner: an experiment registered inside a test (its groups, one
measurement, one claim) runs end to end through run.py, and resumes."""

import json
import textwrap

from tests.helpers import ROOT, assert_figure, read_csv, scalars, run_script

# A throwaway experiment: attention at two lengths; it measures the weight
# the last query puts on position 0, and claims it exceeds a half in every
# seed. Everything else is the runner's.
TOY = '''
import dataclasses
import numpy as np
from src import claims, experiment, probes, record, stats
from src.claims import Claim
from src.config import Config

DEFAULTS = Config(exp='toy', models=('attention',), lengths=(3, 6), seeds=2,
                  steps=30, batch_size=16, chunk_steps=10,
                  checkpoint_every=10, eval_examples=64)
QUICK = DEFAULTS
FIELDS = ('lengths', 'seeds', 'steps')
accepts = lambda spec: spec.has_attention
SECTION, FIGURE = '9. A toy', 'toy.png'
COLUMNS = ['model', 'length', 'seed', 'pos0_mass', 'accuracy']


def groups(config):
  return [experiment.group('attention', L, probe=probes.searchlight,
                           probe_examples=32,
                           task_params={'num_filler': config.num_filler})
          for L in config.lengths]


def on_chunk(group, config, step, probe, writer):
  return {'toy/pos0_mass': probe['pos0_mass'].mean(axis=1)}


def measure(group, ensemble, params, config):
  return ensemble.measure(params, probes.searchlight, num_examples=64)


def rows(group, final, config, timing):
  return [dict(model=group.model, length=group.length, seed=s,
               pos0_mass=final['pos0_mass'][s].mean(),
               accuracy=final['accuracy'][s].mean())
          for s in range(config.seeds)]


def summarize(config, rows):
  return {'claims': [Claim(
      'The beam finds position 0.', claims.THRESHOLD, 'beam',
      dict(values=[float(r['pos0_mass']) for r in rows], threshold=0.5),
      note='each seed: over half its weight there')]}


def figure(config, summary, rows, kept, folder, writer=None):
  plt = record.pyplot()
  fig, ax = plt.subplots(figsize=(6, 4))
  ax.plot([float(r['pos0_mass']) for r in rows], 'o')
  record.save_figure(fig, folder / FIGURE, writer, 'figures/toy')
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
      experiments.register('toy', toy_exp)
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
