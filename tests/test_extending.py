"""The README's "Extending it", done as it says in a copy of the tree: a
new experiment (the README's Entropy, saved as experiments/entropy.py and
named in EXPERIMENTS) and a new recurrent variant (the IRNN: one
`cell_spec` entry, a `functools.partial` of a Flax cell and an init, in
src/models/__init__.py), then `python docs/sync_readme.py`; both run end to
end, and the copy's own docs tests pass (its REFERENCE rows written from
the registry and the experiments' classes). No other file changes."""

import subprocess
import sys

from tests import helpers
from tests.test_experiment import ENTROPY

IRNN = '''

def _identity_recurrence(cell, length, key):
  """The IRNN's recurrence (Le, Jaitly & Hinton 2015): identity, bias 0."""
  del length, key
  cell.dense_h.kernel[...] = jax.numpy.eye(cell.hidden_features)
  cell.dense_i.bias[...] = 0 * cell.dense_i.bias[...]


register(cell_spec(
    'irnn', PLAIN, functools.partial(RNN, activation_fn=jax.nn.relu),
    _identity_recurrence, init='Le et al. 2015: identity recurrence, ReLU',
    init_name='identity', about='an Elman RNN with ReLU', color='#123456'))
'''


def _copy(tree):
  files = subprocess.run(['git', 'ls-files'], cwd=helpers.ROOT, check=True,
                         capture_output=True, text=True).stdout.split()
  for f in files:
    (tree / f).parent.mkdir(parents=True, exist_ok=True)
    (tree / f).write_bytes((helpers.ROOT / f).read_bytes())


def _python(tree, *args):
  return subprocess.run([sys.executable, *map(str, args)], cwd=tree,
                        capture_output=True, text=True, timeout=600,
                        env=helpers.child_env())


def test_an_experiment_and_a_model_added_as_the_readme_says(tmp_path):
  tree = tmp_path / 'tree'
  _copy(tree)
  (tree / 'experiments' / 'entropy.py').write_text(ENTROPY)
  names = tree / 'experiments' / '__init__.py'
  text = names.read_text()
  assert "'lstm97', 'all')" in text
  names.write_text(text.replace("'lstm97', 'all')",
                                "'lstm97', 'all', 'entropy')"))
  registry = tree / 'src' / 'models' / '__init__.py'
  registry.write_text(registry.read_text() + IRNN)
  proc = _python(tree, 'docs/sync_readme.py')
  assert proc.returncode == 0, proc.stderr[-3000:]
  reference = (tree / 'docs' / 'REFERENCE.md').read_text()
  assert '| `irnn` | plain recurrent |' in reference and '| entropy | `' in reference
  tiny = ['--seeds=6', '--steps=10', '--chunk_steps=10', '--batch_size=16',
          '--eval_examples=64']
  for args in (['--exp=entropy', '--lengths=8', *tiny],
               ['--exp=distance', '--models=irnn', '--lengths=3', *tiny]):
    proc = _python(tree, 'run.py', *helpers.cached(args),
                   f'--workdir={tmp_path}/{args[0][6:]}',
                   f'--checkpoint_dir={tmp_path}/ckpt_{args[0][6:]}')
    assert proc.returncode == 0, (args, proc.stderr[-3000:])
  rows = helpers.read_csv(tmp_path / 'distance' / 'results.csv')
  assert {r['model'] for r in rows} == {'irnn'}
  assert (tmp_path / 'entropy' / 'summary.json').is_file()
  proc = _python(tree, '-m', 'pytest', '-q', '-p', 'no:cacheprovider',
                 'tests/test_docs.py', '-k', 'reference or readme')
  assert proc.returncode == 0, proc.stdout[-3000:]
