"""What a reader meets: code that says what it does, not when or where it
was measured; a README that points at what the runs write."""

import dataclasses
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


# -- every code block of the README and REFERENCE, run or checked -------------

REFERENCE = ROOT / 'docs' / 'REFERENCE.md'


def code_blocks(path) -> list[tuple[int, str]]:
  """(line number, text) of every fenced code block of `path`, indented
  ones (a numbered step's) included, dedented."""
  lines, out, start, indent = path.read_text().splitlines(), [], None, 0
  for number, line in enumerate(lines, 1):
    if line.lstrip().startswith('```'):
      if start is None:
        start, indent = number, len(line) - len(line.lstrip())
      else:
        out.append((start, '\n'.join(l[indent:] for l in lines[start:
                                                                number - 1])))
        start = None
  return out


# Each block, by its first line, and the tests that run it (`file::test`);
# a block that needs what no test machine has (a Cloud TPU, gcloud, a
# bucket) names what checks it instead, after 'not run:'.
RUN_BY = {
    ('README.md', 'pip install -r requirements.lock && python run.py '
                  '--exp=distance'): (
        'tests/test_first_run.py::test_every_output_the_readme_promises',
        'tests/test_docs.py::test_the_test_command_is_what_ci_runs'),
    ('README.md', 'Mean test accuracy and seeds solved (>= 0.95) by length '
                  '(24 seeds):'): (
        'tests/test_docs.py::test_readme_quotes_the_committed_report',),
    ('README.md', 'tensorboard --logdir runs/distance/tb/overview'): (
        'tests/test_first_run.py::test_the_run_says_what_to_open',
        'tests/test_first_run.py::test_browser_opens_on_the_finding'),
    ('README.md', 'python run.py --distributed '
                  '--flagfile=configs/tpu_distance.flags \\'): (
        'not run: a Cloud TPU and a bucket; its flagfile by '
        'tests/test_flags.py::test_every_flagfile_in_configs_is_valid',),
    ('README.md', 'from src import claims, experiment, probes'): (
        'tests/test_docs.py::test_readme_experiment_is_the_tested_one',
        'tests/test_experiment.py::'
        'test_the_readmes_entropy_experiment_is_forty_lines_and_runs'),
    ('REFERENCE.md', 'register(ModelSpec('): (
        'tests/test_docs.py::test_reference_registry_snippet_is_the_registry',),
    ('REFERENCE.md', 'from src import analysis'): (
        'tests/test_analysis.py::test_reference_snippet_runs_as_written',),
    ('REFERENCE.md', 'python notebooks/explore.py                          '
                     '# SEARCHLIGHT_RUN=runs/distance'): (
        'tests/test_analysis.py::test_notebook_runs_as_a_script',
        'not run: its jupytext line (jupytext is not in the requirements)'),
    ('REFERENCE.md', 'PROJECT=my-project ZONE=us-central1-a TPU=searchlight '
                     'BUCKET=my-bucket'): ('not run: gcloud and a TPU',),
    ('REFERENCE.md', 'gcloud compute tpus queued-resources create $TPU-qr '
                     '--node-id=$TPU \\'): ('not run: gcloud and a TPU',),
    ('REFERENCE.md', "gcloud compute tpus tpu-vm ssh $TPU --zone=$ZONE "
                     "--worker=all --command='"): (
        'not run: gcloud and a TPU; the lock it installs by .ci/run',),
    ('REFERENCE.md', 'RUN="~/venv/bin/python run.py --distributed \\'): (
        'not run: a Cloud TPU; its flagfile by '
        'tests/test_flags.py::test_every_flagfile_in_configs_is_valid, '
        '--print_config on it by '
        'tests/test_flags.py::test_print_config_says_where_each_value_came_from',),
    ('REFERENCE.md', 'pip install -r requirements-gcs.txt '
                     'tensorboard==2.21.0'): (
        'not run: a bucket; TensorBoard on a logdir by '
        'tests/test_first_run.py::test_overview_is_a_run_per_model',),
    ('REFERENCE.md', 'gcloud storage cp -r '
                     'gs://$BUCKET/searchlight/runs/distance .'): (
        'not run: gcloud and a bucket',),
    ('REFERENCE.md', 'run.py                   the flags (each experiment\'s '
                     'config fields), then the run started and its training '
                     'loop'): (
        'tests/test_docs.py::test_reference_layout_names_real_paths',),
    ('REFERENCE.md', '@dataclasses.dataclass(frozen=True)'): (
        'tests/test_docs.py::test_reference_config_snippet_is_the_code',),
}


