"""What a run leaves behind: TensorBoard events, results.csv, summary.json,
figures, and the progress a user watches.

TensorBoard is written with tensorboardX (no TensorFlow). Each training group
is its own TensorBoard run (a subfolder), so the dashboard overlays groups and
the HPARAMS tab compares them; run-level images and text go to the top folder.
The workdir may be a bucket (`src/storage.py`): every file goes through epath,
and a file that grows (results.csv, event files) is rewritten whole there.
"""

import csv
import io
import json
import math
import os
import sys
import time

import numpy as np

from src import storage


def write_json(path, obj) -> None:
  """Atomic: a reader never sees half a file."""
  storage.write_whole(path, json.dumps(obj, indent=2, sort_keys=False,
                                       default=_jsonable) + '\n')


def update_json(path, key: str, value) -> None:
  """Sets one key of a JSON object file (created if missing)."""
  path = storage.path(path)
  obj = json.loads(path.read_text()) if path.exists() else {}
  if obj.get(key) != value:
    obj[key] = value
    write_json(path, obj)


def _jsonable(x):
  if isinstance(x, (np.floating, np.integer, np.bool_)):
    return x.item()
  if isinstance(x, np.ndarray):
    return x.tolist()
  raise TypeError(f'not JSON serialisable: {type(x)}')


class ResultsCsv:
  """results.csv, appended row by row and synced, so a kill loses nothing
  finished. Rows already there (from before a resume) are read back."""

  def __init__(self, path, columns: list[str], *, write: bool | None = None):
    if write is None:
      from src import distributed
      write = distributed.is_writer()
    self.path, self.columns = storage.path(path), list(columns)
    self.write = write
    self.rows = []
    text = self.path.read_text() if self.path.exists() else ''
    if text:
      reader = csv.DictReader(io.StringIO(text, newline=''))
      if reader.fieldnames != self.columns:
        raise ValueError(f'{self.path} has columns {reader.fieldnames}, '
                         f'expected {self.columns}')
      self.rows = list(reader)
    elif self.write:
      storage.write_whole(self.path, self._text([]))

  def has(self, **match) -> bool:
    """Whether rows matching exist, as process 0 sees them."""
    from src import distributed
    return distributed.agree(any(
        all(row[k] == str(v) for k, v in match.items()) for row in self.rows))

  def drop(self, where) -> None:
    """Removes the rows for which `where(row)` holds (rewritten atomically):
    what a killed run wrote past its last checkpoint."""
    keep = [r for r in self.rows if not where(r)]
    if len(keep) == len(self.rows):
      return
    self.rows = keep
    if self.write:
      storage.write_whole(self.path, self._text(keep))

  def append(self, rows: list[dict]) -> None:
    rows = [{k: _cell(row[k]) for k in self.columns} for row in rows]
    if self.write and storage.is_remote(self.path):  # no append in a bucket
      storage.write_whole(self.path, self._text(self.rows + rows))
    elif self.write:
      with open(self.path, 'a', newline='') as f:
        csv.DictWriter(f, self.columns).writerows(rows)
        f.flush()
        os.fsync(f.fileno())
    self.rows.extend(rows)

  def _text(self, rows) -> str:
    out = io.StringIO(newline='')
    writer = csv.DictWriter(out, self.columns)
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _cell(x) -> str:
  if isinstance(x, (bool, np.bool_)):
    return str(int(x))
  if isinstance(x, (float, np.floating)):
    return repr(float(x))  # round-trips exactly
  return str(x)


# -- TensorBoard ----------------------------------------------------------------

def tb_writer(logdir, *, purge_step: int | None = None):
  """A tensorboardX writer; `purge_step` hides events a resumed run redoes."""
  from tensorboardX import SummaryWriter
  from tensorboardX import record_writer
  # Event files in a bucket through epath, like every other file of the run
  # (tensorboardX's own gs:// writer would need google-cloud-storage apart).
  record_writer.register_writer_factory('gs', _BucketEventFiles())
  return SummaryWriter(os.fspath(logdir), purge_step=purge_step or None,
                       flush_secs=10)


class _BucketEventFile:
  """An event file in a bucket: buffered here, the object rewritten whole at
  every flush (objects cannot be appended to)."""

  def __init__(self, path):
    self.path, self.buffer = storage.path(path), io.BytesIO()

  def write(self, data: bytes) -> None:
    self.buffer.write(data)

  def flush(self) -> None:
    with self.path.open('wb') as f:
      f.write(self.buffer.getvalue())

  def close(self) -> None:
    self.flush()


class _BucketEventFiles:
  """tensorboardX's writer factory interface."""

  def open(self, path):
    return _BucketEventFile(path)

  def directory_check(self, path):
    del path  # a bucket has no folders to make


def _tensorboard_summary(pb):
  """tensorboard's hparams protos as tensorboardX's Summary class (they are
  different classes of the same message)."""
  from tensorboardX.proto import summary_pb2
  return summary_pb2.Summary.FromString(pb.SerializeToString())


