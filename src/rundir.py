"""A workdir is one run: its config, a lock, and the paths it owns.

A run owns its workdir and one checkpoint folder. The folder records its
owner (`owner.json`: the workdir it was made for and the settings that
define results), and each group's folder the recipe its checkpoints were
trained from (`recipe.json`), so that a run never resumes from, reports
from or deletes another run's checkpoints.

`check` only reads (it runs with the flag checks, before anything is
written); `RunDir.open` then creates the folders, takes the lock, and stores
the config and the ownership records on a new run. Paths may be local or in
a bucket (`src/storage.py`); a bucket workdir has no lock (object storage
has no `fcntl`): one run per bucket workdir is the user's to keep.
"""

import fcntl
import json
import os
import sys
import tempfile
import time

from src import storage
from src.config import Config, ConfigError

CONFIG_FILE = 'config.json'
LOCK_FILE = '.lock'
OWNER_FILE = 'owner.json'  # in a checkpoint folder: the run that owns it
RECIPE_FILE = 'recipe.json'  # in a group's folder: what its checkpoints are


def default_checkpoint_dir(workdir):
  """Where a run's checkpoints go unless --checkpoint_dir says: for a
  workdir under ./runs, the same path under ./checkpoints (runs/d2 ->
  checkpoints/d2); for any other, `<workdir>/checkpoints` (a bucket's in the
  bucket). Two workdirs never share one."""
  if not storage.is_remote(workdir):
    below = os.path.relpath(os.path.abspath(os.fspath(workdir)),
                            os.path.abspath('runs'))
    if below != '.' and not below.startswith('..'):
      return storage.path(os.path.join('checkpoints', below))
  return storage.path(workdir) / 'checkpoints'


def check_writable(flag: str, path) -> None:
  """Refuses a path the run could not write to; leaves nothing behind."""
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
  # Tried, not asked: os.access reads mode bits alone, and root passes it
  # everywhere, /proc and /sys included, where no folder can be made. So
  # make an empty folder where the run's first would go, and remove it.
  try:
    os.rmdir(tempfile.mkdtemp(prefix='.searchlight-probe-', dir=existing))
  except OSError as e:
    raise ConfigError(f'--{flag}: {text} is not writable (at {existing}: '
                      f'{e.strerror}); expected a folder you can write to'
                      ) from None


def _read_json(path) -> dict | None:
  path = storage.path(path)
  if not path.exists():
    return None
  try:
    return json.loads(path.read_text())
  except ValueError:
    return None


def stored_config(workdir) -> dict | None:
  meta = _read_json(storage.path(workdir) / CONFIG_FILE)
  return meta.get('config') if isinstance(meta, dict) else None


def recorded_checkpoint_dir(meta: dict) -> str | None:
  """The checkpoint folder a run's config.json names, as given (None in a
  run stored before config.json named it: such a run is re-run)."""
  return meta.get('checkpoint_dir')


# -- ownership ----------------------------------------------------------------------

def _where(path) -> str:
  """A path as ownership compares it: absolute (local) or the URL."""
  text = os.fspath(path)
  return text if storage.is_remote(text) else os.path.normpath(
      os.path.abspath(text))


def _within(path: str, folder: str) -> bool:
  return path == folder or path.startswith(folder.rstrip('/') + '/')


def owner_record(workdir, checkpoint_dir, config: Config) -> dict:
  """What a checkpoint folder records of the run that owns it. The workdir
  is kept absolute and relative to the folder, so that a repository moved
  whole keeps its runs."""
  record = {'workdir': _where(workdir), 'exp': config.exp,
            'config': config.to_json(),
            'created': time.strftime('%Y-%m-%dT%H:%M:%S%z')}
  if not storage.is_remote(workdir) and not storage.is_remote(checkpoint_dir):
    record['workdir_from_here'] = os.path.relpath(_where(workdir),
                                                  _where(checkpoint_dir))
  return record


def owner(checkpoint_dir) -> str | None:
  """The workdir (absolute, or its URL) that owns `checkpoint_dir`, None
  when the folder records none. A record whose workdir moved with it (the
  same place relative to the folder) names it where it is now."""
  record = _read_json(storage.path(checkpoint_dir) / OWNER_FILE)
  if not isinstance(record, dict) or 'workdir' not in record:
    return None
  if 'workdir_from_here' in record and not storage.is_remote(checkpoint_dir):
    moved = os.path.normpath(os.path.join(_where(checkpoint_dir),
                                          record['workdir_from_here']))
    if moved != record['workdir'] and os.path.exists(moved):
      return moved
  return record['workdir']


