"""`run.py` in a process whose JAX has no usable platform: starting a
backend there raises, so `--exp=all`'s parent shows it never starts one
(its parts, processes of their own, read JAX_PLATFORMS=cpu from the
environment as usual).

  python tests/no_backend_run.py ARGS
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jax  # pylint: disable=wrong-import-position
from absl import app  # pylint: disable=wrong-import-position
import run  # pylint: disable=wrong-import-position

jax.config.update('jax_platforms', 'no_such_platform')
app.run(run.main, flags_parser=run.parse_flags)
