"""src/analysis.py and notebooks/explore.py on two tiny runs of run.py."""

import json
import os
import shutil

import numpy as np
import pytest

from src import analysis
from src import evaluation
from src import probes
from src import scoring
from tests import helpers

# 20 steps, not 40: at 40 every seed solves the task and a reproduced
# accuracy of 1.0 would prove little; here they end between 0.81 and 1.
DISTANCE = ['--models=attention,lstm_chrono', '--lengths=4,8', '--seeds=2',
            '--steps=20', '--chunk_steps=10', '--batch_size=16',
            '--eval_examples=64']
ATTENTION = ['--models=attention', '--lengths=8', '--seeds=2', '--steps=40', '--chunk_steps=20',
             '--batch_size=16', '--eval_examples=64']


@pytest.fixture(scope='module')
def distance(tmp_path_factory):
  root = tmp_path_factory.mktemp('distance')
  helpers.run_ok(root, 'distance', *DISTANCE)
  return root


@pytest.fixture(scope='module')
def attention(tmp_path_factory):
  root = tmp_path_factory.mktemp('attention')
  helpers.run_ok(root, 'attention', *ATTENTION)
  return root


def one_line(error) -> str:
  text = str(error.value)
  assert text and '\n' not in text, text
  return text


def snapshot(folder):
  """Every path under `folder` with its size and modification time."""
  return sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns)
                for p in folder.rglob('*'))


def test_load_run_reads_every_file(distance):
  run = analysis.load_run(distance / 'run')
  csv_rows = helpers.read_csv(distance / 'run/results.csv')
  # Floats were written with repr: read back, they print the same text (an
  # empty cell, validation_accuracy with one rate, reads back as NaN).
  table = run.results.astype(object).where(run.results.notna(), '')
  assert table.astype(str).to_dict('records') == csv_rows
  assert len(run.curves) == len(helpers.read_csv(distance / 'run/curves.csv'))
  assert list(run.curves.columns)[:2] == ['group', 'model']
  stored = json.loads((distance / 'run/config.json').read_text())
  assert run.config == stored['config'] and run.command == stored['command']
  assert run.summary == json.loads((distance / 'run/summary.json').read_text())
  assert sorted(run.groups) == ['attention_L004', 'attention_L008',
                                'lstm_chrono_L004', 'lstm_chrono_L008']
  assert run.checkpoint_dir == f'{distance}/ckpt' == stored['checkpoint_dir']
  assert run.group_of('lstm_chrono', 8) == 'lstm_chrono_L008'
  assert analysis.load_run(run) is run


def test_chrono_groups_record_their_horizon(distance):
  """T_max is the longest length, in each chrono group's recipe and HParams
  session; attention has none."""
  run = analysis.load_run(distance / 'run')
  assert {g: r['model_kwargs'].get('chrono_horizon')
          for g, r in run.groups.items()} == {
              'attention_L004': None, 'attention_L008': None,
              'lstm_chrono_L004': 8, 'lstm_chrono_L008': 8}
  from tensorboard.plugins.hparams import metadata
  for group, horizon in (('lstm_chrono_L004', '8'), ('attention_L004', None)):
    acc, _ = helpers.scalars(distance / 'run/tb' / group, None)
    session = metadata.parse_session_start_info_plugin_data(
        acc.PluginTagToContent('hparams')[metadata.SESSION_START_INFO_TAG])
    hparams = {k: v.string_value for k, v in session.hparams.items()}
    assert hparams.get('chrono_horizon') == horizon


def test_every_seed_reproduces_its_row(distance):
  run = analysis.load_run(distance / 'run')
  assert run.results.accuracy.min() < 1  # the check below is not all ones
  before = snapshot(distance / 'ckpt')
  for row in run.results.itertuples():
    seed = analysis.load_seed(run, run.group_of(row.model, row.length),
                              row.seed)
    assert seed.step == 20 and seed.spec.name == row.model
    # The ensemble's own compiled evaluation: results.csv, bit for bit.
    assert seed.evaluate() == {'accuracy': row.accuracy, 'loss': row.loss}
    # The NNX module alone on the strings the run tested this seed on.
    tokens, labels = seed.eval_strings()
    assert tokens.shape == (64, row.length)
    logits = seed.logits(tokens)
    assert (logits.argmax(-1) == labels).mean() == row.accuracy
    loss, _ = scoring.cross_entropy(logits, labels)
    # Not vmapped nor compiled as one program: equal to a float's rounding.
    np.testing.assert_allclose(float(loss), row.loss, rtol=1e-5)
    np.testing.assert_allclose(seed.margin(tokens),
                               logits[:, 0] - logits[:, 1], rtol=1e-6)
  assert snapshot(distance / 'ckpt') == before  # nothing written or moved


