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
import os
import sys
import time

import numpy as np

from src import storage

# The table a run's `finish` printed (no timings), beside its summary: the
# report quotes it.
TABLE_FILE = 'table.txt'


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
    if text and not text.endswith('\n'):  # a row cut short (a kill): not one
      text = text[:text.rfind('\n') + 1]
    if text:
      reader = csv.DictReader(io.StringIO(text, newline=''))
      if reader.fieldnames != self.columns:
        from src.config import ConfigError  # deferred: it imports jax
        raise ConfigError(
            f'--workdir: {self.path} has the columns of another version of '
            f'this experiment ({", ".join(sorted(set(self.columns) ^ set(reader.fieldnames or [])))} '
            'differ); pass a new --workdir, or --overwrite to discard it')
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
    if len(keep) < len(self.rows):
      self.replace(keep)

  def replace(self, rows: list[dict]) -> None:
    """Every row replaced by `rows` (rewritten atomically)."""
    self.rows = [{k: _cell(row[k]) for k in self.columns} for row in rows]
    if self.write:
      storage.write_whole(self.path, self._text(self.rows))

  def append(self, rows: list[dict]) -> None:
    rows = [{k: _cell(row[k]) for k in self.columns} for row in rows]
    if self.write and storage.is_remote(self.path):  # no append in a bucket
      storage.write_whole(self.path, self._text(self.rows + rows))
    elif self.write:
      with open(self.path, 'a', newline='') as f:
        end = f.tell()
        try:
          csv.DictWriter(f, self.columns).writerows(rows)
          f.flush()
          os.fsync(f.fileno())
        except BaseException:  # a full disk: no row half-written
          f.truncate(end)
          raise
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

def tb_writer(logdir, *, purge_step: int | None = None, describe=None,
              filename_suffix: str = ''):
  """A tensorboardX writer; `purge_step` hides events a resumed run redoes.
  `describe(tag)` -> (display name, description): given, each tag's first
  point in this writer carries them (TensorBoard keeps a tag's first
  metadata; writing it at every step would only grow the files)."""
  from tensorboardX import SummaryWriter
  from tensorboardX import record_writer
  from tensorboardX.proto import summary_pb2
  from tensorboardX.proto import tensor_pb2
  from tensorboardX.proto import tensor_shape_pb2
  # Event files in a bucket through epath, like every other file of the run
  # (tensorboardX's own gs:// writer would need google-cloud-storage apart).
  record_writer.register_writer_factory('gs', _BucketEventFiles())
  writer = SummaryWriter(os.fspath(logdir), flush_secs=FLUSH_SECS,
                         filename_suffix=filename_suffix)
  _write_in_place(writer.file_writer.event_writer)
  if purge_step:  # what SummaryWriter(purge_step=...) writes, in order
    from tensorboardX.proto.event_pb2 import Event, SessionLog
    writer.file_writer.add_event(Event(step=purge_step,
                                       file_version='brain.Event:2'))
    writer.file_writer.add_event(Event(
        step=purge_step, session_log=SessionLog(status=SessionLog.START)))
  described = set()

  def value(tag, v):
    # A tensor, as TF2 writes scalars: TensorBoard's fast loader reads a
    # display name and description only from those, not simple_value.
    out = summary_pb2.Summary.Value(tag=tag, tensor=tensor_pb2.TensorProto(
        dtype='DT_FLOAT', float_val=[float(v)],
        tensor_shape=tensor_shape_pb2.TensorShapeProto()))
    if tag not in described:  # a tag's first point says what it is
      described.add(tag)
      display, description = describe(tag) if describe else ('', '')
      out.metadata.CopyFrom(summary_pb2.SummaryMetadata(
          display_name=display, summary_description=description,
          plugin_data=summary_pb2.SummaryMetadata.PluginData(
              plugin_name='scalars')))
    return out

  def add_scalars_at(values: dict, step, walltime=None):
    """Every tag's value at one step, in one event: the per-step training
    curves of a group and its seeds cost one event per run and step."""
    writer.file_writer.add_summary(summary_pb2.Summary(
        value=[value(tag, v) for tag, v in values.items()]), step, walltime)

  writer.add_scalars_at = add_scalars_at
  if describe is not None:
    writer.add_scalar = lambda tag, v, step=None, walltime=None: (
        add_scalars_at({tag: v}, step, walltime))
  return writer


FLUSH_SECS = 10  # an event reaches the file (and a live TensorBoard) this soon


