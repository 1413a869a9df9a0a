"""`--exp=all --quick` end to end on tiny configs."""

import json
import os
import re
import shutil
import signal

import pytest

from src import report as report_lib
from src import scorecard
from tests.helpers import (ROOT, cached, read_csv, run_py, run_script,
                           sigterm_while_training)

NO_BACKEND = ROOT / 'tests/no_backend_run.py'  # a parent that cannot start one

VERDICT = re.compile(r'^(held|did not hold|inconclusive|not applicable|'
                     r'inconclusive \(underpowered: \d+ seeds\))$')


# Two parts run end to end (--parts; every part runs the same code path,
# one process each); the passthrough of every part is checked without
# running it (below).
PARTS = 'distance,attention'


def test_each_part_is_handed_only_the_flags_it_reads():
  from experiments import all as all_lib
  from src import launch
  given = {'models': 'attention', 'heads': '1,2', 'steps': '10',
           'budgets': '10,20', 'lengths': '5', 'quick': True}
  flags = launch.Flags(values=given, present=set(given), fields={},
                       sources={}, flagfiles={})
  command = {part: ' '.join(all_lib.passthrough(part, flags))
             for part in all_lib.PARTS}
  assert '--models=attention' in command['distance']
  assert '--heads=1,2' in command['heads']
  assert '--heads' not in command['attention'] + command['distance']
  assert '--steps' not in command['budget'] + command['gating']
  assert '--budgets' not in command['distance']
  assert all('--quick' in c for c in command.values())


# One run both tests below read: the two parts, started in another folder
# than the repository's with a relative --workdir (which must mean the same
# to every part), checkpointed every 10 steps.
COMMAND = ('--exp=all', '--quick', f'--parts={PARTS}', '--workdir=run',
           '--checkpoint_dir=ckpt', '--lengths=5',
           '--models=attention',  # the one model every part accepts
           '--seeds=2', '--steps=20', '--chunk_steps=10',
           '--checkpoint_every=10', '--budgets=10,20', '--heads=1,2',
           '--eval_examples=32', '--batch_size=8')


@pytest.fixture(scope='module')
def reference(tmp_path_factory):
  """The folder of an uninterrupted `--exp=all` on the two parts, run by a
  parent that cannot start a JAX backend."""
  root = tmp_path_factory.mktemp('reference')
  proc = run_script(NO_BACKEND, *COMMAND, timeout=900, cwd=root)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  return root


