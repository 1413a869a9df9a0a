"""`run.py` in a process whose JAX has no usable platform: starting a
backend there raises, so `--exp=all`'s parent shows it never starts one.
The parts it forks (`launch.fork`) would inherit that; each is given the
CPU back, as a process started afresh with JAX_PLATFORMS=cpu has it.

  python tests/no_backend_run.py ARGS
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jax  # pylint: disable=wrong-import-position
from absl import app  # pylint: disable=wrong-import-position
import run  # pylint: disable=wrong-import-position
from src import launch  # pylint: disable=wrong-import-position

fork = launch.fork


def fork_on_cpu(run_part, argv):
  def run_part_on_cpu(argv):
    jax.config.update('jax_platforms', 'cpu')
    run_part(argv)
  return fork(run_part_on_cpu, argv)


launch.fork = fork_on_cpu
jax.config.update('jax_platforms', 'no_such_platform')
app.run(run.main, flags_parser=run.parse_flags)
