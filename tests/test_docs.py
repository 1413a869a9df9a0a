"""What a reader meets: code that says what it does, not when or where it
was measured; a README that points at what the runs write."""

import functools
import re

from tests.helpers import ROOT

# A date, a machine, a load or a timing as measured on one: history, which
# belongs in docs/ENGINEERING.md (and git), not in the code.
HISTORY = re.compile(
    r'20[0-9]{2}-[01][0-9]-[0-3][0-9]|\bVM\b|CPU-minutes|\b2-core\b|'
    r'\bat load [0-9]|\btook [0-9][0-9.]* ?(s|ms|minutes)\b|'
    r'[0-9][0-9.]* ?(ms|seconds|minutes|hours) (on|of) (a|the|this)\b')


def test_no_dates_machines_or_timings_in_the_code():
  offenders = []
  for path in [ROOT / 'run.py', *sorted((ROOT / 'src').rglob('*.py')),
               *sorted((ROOT / 'experiments').glob('*.py'))]:
    for number, line in enumerate(path.read_text().splitlines(), 1):
      if HISTORY.search(line):
        offenders.append(f'{path.relative_to(ROOT)}:{number}: {line.strip()}')
  assert not offenders, '\n'.join(offenders)


def test_the_history_check_catches_what_it_is_for():
  for line in ('# 83 minutes on a 2-core CPU', '(2026-12-02)', 'the VM',
               'took 1.4 s', '34 minutes on a shared CPU at load 7'):
    assert HISTORY.search(line), line
  for line in ('about 15 steps', 'L x L', 'every 100 training steps'):
    assert not HISTORY.search(line), line


# -- the README, a manual bound to the report ------------------------------------

README = ROOT / 'README.md'


@functools.cache
def _sync():  # once: the script defines its absl flag at import
  import importlib.util
  spec = importlib.util.spec_from_file_location(
      'sync_readme', ROOT / 'docs' / 'sync_readme.py')
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_readme_quotes_the_committed_report():
  """The scorecard and the distance table are the report's, as
  `docs/sync_readme.py` writes them: they cannot drift apart."""
  readme = README.read_text()
  report = (ROOT / 'docs' / 'REPORT.md').read_text()
  assert _sync().synced(readme, report) == readme
  blocks = _sync().blocks(report)
  assert blocks['scorecard'].count('\n| ') >= 9  # a row per lesson claim
  assert 'critical' in blocks['distance table']


def test_sync_rewrites_a_stale_readme():
  report = (ROOT / 'docs' / 'REPORT.md').read_text()
  stale = README.read_text().replace('| 2 |', '| 2 (stale) |', 1)
  assert stale != README.read_text()
  assert _sync().synced(stale, report) == README.read_text()


def test_readme_experiment_is_the_tested_one():
  """The README's example experiment is the one tests/test_experiment.py
  runs, character for character."""
  from tests.test_experiment import ENTROPY
  block = README.read_text().split('<!-- entropy: ', 1)[1]
  code = block.split('```python\n', 1)[1].split('```', 1)[0]
  assert code.strip() == ENTROPY.strip()


def test_readme_is_a_manual():
  """About 300 lines, the manual's sections in order, links that resolve,
  no history (dates, issue numbers, commit hashes)."""
  text = README.read_text()
  assert len(text.splitlines()) <= 300
  headings = re.findall(r'^## (.+)$', text, re.M)
  assert headings == [
      'Two commands', 'What you will see', "The lesson's scorecard",
      'TensorBoard', 'The experiments', 'Flags', 'Outputs', 'Nothing lost',
      'Accelerators', 'Extending it']
  assert not re.search(r'20[0-9]{2}-[01][0-9]-[0-3][0-9]|\bissue [0-9]|'
                       r'\b[0-9a-f]{7,40}\b', text)
  for target in re.findall(r'\]\(([^)#]+)[)#]', text):
    if not target.startswith('http'):
      assert (ROOT / target).exists(), target


def test_reference_documents_every_model_and_column():
  """docs/REFERENCE.md: the models' table is what docs/sync_readme.py
  writes from the registry (a row per model), and each experiment's
  results.csv columns are as the code writes them."""
  import experiments
  from src import models
  reference = (ROOT / 'docs' / 'REFERENCE.md').read_text()
  assert _sync().synced_reference(reference) == reference
  for name in models.names():
    assert f'| `{name}` | {models.get(name).family.name} |' in reference
  for name in experiments.EXPERIMENTS:
    columns = ','.join(experiments.load(name).columns)
    assert f'| {name} | `{columns}`' in reference, name


def test_reference_shows_the_calibration_of_every_scenario():
  """docs/REFERENCE.md's calibration table is `python -m src.calibration`'s:
  one row per simulated truth, in the order the simulator draws them."""
  from src import calibration
  reference = (ROOT / 'docs' / 'REFERENCE.md').read_text()
  block = re.search(r'<!-- calibration: python -m src.calibration -->\n'
                    r'(.*?)\n<!-- end -->', reference, re.S)
  assert block, 'REFERENCE.md has no calibration block'
  rows = [line.split(' | ')[:2] for line in block.group(1).splitlines()[2:]]
  assert rows == ([[f'| {s.kind}', s.name] for s in calibration.scenarios()]
                  + [['| a family', f.name] for f in calibration.families()])
  sizes = block.group(1).splitlines()[0]
  assert all(f'n={n}' in sizes for n in calibration.SIZES)
