"""The README's first command, at --quick scale narrowed (SMALL), as a
newcomer runs it (in an empty folder): every output the README promises
where it says; then what TensorBoard itself serves of it (the overview
logdir: a run per model, the finding against L, the training curves, the
verdicts and config as text, a figure at the card's width; the full logdir:
groups, seeds, HParams showing model and length; every tag described) and
what a headless browser shows on first open."""

import json
import pathlib
import re
import struct

import pytest

from experiments import distance
from src import claim_text, record, stats, tblog
from tests import tensorboard_server as tb
from tests.helpers import ROOT, read_csv, run_py


def readme_first_command() -> list[str]:
  """The arguments of `python run.py ...` in the README's two commands."""
  readme = (ROOT / 'README.md').read_text()
  block = readme.split('## Two commands', 1)[1].split('```', 2)[1]
  first = block.strip().splitlines()[0].split('&&')[-1].split()
  assert first[:2] == ['python', 'run.py'], first
  return first[2:]


# --quick, narrowed to the fewest groups that still show every output: two
# models (the headline's attention, and rnn, which the tag descriptions
# name), two lengths (a finding against L), two chunks (a curve).
SMALL = ('--quick', '--models=attention,rnn', '--lengths=5,20', '--steps=100')


@pytest.fixture(scope='module')
def run(tmp_path_factory):
  """(workdir, stdout, config) of the README's command, SMALL."""
  root = tmp_path_factory.mktemp('newcomer')
  proc = run_py(*readme_first_command(), *SMALL, cwd=root, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  folder = root / 'runs' / 'distance'
  return folder, proc.stdout, json.loads(
      (folder / 'config.json').read_text())['config']


@pytest.fixture(scope='module')
def models(run):
  return tuple(run[2]['models'])


@pytest.fixture(scope='module')
def groups(run, models):
  return tuple(f'{m}_L{L:03d}' for m in models for L in run[2]['lengths'])


@pytest.fixture(scope='module')
def overview(run, models):
  with tb.serve(run[0] / 'tb' / 'overview', runs=models) as server:
    yield server


@pytest.fixture(scope='module')
def everything(run, groups):
  with tb.serve(run[0] / 'tb', runs=groups) as server:
    yield server


def test_every_output_the_readme_promises(run, groups):
  """What "What you will see" and "Outputs" name, where they say."""
  folder, stdout, config = run
  for name in ('results.csv', 'summary.json', 'config.json', 'curves.csv',
               'groups.json', 'table.txt', 'distance.png'):
    assert (folder / name).is_file(), name
  assert (folder / 'tb' / 'overview').is_dir()
  assert not (folder / '.lock').exists()  # released and removed at the end
  checkpoints = folder.parent.parent / 'checkpoints' / 'distance'
  assert (checkpoints / 'owner.json').is_file()
  for g in groups:
    assert (checkpoints / g / 'recipe.json').is_file(), g
    assert (folder / 'tb' / g).is_dir(), g
  rows = read_csv(folder / 'results.csv')
  assert len(rows) == len(groups) * config['seeds']  # a row per seed
  summary = json.loads((folder / 'summary.json').read_text())
  assert all({'claim', 'kind', 'measured', 'verdict', 'test', 'p',
              'p_adjusted', 'family'} <= set(c) for c in summary['claims'])
  table = (folder / 'table.txt').read_text()
  assert table in stdout and 'critical' in table
  # A line per claim, at a glance: its verdict, sentence, count and p.
  verdicts = [l for l in stdout.splitlines() if re.match(
      r'- (HELD|DID NOT HOLD|INCONCLUSIVE)', l)]
  assert len(verdicts) == len(summary['claims'])
  assert all(len(l) <= 200 and re.search(r'\bp [0-9.e-]+\)$', l)
             for l in verdicts), verdicts
  again = run_py(*readme_first_command(), *SMALL, cwd=folder.parent.parent)
  assert again.returncode == 0, again.stderr[-3000:]
  assert 'nothing to do: ' in again.stdout + again.stderr
  assert '%  ' not in again.stderr  # no progress bar over work found done


def test_the_run_says_what_to_open(run):
  """The last lines: the command and the URL, the overview first (the
  workdir as given: relative)."""
  folder = pathlib.Path('runs/distance')
  stdout = run[1]
  assert (f'tensorboard --logdir {folder / "tb" / "overview"}\n'
          f'  then open http://localhost:6006/?smoothing=0#timeseries'
          in stdout)
  assert stdout.rstrip().endswith(f'tensorboard --logdir {folder / "tb"}')


def test_overview_is_a_run_per_model(overview, models, run):
  """Few runs (TensorBoard's legacy tabs tick them all up to 40), one per
  model, the root with the text and figures, and the two axis guides, flat
  at 0 and 1 at every length of every finding chart."""
  assert set(overview.get('/data/runs')) == {'.', *models,
                                             *tblog.AXIS_GUIDES}
  tags = overview.get('/data/plugin/scalars/tags')
  lengths = [f'L{L:03d}' for L in run[2]['lengths']]
  for m in models:
    assert set(tags[m]) == {
        'finding/accuracy', 'finding/solved', f'finding/solved_by_model/{m}',
        *(f'training/{what}_{L}' for what in ('accuracy', 'solved')
          for L in lengths)}
  findings = {'finding/accuracy', 'finding/solved',
              *(f'finding/solved_by_model/{m}' for m in models)}
  for guide, value in tblog.AXIS_GUIDES.items():
    assert set(tags[guide]) == findings
    for tag in findings:
      points = overview.get('/data/plugin/scalars/scalars', run=guide, tag=tag)
      assert [(p[1], p[2]) for p in points] == [
          (L, value) for L in run[2]['lengths']]


def test_finding_against_length(run, overview, models):
  """x is the length; each model's values are its seeds' results.csv."""
  rows = read_csv(run[0] / 'results.csv')
  lengths = run[2]['lengths']
  for m in models:
    mine = {L: [r for r in rows if r['model'] == m and r['length'] == str(L)]
            for L in lengths}
    solved = [sum(int(r['solved']) for r in mine[L]) / len(mine[L])
              for L in lengths]
    accuracy = [sum(float(r['accuracy']) for r in mine[L]) / len(mine[L])
                for L in lengths]
    for tag, want in (('finding/solved', solved),
                      (f'finding/solved_by_model/{m}', solved),
                      ('finding/accuracy', accuracy)):
      points = overview.get('/data/plugin/scalars/scalars', run=m, tag=tag)
      assert [p[1] for p in points] == lengths
      assert [p[2] for p in points] == pytest.approx(want, abs=1e-6)


def test_training_curves_are_the_groups(run, overview, everything, models):
  """The overview's curve of a length is its group's, chunk by chunk."""
  config = run[2]
  chunks = list(range(config['chunk_steps'], config['steps'] + 1,
                      config['chunk_steps']))
  for m in models:
    for L in config['lengths']:
      group = everything.get('/data/plugin/scalars/scalars',
                             run=f'{m}_L{L:03d}', tag='test/solved_fraction')
      assert [p[1] for p in group] == chunks
      mine = overview.get('/data/plugin/scalars/scalars', run=m,
                          tag=f'training/solved_L{L:03d}')
      assert [p[1:] for p in mine] == [p[1:] for p in group]


def test_every_tag_described(run, overview, everything, groups):
  """Display names and descriptions, as the dashboards get them: how many
  strings, what solved is, what a step is."""
  for server in (overview, everything):
    for name, tags in server.get('/data/plugin/scalars/tags').items():
      for tag, info in tags.items():
        assert info['displayName'] and info['displayName'] != tag, (name, tag)
        assert len(info['description']) > 60, (name, tag)
  config = run[2]
  group = everything.get('/data/plugin/scalars/tags')[groups[0]]
  assert group['test/accuracy']['displayName'] == 'test accuracy'
  test = group['test/accuracy']['description']
  assert '256 new strings at the end of every chunk' in test
  assert f'final test on {config["eval_examples"]:,} fresh strings' in test
  assert (f'one Adam update on {config["batch_size"]} fresh training '
          'strings') in test
  assert '&gt;= 0.95' in group['test/solved_fraction']['description']
  by_model = overview.get('/data/plugin/scalars/tags')['rnn']
  assert 'x axis is the length L' in (
      by_model['finding/solved_by_model/rnn']['description'])


def _cells(html: str) -> list[list[str]]:
  """The rows of the innermost table of TensorBoard's rendered markdown."""
  inner = html[html.rindex('<thead>'):]
  return [[re.sub(r'<[^>]+>', '', c).strip()
           for c in re.findall(r'<t[dh]>(.*?)</t[dh]>', row, re.S)]
          for row in re.findall(r'<tr>(.*?)</tr>', inner, re.S)]


def test_verdicts_are_a_text_table(run, overview):
  """Verdict and p first (held and did not hold told apart at a glance),
  then the claim, in one wide cell; its count and test beside it: one row
  per claim of summary.json."""
  claims = json.loads((run[0] / 'summary.json').read_text())['claims']
  text, = overview.get('/data/plugin/text/text', run='.',
                       tag='claims/text_summary')
  header, *rows = _cells(text['text'])
  assert header == ['verdict, p (Holm): claim', 'count', 'test']
  shown = {'held': 'HELD', 'did not hold': 'did not hold'}
  said = lambda c: shown.get(c['verdict'], c['verdict']) + (
      '' if c['p_adjusted'] is None
      else f', p {stats.fmt_p(c["p_adjusted"])}') + f': {c["claim"]}'
  assert len(rows) == len(claims)
  assert all(r[0].startswith(said(c)) and r[2] == claim_text.test_name(c)
             for r, c in zip(rows, claims)), rows
  assert '<strong>HELD</strong>' in text['text'] or not any(
      c['verdict'] == 'held' for c in claims)


def test_config_text_has_the_fields_read(overview):
  """The config text lists the fields the experiment reads, no others."""
  text, = overview.get('/data/plugin/text/text', run='.',
                       tag='config/text_summary')
  fields = re.findall(r'<tr>\n<td>(\w+)</td>\n<td><code>', text['text'])
  assert set(fields) == {'exp', 'quick', *distance.EXPERIMENT.fields}


def test_figure_fits_the_card(overview):
  """The figure is drawn at the card's width, not scaled down into it."""
  image, = overview.get('/data/plugin/images/images', run='.',
                        tag='figures/distance')
  png = overview.raw('/data/plugin/images/individualImage',
                     blob_key=image['query'].split('=', 1)[1])
  width, height = struct.unpack('>II', png[16:24])
  assert record.CARD_PX - 10 <= width <= record.CARD_PX + 30
  assert 150 <= height <= 2 * width


def test_hparams_show_model_and_length(run, everything, models):
  """HPARAMS ticks the first five hparams, those that differ first, in the
  server's order (by name): model and length among them."""
  experiment = everything.post('/data/plugin/hparams/experiment',
                               {'experimentName': ''})
  infos = experiment['hparamInfos']
  shown = sorted(infos, key=lambda h: not h.get('differs'))[:5]
  assert {'model', 'length'} <= {h['name'] for h in shown}
  domain = {h['name']: h['domainDiscrete'] for h in infos}
  assert domain['length'] == [str(L) for L in run[2]['lengths']]
  assert domain['model'] == sorted(models)


# -- in a browser ---------------------------------------------------------------

needs_browser = pytest.mark.skipif(
    tb.chromium() is None, reason='no Chromium (apt-get install chromium)')


def _card(dom: str, tag: str) -> str:
  """A time-series card's HTML, from its title to the next card's."""
  start = dom.index(f'title="{tag}"')
  end = dom.find('<tb-truncated-path', start + 1)
  return dom[start:end if end > 0 else None]


def _y_ticks(card: str) -> list[float]:
  """The y axis's tick labels of a rendered line chart card."""
  axis = card[card.index('class="axis y-axis"'):]
  axis = axis[:axis.index('</line-chart-axis>')]
  return [float(t) for t in re.findall(r'<text[^>]*>\s*([-0-9.e]+)\s*</text>',
                                       axis)]


@needs_browser
def test_browser_opens_on_the_finding(overview, models, tmp_path):
  """The URL the run prints, as Chromium draws it with TensorBoard's
  defaults (Ignore outliers on): every finding card spans 0 to 1 (here every
  seed solves: without the axis guides the charts would show 1 alone) and
  shows every model, each in a colour of its own and named in the card's
  table; each model's line alone in a card too."""
  # Tall enough that every card is in view (TensorBoard draws only those).
  dom = tb.render(overview.url + tb.VIEW + '#timeseries', tmp_path / 'p',
                  size=(1400, 3000))
  line = r'<path d="M[^"]*" style="fill: none; stroke: (rgb\([^)]*\))'
  for tag in ('finding/accuracy', 'finding/solved'):
    card = _card(dom, tag)
    ticks = _y_ticks(card)
    assert min(ticks) == 0 and max(ticks) == 1, (tag, ticks)
    colours = re.findall(line, card)
    assert len(colours) == len(set(colours)) == len(models) + len(
        tblog.AXIS_GUIDES)
    table = re.sub(r'<[^>]+>', ' ', card[card.index('<tb-data-table'):])
    assert all(f' {m} ' in table for m in models)
  for m in models:
    alone = _card(dom, f'finding/solved_by_model/{m}')
    ticks = _y_ticks(alone)
    assert min(ticks) == 0 and max(ticks) == 1, (m, ticks)
    assert len(re.findall(line, alone)) == 1 + len(tblog.AXIS_GUIDES)
    table = re.sub(r'<[^>]+>', ' ', alone[alone.index('<tb-data-table'):])
    assert f' {m} ' in table
