"""Regenerates the README's TensorBoard screenshots from a finished run:

  python docs/screenshots.py [--workdir=runs/distance]

A real TensorBoard on the run's logdirs and a headless Chromium (apt-get
install chromium), at the URL the run prints:
  docs/tensorboard_overview.png  tb/overview, TIME SERIES on first open
  docs/tensorboard_claims.png    tb/overview, TEXT: the verdicts table
  docs/tensorboard_hparams.png   tb/, HPARAMS: a session per group and rate
"""

import pathlib
import sys
import tempfile

from absl import app
from absl import flags

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests import tensorboard_server as tb  # noqa: E402

_WORKDIR = flags.DEFINE_string('workdir', 'runs/distance',
                               'the finished run to show')
# (file, logdir under the run, page, window size)
SHOTS = (('tensorboard_overview.png', 'tb/overview', '#timeseries',
          (1400, 1000)),
         ('tensorboard_claims.png', 'tb/overview', '#text', (1400, 900)),
         ('tensorboard_hparams.png', 'tb', '#hparams', (1400, 800)))


def main(argv):
  del argv
  if tb.chromium() is None:
    sys.exit('error: no Chromium on PATH: apt-get install chromium')
  run = pathlib.Path(_WORKDIR.value)
  if not (run / 'tb' / 'overview').is_dir():
    sys.exit(f'error: --workdir: {run} holds no finished run (no '
             'tb/overview); pass a run\'s folder')
  with tempfile.TemporaryDirectory() as tmp:
    for name, logdir, page, size in SHOTS:
      with tb.serve(run / logdir) as server:
        out = ROOT / 'docs' / name
        tb.render(server.url + tb.VIEW + page, pathlib.Path(tmp) / name,
                  screenshot=out, size=size)
        print(out.relative_to(ROOT))


if __name__ == '__main__':
  app.run(main)
