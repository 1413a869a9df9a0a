"""`run.py`, on a disk that fills up: the Nth time a file named NAME (or
its `.tmp` twin, `storage.write_whole`'s) is opened for writing, half of
what is written reaches it and the write fails with ENOSPC, as a full disk
fails.

  SEARCHLIGHT_FULL_DISK_AT=results.csv:2 python tests/full_disk_run.py ARGS
"""

import builtins
import errno
import os
import sys

NAME, NTH = os.environ['SEARCHLIGHT_FULL_DISK_AT'].rsplit(':', 1)
opened = [0]
real_open = builtins.open


class FullFile:
  """A file whose first write half lands and then fails."""

  def __init__(self, f):
    self.f = f

  def write(self, data):
    self.f.write(data[:len(data) // 2])
    self.f.flush()
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.f.name)

  def __getattr__(self, name):
    return getattr(self.f, name)

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.f.close()


def full_open(file, mode='r', *args, **kwargs):
  f = real_open(file, mode, *args, **kwargs)
  name = os.path.basename(os.fspath(file)) if isinstance(
      file, (str, os.PathLike)) else ''
  if any(m in mode for m in 'wax') and name in (NAME, NAME + '.tmp'):
    opened[0] += 1
    if opened[0] == int(NTH):
      return FullFile(f)
  return f


builtins.open = full_open
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from absl import app  # pylint: disable=wrong-import-position
import run  # pylint: disable=wrong-import-position

app.run(run.main, flags_parser=run.parse_flags)
