"""What TensorBoard itself serves from a tiny distance run: the CUSTOM
SCALARS layout and the tags it draws, every tag's display name and
description, the solved-fraction curve, the config text. Through its HTTP
API, as the dashboards ask for it (a server on 127.0.0.1, stopped at the
end)."""

import json
import re
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
# The overview's runs, a run per line: each length, each seed, the model.
OVERVIEW = ('summary/L003', 'summary/L006', 'summary/seed_0',
            'summary/seed_1', 'summary/attention')


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
        if all(r in tags for r in GROUPS + OVERVIEW):
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
  group's seeds; each chart draws a line per run under summary/."""
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
      lines = {}
      for run in ('summary',) + OVERVIEW + GROUPS:  # as if all ticked
        data = get('/data/plugin/custom_scalars/scalars', run=run, tag=regex)
        assert data['regex_valid'], regex
        for events in data['tag_to_events'].values():
          lines[run] = [e[1] for e in events]
      drawn[chart['title']] = lines
  # attention: one line per length, one point per chunk.
  assert drawn['attention: test accuracy'] == {
      'summary/L003': [10, 20], 'summary/L006': [10, 20]}
  assert drawn['attention: solved fraction'] == {
      'summary/L003': [10, 20], 'summary/L006': [10, 20]}
  assert drawn['attention_L006: test accuracy of each seed'] == {
      'summary/seed_0': [10, 20], 'summary/seed_1': [10, 20]}
  # The finding: x is the length.
  assert drawn['final test accuracy (seed mean) against L'] == {
      'summary/attention': [3, 6]}


def test_every_tag_described(server):
  """Display names and descriptions, read back as the dashboards get them:
  how many strings, what solved is, what a step is."""
  get, _ = server
  tags = get('/data/plugin/scalars/tags')
  runs = [*GROUPS, *(f'{g}/seed_{s}' for g in GROUPS for s in (0, 1)),
          *OVERVIEW]
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
    overview = get('/data/plugin/scalars/scalars', run=f'summary/L00{length}',
                   tag='overview/solved/attention')
    assert [p[1:] for p in overview] == [p[1:] for p in points]


def test_config_text_has_the_fields_read(server):
  """The config text lists the fields the experiment reads, no others."""
  get, _ = server
  text, = get('/data/plugin/text/text', run='summary',
              tag='config/text_summary')
  fields = re.findall(r'<tr>\n<td>(\w+)</td>\n<td><code>', text['text'])
  assert set(fields) == {'exp', 'quick', *distance.FIELDS}