def _write_in_place(events) -> None:
  """Makes a tensorboardX EventFileWriter write each event in the caller's
  thread, flushing every FLUSH_SECS, where it would pickle it through a
  multiprocessing queue to a thread of its own, on the cores training uses
  (docs/ENGINEERING.md has the A/B). Its own thread then has nothing to
  write."""
  last_flush = [0.0]

  def add_event(event):
    if events._closed:
      return
    events._ev_writer.write_event(event)
    if time.time() - last_flush[0] > FLUSH_SECS:
      events._ev_writer.flush()
      last_flush[0] = time.time()

  events.add_event = add_event
  file = events._ev_writer
  for name in ('write_event', 'flush', 'close'):
    setattr(file, name, _naming_the_file(getattr(file, name),
                                         getattr(file, '_file_name', None)))


def _naming_the_file(method, file_name):
  """`method`, whose OSError (a full disk's names no file) names the event
  file."""
  def named(*args):
    try:
      return method(*args)
    except OSError as e:
      if e.filename:
        raise
      raise OSError(e.errno, e.strerror, file_name) from e
  return named


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


def hparam_value(value):
  """An hparam as TensorBoard shows it: an integer as a string, since the
  HParams table prints every number to 5 digits (length 10 as "10.000")."""
  if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
    return str(int(value))
  return value


def write_hparams_experiment(writer, sessions: list[dict],
                             metrics: dict) -> None:
  """One HParams experiment for the whole run: every hparam the sessions
  use, each with the discrete domain of the values the run has (integers in
  numeric order, as strings), and the metrics {tag: (display name,
  description)}."""
  from google.protobuf import struct_pb2
  from tensorboard.plugins.hparams import api_pb2
  from tensorboard.plugins.hparams import metadata
  from tensorboard.plugins.hparams import plugin_data_pb2
  from tensorboard.plugins.hparams import summary_v2 as hp
  domains = {}
  for session in sessions:
    for name, value in session.items():
      domains.setdefault(name, set()).add(value)
  # TensorBoard lists hparams that differ first (then by name) and shows
  # only the first few until ticked: `differs` marks what tells groups apart.
  hparams = []
  for name, values in sorted(domains.items()):
    values = sorted(values, key=lambda v: (isinstance(v, str), v))
    values = [hparam_value(v) for v in values]
    kind = {str: api_pb2.DATA_TYPE_STRING, bool: api_pb2.DATA_TYPE_BOOL}.get(
        type(values[0]), api_pb2.DATA_TYPE_FLOAT64)
    domain = struct_pb2.ListValue()
    domain.extend(values)
    hparams.append(api_pb2.HParamInfo(name=name, type=kind,
                                      domain_discrete=domain,
                                      differs=len(values) > 1))
  metric_infos = [api_pb2.MetricInfo(
      name=api_pb2.MetricName(tag=tag), display_name=display,
      description=description)
                  for tag, (display, description) in metrics.items()]
  experiment = api_pb2.Experiment(time_created_secs=time.time(),
                                  hparam_infos=hparams,
                                  metric_infos=metric_infos)
  writer.file_writer.add_summary(_tensorboard_summary(hp._summary_pb(
      metadata.EXPERIMENT_TAG,
      plugin_data_pb2.HParamsPluginData(experiment=experiment))))


def write_hparams_session(writer, hparams: dict, name: str) -> None:
  """The group's HParams session, in its own run (its metrics are the
  run's scalars of the experiment's metric tags); `name` is what the
  table's Trial ID column shows."""
  from tensorboard.plugins.hparams import summary_v2 as hp
  writer.file_writer.add_summary(_tensorboard_summary(hp.hparams_pb(
      {k: hparam_value(v) for k, v in hparams.items()}, trial_id=name)))


def publish(run_dir, config, summary: dict, draw=None, *,
            fields=None) -> None:
  """summary.json, then the run-level TensorBoard run, the root of
  tb/overview (the logdir to open first): the verdicts as a table, the
  config as text (the `fields` the experiment reads, with `exp` and
  `quick`; all of them if None) and the figures `draw(writer)` makes.
  Process 0 only."""
  if not run_dir.is_writer:
    return
  write_json(run_dir.path / 'summary.json', summary)
  writer = tb_writer(run_dir.path / 'tb' / 'overview')
  if summary.get('claims'):
    writer.add_text('claims', verdicts_text(summary['claims']), 0)
  config_json = config.to_json()
  if fields is not None:
    config_json = {k: v for k, v in config_json.items()
                   if k in ('exp', 'quick') or k in fields}
  write_config_text(writer, config_json)
  if draw is not None:
    draw(writer)
  writer.close()


