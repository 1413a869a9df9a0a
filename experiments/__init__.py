"""One module per `--exp`: what it measures, for the shared runner
(`src/experiment.py` lists what a module supplies). A new experiment is one
file here and its name in EXPERIMENTS.

Imported lazily by name, so `run.py --help` and flag checks stay fast.
"""

import dataclasses
import importlib

from src.config import Config

EXPERIMENTS = ('distance', 'gating', 'attention', 'gradient', 'cost', 'heads',
               'induction', 'budget', 'throughput', 'routing', 'recall',
               'all')


_REGISTERED = {}  # experiments registered at run time (tests, notebooks)


def register(name: str, module) -> None:
  """An experiment defined elsewhere than this folder (a test's)."""
  global EXPERIMENTS
  _REGISTERED[name] = module
  EXPERIMENTS = tuple(dict.fromkeys(EXPERIMENTS + (name,)))


def load(name: str):
  if name not in EXPERIMENTS:
    raise KeyError(name)
  if name in _REGISTERED:
    return _REGISTERED[name]
  return importlib.import_module(f'experiments.{name}')


def fields(name: str) -> tuple[str, ...]:
  """The config fields `--exp=NAME` reads (its FIELDS), in Config's order;
  for an experiment made of parts (`all`), the union of its parts'."""
  module = load(name)
  wanted = set(getattr(module, 'FIELDS', ())) if hasattr(
      module, 'PARTS') else set()
  for part in getattr(module, 'PARTS', (name,)):
    wanted |= set(load(part).FIELDS)
  return tuple(f.name for f in dataclasses.fields(Config) if f.name in wanted)
