"""One module per `--exp`: each has DEFAULTS (a Config), FIELDS (the config
fields it reads) and run(config, run_dir).

Imported lazily by name, so `run.py --help` and flag checks stay fast.
"""

import dataclasses
import importlib

from src.config import Config

EXPERIMENTS = ('distance', 'gating', 'attention', 'gradient', 'cost', 'heads',
               'induction', 'budget', 'throughput', 'all')


def load(name: str):
  if name not in EXPERIMENTS:
    raise KeyError(name)
  return importlib.import_module(f'experiments.{name}')


def fields(name: str) -> tuple[str, ...]:
  """The config fields `--exp=NAME` reads (its FIELDS), in Config's order;
  for an experiment made of parts (`all`), the union of its parts'."""
  module = load(name)
  wanted = set()
  for part in getattr(module, 'PARTS', (name,)):
    wanted |= set(load(part).FIELDS)
  return tuple(f.name for f in dataclasses.fields(Config) if f.name in wanted)