def test_all_quick_writes_a_report_from_the_summaries(reference, tmp_path):
  """The parent never starts a JAX backend (it could not: its JAX has no
  usable platform), so on an accelerator each part finds it free. Run
  again, it redoes no part and writes the report (and its results.csv)
  from the summaries as they are now."""
  shutil.copytree(reference, tmp_path, dirs_exist_ok=True)
  run = tmp_path / 'run'
  with open(run / 'results.csv', 'a') as f:  # as an older report's claim
    f.write('distance,An old claim.,held,stale\n')
  parts = {p: (run / p / 'results.csv').read_text() for p in PARTS.split(',')}
  proc = run_script(NO_BACKEND, *COMMAND, timeout=900, cwd=tmp_path)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  for part, text in parts.items():  # nothing trained or measured again
    assert (run / part / 'results.csv').read_text() == text
  report = (run / 'REPORT.md').read_text()
  assert 'Quick run' in report.split('## The scorecard')[0]  # said at the top
  links = re.findall(r'\]\(([^)#]+)\)', report)
  assert links and all(not l.startswith('/') for l in links)  # relative
  for link in links:
    assert (run / link).is_file(), link
  # The scorecard: a row per claim of the lesson, each linking its section.
  card = [l for l in report.splitlines() if re.match(r'^\| \d+ \| \*\*', l)]
  assert len(card) == len(scorecard.LESSON)
  for number in (2, 3):
    assert f'(#{scorecard.anchor(number)})' in card[number - 1]
    assert f'\n## {number}. ' in report
  # The claims, section by section: the verdicts the parts' summaries hold.
  table = [l for l in report.splitlines() if l.startswith('| ')
           and not re.match(r'^\| (\d+|#|Claim) \|', l)]
  expected = []
  from experiments import all as all_lib
  assert sorted(p.name for p in run.iterdir()
                if p.is_dir() and p.name != 'tb') == sorted(
                    PARTS.split(','))  # --parts: those and no other
  for part in all_lib.report_order(PARTS.split(',')):
    summary = json.loads((run / part / 'summary.json').read_text())
    expected += [c['verdict'] for c in summary['claims']]
  verdicts = [l.split('|')[4].strip().strip('*') for l in table]
  assert verdicts == expected and len(verdicts) >= 2
  reproduce = dict(re.findall(
      r'\(part `\w+`\): `python run.py --exp=(\w+) (.*)`', report))
  assert '--models=attention' in reproduce['distance']
  assert '--budgets' not in reproduce['distance']
  assert all(VERDICT.match(v) for v in verdicts)
  rows = read_csv(run / 'results.csv')
  assert [r['verdict'] for r in rows] == expected
  # The parts ran on the CPU, each recording its devices; the parent, none.
  parent = json.loads((run / 'config.json').read_text())['provenance']
  assert parent['devices'] is None
  for part in PARTS.split(','):
    devices = json.loads((run / part / 'config.json').read_text())[
        'provenance']['devices']
    assert devices and all('Cpu' in d or 'cpu' in d for d in devices)


def test_a_claim_two_parts_measure_appears_once():
  """The report's claims: a claim measured again by a later part (the same
  text at the same setting) keeps one row with both parts' evidence; a
  different setting is another claim."""
  claim = lambda text, verdict, measured, **kw: dict(
      claim=text, verdict=verdict, measured=measured, **kw)
  merged = report_lib.merge_claims([
      ('distance', [claim('X holds.', 'held', 'a'),
                    claim('Y holds.', 'held', 'b')]),
      ('linear', [claim('X holds.', 'held', 'c'),
                  claim('Y holds.', 'inconclusive', 'd'),
                  claim('X holds.', 'held', 'e', length=20)])])
  assert [m['claim'] for m in merged] == ['X holds.', 'Y holds.',
                                          'X holds. (L=20)']
  x, y, x20 = merged
  assert x['experiment'] == 'distance + linear' and x['verdict'] == 'held'
  assert x['measured'] == 'a; measured again by linear: c'
  assert y['verdict'] == 'held (distance); inconclusive (linear)'
  assert x20['experiment'] == 'linear'


def _all_run(root, env=None):
  """`COMMAND` in `root`, in a session of its own (so that a fault may
  SIGKILL its whole process group: parent and part)."""
  root.mkdir(exist_ok=True)
  return run_py(*COMMAND, env=env, cwd=root, timeout=900, session=True)


def _outputs(root):
  """What a finished --exp=all leaves: every results.csv (timing columns
  aside) and REPORT.md (its run's paths, date and time aside)."""
  run = root / 'run'
  out = {}
  for path in sorted(run.rglob('results.csv')):
    out[str(path.relative_to(run))] = [
        {k: v for k, v in r.items() if k not in ('wall_s', 'compile_s')}
        for r in read_csv(path)]
  report = (run / 'REPORT.md').read_text().replace(str(root), 'ROOT')
  out['REPORT.md'] = re.sub(r'\nMeasured by .*\n', '\nMeasured by ...\n',
                            report)
  return out


