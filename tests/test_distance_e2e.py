"""`python run.py --exp=distance` end to end on a tiny sweep."""

import json

import numpy as np
import pytest

from experiments import distance
from tests.helpers import TINY, read_csv, run_py, scalars


@pytest.fixture(scope='module')
def tiny_run(tmp_path_factory):
  root = tmp_path_factory.mktemp('distance')
  proc = run_py('--exp=distance', f'--workdir={root}/run',
                f'--checkpoint_dir={root}/ckpt', *TINY)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return root, proc


def test_results_csv(tiny_run):
  root, _ = tiny_run
  rows = read_csv(root / 'run' / 'results.csv')
  assert list(rows[0]) == distance.COLUMNS
  assert [(r['model'], int(r['length']), int(r['seed'])) for r in rows] == [
      (m, L, s) for m in ('attention', 'rnn') for L in (3, 6) for s in (0, 1)]
  for r in rows:
    assert 0.0 <= float(r['accuracy']) <= 1.0
    assert int(r['steps']) == 40 and r['diverged'] == '0'
    assert float(r['wall_s']) > float(r['compile_s']) > 0


def test_summary_recomputed_from_csv(tiny_run):
  root, _ = tiny_run
  rows = read_csv(root / 'run' / 'results.csv')
  summary = json.loads((root / 'run' / 'summary.json').read_text())
  for model in ('attention', 'rnn'):
    mean = {L: np.mean([float(r['accuracy']) for r in rows
                        if r['model'] == model and int(r['length']) == L])
            for L in (3, 6)}
    expected = None
    for L in (3, 6):
      if mean[L] < 0.95:
        break
      expected = L
    assert summary['critical_distance'][model] == expected
    for g in summary['groups']:
      if g['model'] == model:
        assert g['mean_accuracy'] == pytest.approx(mean[g['length']])
        assert g['ci95'][0] <= g['mean_accuracy'] <= g['ci95'][1]
  assert {c['verdict'] for c in summary['claims']} <= {
      'held', 'did not hold', 'partly', 'untested'}
  config = json.loads((root / 'run' / 'config.json').read_text())
  assert config['config']['lengths'] == [3, 6]
  assert 'jax' in config['versions'] and config['devices']


def test_tensorboard_reads_back(tiny_run):
  root, _ = tiny_run
  acc, loss = scalars(root / 'run' / 'tb' / 'attention_L003', 'train/loss')
  assert [s for s, _ in loss] == list(range(1, 41))  # every step, once
  assert all(np.isfinite(v) for _, v in loss)
  assert loss[-1][1] < loss[0][1]  # it learned
  _, test_acc = scalars(root / 'run' / 'tb' / 'attention_L003',
                        'test/accuracy')
  assert len(test_acc) == 1
  assert '_hparams_/session_start_info' in acc.PluginTagToContent('hparams')
  summary_acc, _ = scalars(root / 'run' / 'tb' / 'summary', None)
  assert 'figures/distance' in summary_acc.Tags()['images']
  assert summary_acc.Tags()['tensors'] or summary_acc.Tags().get('text')


def test_figure_and_table(tiny_run):
  root, proc = tiny_run
  png = (root / 'run' / 'distance.png').read_bytes()
  assert png[:8] == b'\x89PNG\r\n\x1a\n' and len(png) > 10_000
  assert 'Mean test accuracy by length' in proc.stdout
  assert 'critical' in proc.stdout
