"""A workdir is one run: its config, a lock, and the paths it owns.

`check` only reads (it runs with the flag checks, before anything is
written); `RunDir.open` then creates the folders, takes the lock, and stores
the config on a new run. Paths may be local or in a bucket (`src/storage.py`);
a bucket workdir has no lock (object storage has no `fcntl`): one run per
bucket workdir is the user's to keep.
"""

import fcntl
import json
import os
import sys
import time

from src import storage
from src.config import Config, ConfigError

CONFIG_FILE = 'config.json'
LOCK_FILE = '.lock'


def check_writable(flag: str, path) -> None:
  """Refuses a path the run could not write to; creates nothing."""
  if storage.is_remote(path):
    try:
      storage.probe(storage.path(path))
    except storage.Unreachable as e:
      raise ConfigError(f'--{flag}: {path}: {e}') from None
    return
  text = os.fspath(path)
  if os.path.exists(text) and not os.path.isdir(text):
    raise ConfigError(f'--{flag}: {text} is a file; expected a folder path')
  existing = text
  while not os.path.exists(existing):
    existing = os.path.dirname(existing) or '.'
  if not os.path.isdir(existing) or not os.access(existing, os.W_OK | os.X_OK):
    raise ConfigError(f'--{flag}: {text} is not writable (at {existing}); '
                      'expected a folder you can write to')


def stored_config(workdir) -> dict | None:
  path = storage.path(workdir) / CONFIG_FILE
  if not path.exists():
    return None
  try:
    return json.loads(path.read_text())['config']
  except (ValueError, KeyError):
    return None


def check(workdir, checkpoint_dir, config: Config, overwrite: bool,
          reads=None) -> None:
  """Refuses unusable paths and a workdir that holds a different run: one
  whose config differs in a field that defines results and that the
  experiment `reads` (its FIELDS; None: every field). A field it does not
  read cannot have changed its results, so a field added to Config later
  does not stop an older run from resuming."""
  check_writable('workdir', workdir)
  check_writable('checkpoint_dir', checkpoint_dir)
  stored = stored_config(workdir)
  if stored is None or overwrite:
    return
  wanted = json.loads(json.dumps(config.to_json()))
  run_fields = [k for k in config.run_fields()
                if reads is None or k in ('exp', 'quick', *reads)]
  diffs = [f'{k}: {stored.get(k)!r} there, {wanted[k]!r} now'
           for k in run_fields if stored.get(k) != wanted[k]]
  if diffs:
    raise ConfigError(
        f'--workdir: {workdir} holds a run with different settings ('
        + '; '.join(diffs) + '); pass a new --workdir, or --overwrite to '
        'discard it')


class RunDir:
  """An open run: holds the workdir lock until closed."""

  def __init__(self, workdir, checkpoint_dir, *, is_writer: bool = True):
    self.path = storage.path(workdir)
    self.checkpoint_dir = storage.path(checkpoint_dir)
    self.is_writer = is_writer  # only process 0 writes the run's files
    self._lock = None

  def open(self, config: Config, *, overwrite: bool, extra: dict) -> 'RunDir':
    if not self.is_writer:
      return self  # process 0 owns the workdir, its lock and its config
    try:
      return self._open(config, overwrite=overwrite, extra=extra)
    except ConfigError:
      raise
    except Exception as e:  # a bucket that refuses: one line, not a traceback
      if not storage.is_remote(self.path):
        raise
      raise ConfigError(f'--workdir: cannot write to {self.path} '
                        f'({storage.reason(e)})') from None

  def _open(self, config: Config, *, overwrite: bool, extra: dict):
    self.path.mkdir(parents=True, exist_ok=True)
    if not storage.is_remote(self.path):
      self._take_lock()
    if overwrite:
      for child in self.path.iterdir():
        if child.name != LOCK_FILE:
          child.rmtree() if child.is_dir() else child.unlink()
      if self.checkpoint_dir.exists():
        self.checkpoint_dir.rmtree()
    self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    if stored_config(self.path) is None:
      from src.record import write_json
      write_json(self.path / CONFIG_FILE, {
          'config': config.to_json(),
          'command': ' '.join([os.path.basename(sys.executable)] + sys.argv),
          # Where the groups' checkpoints went, as given (src/analysis.py).
          'checkpoint_dir': os.fspath(self.checkpoint_dir),
          'created': time.strftime('%Y-%m-%dT%H:%M:%S%z'), **extra})
    return self

  def _take_lock(self) -> None:
    self._lock = open(os.path.join(self.path, LOCK_FILE), 'a+')
    try:
      fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      self._lock.seek(0)
      holder = self._lock.read().strip() or 'another process'
      self._lock.close()
      raise ConfigError(f'--workdir: {self.path} is in use by {holder}; wait '
                        'for it to finish or pass another --workdir') from None
    self._lock.seek(0)
    self._lock.truncate()
    self._lock.write(f'pid {os.getpid()}\n')
    self._lock.flush()

  def close(self) -> None:
    if self._lock is not None:
      fcntl.flock(self._lock, fcntl.LOCK_UN)
      self._lock.close()
      self._lock = None

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()
