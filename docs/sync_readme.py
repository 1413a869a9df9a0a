"""Keeps the README and the committed report one: copies a finished
`--exp=all` run's REPORT.md and figures into docs/ (with --run), then writes
the README's scorecard and distance table from docs/REPORT.md, and
docs/REFERENCE.md's tables of the models (from the registry) and of each
experiment's outputs (from its class).

  python docs/sync_readme.py --run=runs/all   # after a full run
  python docs/sync_readme.py                  # the README from docs/REPORT.md

tests/test_docs.py checks that the README is what this would write.
"""

import pathlib
import re
import shutil
import sys

from absl import app
from absl import flags

DOCS = pathlib.Path(__file__).resolve().parent
ROOT = DOCS.parent
FIGURES = 'report'  # docs/report/<part>/<figure>.png

_RUN = flags.DEFINE_string('run', '', 'a finished --exp=all run to publish '
                           'into docs/ first (its REPORT.md and figures)')


def publish(run: pathlib.Path) -> None:
  """docs/REPORT.md and docs/report/<part>/*.png from the run's."""
  text = (run / 'REPORT.md').read_text()
  parts = sorted(set(re.findall(r'\]\(([\w-]+)/[\w.-]+\.png\)', text)))
  shutil.rmtree(DOCS / FIGURES, ignore_errors=True)
  for part in parts:
    (DOCS / FIGURES / part).mkdir(parents=True)
    for png in (run / part).glob('*.png'):
      shutil.copy2(png, DOCS / FIGURES / part / png.name)
  text = re.sub(r'\]\(([\w-]+/[\w.-]+\.png)\)', rf']({FIGURES}/\1)', text)
  (DOCS / 'REPORT.md').write_text(text)


def blocks(report: str) -> dict[str, str]:
  """What the README quotes of the report: its scorecard (links into
  docs/REPORT.md) and the table the distance part printed."""
  scorecard = report.split('## The scorecard\n\n', 1)[1].split('\n\n', 1)[0]
  scorecard = scorecard.replace('](#', '](docs/REPORT.md#')
  distance = report.split('(part `distance`)', 1)[1]
  table = re.search(r'\n```\n(.*?)\n```\n', distance, re.S).group(1)
  return {'scorecard': scorecard,
          'distance table': f'```\n{table.strip(chr(10))}\n```'}


def synced(readme: str, report: str) -> str:
  """The README with each `<!-- NAME: ... -->` ... `<!-- end -->` block
  holding the report's."""
  for name, text in blocks(report).items():
    readme = _replace_block(readme, name, text, 'README.md')
  return readme


def models_table() -> str:
  """A row per registered model: its name, family, what it is and its
  initialisation, as its registry entry says them."""
  sys.path.insert(0, str(ROOT))
  from src import models  # pylint: disable=import-outside-toplevel
  rows = ['| name | family | what it is | initialisation (source) |',
          '|---|---|---|---|']
  cell = lambda text: text.replace('|', '\\|')  # a bar would end the cell
  for name in models.names():
    spec = models.get(name)
    rows.append(f'| `{name}` | {spec.family.name} | {cell(spec.about)} | '
                f'{cell(spec.init)} |')
  return '\n'.join(rows)


def outputs_table() -> str:
  """A row per experiment: its results.csv columns (and what its
  `columns_note` adds: other files, what a column means) and its
  summary.json keys, as its class says them."""
  sys.path.insert(0, str(ROOT))
  import experiments  # pylint: disable=import-outside-toplevel
  rows = ['| exp | `results.csv` columns | `summary.json` keys |',
          '|---|---|---|']
  for name in experiments.EXPERIMENTS:
    e = experiments.load(name)
    rows.append(f'| {name} | `{",".join(e.columns)}`{e.columns_note} | '
                f'{e.summary_keys} |')
  return '\n'.join(rows)


def synced_reference(reference: str) -> str:
  """docs/REFERENCE.md with its models block holding `models_table()` and
  its outputs block `outputs_table()`."""
  reference = _replace_block(reference, 'models', models_table(),
                             'REFERENCE.md')
  return _replace_block(reference, 'outputs', outputs_table(), 'REFERENCE.md')


def _replace_block(text: str, name: str, body: str, where: str) -> str:
  pattern = re.compile(rf'(<!-- {name}: [^\n]*-->\n).*?(<!-- end -->)', re.S)
  if not pattern.search(text):
    raise ValueError(f'{where} has no <!-- {name}: --> block')
  return pattern.sub(lambda m: m.group(1) + body + '\n' + m.group(2), text,
                     count=1)


def main(argv):
  del argv
  if _RUN.value:
    run = pathlib.Path(_RUN.value)
    if not (run / 'REPORT.md').is_file():
      sys.exit(f'error: --run: {run} holds no REPORT.md; pass a finished '
               '--exp=all run\'s folder')
    publish(run)
  readme = ROOT / 'README.md'
  readme.write_text(synced(readme.read_text(),
                           (DOCS / 'REPORT.md').read_text()))
  reference = DOCS / 'REFERENCE.md'
  reference.write_text(synced_reference(reference.read_text()))
  print('README.md synced with docs/REPORT.md, REFERENCE.md with the '
        'registry')


if __name__ == '__main__':
  app.run(main)