def test_all_killed_mid_part_and_between_parts_resumes_to_the_same_report(
    reference, tmp_path):
  """SIGKILL of the whole run (parent and part) in the middle of the first
  part's training, then of the parent between the two parts: the same
  command twice more finishes with the results.csv files and REPORT.md of
  an uninterrupted run (`reference`), value for value."""
  killed = tmp_path / 'killed'
  # After step 20's events, before its checkpoint: step 10's is the last.
  proc = _all_run(killed, {'SEARCHLIGHT_FAULT_KILL_TREE': 'attention_L005@20'})
  assert proc.returncode == -9, proc.stderr[-2000:]
  assert not (killed / 'run/distance/summary.json').exists()  # mid-part
  assert sorted(os.listdir(killed / 'ckpt/distance/attention_L005')) == [
      '10', 'recipe.json']
  proc = _all_run(killed, {'SEARCHLIGHT_FAULT_KILL_AT': 'before attention'})
  assert proc.returncode == -9, proc.stderr[-2000:]
  assert 'attention_L005: resuming from step 10' in proc.stdout
  assert (killed / 'run/distance/summary.json').exists()  # between parts
  assert not (killed / 'run/attention').exists()
  proc = _all_run(killed)
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
  assert _outputs(killed) == _outputs(reference)


def test_sigterm_reaches_the_part_which_saves_and_both_exit(tmp_path):
  """A scheduler's SIGTERM to the parent alone: handed on to the part that
  trains (a process of its own), which saves and exits; then the parent,
  with the part's exit status."""
  proc, out, err, _ = sigterm_while_training(cached([
      '--exp=all', '--parts=distance', f'--workdir={tmp_path}/run',
      f'--checkpoint_dir={tmp_path}/ckpt', '--models=rnn', '--lengths=6',
      '--seeds=2', '--steps=1000000', '--chunk_steps=50',
      '--checkpoint_every=1000000', '--batch_size=16']),
      tmp_path / 'run/distance/tb/rnn_L006', cwd=tmp_path)
  assert proc.returncode == 128 + signal.SIGTERM, err
  assert out.count('Run the same command again to resume') == 2, out
  assert 'at distance;' in out and 'Traceback' not in out + err
  saved = [p.name for p in (tmp_path / 'ckpt/distance/rnn_L006').iterdir()
           if p.name.isdigit()]
  assert len(saved) == 1 and int(saved[0]) % 50 == 0, saved


def test_a_part_trained_at_another_commit_is_named(tmp_path):
  for name, commit in (('distance', 'a' * 40), ('gating', 'a' * 40),
                       ('routing', 'b' * 40)):
    (tmp_path / name).mkdir()
    (tmp_path / name / 'config.json').write_text(json.dumps(
        {'provenance': {'git': {'commit': commit}, 'cpu': 'a CPU'}}))
  run_dir = type('RunDir', (), {'path': tmp_path})()
  line = report_lib.provenance_line(
      False, run_dir, ['distance', 'gating', 'routing'], {},
      {'distance': 60.0})
  assert 'at commit aaaaaaa (routing at bbbbbbb):' in line


def test_the_scorecard_counts_each_claim_once():
  assert scorecard.verdict_counts([
      'held', 'did not hold', 'held', 'inconclusive',
      'inconclusive (underpowered: 8 seeds)',
      'held (distance); inconclusive (linear)']) == (
          '2 held, 1 did not hold, 2 inconclusive (1 underpowered), '
          '1 split between parts')


def _row(family, verdicts, *, label='m', role='lesson', lesson=2,
         powered=None):
  """A merged report row: `verdicts` {part: verdict}, `powered` {part:
  bool} (default: every part powered)."""
  return dict(family=family, claim=family, verdicts=verdicts, label=label,
              verdict='; '.join(f'{v} ({p})' for p, v in verdicts.items())
              if len(set(verdicts.values())) > 1 else
              next(iter(verdicts.values())), role=role, lesson=lesson,
              experiment=next(iter(verdicts)), headline='',
              powered=powered or {p: True for p in verdicts})


