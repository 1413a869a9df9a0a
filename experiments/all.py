"""The whole lesson in one command: every experiment, then REPORT.md.

Command: `python run.py --exp=all`, or `python run.py --exp=all --quick`
for a first look (`--only_check_args` lists the parts and estimates their
time; docs/REPORT.md states what the full run took). Runs the parts in RUNS (every experiment but throughput, and distance and
induction once more for the linear recurrences), each as its own `run.py`
process in a sub-workdir (`<workdir>/<name>`, checkpoints in
`<checkpoint_dir>/<name>`, each part's own), so each resumes as usual; then
reads their summary.json files and writes REPORT.md: the lesson's scorecard,
then claim by claim the measured numbers, the verdict, the figure and the
command that reproduces it. The links are relative: zip the folder or push
it to GitHub and it still reads.
"""

import collections
import dataclasses
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import experiments
from src import checkpoint as checkpoint_lib
from src import claim_text
from src import claims as claims_lib
from src import config as config_lib
from src import experiment
from src import gates as gates_lib
from src import runner
from src import scorecard as scorecard_lib
from src import models as models_lib
from src import power as power_lib
from src import provenance
from src import record
from src import stats
from src import storage
from src.checkpoint import Preempted
from src.config import Config

# The parts, in the order they run: (name, experiment, flags of its own in
# a full run and in a quick one, and its REPORT.md section when it is not
# the experiment's own SECTION). A part's own flags come before the user's,
# so the user's win. `linear` and `induction_linear` measure the recurrences
# that came back (linear attention, LRU, Mamba) on the same claims: Mamba's
# selective scan is the slowest step here on a CPU, so they stop at L=100.
# Each linear architecture at its paper's initialisation (its variants, as
# `lru_disk`, are for their own runs).
# A quick run is a first look at every part in a fraction of the time, its
# tests underpowered by design: on top of each experiment's own --quick, the
# parts that are many small groups (compiling is most of a small group's
# time) keep fewer models and lengths: each still measures every claim it
# makes, on the models that make the contrast.
_LINEARS = ','.join(models_lib.names(
    lambda s: s.family == models_lib.LINEAR and s.name == s.architecture))