def test_probes_on_a_string_typed_by_hand(distance):
  lstm = analysis.load_seed(distance / 'run', 'lstm_chrono_L008', 1)
  tokens = lstm.encode('A 3 1 4 1 5 2 ?')
  assert tokens.tolist() == [0, 6, 4, 7, 4, 8, 5, 2]
  assert lstm.decode(tokens) == 'A 3 1 4 1 5 2 ?'
  h_LxD = lstm.hidden_states(tokens)
  c_LxD = lstm.hidden_states(tokens, cell=True)
  assert h_LxD.shape == c_LxD.shape == (8, 32)
  assert np.all(np.abs(h_LxD) <= np.tanh(np.abs(c_LxD)) + 1e-6)  # h = o tanh c
  np.testing.assert_allclose(  # the classifier reads the last hidden state
      np.asarray(lstm.model.classifier(h_LxD[-1])), lstm.logits(tokens),
      rtol=1e-5, atol=1e-6)
  assert lstm.hidden_states(tokens[None]).shape == (1, 8, 32)
  att = analysis.load_seed(distance / 'run', 'attention_L008', 0)
  weights = att.searchlight(att.encode('B 0 0 7 7 0 0 ?'))
  assert weights.shape == (8,) and abs(weights.sum() - 1) < 1e-5
  assert att.margin(att.encode('A 3 1 ?')) > 0 > att.margin(
      att.encode('B 3 1 ?'))


def test_searchlight_is_what_the_experiment_logged(attention):
  run = analysis.load_run(attention / 'run')
  per_seed = run.summary['models']['attention']['8']['per_seed']
  for s in range(2):
    seed = analysis.load_seed(run, 'attention_L008', s)
    rows = run.results[run.results.seed == s].set_index('first_symbol')
    tokens, labels = seed.eval_strings()
    weights_BxL = seed.searchlight(tokens)
    for c, cls in enumerate('AB'):
      pos0 = weights_BxL[labels == c, 0].mean()
      np.testing.assert_allclose(pos0, rows.pos0_mass[cls], rtol=1e-5)
      assert rows.pos0_mass[cls] == per_seed[s][f'pos0_mass_{cls}']
    # probes.searchlight on the loaded module, and the experiment's own
    # compiled measurement of it, exactly.
    mine = probes.searchlight(seed.model, tokens, labels)
    np.testing.assert_allclose(mine['pos0_mass'], rows.pos0_mass[['A', 'B']],
                               rtol=1e-5)
    logged = evaluation.measure(seed.ensemble, seed.state['params'],
                                probes.searchlight, num_examples=64)
    assert logged['pos0_mass'][s].tolist() == rows.pos0_mass[
        ['A', 'B']].tolist()
    assert logged['accuracy'][s].tolist() == rows.accuracy[['A', 'B']].tolist()


def test_errors_are_one_line(distance, tmp_path):
  run = analysis.load_run(distance / 'run')
  with pytest.raises(analysis.NotFound) as e:
    analysis.load_seed(run, 'rnn_L008', 0)
  assert 'attention_L004' in one_line(e) and 'lstm_chrono_L008' in one_line(e)
  with pytest.raises(analysis.NotFound) as e:
    analysis.load_seed(run, 'attention_L004', 2)
  assert 'seeds 0..1' in one_line(e)
  with pytest.raises(analysis.NotFound) as e:
    analysis.load_seed(run, 'attention_L004', 0, checkpoint_dir=tmp_path)
  assert 'does not exist' in one_line(e)
  (tmp_path / 'attention_L004').mkdir()
  with pytest.raises(analysis.NotFound) as e:
    analysis.load_seed(run, 'attention_L004', 0, checkpoint_dir=tmp_path)
  assert 'no checkpoint of attention_L004' in one_line(e)
  with pytest.raises(analysis.NotFound) as e:
    analysis.load_run(tmp_path)
  assert 'no config.json' in one_line(e)
  with pytest.raises(analysis.NotFound) as e:
    run.group_of('rnn', 8)
  one_line(e)
  parent = tmp_path / 'all'  # --exp=all: its parts in sub-folders
  shutil.copytree(distance / 'run', parent / 'distance')
  shutil.copy(distance / 'run/config.json', parent)
  with pytest.raises(analysis.NotFound) as e:
    analysis.load_run(parent)
  assert 'sub-folders: distance' in one_line(e)

  lstm = analysis.load_seed(run, 'lstm_chrono_L004', 0)
  att = analysis.load_seed(run, 'attention_L004', 0)
  tokens = att.encode('A 1 ?')
  for ask, error in [
      (lambda: lstm.searchlight(tokens), analysis.Unanswerable),
      (lambda: att.hidden_states(tokens), analysis.Unanswerable),
      (lambda: att.hidden_states(tokens, cell=True), analysis.Unanswerable),
      (lambda: att.encode('A 1 2 3 ?'), ValueError),  # past its positions
      (lambda: att.encode('C 1 ?'), ValueError),
      (lambda: att.encode('A 9 ?'), ValueError),  # num_filler is 8
      (lambda: att.logits([[0, 11, 2]]), ValueError)]:  # past the vocabulary
    with pytest.raises(error) as e:
      ask()
    one_line(e)
  assert lstm.hidden_states(lstm.encode('A 1 2 3 4 5 ?')).shape == (7, 32)