def verdicts_text(claims: list[dict]) -> str:
  """The claims as a markdown table: each row's first cell its verdict
  (HELD in capitals and bold, did not hold in bold, inconclusive plain) and
  p, then the claim; the count that decides it and its test in a few words
  (`claim_text.test_name`; the whole is in summary.json) beside it. One wide
  first column: TensorBoard's TEXT tab wraps a narrow column's words in
  two."""
  from src import claim_text  # deferred: it imports scipy
  from src import stats
  mark = {'held': '**HELD**', 'did not hold': '**did not hold**'}
  lines = ['| verdict, p (Holm): claim | count | test |', '|---|---|---|']
  for c in claims:
    p = c.get('p_adjusted')
    where = ''.join(f' ({k}={c[k]})' for k in ('length', 'd_model', 'decoys')
                    if k in c)
    said = mark.get(c['verdict'], c['verdict']) + (
        '' if p is None else f', p {stats.fmt_p(p)}')
    lines.append(f'| {said}: {c["claim"]}{where} | '
                 f'{claim_text.headline(c)} | {claim_text.test_name(c)} |')
  return '\n'.join(lines)


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
  """Saves a PNG and, given a writer, logs the same picture as TensorBoard
  images (`card_images`: a panel per image, tagged `tag/1`, `tag/2`... when
  there are several)."""
  png = io.BytesIO()
  fig.savefig(png, format='png', dpi=110, bbox_inches='tight')
  storage.write_whole(path, png.getvalue())
  if writer is not None:
    tag = tag or storage.path(path).stem
    images = card_images(fig)
    for i, image in enumerate(images):
      writer.add_image(tag if len(images) == 1 else f'{tag}/{i + 1}', image,
                       step, dataformats='HWC')
  pyplot().close(fig)


# Per model in a figure, so lines that coincide stay told apart.
MARKERS = ('o', 's', 'D', '^', 'v', 'P', 'X', '*')
LINE_STYLES = ('-', '--', '-.', (0, (1, 1)), (0, (5, 1, 1, 1, 1, 1)))


def offset_x(x, offset: float = 0.0, log_x=True) -> np.ndarray:
  """`x` shifted by `offset`, a fraction of the x range (of its logarithm on
  a log axis), so models sit side by side."""
  x = np.asarray(x, float)
  if log_x:
    return x * max(x.max() / x.min(), 2.0) ** offset
  return x + offset * max(x.max() - x.min(), 1.0)


def seed_dots(ax, x, values, color, *, offset: float = 0.0, log_x=True,
              label=None, marker='o'):
  """Every seed's value as a mark at `x`, shifted by `offset` (`offset_x`),
  drawn above the lines (a mean never hides a seed)."""
  for xi, v in zip(offset_x(x, offset, log_x), values):
    v = np.asarray(v, float)
    ax.scatter(np.full(v.shape, xi), v, s=16, color=color, alpha=0.6,
               marker=marker, edgecolors='none', zorder=5, label=label)
    label = None


# TensorBoard's image card fits a picture into a box about 400 x 210 px (it
# keeps the aspect): what is logged is redrawn for that box, one picture per
# panel, its text at least CARD_FONT_PX pixels high once there (a figure
# drawn for a page and scaled down into the card would not be readable).
CARD_PX, CARD_HEIGHT_PX, CARD_FONT_PX = 400, 210, 10
CARD_INCHES = 5.0