_LINEAR = f'--models=attention,lstm_chrono,rnn,{_LINEARS}'
RUNS = (
    ('distance', 'distance', (), (), None),
    # "About 15 steps" per initialisation (Flax's orthogonal recurrent
    # matrix, PyTorch's uniform), at lengths that resolve it.
    ('gives_way', 'distance',
     ('--models=rnn,rnn_uniform', '--lengths=10,15,20,25,30,50',
      '--seeds=16'),
     ('--models=rnn,rnn_uniform', '--lengths=10,15,20,30'),
     '2. Distance: where a plain RNN gives way'),
    # Chrono's LSTM and the RNN both solve L=100 in most seeds (ties at the
    # ceiling, censored): the lengths past it resolve them.
    ('distance_long', 'distance',
     ('--models=lstm_chrono,rnn', '--lengths=20,50,100,200,400',
      '--seeds=8'),
     ('--models=lstm_chrono,rnn', '--lengths=20,50,100'),
     '2. Distance: past the longest length'),
    # 17 seeds, not distance's 24: Mamba's scan is the slowest step here on
    # a CPU; 17 is the fewest at which "stays at 100%" can be held (a 95%
    # bound on the share of seeds above 0.84), and the plan warns of the
    # comparisons' power.
    ('linear', 'distance', (_LINEAR, '--lengths=10,20,50,100', '--seeds=17'),
     (f'--models=attention,{_LINEARS}', '--lengths=5,20'),
     '10. Beyond the lesson: the recurrences that came back, distance'),
    # The memory task with decoys (a quarter of the filler is A or B): the
    # symbol must be found at position 0, not anywhere.
    ('distance_decoys', 'distance', ('--decoys=0.25',),
     ('--decoys=0.25', '--models=attention,lstm_chrono,rnn'),
     '2. Distance, with decoys in the filler'),
    ('attention', 'attention', (), (), None),
    ('attention_decoys', 'attention', ('--decoys=0.25',), ('--decoys=0.25',),
     '3. The searchlight, with decoys in the filler'),
    # 16 seeds, not gradient's 8: the shape of the decay is fitted seed by
    # seed, and at 8 a family of 5 shape tests has under half the power.
    ('gradient', 'gradient', ('--seeds=16',),
     ('--models=attention,lstm,lstm_chrono,rnn', '--bridge_length=40'), None),
    ('cost', 'cost', (), ('--lengths=256,1024,2048',), None),
    ('heads', 'heads', (), (), None),
    ('induction', 'induction', (), (), None),
    # One rate, not induction's grid of three (which would triple the
    # slowest part): "two layers can" is judged; "cannot" reads
    # inconclusive (one learning rate) by design.
    # configs/induction_linear_best.flags runs the grid.
    ('induction_linear', 'induction',
     (f'--models={_LINEARS}', '--learning_rate=3e-3'),
     (f'--models={_LINEARS}', '--lengths=16', '--steps=500'),
     '10. Beyond the lesson: the recurrences that came back, induction'),
    # Gating's own default (7 initialisations, 12 seeds x 3 rates) would
    # take the whole report's CPU budget: here three gated initialisations
    # against the plain RNN (a family of 3 tests, which 8 seeds can decide)
    # at every rate of the grid.
    ('gating', 'gating',
     ('--models=lstm,lstm_fb1,lstm_chrono,rnn', '--seeds=8'),
     ('--lengths=10,50',), None),
    # Budget's own default (4 models x 6 lengths x 20 seeds to 4,000 steps)
    # would be most of the report's time: here the LSTM and the GRU,
    # whose limits lie around 20-30, at those two lengths, still 20
    # seeds (a wall's bound needs them). The RNN's limit lies past 50 (100
    # at 8 seeds), where it would take L = 50, 100 and as long again: its
    # own command is in the README (chrono solves every length to 100).
    ('budget', 'budget',
     ('--models=lstm,gru', '--lengths=20,30'), (), None),
    # Routing's grid of three rates: "cannot" and "more reliably" need each
    # model at its best rate, and a best rate at an end of a grid (every
    # rate of a grid of two) leaves a failure open. 17 seeds, not 10: the
    # copy control is a reliability, which 10 seeds cannot hold.
    ('routing', 'routing', ('--seeds=17',), (), None),
    # 17 seeds, not recall's 8: "attention recalls every pair" is a
    # reliability, which 8 seeds cannot hold.
    ('recall', 'recall', ('--seeds=17',),
     ('--models=attention,lstm_chrono,lru',), None),
)
PARTS = tuple(dict.fromkeys(exp for _, exp, *_ in RUNS))  # experiments
# A part that trains other models beside the ones it is for, as
# comparators: `linear` runs distance's attention, chrono LSTM and RNN again
# on distance's first 17 seeds, the same numbers; its claims about them
# would count distance's evidence twice, so the report keeps only its
# claims about its own family.
OWN_FAMILY = {'linear': models_lib.LINEAR}


def section(name: str) -> tuple[str, str]:
  """(title, figure) of part `name` in REPORT.md: its own title, else its
  experiment's SECTION, and its experiment's FIGURE."""
  _, exp, _, _, title = next(r for r in RUNS if r[0] == name)
  part = experiments.load(exp)
  return title or part.section, part.figure_file


def names() -> tuple[str, ...]:
  """Every part's name, in the order they run (what --parts accepts)."""
  return tuple(r[0] for r in RUNS)


def part_fields(config) -> dict:
  """{part: (its experiment, its own config field flags as text)} for the
  parts `--parts` names, as each part's command line gives them (the
  user's flags go on top: they win)."""
  out = {}
  for name in chosen(config):
    exp, full, fast, _ = next(r[1:] for r in RUNS if r[0] == name)
    own = {}
    for flag in (fast if config.quick else full):
      key, _, value = flag.lstrip('-').partition('=')
      own[key] = value
    out[name] = (exp, own)
  return out


def chosen(config) -> list[str]:
  """The parts `--parts` names (default: every one), in RUNS order."""
  return [n for n in names() if not config.parts or n in config.parts]


def report_order(parts=None) -> list[str]:
  """The parts (default: every one) in the lesson's order (by section
  number), parts of one section in the order they run."""
  number = lambda name: float(section(name)[0].split('.')[0])
  return sorted(parts or names(), key=number)


@dataclasses.dataclass(frozen=True)
class AllConfig(Config):
  parts: tuple[str, ...] = config_lib.field(
      (), 'the parts to run and report (default: every one)',
      'a comma list of the parts of --exp=all',
      lambda flag, text, context: config_lib.choice_list(
          flag, text, context['parts']))
  # Its flags are its parts' (`All.fields`): each part reads its own.
  fixed = tuple(f.name for f in dataclasses.fields(Config))


