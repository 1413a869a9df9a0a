"""What a run's config.json records so that it can be reproduced: the code
(git commit, dirty flag), the package versions, the machine, the JAX/XLA
environment and the flags as resolved, flagfiles included.

Nothing here starts a JAX backend: the devices are handed in by the caller
(`--exp=all`'s parent has none; each part records its own).
"""

import importlib.metadata
import os
import platform
import socket
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The stack a result depends on; accelerator plugins are listed when present.
PACKAGES = ('jax', 'jaxlib', 'libtpu', 'libtpu-nightly', 'jax-cuda12-plugin',
            'jax-cuda12-pjrt', 'jax-cuda13-plugin', 'jax-cuda13-pjrt', 'flax',
            'optax', 'orbax-checkpoint', 'numpy', 'scipy', 'tensorboardX',
            'etils', 'gcsfs')
ENV_PREFIXES = ('JAX_', 'XLA_', 'LIBTPU_', 'TPU_')


def versions() -> dict[str, str]:
  out = {}
  for name in PACKAGES:
    try:
      out[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      pass
  return out


def git(root: str = ROOT) -> dict | None:
  """The checkout's commit and whether tracked or new files differ from it
  (None outside a git checkout, or without git)."""
  def run(*args):  # stripped of the newline only: porcelain lines start
    # with a space where the index is unchanged
    return subprocess.run(['git', '-C', root, *args], capture_output=True,
                          text=True, timeout=10, check=True).stdout.rstrip('\n')
  try:
    commit = run('rev-parse', 'HEAD')
    changed = run('status', '--porcelain').splitlines()
  except (OSError, subprocess.SubprocessError):
    return None
  return {'commit': commit, 'dirty': bool(changed),
          'changed': [line[3:] for line in changed][:50]}


def environment() -> dict[str, str]:
  return {k: v for k, v in sorted(os.environ.items())
          if k.startswith(ENV_PREFIXES)}


# As the user set it: a started backend adds its own (TPU_SKIP_MDS_QUERY).
_ENVIRONMENT_AT_IMPORT = environment()


def cpu() -> str:
  """The host's processor and the cores this process may use: 'AMD EPYC
  7B13, 2 cores' (the model from /proc/cpuinfo where there is one)."""
  model = platform.processor() or platform.machine()
  try:
    with open('/proc/cpuinfo') as f:
      for line in f:
        if line.startswith('model name'):
          model = line.split(':', 1)[1].strip()
          break
  except OSError:
    pass
  cores = (len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity')
           else os.cpu_count())
  return f'{model}, {cores} cores'


def collect(*, flags: dict, flag_sources: dict, flagfiles: dict,
            devices=None, process_count: int | None = None,
            determinism: dict | None = None) -> dict:
  """The provenance block of config.json: `flags` every flag's value,
  `flag_sources` where each given one came from, `flagfiles` their text;
  `devices` the JAX devices (None where no backend was started);
  `determinism` what `determinism.configure` set (None: nothing asked)."""
  return {
      'git': git(),
      'versions': versions(),
      'python': sys.version.split()[0],
      'hostname': socket.gethostname(),
      'platform': platform.platform(),
      'cpu': cpu(),
      'devices': None if devices is None else [str(d) for d in devices],
      'device_kind': None if not devices else devices[0].device_kind,
      'process_count': process_count,
      'environment': _ENVIRONMENT_AT_IMPORT,
      'determinism': determinism,
      'flags': flags,
      'flag_sources': flag_sources,
      'flagfiles': flagfiles,
  }