def test_a_damaged_checkpoint_stays_where_it_is(distance, tmp_path):
  shutil.copytree(distance / 'ckpt/attention_L004', tmp_path / 'attention_L004')
  meta = tmp_path / 'attention_L004/20/meta/metadata'
  saved = json.loads(meta.read_text())
  meta.write_text(json.dumps(dict(saved, checksum=saved['checksum'] + 1)))
  before = snapshot(tmp_path)
  with pytest.raises(analysis.NotFound) as e:
    analysis.load_seed(distance / 'run', 'attention_L004', 0,
                       checkpoint_dir=tmp_path)
  assert 'no readable checkpoint' in one_line(e)
  assert snapshot(tmp_path) == before  # not moved aside to 20.bad
  (tmp_path / 'attention_L004/20/state/_METADATA').unlink()
  with pytest.raises(analysis.NotFound) as e:
    analysis.load_seed(distance / 'run', 'attention_L004', 0,
                       checkpoint_dir=tmp_path)
  assert 'no readable checkpoint' in one_line(e)


@pytest.mark.parametrize('pick', [None, 'attention_L008:1'])
def test_notebook_runs_as_a_script(distance, tmp_path, pick):
  env = dict(os.environ, MPLBACKEND='Agg', JAX_PLATFORMS='cpu',
             SEARCHLIGHT_RUN=str(distance / 'run'),
             SEARCHLIGHT_OUT=str(tmp_path))
  if pick:
    env['SEARCHLIGHT_SEED'] = pick
  proc = helpers.run_script(helpers.ROOT / 'notebooks/explore.py', env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  run = analysis.load_run(distance / 'run')
  worst = run.results.loc[run.results.accuracy.idxmin()]
  group, seed = (pick or f'{run.group_of(worst.model, worst.length)}:'
                 f'{worst.seed}').split(':')
  assert f"Seed('{group}', seed {seed}," in proc.stdout
  for name in ('distance.png', 'seed.png'):
    assert f'wrote {tmp_path / name}' in proc.stdout
    helpers.assert_figure(tmp_path / name, min_size=(150, 400))


def test_reference_snippet_runs_as_written(distance, tmp_path, monkeypatch):
  """docs/REFERENCE.md's analysis snippet, from the folder that holds
  `runs/distance` (here the tiny run): every statement as written, the two
  that ask a recurrent net and an attention model each on a seed of that
  kind."""
  import ast
  from tests.test_docs import REFERENCE, _block
  (tmp_path / 'runs').mkdir()
  (tmp_path / 'runs' / 'distance').symlink_to(distance / 'run')
  monkeypatch.chdir(tmp_path)
  code = _block(REFERENCE, 'from src import analysis')
  lines = code.splitlines()
  kind = {'# a recurrent net': 'lstm_chrono', '# an attention model':
          'attention'}
  namespace = {}
  for statement in ast.parse(code).body:
    text = '\n'.join(lines[statement.lineno - 1:statement.end_lineno])
    model = next((m for note, m in kind.items() if note in text), None)
    if model is not None:  # a seed of the kind the statement asks
      run = namespace['run']
      namespace['seed'] = analysis.load_seed(run, run.group_of(model, 8), 0)
    exec(compile(ast.Module([statement], []), 'REFERENCE.md', 'exec'),
         namespace)
  assert np.asarray(namespace['h']).size and np.asarray(namespace['w']).size
