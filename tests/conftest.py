import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault('JAX_PLATFORMS', 'cpu')
# The tests' programs are tiny and most run once: compiling them is most of
# the suite's time. LLVM's optimisation level 0 (XLA's HLO passes, and so
# the programs' operations and their cost analysis, unchanged) compiles them
# faster (docs/ENGINEERING.md); every test passes at either level. And the
# two xdist workers already keep both cores busy, so each process runs its
# operations on one thread: Eigen's intra-op threads would only contend with
# the other worker. Every process of the session inherits both flags
# (workers, the fork server, each `run.py`); a run outside the tests
# compiles and runs at XLA's defaults. A flag set in XLA_FLAGS is left as
# set.
for flag in ('--xla_backend_optimization_level=0',
             '--xla_cpu_multi_thread_eigen=false'):
  if flag.partition('=')[0] not in os.environ.get('XLA_FLAGS', ''):
    os.environ['XLA_FLAGS'] = (os.environ.get('XLA_FLAGS', '') + ' '
                               + flag).strip()

# One persistent compilation cache for the whole session, shared by the
# xdist workers (they inherit the controller's environment) and by every
# `run.py` a test starts (tests/helpers.py passes --compilation_cache_dir):
# the tests compile the same tiny programs again and again. Numbers do not
# change: a cached program is the program.
CACHE = 'SEARCHLIGHT_TEST_COMPILATION_CACHE'


def pytest_configure(config):
  # xdist would order the files by their number of tests; keep ours (below).
  config.option.loadscopereorder = False
  if CACHE not in os.environ:
    os.environ[CACHE] = tempfile.mkdtemp(prefix='searchlight-xla-cache-')
    config._searchlight_cache_owner = True
  from src import launch
  launch.use_compilation_cache(os.environ[CACHE])


# The files in the order the two workers take them (`--dist loadfile`): the
# longest first, so that no long file starts last while the other worker
# idles; a file not named here follows them.
SLOWEST_FIRST = (
    'test_linear_models.py',
    'test_cost.py',
    'test_analysis.py',
    'test_heads_induction.py',
    'test_resume.py',
    'test_ownership.py',
    'test_scale.py',
    'test_gradient.py',
    'test_train.py',
    'test_distance_e2e.py',
    'test_attention.py',
    'test_models.py',
    'test_all.py',
)


def pytest_collection_modifyitems(config, items):
  rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
  items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_unconfigure(config):
  if getattr(config, '_searchlight_cache_owner', False):
    shutil.rmtree(os.environ.pop(CACHE), ignore_errors=True)