def test_the_answer_names_the_settings_a_verdict_depends_on():
  f = 'x gives way'
  assert scorecard.family_answer([_row(f, {'a': 'held'}),
                                _row(f, {'a': 'held'}, label='n')]) == (
      'holds (2 of 2 rows)')
  assert scorecard.family_answer([
      _row(f, {'a': 'held'}, label='rnn'),
      _row(f, {'a': 'did not hold'}, label='rnn_uniform')]) == (
      'holds for rnn; not for rnn_uniform (1 of 2 rows held)')
  # An unpowered part's verdict is not an answer; two powered parts that
  # disagree are a split; one powered beside one unpowered is not.
  assert scorecard.family_answer([_row(
      f, {'a': 'held', 'b': 'inconclusive (underpowered: 8 seeds)'},
      powered={'a': True, 'b': False})]) == 'holds (1 of 1 rows)'
  assert scorecard.family_answer([_row(
      f, {'a': 'held', 'b': 'did not hold'})]).startswith(
      'split between powered parts for m')
  # Power bounds what a part can miss, not what it found: a held from an
  # unpowered part counts, its inconclusive does not.
  assert scorecard.family_answer([_row(f, {'a': 'held'}, powered={'a': False})
                                ]) == 'holds (1 of 1 rows)'
  assert scorecard.family_answer([_row(f, {'a': 'inconclusive'},
                                     powered={'a': False})
                                ]).startswith('not answered')
  # Not applicable is no answer; an underpowered inconclusive beside a
  # powered one is no split.
  assert scorecard.family_answer([_row(
      f, {'a': 'held', 'b': 'not applicable'})]) == 'holds (1 of 1 rows)'
  assert scorecard.family_answer([_row(
      f, {'a': 'inconclusive', 'b': 'inconclusive (underpowered: 8 seeds)'})
  ]).startswith('inconclusive for m')
  # What stopped it, where something did, even in an unpowered part.
  assert scorecard.family_answer([dict(
      _row(f, {'a': 'inconclusive'}, powered={'a': False}),
      measured='p = 0.01; not held: its best rate (0.003) is at an end of '
               'the grid (0.003, 0.01)')]).startswith(
      'inconclusive, its best rate at an end of the grid, for m')
  assert scorecard.family_answer([dict(
      _row(f, {'a': 'inconclusive'}, powered={'a': False}),
      measured='ahead in 4, tied in 4, 4 tied at the ceiling (100: ...)')
  ]).startswith('inconclusive, pairs tied at the longest length tested, for')


def test_a_rows_label_tells_its_settings_apart():
  row = lambda claim, **kw: dict(claim=claim, **kw)
  assert report_lib.row_label(row(
      'Without a dense block, attention (attention h2) cannot compute xor.',
      model='attention', task='xor_fixed')) == 'attention h2, xor_fixed'
  one, two = (report_lib.row_label(row(f'{n} attention layers (attention) ...',
                                    model='attention', num_layers=k))
              for n, k in (('One', 1), ('Two', 2)))
  assert one == 'attention, 1 layers' and two == 'attention, 2 layers'


def test_two_rows_of_a_family_alike_but_for_their_training_say_it():
  claim = lambda text, **kw: dict(claim=text, verdict='held', measured='',
                                  family='gating', model='lstm_chrono',
                                  versus='rnn', **kw)
  one, grid = report_lib.merge_claims([
      ('distance', [claim('G (lstm_chrono) beats R (rnn) at one rate '
                          '(0.003), after 500 steps.')]),
      ('gating', [claim('G (lstm_chrono) beats R (rnn) each at its best of '
                        'rates 0.001, 0.003, 0.01, after 1000 steps.')])])
  assert one['label'] == 'lstm_chrono, vs rnn, rate 0.003, 500 steps'
  assert grid['label'] == 'lstm_chrono, vs rnn, best of 3 rates, 1000 steps'
  alone, = report_lib.merge_claims([('gating', [claim(
      'G (lstm_chrono) beats R (rnn) at one rate (0.003), after 500 steps.')
  ])])
  assert alone['label'] == 'lstm_chrono, vs rnn'