DEFAULTS = AllConfig(exp='all')
QUICK = dataclasses.replace(DEFAULTS, quick=True)
COLUMNS = ['experiment', 'claim', 'verdict', 'measured', 'kind', 'test',
           'p', 'p_adjusted', 'p_bh', 'bh_verdict', 'lesson', 'role']


# Flags every part takes from the parent as the user gave them, beside the
# config field flags it reads.
PASSED = ('quick', 'compilation_cache_dir', 'nondeterministic',
          'cpu_devices', 'coordinator_address', 'num_processes', 'process_id',
          'distributed', 'verbosity')


def passthrough(part: str, flags) -> list[str]:
  """The flags the user gave that part `part` reads, as its command line."""
  out = []
  for name in experiments.load(part).fields + PASSED:
    if name in flags.present:
      value = flags.values[name]
      out.append(f'--{name}' if value is True else
                 f'--no{name}' if value is False else f'--{name}={value}')
  return out


def run(config: Config, run_dir, *, stop=None, flags=None) -> dict:
  """Runs every part; `flags`: the command line (`launch.Flags`), whose
  flags each part reads are handed on to it."""
  passthrough_ = ({part: passthrough(part, flags) for part in PARTS}
                  if flags is not None else {})
  root = Path(__file__).resolve().parents[1]
  walls = {}
  for name in chosen(config):
    if stop is not None and stop.requested:
      raise Preempted(stop.signum, f'before {name}')
    if checkpoint_lib.fault_due(f'before {name}'):
      checkpoint_lib.die(f'before {name}')
    command = part_command(name, run_dir, passthrough_, config.quick)
    print(f'\n=== {name}: {" ".join(command)}', flush=True)
    start = time.perf_counter()
    # In the caller's folder, so a relative --workdir means to each part
    # what it meant to this process.
    child = subprocess.Popen([sys.executable, str(root / 'run.py'),
                              *command[2:]])
    # Ctrl-C reaches the child by itself (same process group); SIGTERM from
    # a scheduler may reach only this process: hand it on.
    previous = {
        signal.SIGTERM: signal.signal(
            signal.SIGTERM, lambda signum, _: child.send_signal(signum)),
        signal.SIGINT: signal.signal(signal.SIGINT, lambda *_: None)}
    try:
      code = child.wait()
    finally:
      for s, handler in previous.items():
        signal.signal(s, handler)
    walls[name] = time.perf_counter() - start
    if code in (128 + signal.SIGTERM, 128 + signal.SIGINT):
      raise Preempted(code - 128, f'{name}')
    if code != 0:
      raise RuntimeError(f'--exp={name} failed with exit status {code}; '
                         'its output is above')
  return write_report(config, run_dir, passthrough_, walls)


def own_claims(part: str, claims: list[dict]) -> list[dict]:
  """A part's claims the report keeps: all, or, for a part in
  OWN_FAMILY, those about a model of its family."""
  family = OWN_FAMILY.get(part)
  if family is None:
    return claims
  return [c for c in claims if c.get('model') in models_lib.names(
      lambda spec: spec.family == family)]


def judged_across_parts(parts) -> list:
  """[(part, its claims)] with every family judged again across the parts
  (`claims.judge_together`): a claim's family is the claim at every setting
  it is tested at, in whichever part, so Holm runs over all of them."""
  flat = claims_lib.judge_together([c for _, claims in parts for c in claims])
  out, start = [], 0
  for name, claims in parts:
    out.append((name, flat[start:start + len(claims)]))
    start += len(claims)
  return out


