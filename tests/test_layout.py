"""The house a newcomer walks: run.py reaches `train_step` in four hops,
no module is past 600 lines (a model's past 500), the library never
imports an experiment, no experiment imports another, and no two modules
import each other, however indirectly."""

import ast
import inspect

import experiments
from tests.helpers import ROOT

MAX_LINES, MAX_MODEL_LINES = 600, 500


def modules() -> dict[str, ast.Module]:
  """{dotted name: syntax tree} of run.py, src/ and experiments/."""
  paths = [ROOT / 'run.py', *sorted((ROOT / 'src').rglob('*.py')),
           *sorted((ROOT / 'experiments').glob('*.py'))]
  out = {}
  for path in paths:
    name = '.'.join(path.relative_to(ROOT).with_suffix('').parts)
    out[name.removesuffix('.__init__')] = ast.parse(path.read_text())
  return out


def imports(tree: ast.Module, known) -> set[str]:
  """The modules of `known` that `tree` imports at its top level (an import
  inside a function runs later, on purpose: not a floor)."""
  out = set()
  for node in tree.body:
    if isinstance(node, ast.Import):
      out |= {a.name for a in node.names if a.name in known}
    elif isinstance(node, ast.ImportFrom) and node.module:
      for a in node.names:
        full = f'{node.module}.{a.name}'
        out.add(full if full in known else node.module)
  return out & set(known)


def test_run_py_reaches_train_step_in_four_hops():
  """run.py's main -> runner.train_and_evaluate (the loop) ->
  Ensemble.train_chunk -> its compiled chunk (`_train_chunk`, a scan) ->
  train_step."""
  import run
  from src import runner, train
  assert 'runner.train_and_evaluate(' in inspect.getsource(run.main)
  assert 'ensemble.train_chunk(' in inspect.getsource(
      runner.train_and_evaluate)
  assert 'self._train_chunk' in inspect.getsource(
      train.Ensemble._train_program)
  assert '_train_program(' in inspect.getsource(train.Ensemble.train_chunk)
  assert 'train_step, self.graphdef' in inspect.getsource(
      train.Ensemble._train_chunk)


def test_no_module_is_two_files():
  long = {}
  for path in [ROOT / 'run.py', *(ROOT / 'src').rglob('*.py'),
               *(ROOT / 'experiments').glob('*.py')]:
    limit = (MAX_MODEL_LINES if path.parent.name == 'models'
             else MAX_LINES)
    lines = len(path.read_text().splitlines())
    if lines > limit:
      long[str(path.relative_to(ROOT))] = lines
  assert not long, long


def test_imports_go_one_way():
  trees = modules()
  graph = {name: imports(tree, trees) - {name}
           for name, tree in trees.items()}
  library = [n for n in graph if n.startswith('src')]
  assert not [n for n in library if any(
      d == 'run' or d.startswith('experiments') for d in graph[n])]
  names = {f'experiments.{e}' for e in experiments.EXPERIMENTS} - {
      'experiments.all'}  # --exp=all runs the others, as processes
  for name in names & set(graph):
    assert not graph[name] & names, (name, graph[name] & names)
  floors(graph)


def floors(graph: dict) -> dict:
  """Each module's floor, one above everything it imports; a circle (no
  floor can be given) fails, naming it."""
  floor = {}

  def floor_of(name, path=()):
    assert name not in path, 'import circle: ' + ' -> '.join(path + (name,))
    if name not in floor:
      floor[name] = 1 + max((floor_of(d, path + (name,))
                             for d in graph[name]), default=0)
    return floor[name]
  for name in graph:
    floor_of(name)
  return floor


def test_the_checks_find_a_circle_and_read_an_import():
  a = ast.parse('from src import b\nimport src.c\n')
  known = {'src.a': a, 'src.b': None, 'src.c': None}
  assert imports(a, known) == {'src.b', 'src.c'}
  assert floors({'a': {'b'}, 'b': {'c'}, 'c': set()}) == {
      'a': 3, 'b': 2, 'c': 1}
  try:
    floors({'a': {'b'}, 'b': {'c'}, 'c': {'a'}})
  except AssertionError as e:
    assert 'a -> b -> c -> a' in str(e)
  else:
    raise AssertionError('a circle passed')
