"""One module per `--exp`, each an `experiment.Experiment` (its EXPERIMENT):
what it measures and claims; `src/runner.py` does the rest. A
new experiment is one file here and its name in EXPERIMENTS (or, from a
test or a notebook, `register`).

Each is imported by name (`load`); run.py imports them all, since their
config classes say which flags exist.
"""

import dataclasses
import importlib

EXPERIMENTS = ('distance', 'gating', 'attention', 'gradient', 'cost', 'heads',
               'induction', 'budget', 'throughput', 'routing', 'recall',
               'lstm97', 'all')


_REGISTERED = {}  # experiments registered at run time (tests, notebooks)


def register(experiment) -> None:
  """An experiment defined elsewhere than this folder (a test's), by its
  name."""
  global EXPERIMENTS
  _REGISTERED[experiment.name] = experiment
  EXPERIMENTS = tuple(dict.fromkeys(EXPERIMENTS + (experiment.name,)))


def load(name: str):
  """The experiment `--exp=NAME` runs."""
  if name not in EXPERIMENTS:
    raise KeyError(name)
  if name in _REGISTERED:
    return _REGISTERED[name]
  return importlib.import_module(f'experiments.{name}').EXPERIMENT


def flag_fields() -> dict:
  """{name: dataclass field} of every experiment's field flags: what run.py
  defines. A name two experiments declare takes the same syntax in both."""
  out = {}
  for name in EXPERIMENTS:
    config = type(load(name).defaults)
    for field in dataclasses.fields(config):
      if field.name in config.flags():
        out.setdefault(field.name, field)
  return out