def write_hparams_experiment(logdir, sessions: list[dict],
                             metrics) -> None:
  """One HParams experiment for the whole run: every hparam the sessions
  use, a categorical one (strings, or numbers such as lengths) with the
  discrete domain of the values the run has, and the metrics."""
  from tensorboard.plugins.hparams import summary_v2 as hp
  domains = {}
  for session in sessions:
    for name, value in session.items():
      domains.setdefault(name, set()).add(value)
  hparams = []
  for name, values in domains.items():
    values = sorted(values, key=lambda v: (isinstance(v, str), v))
    hparams.append(hp.HParam(name, hp.Discrete(values)))
  pb = hp.hparams_config_pb(hparams=hparams,
                            metrics=[hp.Metric(m) for m in metrics])
  writer = tb_writer(logdir)
  writer.file_writer.add_summary(_tensorboard_summary(pb))
  writer.close()


def write_hparams_session(writer, hparams: dict) -> None:
  """The group's HParams session, in its own run; its metrics are the
  run's scalars of the experiment's metric tags."""
  from tensorboard.plugins.hparams import summary_v2 as hp
  writer.file_writer.add_summary(_tensorboard_summary(
      hp.hparams_pb(hparams, trial_id=storage.path(writer.logdir).name)))


def publish(run_dir, config, summary: dict, draw=None) -> None:
  """summary.json, then the run-level TensorBoard run (`tb/summary`): the
  config as text and the figures `draw(writer)` makes. Process 0 only."""
  if not run_dir.is_writer:
    return
  write_json(run_dir.path / 'summary.json', summary)
  writer = tb_writer(run_dir.path / 'tb' / 'summary')
  write_config_text(writer, config.to_json())
  if draw is not None:
    draw(writer)
  writer.close()


def write_config_text(writer, config_json: dict) -> None:
  lines = ['| field | value |', '|---|---|']
  lines += [f'| {k} | `{v}` |' for k, v in config_json.items()]
  writer.add_text('config', '\n'.join(lines), 0)


# -- figures --------------------------------------------------------------------

def pyplot():
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  return plt


def save_figure(fig, path, writer=None, tag: str | None = None,
                step: int = 0) -> None:
  """Saves a PNG and, given a writer, logs the same picture as an image."""
  png = io.BytesIO()
  fig.savefig(png, format='png', dpi=110, bbox_inches='tight')
  storage.write_whole(path, png.getvalue())
  if writer is not None:
    writer.add_image(tag or storage.path(path).stem, figure_array(fig), step,
                     dataformats='HWC')
  pyplot().close(fig)


def seed_dots(ax, x, values, color, *, offset: float = 0.0, log_x=True,
              label=None):
  """Every seed's value as a dot at `x`, shifted by `offset`, a fraction of
  the x range (of its logarithm on a log axis), so models sit side by
  side."""
  x = np.asarray(x, float)
  if log_x:
    shift = x * max(x.max() / x.min(), 2.0) ** offset
  else:
    shift = x + offset * max(x.max() - x.min(), 1.0)
  for xi, v in zip(shift, values):
    v = np.asarray(v, float)
    ax.scatter(np.full(v.shape, xi), v, s=12, color=color, alpha=0.55,
               edgecolors='none', zorder=3, label=label)
    label = None


def figure_array(fig) -> np.ndarray:
  buffer = io.BytesIO()
  fig.savefig(buffer, format='png', dpi=80, bbox_inches='tight')
  buffer.seek(0)
  return (pyplot().imread(buffer)[..., :3] * 255).astype(np.uint8)


# -- the terminal ---------------------------------------------------------------

class Progress:
  """One status line over all groups and steps, with an ETA by work done."""

  def __init__(self, total_work: float, *, stream=sys.stderr):
    from src import distributed
    self.total, self.done, self.start = max(total_work, 1e-9), 0.0, None
    self.stream, self.tty = stream, stream.isatty()
    self.quiet = not distributed.is_writer()  # one voice per run
    self._last_print = 0.0

  def update(self, work: float, text: str) -> None:
    now = time.perf_counter()
    if self.start is None:
      self.start = now
    self.done = min(self.done + work, self.total)
    if self.quiet:
      return
    if not self.tty and now - self._last_print < 10 and self.done < self.total:
      return
    self._last_print = now
    frac = self.done / self.total
    elapsed = now - self.start
    eta = f'{elapsed / frac * (1 - frac):4.0f}s' if frac > 0 else '   ?'
    bar = '#' * int(20 * frac) + '.' * (20 - int(20 * frac))
    line = (f'[{bar}] {100 * frac:5.1f}%  {text}  '
            f'elapsed {elapsed:4.0f}s  eta {eta}')
    if self.tty:
      self.stream.write('\r' + line[:150].ljust(150))
    else:
      self.stream.write(line + '\n')
    self.stream.flush()

  def say(self, line: str) -> None:
    """A permanent line above the bar."""
    if self.quiet:
      return
    if self.tty:
      self.stream.write('\r' + ' ' * 150 + '\r')
    print(line, flush=True)


def table(rows: list[list], header: list[str]) -> str:
  cells = [header] + [[str(c) for c in row] for row in rows]
  widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
  fmt = lambda r: '  '.join(c.rjust(w) for c, w in zip(r, widths))
  return '\n'.join([fmt(header), fmt(['-' * w for w in widths])] +
                   [fmt(r) for r in cells[1:]])
