"""What TensorBoard itself serves from a tiny distance run: the CUSTOM
SCALARS layout and the tags it draws, every tag's display name and
description, the solved-fraction curve, the config text. Through its HTTP
API, as the dashboards ask for it (a server on 127.0.0.1, stopped at the
end)."""

import json
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

from experiments import distance
from tests.helpers import read_csv, run_py

# One model at two lengths, two chunks: the smallest run with every chart.
FLAGS = ['--models=attention', '--lengths=3,6', '--seeds=2', '--steps=20',
         '--chunk_steps=10', '--checkpoint_every=20', '--batch_size=16',
         '--eval_examples=64']
GROUPS = ('attention_L003', 'attention_L006')


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


@pytest.fixture(scope='module')
def server(tmp_path_factory):
  """(GET function, run folder) of a TensorBoard serving a tiny run."""
  root = tmp_path_factory.mktemp('tb')
  proc = run_py('--exp=distance', f'--workdir={root}/run',
                f'--checkpoint_dir={root}/ckpt', *FLAGS)
  assert proc.returncode == 0, proc.stderr[-3000:]
  port = _free_port()
  tb = subprocess.Popen(
      [sys.executable, '-m', 'tensorboard.main', '--logdir',
       str(root / 'run' / 'tb'), '--port', str(port), '--host', '127.0.0.1'],
      stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL)

  def get(route, **params):
    url = f'http://127.0.0.1:{port}{route}'
    if params:
      url += '?' + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as r:
      return json.loads(r.read())

  try:
    deadline = time.time() + 40
    while True:  # until the loader has read every run's tags
      try:
        tags = get('/data/plugin/scalars/tags')
        if all(g in tags for g in GROUPS) and len(tags.get('summary', {})) \
            >= 2 * (2 + 2 + 2) + 2:
          break
      except OSError:
        pass
      assert time.time() < deadline, 'TensorBoard did not come up'
      time.sleep(0.5)
    yield get, root / 'run'
  finally:
    tb.terminate()
    tb.wait(timeout=20)


def test_custom_scalars_layout(server):
  """The finding first, then each model's lengths, its solved fraction, each
  group's seeds; every chart's regex draws tags of the summary run."""
  get, _ = server
  layout = get('/data/plugin/custom_scalars/layout')
  charts = {c['title']: [ch['title'] for ch in c['chart']]
            for c in layout['category']}
  titles = list(charts)
  assert titles[0].startswith('The finding')
  assert charts[titles[1]] == ['attention: test accuracy']
  assert charts[titles[2]] == ['attention: solved fraction']
  assert charts[titles[3]] == [f'{g}: test accuracy of each seed'
                               for g in GROUPS]
  drawn = {}
  for category in layout['category']:
    for chart in category['chart']:
      regex, = chart['multiline']['tag']
      data = get('/data/plugin/custom_scalars/scalars', run='summary',
                 tag=regex)
      assert data['regex_valid'], regex
      drawn[chart['title']] = data['tag_to_events']
  # attention: one line per length, one point per chunk.
  lines = drawn['attention: test accuracy']
  assert sorted(lines) == [f'overview/accuracy/{g}' for g in GROUPS]
  assert all([e[1] for e in v] == [10, 20] for v in lines.values())
  seeds = drawn['attention_L006: test accuracy of each seed']
  assert sorted(seeds) == [f'overview/seeds/attention_L006/seed_{s}'
                           for s in (0, 1)]
  # The finding: x is the length.
  final, = drawn['final test accuracy (seed mean) against L'].values()
  assert [e[1] for e in final] == [3, 6]


def test_every_tag_described(server):
  """Display names and descriptions, read back as the dashboards get them:
  how many strings, what solved is, what a step is."""
  get, _ = server
  tags = get('/data/plugin/scalars/tags')
  runs = [*GROUPS, *(f'{g}/seed_{s}' for g in GROUPS for s in (0, 1)),
          'summary']
  assert set(runs) <= set(tags)
  for run in runs:
    for tag, info in tags[run].items():
      assert info['displayName'] and info['displayName'] != tag, (run, tag)
      assert len(info['description']) > 60, (run, tag)
  group = tags['attention_L003']
  assert group['test/accuracy']['displayName'] == 'test accuracy'
  test = group['test/accuracy']['description']
  assert '256 new strings at the end of every chunk' in test
  assert 'final test on 64 fresh strings' in test
  assert 'one Adam update on 16 fresh training strings' in test
  assert '&gt;= 0.95' in group['test/solved_fraction']['description']


def test_solved_fraction_every_chunk(server):
  """A curve, one point per chunk, its last the final test's (results.csv),
  in the group run and in the overview."""
  get, run = server
  rows = read_csv(run / 'results.csv')
  for g, length in zip(GROUPS, (3, 6)):
    points = get('/data/plugin/scalars/scalars', run=g,
                 tag='test/solved_fraction')
    assert [p[1] for p in points] == [10, 20]
    solved = [int(r['solved']) for r in rows if r['length'] == str(length)]
    assert points[-1][2] == pytest.approx(sum(solved) / len(solved))
    overview = get('/data/plugin/scalars/scalars', run='summary',
                   tag=f'overview/solved/{g}')
    assert [p[1:] for p in overview] == [p[1:] for p in points]


def test_config_text_has_the_fields_read(server):
  get, _ = server
  text, = get('/data/plugin/text/text', run='summary', tag='config')
  fields = [line.split('|')[1].strip()
            for line in text['text'].split('\n')[2:] if line.startswith('|')]
  assert fields and set(fields) == {'exp', 'quick', *distance.FIELDS}
