"""One module per `--exp`: each has DEFAULTS (a Config) and run(config, run_dir).

Imported lazily by name, so `run.py --help` and flag checks stay fast.
"""

import importlib

EXPERIMENTS = ('distance', 'gating', 'attention', 'gradient', 'cost', 'heads',
               'induction', 'budget', 'throughput', 'all')


def load(name: str):
  if name not in EXPERIMENTS:
    raise KeyError(name)
  return importlib.import_module(f'experiments.{name}')