def _test_exists(node: str) -> bool:
  path, _, name = node.partition('::')
  return (ROOT / path).is_file() and (
      not name or f'def {name}(' in (ROOT / path).read_text())


def test_every_code_block_is_run_by_a_test():
  """A block added to the README or REFERENCE with no test behind it fails
  here; each test named exists, and a block no machine here can run says
  what checks it instead."""
  seen = set()
  for path in (README, REFERENCE):
    for number, text in code_blocks(path):
      key = (path.name, text.strip().splitlines()[0].rstrip())
      assert key in RUN_BY, f'{path.name}:{number}: no test runs {key[1]!r}'
      seen.add(key)
      for entry in RUN_BY[key]:
        for node in re.findall(r'tests/[\w/]+\.py(?:::\w+)?', entry):
          assert _test_exists(node), (key, node)
        assert entry.startswith(('tests/', 'not run: ')), entry
  assert seen == set(RUN_BY), set(RUN_BY) - seen  # no check of a lost block


def test_the_test_command_is_what_ci_runs():
  """The README's second command is the last line of .ci/run."""
  block = README.read_text().split('## Two commands', 1)[1].split('```', 2)[1]
  second = block.strip().splitlines()[1]
  ci = (ROOT / '.ci' / 'run').read_text().strip().splitlines()
  assert ci[-1] == second


def _block(path, first: str) -> str:
  (text,) = [t for _, t in code_blocks(path) if t.startswith(first)]
  return text


def test_reference_registry_snippet_is_the_registry():
  """REFERENCE's `register(ModelSpec('lru', ...))`, run with a `register`
  that compares: every field it names is the registry's lru (its '...'
  strings as prefixes)."""
  from src import models
  from src.models import footprint, lru as lru_lib
  registered = []
  namespace = dict(register=registered.append, ModelSpec=models.ModelSpec,
                   LINEAR=models.LINEAR, lru_lib=lru_lib,
                   footprint=footprint)
  exec(_block(REFERENCE, 'register(ModelSpec('), namespace)
  (spec,) = registered
  lru = models.get('lru')
  for field in dataclasses.fields(spec):
    mine, real = getattr(spec, field.name), getattr(lru, field.name)
    if field.default is not dataclasses.MISSING and mine == field.default:
      continue  # not named in the snippet
    if isinstance(mine, str) and mine.endswith('...'):
      assert real.startswith(mine[:-3].rstrip()), field.name
    else:
      assert mine == real, field.name


def test_reference_layout_names_real_paths():
  """Every path the layout names exists."""
  for line in _block(REFERENCE, 'run.py ').splitlines():
    name = line.split()[0]
    if '<' in name:  # experiments/<exp>.py
      assert list(ROOT.glob(name.replace('<exp>', '*'))), name
    else:
      assert (ROOT / name.rstrip('/')).exists(), name


def test_reference_config_snippet_is_the_code():
  """REFERENCE's config example is experiments/gradient.py's, its '...'
  standing for the rest of a string."""
  snippet = _block(REFERENCE, '@dataclasses.dataclass(frozen=True)')
  source = (ROOT / 'experiments' / 'gradient.py').read_text()
  pattern = r'\s+'.join(re.escape(part) for part in snippet.replace(
      ' ...', ' \x00').split())
  pattern = pattern.replace('\x00', r'[\s\S]*?')
  assert re.search(pattern, source), snippet


def test_sizes_come_from_the_tool():
  """No memory size typed by hand where a user reads how to run something:
  `--only_check_args` prints the largest group's need."""
  for path in (README, REFERENCE, *sorted((ROOT / 'configs').glob('*'))):
    assert not re.search(r'\b[0-9][0-9.]* ?GiB\b', path.read_text()), path