def merge_claims(parts) -> list[dict]:
  """The report's claims from [(part, its claims)], in that order, each
  claim once: one that a later part measured again (the same text, at the
  same setting) keeps its first place and gains the later part's evidence,
  and its verdict names each part's where they differ."""
  out, index = [], {}
  for name, claims in parts:
    figure = f'{name}/{section(name)[1]}'
    for c in claims:
      text = c['claim'] + runner.claim_setting(c)
      # The plan's power for this row (`power.plan`), from what its
      # summary records: a row under POWER_WANTED answers nothing.
      # One rate where "cannot" needs a grid: no power to hold it.
      power = 1.0 if c.get('p') is None else power_lib.power(
          c.get('kind', ''), int(c.get('seeds') or 0),
          int(c.get('family_size') or 1), rate=(c.get('evidence') or {}).get(
              'rate', claims_lib.RELIABLE_RATE),
          gated=gates_lib.one_rate(c.get('gates')),
          at_least=bool((c.get('evidence') or {}).get('at_least')))
      if text not in index:
        index[text] = len(out)
        out.append(dict(experiment=name, claim=text, verdict=c['verdict'],
                        role=c.get('role', claims_lib.LESSON),
                        label=row_label(c),
                        trained_label=row_label(c, trained=True),
                        powered={name: power >= power_lib.POWER_WANTED},
                        measured=c['measured'], note=c.get('note', ''),
                        kind=c.get('kind', ''), test=c.get('test', ''),
                        p=c.get('p'), p_adjusted=c.get('p_adjusted'),
                        if_significant=c.get('if_significant'),
                        family=c.get('family', ''), model=c.get('model'),
                        gates=c.get('gates') or {},
                        task=c.get('task'), evidence=c.get('evidence', {}),
                        figure=figure, verdicts={name: c['verdict']}))
        continue
      first = out[index[text]]
      first['experiment'] += f' + {name}'
      first['measured'] += f'; measured again by {name}: {c["measured"]}'
      first['verdicts'][name] = c['verdict']
      first['powered'][name] = power >= power_lib.POWER_WANTED
      if len(set(first['verdicts'].values())) > 1:
        first['verdict'] = '; '.join(f'{v} ({p})'
                                     for p, v in first['verdicts'].items())
  # Two rows of a family that the setting alone does not tell apart are
  # told apart by their training (one rate or a grid, the steps).
  seen = collections.Counter((c['family'], c['label']) for c in out)
  for c in out:
    trained = c.pop('trained_label')
    if seen[c['family'], c['label']] > 1:
      c['label'] = trained
  return with_false_discovery_rate(out)


def with_false_discovery_rate(claims: list[dict]) -> list[dict]:
  """A second look over the whole report: every tested claim's p
  Benjamini-Hochberg adjusted over all of the report's tests (`p_bh`), and
  the verdict that rate would give (`bh_verdict`: its direction where
  p_bh < alpha, beside the Holm-within-family verdict)."""
  tested = [c for c in claims if c.get('p') is not None]
  for c, q in zip(tested, claims_lib.benjamini_hochberg(
      [c['p'] for c in tested])):
    c['p_bh'] = q
    c['bh_verdict'] = (c['if_significant'] if q < stats.ALPHA
                       else stats.INCONCLUSIVE)
  for c in claims:
    c.setdefault('p_bh', None)
    c.setdefault('bh_verdict', '')
  return claims


def row_label(c: dict, trained: bool = False) -> str:
  """A row's setting in a few words, for the scorecard: the model as the
  sentence names it (its first parenthesis: 'attention h2'), the task, the
  layers, what it is set against, with `trained` the training its sentence
  names, and the length, width or decoys."""
  named = re.search(r'\(([^()]*)\)', c['claim'])
  model = c.get('model') or ''
  if named and model and named.group(1).startswith(model):
    model = named.group(1).split(';')[0]
  # The training its sentence names (memory.conditions): one rate or the
  # best of a grid, and the steps.
  trained = trained and re.search(r'(at one rate \(([^)]*)\)|each at its best of rates '
                      r'([0-9.e, -]*)), after (\d+) steps', c['claim'])
  if trained and (found := trained):
    trained = (f'rate {found.group(2)}' if found.group(2) else
               f'best of {found.group(3).count(",") + 1} rates') + (
                   f', {found.group(4)} steps')
  parts = [model, c.get('task') or '',
           f'{c["num_layers"]} layers' if c.get('num_layers') else '',
           f'vs {c["versus"]}' if c.get('versus') else '', trained or '']
  return ', '.join(x for x in parts if x) + runner.claim_setting(c)


def part_command(name, run_dir, passthrough, quick):
  exp, full, fast, _ = next(r[1:] for r in RUNS if r[0] == name)
  return ['python', 'run.py', f'--exp={exp}',
          f'--workdir={run_dir.path / name}',
          f'--checkpoint_dir={run_dir.checkpoint_dir / name}',
          *(fast if quick else full), *passthrough.get(exp, ())]


def lesson_number(part: str) -> int:
  return int(section(part)[0].split('.')[0])