def _claims(workdir, checkpoint_dir) -> bool:
  """Whether the run in `workdir` names `checkpoint_dir` in its config.json:
  how a folder from before ownership records is known to be its."""
  meta = _read_json(storage.path(workdir) / CONFIG_FILE)
  if not isinstance(meta, dict) or 'config' not in meta:
    return False
  named = recorded_checkpoint_dir(meta)
  return named is not None and _where(named) == _where(checkpoint_dir)


def _has_content(folder, ignore=(OWNER_FILE,)) -> bool:
  folder = storage.path(folder)
  return folder.exists() and any(
      child.name not in ignore for child in folder.iterdir())


def check_ownership(workdir, checkpoint_dir, overwrite: bool) -> None:
  """Refuses a checkpoint folder that another run owns, or one that holds
  checkpoints no record ties to this run; with --overwrite, also a workdir
  that is not a run's and a checkpoint folder holding another run's."""
  mine, ckpt = _where(workdir), storage.path(checkpoint_dir)
  leave_out = (f'pass another --checkpoint_dir, or none (the default '
               f'follows --workdir: {default_checkpoint_dir(workdir)})')
  holder = owner(ckpt)
  if holder is not None and holder != mine:
    raise ConfigError(f'--checkpoint_dir: {ckpt} belongs to the run in '
                      f'{holder}, not to this one ({workdir}); {leave_out}')
  if holder is None and _has_content(ckpt) and not _claims(workdir, ckpt):
    raise ConfigError(f'--checkpoint_dir: {ckpt} holds files that no record '
                      f'ties to this run ({workdir}): another run\'s, or '
                      f'not checkpoints; {leave_out}')
  if not overwrite:
    return
  if (_has_content(workdir, ignore=(LOCK_FILE,))
      and stored_config(workdir) is None):
    raise ConfigError(f'--overwrite: {workdir} is not a run\'s folder (no '
                      f'{CONFIG_FILE}) and is not empty; --overwrite '
                      'discards runs only: pass another --workdir')
  if ckpt.exists():
    for record in [*ckpt.glob(f'*/{OWNER_FILE}'),
                   *ckpt.glob(f'*/*/{OWNER_FILE}')]:
      other = owner(record.parent)
      if other is not None and not _within(other, mine):
        raise ConfigError(
            f'--overwrite: {ckpt} holds {record.parent}, which belongs to the '
            f'run in {other}: --overwrite discards only this run\'s; move it '
            'or pass another --checkpoint_dir')


def check_recipe(folder, recipe: dict, workdir=None) -> None:
  """Refuses a group's checkpoints that were trained from another recipe
  (model and its settings, task, length, width, seeds, rates): restored,
  they would be another model's results. Its recipe.json says; a folder from
  before them is compared with what `workdir`'s groups.json recorded."""
  folder = storage.path(folder)
  stored = _read_json(folder / RECIPE_FILE)
  if stored is None and workdir is not None and _has_content(folder):
    stored = (_read_json(storage.path(workdir) / 'groups.json') or {}).get(
        folder.name)
  wanted = json.loads(json.dumps(recipe))
  if stored is None or stored == wanted:
    return
  diffs = '; '.join(f'{k}: {a!r} there, {b!r} now'
                    for k, a, b in _differences(stored, wanted))
  raise ConfigError(f'--checkpoint_dir: {folder} holds checkpoints built '
                    f'from another recipe ({diffs}); --overwrite discards '
                    'them, or pass another --checkpoint_dir')


def _differences(a, b, prefix=''):
  if isinstance(a, dict) and isinstance(b, dict):
    for k in dict.fromkeys([*a, *b]):
      yield from _differences(a.get(k), b.get(k), f'{prefix}{k}.')
  elif a != b:
    yield prefix.rstrip('.'), a, b


def claim_group(folder, recipe: dict, workdir=None, *,
                is_writer: bool = True) -> None:
  """Checks a group's folder against its recipe, then records the recipe
  there (process 0), before any checkpoint of it is restored or saved."""
  check_recipe(folder, recipe, workdir)
  path = storage.path(folder) / RECIPE_FILE
  if is_writer and not path.exists():
    from src.record import write_json
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, recipe)


# config.json's layout; a run stored by a newer layout is not read.
SCHEMA_VERSION = 2