def card_images(fig) -> list[np.ndarray]:
  """The figure as TensorBoard's cards show it, one RGB array per panel
  (a colour bar stays with the panel it belongs to), each redrawn in the
  card's aspect, about CARD_PX wide with its text CARD_FONT_PX high; long
  titles wrapped, a lone panel's legend beside it. Call after saving the
  PNG: it changes the figure."""
  import textwrap
  from matplotlib.text import Text
  from matplotlib.transforms import Bbox
  panels = [ax for ax in fig.axes if not hasattr(ax, '_colorbar')]
  spec = panels[0].get_subplotspec()
  rows, cols = spec.get_gridspec().get_geometry() if spec else (1, 1)
  fig.set_size_inches(cols * CARD_INCHES,
                      rows * CARD_INCHES * CARD_HEIGHT_PX / CARD_PX)
  if len(panels) == 1:  # room for the legend beside it: a little taller
    fig.set_size_inches(CARD_INCHES, 0.65 * CARD_INCHES)
    legend = panels[0].get_legend()
    if legend is not None:
      panels[0].legend(handles=legend.legend_handles,
                       labels=[t.get_text() for t in legend.get_texts()],
                       loc='upper left', bbox_to_anchor=(1.01, 1.0),
                       borderaxespad=0)
  for ax in panels:
    if ax.get_title():
      ax.set_title(textwrap.fill(ax.get_title(), 70),
                   fontsize=ax.title.get_fontsize())
    ax.set_xlabel(textwrap.fill(ax.get_xlabel(), 60))
  renderer = fig.canvas.get_renderer()

  def boxes():  # in inches: each panel with the colour bars to its right
    fig.set_layout_engine('tight')  # the panels fill the card's aspect
    fig.draw_without_rendering()
    found = [ax.get_tightbbox(renderer).transformed(
        fig.dpi_scale_trans.inverted()) for ax in panels]
    for ax in fig.axes:
      if hasattr(ax, '_colorbar'):
        bar = ax.get_tightbbox(renderer).transformed(
            fig.dpi_scale_trans.inverted())
        left = [i for i, b in enumerate(found) if b.x0 <= bar.x0]
        i = max(left, key=lambda i: found[i].x0) if left else 0
        found[i] = Bbox.union([found[i], bar])
    return found

  dpi = 72.0
  for _ in range(3):  # bigger text widens the boxes: settle the scale again
    for text in fig.findobj(Text):
      text.set_fontsize(max(text.get_fontsize(), CARD_FONT_PX * 72 / dpi))
    found = boxes()
    dpi = CARD_PX / max(b.width for b in found)
  whole = Bbox.union(found).padded(0.05)  # the canvas may cut labels off
  buffer = io.BytesIO()
  fig.savefig(buffer, format='png', dpi=dpi, bbox_inches=whole)
  buffer.seek(0)
  image = (pyplot().imread(buffer)[..., :3] * 255).astype(np.uint8)
  crops = []
  for b in found:
    x0 = max(int((b.x0 - whole.x0) * dpi) - 3, 0)
    x1 = int(np.ceil((b.x1 - whole.x0) * dpi)) + 3
    y0 = max(int((whole.y1 - b.y1) * dpi) - 3, 0)
    y1 = int(np.ceil((whole.y1 - b.y0) * dpi)) + 3
    crops.append(image[y0:y1, x0:x1])
  return crops


# -- the terminal ---------------------------------------------------------------

ETA_AFTER = 0.1  # the share of a run's work done before its ETA is shown


class Progress:
  """One status line over all groups and steps. The ETA is the work left at
  the rate measured since the first piece of work this process did (a
  compile, the first chunk's wait, is not the rate; work found done is not
  counted in it), in the units of each group's registry cost
  (`ModelSpec.step_work`); '?' until ETA_AFTER of this process's work is
  done, before which one model's rate says little of the others'."""

  def __init__(self, total_work: float, *, stream=sys.stderr,
               clock=time.perf_counter):
    from src import distributed
    self.total, self.done = max(total_work, 1e-9), 0.0
    self.start = None  # when this process's first work was done
    self.since = 0.0  # the work done by then (found done, or the first)
    self.stream, self.tty = stream, stream.isatty()
    self.quiet = not distributed.is_writer()  # one voice per run
    self.clock = clock
    self._last_print = 0.0
    self._began = clock()

  def update(self, work: float, text: str, *, done_before: bool = False
             ) -> None:
    """`work` more done; `done_before`: found done (a resumed run), not
    done now."""
    now = self.clock()
    self.done = min(self.done + work, self.total)
    if done_before:  # never part of the rate
      self.since += work
    elif self.start is None and work > 0:
      # The first piece of work carried the compiles: the rate starts after.
      self.start, self.since = now, self.done
    if self.quiet:
      return
    if not self.tty and now - self._last_print < 10 and self.done < self.total:
      return
    self._last_print = now
    frac = self.done / self.total
    elapsed = now - self._began
    eta = self.eta(now)
    eta = '   ?' if eta is None else f'{eta:4.0f}s'
    bar = '#' * int(20 * frac) + '.' * (20 - int(20 * frac))
    line = (f'[{bar}] {100 * frac:5.1f}%  {text}  '
            f'elapsed {elapsed:4.0f}s  eta {eta}')
    if self.tty:
      self.stream.write('\r' + line[:150].ljust(150))
    else:
      self.stream.write(line + '\n')
    self.stream.flush()

  def eta(self, now: float) -> float | None:
    """Seconds left at the measured rate, or None until ETA_AFTER of this
    process's work is done."""
    rate_work = self.done - self.since
    if (self.start is None or rate_work <= 0 or now - self.start <= 1
        or rate_work < ETA_AFTER * (self.total - self.since)):
      return None
    return (now - self.start) / rate_work * (self.total - self.done)

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
