"""Where a run's files live: a local folder or a Cloud Storage bucket (gs://).

Every workdir and checkpoint path goes through `etils.epath` (what orbax
uses), never `pathlib`, which silently turns `gs://b/x` into the local folder
`gs:/b/x`. A bucket differs from a disk in three ways the writers respect: no
append (a file is rewritten whole), no fsync (an object is durable once its
write returns) and no `fcntl` lock (a bucket workdir is not locked). Buckets
need gcsfs (`requirements-gcs.txt`), which epath's fsspec backend loads.
"""

import errno
import logging
import os
import threading

from etils import epath

# How long a bucket may take to answer the first call (credentials, network)
# before the run is refused; gcsfs alone retries for about a minute.
TIMEOUT_S = float(os.environ.get('SEARCHLIGHT_STORAGE_TIMEOUT_S', '30'))
GCS_HINT = 'pip install -r requirements-gcs.txt (gcsfs)'


class Unreachable(Exception):
  """A bucket path that cannot be used: the message is one line."""


def path(text) -> epath.Path:
  """A workdir or checkpoint path, local or `gs://`, kept as typed."""
  return epath.Path(os.fspath(text))


def is_remote(p) -> bool:
  return '://' in os.fspath(p)


def absolute(p) -> epath.Path:
  """Local paths made absolute (orbax and the compilation cache want it);
  a bucket path is absolute already."""
  return path(p) if is_remote(p) else path(os.path.abspath(os.fspath(p)))


def reason(e: BaseException) -> str:
  text = str(e).strip().splitlines()
  return f'{type(e).__name__}: {text[0][:200]}' if text else type(e).__name__


def probe(p, timeout_s: float = TIMEOUT_S) -> bool:
  """Whether the bucket path exists; raises `Unreachable` when the bucket
  cannot be asked within `timeout_s` (no network, no credentials, no gcsfs).
  Creates nothing, here or there."""
  answer = {}

  def ask():
    try:
      answer['exists'] = p.exists() and (p.is_dir() or 'file')
    except BaseException as e:  # pylint: disable=broad-except
      answer['error'] = e

  quiet = logging.getLogger('gcsfs')  # its credential warnings: one line here
  level = quiet.level
  quiet.setLevel(logging.ERROR)
  thread = threading.Thread(target=ask, daemon=True)
  thread.start()
  thread.join(timeout_s)
  if thread.is_alive():
    raise Unreachable(f'no answer within {timeout_s:g} s (no network or no '
                      'credentials? try `gcloud storage ls` from this machine)')
  quiet.setLevel(level)
  error = answer.get('error')
  if isinstance(error, ImportError):
    raise Unreachable(f'Cloud Storage needs gcsfs: {GCS_HINT}')
  if error is not None:
    raise Unreachable(f'cannot be reached ({reason(error)})')
  if answer['exists'] == 'file':
    raise Unreachable('is a file; expected a folder path')
  return bool(answer['exists'])


def write_whole(p, data: str | bytes) -> None:
  """Writes a file so that a reader never sees half of it: on a disk a
  temporary file renamed over it, in a bucket one object write."""
  p = path(p)
  mode = 'wb' if isinstance(data, bytes) else 'w'
  if is_remote(p):
    with p.open(mode) as f:
      f.write(data)
    return
  tmp = os.fspath(p) + '.tmp'
  try:
    with open(tmp, mode) as f:
      f.write(data)
  except BaseException:  # a full disk: the old file stays, whole
    if os.path.exists(tmp):
      os.unlink(tmp)
    raise
  os.replace(tmp, os.fspath(p))


def out_of_space(e: BaseException) -> bool:
  """Whether `e` says the disk (or the quota) is full, as Python's writers
  and tensorstore's (orbax) report it."""
  return (getattr(e, 'errno', None) in (errno.ENOSPC, errno.EDQUOT)
          or 'No space left on device' in str(e))