def _commit(git: dict | None) -> str:
  git = git or {}
  changed = git.get('changed') or []
  dirty = (f' (uncommitted: {", ".join(changed)})' if 0 < len(changed) <= 3
           else ' (with uncommitted changes)' if git.get('dirty') else '')
  return f'{(git.get("commit") or "unknown")[:7]}{dirty}'


def provenance_line(config, run_dir, parts, summaries, walls) -> str:
  """Where, when and at which commit the parts ran, and how long they took
  as each recorded it; and, if another, the commit that wrote the report
  (a report rewritten from finished parts trains nothing)."""
  meta = json.loads((run_dir.path / parts[0] / 'config.json').read_text())
  trained = meta.get('provenance', {})
  here = provenance.collect(flags={}, flag_sources={}, flagfiles={})
  machine = (trained.get('cpu') or (here.get('cpu') if trained.get(
      'hostname') == here.get('hostname') else None)
             or trained.get('platform', ''))
  devices = trained.get('devices') or []
  recorded = sum(float(s.get('wall_s') or 0) if not isinstance(
      s.get('wall_s'), dict) else 0 for s in summaries.values()) / 60
  # A part trained again at another commit (its settings changed) says so.
  commits = {name: _commit(json.loads(
      (run_dir.path / name / 'config.json').read_text()).get(
          'provenance', {}).get('git')) for name in parts}
  first = _commit(trained.get('git'))
  others = ', '.join(f'{name} at {c}' for name, c in commits.items()
                     if c != first)
  line = (f'Measured by `python run.py --exp={"all --quick" if config.quick else "all"}`'
          f' on {machine} ({len(devices)} '
          f'{"JAX device" if len(devices) == 1 else "JAX devices"}), at commit '
          f'{first}{f" ({others})" if others else ""}: {recorded:.0f} minutes '
          'of training and measuring, as the parts recorded it. ')
  writer = _commit(here.get('git'))
  if writer != _commit(trained.get('git')):
    line += (f'This report written {time.strftime("%Y-%m-%d")} at commit '
             f'{writer} from those parts ({sum(walls.values()) / 60:.1f} '
             'minutes).')
  else:
    line += f'Written {time.strftime("%Y-%m-%d")}.'
  return line


