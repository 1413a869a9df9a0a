import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault('JAX_PLATFORMS', 'cpu')

# One persistent compilation cache for the whole session, shared by the
# xdist workers (they inherit the controller's environment) and by every
# `run.py` a test starts (tests/helpers.py passes --compilation_cache_dir):
# the tests compile the same tiny programs again and again. Numbers do not
# change: a cached program is the program.
CACHE = 'SEARCHLIGHT_TEST_COMPILATION_CACHE'


def pytest_configure(config):
  if CACHE not in os.environ:
    os.environ[CACHE] = tempfile.mkdtemp(prefix='searchlight-xla-cache-')
    config._searchlight_cache_owner = True
  import jax
  jax.config.update('jax_compilation_cache_dir', os.environ[CACHE])
  jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)


def pytest_unconfigure(config):
  if getattr(config, '_searchlight_cache_owner', False):
    shutil.rmtree(os.environ.pop(CACHE), ignore_errors=True)