def test_the_answer_quotes_the_headline_of_the_row_it_names_first():
  f = 'x beams'
  rows = [dict(_row(f, {'a': 'did not hold'}, label='m'), headline='low'),
          dict(_row(f, {'a': 'held'}, label='n'), headline='high')]
  answer, = scorecard.answers(rows)
  assert answer.startswith('X beams: **holds for n; not for m')
  assert answer.endswith('(high)')


def test_the_counts_say_what_the_answer_says():
  """An inconclusive counts as underpowered where its verdict says so (held
  out of reach at its seeds), not for a plan under 80% power alone; a
  family whose rows are all not applicable is not answered, and said so."""
  rows = [_row('attention recalls',
               {'recall': 'inconclusive (underpowered: 8 seeds)'},
               powered={'recall': False}, lesson=9),
          _row('attention recalls', {'recall': 'inconclusive'},
               powered={'recall': False}, lesson=9, label='n'),
          dict(_row('the summary fills up', {'recall': 'not applicable'},
                    lesson=9), verdict='not applicable')]
  card = scorecard.scorecard(rows).splitlines()[10]
  assert ('under 80% power (2 rows)**; The summary fills up: **not '
          'answered: not applicable in every row (1), each saying why** | 2 '
          'inconclusive (1 underpowered) |') in card


def test_the_scorecard_counts_neither_side_claims_nor_sanity_checks():
  rows = [_row('attention stays', {'distance': 'held'}),
          _row('gating carries', {'distance': 'did not hold'}, role='side'),
          _row('position 0 lost', {'attention': 'held'}, role='sanity',
               lesson=3),
          dict(_row('the A beam', {'attention': 'not applicable'}, lesson=3),
               verdict='not applicable')]
  card = scorecard.scorecard(rows).splitlines()
  assert '| Attention stays: **holds (1 of 1 rows)** | 1 held |' in card[3]
  assert 'gating' not in card[3].lower()
  assert '| 3 | ' in card[4] and 'no row to count' in card[4]
  assert 'not measured in this run' in card[5]
  side = scorecard.side_claims(rows)
  assert '| 2 | Gating carries | **does not hold (1 of 1 rows)** |' in side
  assert '1 sanity checks' in side and '1 rows not applicable' in side
  assert 'not held' not in side
  rows[2] = dict(rows[2], verdict='did not hold')
  assert 'Sanity checks not held**: position 0 lost' in scorecard.side_claims(
      rows)


def test_a_parts_stored_run_with_other_settings_is_refused_before_it_starts(
    tmp_path):
  """A part's own folder holds a run of other settings: --exp=all refuses it
  in one line before anything runs (the part's process would)."""
  import dataclasses
  import pytest
  import experiments
  from src import launch, rundir
  from src.config import ConfigError
  heads = experiments.load('heads')
  stored = dataclasses.replace(heads.quick, quick=True, heads=(1,))
  (tmp_path / 'run' / 'heads').mkdir(parents=True)
  (tmp_path / 'run' / 'heads' / rundir.CONFIG_FILE).write_text(json.dumps(
      {'schema': rundir.SCHEMA_VERSION, 'config': stored.to_json()}))
  given = {'exp': 'all', 'quick': True, 'overwrite': False,
           'workdir': str(tmp_path / 'run'), 'checkpoint_dir': None,
           'compilation_cache_dir': '', 'cpu_devices': None,
           'coordinator_address': None, 'num_processes': None,
           'process_id': None, 'distributed': False}
  resolve = lambda fields: launch.resolve(launch.Flags(
      values=given, present={'exp', 'quick'}, fields=fields, sources={},
      flagfiles={}), experiments, ['run.py'])
  resolve({'parts': 'heads', 'heads': '1'})  # the same settings: resumes
  with pytest.raises(ConfigError, match=r'heads: \[1\] there, \[1, 2\] now'):
    resolve({'parts': 'heads', 'heads': '1,2'})
