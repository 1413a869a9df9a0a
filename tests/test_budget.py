"""`--exp=budget` end to end on a tiny config (its own file, so that the
test workers can run it beside --exp=all's test)."""

import json

from tests.helpers import assert_figure, read_csv, run_py


def test_budget_one_run_serves_every_budget(tmp_path):
  """The model after 10 (or 30) steps of one run with budgets 10 and 30 is
  the 10-step (30-step) run's model, at every budget."""
  common = ['--exp=budget', '--models=rnn', '--lengths=5', '--seeds=2',
            '--batch_size=16', '--eval_examples=64', '--chunk_steps=10']
  both = run_py(*common, '--budgets=10,30', f'--workdir={tmp_path}/a',
                f'--checkpoint_dir={tmp_path}/ac')
  assert both.returncode == 0, both.stderr[-2000:]
  assert 'rnn_L005: resuming from step 10 (training to step 30)' in both.stdout
  rows = read_csv(tmp_path / 'a/results.csv')
  assert sorted({int(r['steps']) for r in rows}) == [10, 30]
  pick = lambda rs, steps: [(r['seed'], r['accuracy'], r['loss'])
                            for r in rs if r['steps'] == str(steps)]
  for budget in (10, 30):
    alone = run_py(*common, f'--budgets={budget}',
                   f'--workdir={tmp_path}/{budget}',
                   f'--checkpoint_dir={tmp_path}/{budget}c')
    assert alone.returncode == 0, alone.stderr[-2000:]
    assert pick(rows, budget) == pick(
        read_csv(tmp_path / f'{budget}/results.csv'), budget)
  summary = json.loads((tmp_path / 'a/summary.json').read_text())
  assert set(summary['critical_distance']['rnn']) == {'10', '30'}
  assert_figure(tmp_path / 'a/budget.png')
