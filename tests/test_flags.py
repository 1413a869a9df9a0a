"""Flags: each experiment declares the config fields it reads."""

import ast
import dataclasses

import pytest

import experiments
from src.config import Config
from tests.helpers import ROOT

FIELD_NAMES = {f.name for f in dataclasses.fields(Config)} - {'exp', 'quick'}


@pytest.mark.parametrize('name', [e for e in experiments.EXPERIMENTS
                                  if e != 'all'])
def test_fields_cover_what_the_experiment_reads(name):
  """Every `config.<field>` in the module is declared: a flag it reads is
  never refused. (Fields read through src/sweep.py are declared by hand.)"""
  tree = ast.parse((ROOT / 'experiments' / f'{name}.py').read_text())
  read = {node.attr for node in ast.walk(tree)
          if isinstance(node, ast.Attribute) and node.attr in FIELD_NAMES
          and getattr(node.value, 'id', '') == 'config'}
  declared = experiments.load(name).FIELDS
  assert read <= set(declared), read - set(declared)
  assert set(declared) <= FIELD_NAMES and len(set(declared)) == len(declared)


def test_all_reads_the_union_of_its_parts():
  parts = experiments.load('all').PARTS
  union = set().union(*(experiments.load(p).FIELDS for p in parts))
  assert set(experiments.fields('all')) == union
  assert 'vocab' in union and 'vocab' not in experiments.fields('distance')