def check(workdir, checkpoint_dir, config: Config, overwrite: bool,
          recipes: dict | None = None,
          defaults: Config | None = None) -> None:
  """Refuses unusable paths, a checkpoint folder that is not this run's
  (`check_ownership`), a group whose checkpoints were built from another
  of `recipes` ({group name: recipe}), and a workdir that holds a different
  run (`check_settings`)."""
  check_writable('workdir', workdir)
  check_writable('checkpoint_dir', checkpoint_dir)
  check_ownership(workdir, checkpoint_dir, overwrite)
  if overwrite:
    return
  check_settings(workdir, config, defaults)
  for name, recipe in (recipes or {}).items():
    check_recipe(storage.path(checkpoint_dir) / name, recipe, workdir)


def check_settings(workdir, config: Config,
                   defaults: Config | None = None) -> None:
  """Refuses a workdir that holds a different run: one whose config differs
  in a field that defines results and that is one of the experiment's flags
  (`config.flags()`). A field it does not take cannot have changed its
  results; a field the stored run does not have (added since) counts as the
  experiment's `defaults` value, so an older run resumes unless the field
  is given another value."""
  meta = _read_json(storage.path(workdir) / CONFIG_FILE) or {}
  if meta.get('schema', 1) > SCHEMA_VERSION:
    raise ConfigError(f'--workdir: {workdir} holds a run stored by a newer '
                      f'version (config.json schema {meta["schema"]}); run '
                      'it with that version, or pass another --workdir')
  stored = stored_config(workdir)
  if stored is None:
    return
  wanted = json.loads(json.dumps(config.to_json()))
  absent = json.loads(json.dumps((defaults or config).to_json()))
  run_fields = [k for k in config.run_fields()
                if k in ('exp', 'quick', *config.flags())]
  there = lambda k: stored[k] if k in stored else absent[k]
  diffs = [f'{k}: ' + (f'{stored[k]!r} there' if k in stored else
                       f'absent there (the default, {absent[k]!r})')
           + f', {wanted[k]!r} now'
           for k in run_fields if there(k) != wanted[k]]
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
    if overwrite:  # only this run's: checked again right before
      check_ownership(self.path, self.checkpoint_dir, overwrite=True)
      for child in self.path.iterdir():
        if child.name != LOCK_FILE:
          child.rmtree() if child.is_dir() else child.unlink()
      if self.checkpoint_dir.exists():
        self.checkpoint_dir.rmtree()
    self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    from src.record import write_json
    if owner(self.checkpoint_dir) is None:
      write_json(self.checkpoint_dir / OWNER_FILE,
                 owner_record(self.path, self.checkpoint_dir, config))
    if stored_config(self.path) is None:
      write_json(self.path / CONFIG_FILE, {
          'schema': SCHEMA_VERSION, 'config': config.to_json(),
          'command': ' '.join([os.path.basename(sys.executable)] + sys.argv),
          # Where the groups' checkpoints went, as given (src/analysis.py).
          'checkpoint_dir': os.fspath(self.checkpoint_dir),
          'created': time.strftime('%Y-%m-%dT%H:%M:%S%z'), **extra})
    return self

  def _take_lock(self) -> None:
    """The workdir's lock file, created and locked (flock); `close` removes
    it, so a finished run leaves none. A file removed between our open and
    our lock is not the lock any more: open the new one."""
    name = os.path.join(self.path, LOCK_FILE)
    while True:
      self._lock = open(name, 'a+')
      try:
        fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except BlockingIOError:
        self._lock.seek(0)
        holder = self._lock.read().strip() or 'another process'
        self._lock.close()
        raise ConfigError(f'--workdir: {self.path} is in use by {holder}; '
                          'wait for it to finish or pass another --workdir'
                          ) from None
      try:
        if os.stat(name).st_ino == os.fstat(self._lock.fileno()).st_ino:
          break
      except FileNotFoundError:
        pass
      self._lock.close()
    self._lock.seek(0)
    self._lock.truncate()
    self._lock.write(f'pid {os.getpid()}\n')
    self._lock.flush()

  def close(self) -> None:
    if self._lock is not None:
      try:  # removed while held: no other process can hold it meanwhile
        os.unlink(self._lock.name)
      except FileNotFoundError:
        pass
      fcntl.flock(self._lock, fcntl.LOCK_UN)
      self._lock.close()
      self._lock = None

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()