def write_report(config, run_dir, passthrough, walls) -> dict:
  """REPORT.md and results.csv of the run's claims: the scorecard, then a
  section per claim of the lesson (its figures, how to reproduce each part,
  its claims with their kind, test and numbers)."""
  if not run_dir.is_writer:
    return {}  # the parts' process 0 wrote their summaries: its host reports
  parts = report_order(chosen(config))
  summaries = {name: json.loads((run_dir.path / name / 'summary.json')
                                .read_text()) for name in parts}
  claims = merge_claims(judged_across_parts(
      [(name, own_claims(name, summaries[name].get('claims', [])))
       for name in parts]))
  for c in claims:
    c['lesson'] = lesson_number(c['experiment'].split(' + ')[0])
    c['headline'] = claim_text.headline(c)
  rows = [{k: c[k] for k in COLUMNS} for c in claims]
  # The report's claims table is this report's alone, rewritten whole: one
  # an earlier version wrote (other columns) is replaced, not refused.
  storage.write_whole(run_dir.path / 'results.csv', '')
  results = record.ResultsCsv(run_dir.path / 'results.csv', COLUMNS,
                              write=True)  # no backend here to ask who writes
  results.replace(rows)  # this report's claims, not an earlier one's
  out = ['# Searchlight: what the lesson claims, and what held', '',
         provenance_line(config, run_dir, parts, summaries, walls), '']
  if config.quick:
    out += ['> **Quick run** (`--quick`): every experiment ran a CPU-fast '
            'variant with fewer seeds, steps and lengths. Read the verdicts '
            'as a first look; the full run is `python run.py --exp=all`.', '']
  out += ['## The scorecard', '', scorecard_lib.scorecard(claims), '',
          'Each answer comes from the rows that test the lesson\'s own '
          'sentence, per family: a held or did not hold from any part; an '
          'inconclusive only from a part whose plan gave the row at least '
          f'{power_lib.POWER_WANTED:.0%} power (`--only_check_args` prints '
          'the plan), with what stopped it; "split" only where two parts '
          'that count disagree.', '',
          '### Side claims', '', scorecard_lib.side_claims(claims), '',
          'Each claim is judged from its experiment\'s own summary.json by '
          'the test its kind calls for (threshold: the median, sign test; '
          'reliability: a bound on the share of seeds; capability: a seed '
          'on held-out strings above the null; impossibility: every seed at '
          'or below the null, trained out, at the best rate of a grid; '
          'comparison: paired, on the pairs that differ; shape: the fits, '
          'seed by seed: `src/claims.py`, each kind calibrated on known '
          'truth in `src/calibration.py`),'
          ' Holm-adjusted within its family. **BH q** is '
          'its p adjusted over every test of this report '
          '(Benjamini-Hochberg), a second look at the false discovery rate. '
          'Every verdict says what was measured, whichever way it came out.',
          '']
  for number, (title, words) in scorecard_lib.LESSON.items():
    mine = [c for c in claims if c['lesson'] == number]
    here = [p for p in parts if lesson_number(p) == number]
    out += [f'## {number}. {title}', '', f'The lesson: {words}', '']
    if not here:
      out += ['Not a claim: the task of sections 2 to 4 and 10 (`src/tasks.py`'
              ', `memory_batch`).' if number == 1 else
              'Not measured in this run.', '']
      continue
    for name in here:
      title_, figure = section(name)
      command = ' '.join(part_command(name, run_dir, passthrough,
                                      config.quick))
      out += [f'**{title_}** (part `{name}`): `{command}`', '',
              f'![{name}]({name}/{figure})', '']
      table = run_dir.path / name / runner.TABLE_FILE
      if table.exists() and table.read_text().strip():
        out += ['```', table.read_text().rstrip('\n'), '```', '']
    counts = {}
    for c in mine:
      counts[c['verdict']] = counts.get(c['verdict'], 0) + 1
    out += [f'{len(mine)} claims: ' + ', '.join(
        f'{v} {k}' for k, v in counts.items()) + '.', '',
            '| Claim | Kind | Measured | Verdict | BH q |',
            '|---|---|---|---|---|']
    for c in mine:
      measured = c['measured'].replace('|', '\\|')
      q = '' if c['p_bh'] is None else stats.fmt_p(c['p_bh'])
      kind = c['kind'] + {claims_lib.SIDE: ' (side claim)',
                          claims_lib.SANITY: ' (sanity check: not counted)'
                          }.get(c.get('role'), '')
      out.append(f'| {c["claim"]} | {kind} | {measured} | '
                 f'**{c["verdict"]}** | {q} |')
    out += ['', '<details><summary>The rules</summary>', '']
    out += [f'- {c["claim"]}: {c["note"]}' for c in mine if c.get('note')]
    out += ['', '</details>', '']
  report = '\n'.join(out)
  summary = {'claims': claims, 'wall_s': walls, 'quick': config.quick,
             'scorecard': scorecard_lib.scorecard(claims),
             'side': scorecard_lib.side_claims(claims)}
  storage.write_whole(run_dir.path / 'REPORT.md', report)
  record.publish(run_dir, config, summary,
                 lambda writer: writer.add_text('report', report, 0),
                 fields=EXPERIMENT.fields)
  print('\n' + record.table([[c['lesson'], c['verdict'], c['claim'][:70]]
                              for c in claims], ['#', 'verdict', 'claim']))
  print(f'\nReport: {run_dir.path / "REPORT.md"}')
  return summary


class All(experiment.Composite):
  """The whole lesson: every part, then REPORT.md."""
  summary_keys = (
      '`claims` (each once: a claim two parts measure, as `linear` '
      "measures distance's attention, chrono and RNN claims again, keeps "
      "one row, `experiment` naming both, with both parts' evidence and, "
      "where they differ, each part's verdict; `verdicts{part}`), "
      '`wall_s`, `quick`; plus `REPORT.md`')
  name = 'all'
  defaults, quick, columns, parts = DEFAULTS, QUICK, COLUMNS, PARTS

  @property
  def fields(self) -> tuple[str, ...]:
    """Its own (--parts) and every part's."""
    return tuple(dict.fromkeys(super().fields + tuple(
        f for part in PARTS for f in experiments.load(part).fields)))

  def run(self, config, run_dir, *, stop=None, flags=None) -> dict:
    return run(config, run_dir, stop=stop, flags=flags)

  def part_fields(self, config) -> dict:
    return part_fields(config)

  def part_names(self) -> tuple[str, ...]:
    return names()


EXPERIMENT = All()
