"""The report over finished parts: their claims judged together, merged
into one row each, and written out as REPORT.md and results.csv.

`experiments/all.py` runs the parts and hands each over as a `Part` (its
name, REPORT.md section and figure, the command that reproduces it); this
module reads their summary.json files and writes the report: the lesson's
scorecard (`src/scorecard.py`), then section by section the figures, the
commands and the claims with their kind, test and numbers.
"""

import collections
import dataclasses
import json
import re
import time

from src import claim_text
from src import claims as claims_lib
from src import gates as gates_lib
from src import models as models_lib
from src import power as power_lib
from src import provenance
from src import record
from src import scorecard as scorecard_lib
from src import stats
from src import storage

COLUMNS = ['experiment', 'claim', 'verdict', 'measured', 'kind', 'test',
           'p', 'p_adjusted', 'p_bh', 'bh_verdict', 'lesson', 'role']


@dataclasses.dataclass(frozen=True)
class Part:
  """One part of the report: its folder's name, its REPORT.md section title
  ('2. Distance ...') and figure file, the command that reproduces it, and,
  for a part that trains other models beside its own as comparators, the
  family whose claims it keeps (the others' are another part's evidence)."""
  name: str
  title: str
  figure: str
  command: str = ''
  family: str | None = None

  @property
  def lesson(self) -> int:
    """The lesson claim it tests: its section's number."""
    return int(self.title.split('.')[0])


def own_claims(part: Part, claims: list[dict]) -> list[dict]:
  """A part's claims the report keeps: all, or, for a part with a
  `family`, those about a model of that family."""
  if part.family is None:
    return claims
  return [c for c in claims if c.get('model') in models_lib.names(
      lambda spec: spec.family == part.family)]


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


def merge_claims(parts, figures=None) -> list[dict]:
  """The report's claims from [(part, its claims)], in that order, each
  claim once: one that a later part measured again (the same text, at the
  same setting) keeps its first place and gains the later part's evidence,
  and its verdict names each part's where they differ. `figures`: {part:
  its figure file}, which each row names."""
  out, index = [], {}
  for name, claims in parts:
    figure = f'{name}/{(figures or {}).get(name, "")}'
    for c in claims:
      text = c['claim'] + claim_text.claim_setting(c)
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
  return ', '.join(x for x in parts if x) + claim_text.claim_setting(c)


def commit_text(git: dict | None) -> str:
  git = git or {}
  changed = git.get('changed') or []
  dirty = (f' (uncommitted: {", ".join(changed)})' if 0 < len(changed) <= 3
           else ' (with uncommitted changes)' if git.get('dirty') else '')
  return f'{(git.get("commit") or "unknown")[:7]}{dirty}'


def provenance_line(quick, run_dir, parts, summaries, walls) -> str:
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
  commits = {name: commit_text(json.loads(
      (run_dir.path / name / 'config.json').read_text()).get(
          'provenance', {}).get('git')) for name in parts}
  first = commit_text(trained.get('git'))
  others = ', '.join(f'{name} at {c}' for name, c in commits.items()
                     if c != first)
  line = (f'Measured by `python run.py --exp={"all --quick" if quick else "all"}`'
          f' on {machine} ({len(devices)} '
          f'{"JAX device" if len(devices) == 1 else "JAX devices"}), at commit '
          f'{first}{f" ({others})" if others else ""}: {recorded:.0f} minutes '
          'of training and measuring, as the parts recorded it. ')
  writer = commit_text(here.get('git'))
  if writer != commit_text(trained.get('git')):
    line += (f'This report written {time.strftime("%Y-%m-%d")} at commit '
             f'{writer} from those parts ({sum(walls.values()) / 60:.1f} '
             'minutes).')
  else:
    line += f'Written {time.strftime("%Y-%m-%d")}.'
  return line


def write(config, run_dir, parts: list[Part], walls: dict,
          fields) -> dict:
  """REPORT.md and results.csv of the claims of `parts` (finished, in the
  lesson's order): the scorecard, then a section per claim of the lesson
  (its figures, how to reproduce each part, its claims with their kind,
  test and numbers). `fields`: the config fields the run's TensorBoard
  hparams name."""
  if not run_dir.is_writer:
    return {}  # the parts' process 0 wrote their summaries: its host reports
  names = [p.name for p in parts]
  by_name = {p.name: p for p in parts}
  summaries = {name: json.loads((run_dir.path / name / 'summary.json')
                                .read_text()) for name in names}
  claims = merge_claims(judged_across_parts(
      [(p.name, own_claims(p, summaries[p.name].get('claims', [])))
       for p in parts]), {p.name: p.figure for p in parts})
  for c in claims:
    c['lesson'] = by_name[c['experiment'].split(' + ')[0]].lesson
    c['headline'] = claim_text.headline(c)
  rows = [{k: c[k] for k in COLUMNS} for c in claims]
  # The report's claims table is this report's alone, rewritten whole: one
  # an earlier version wrote (other columns) is replaced, not refused.
  storage.write_whole(run_dir.path / 'results.csv', '')
  results = record.ResultsCsv(run_dir.path / 'results.csv', COLUMNS,
                              write=True)  # no backend here to ask who writes
  results.replace(rows)  # this report's claims, not an earlier one's
  out = ['# Searchlight: what the lesson claims, and what held', '',
         provenance_line(config.quick, run_dir, names, summaries,
                         walls), '']
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
    here = [p for p in parts if p.lesson == number]
    out += [f'## {number}. {title}', '', f'The lesson: {words}', '']
    if not here:
      out += ['Not a claim: the task of sections 2 to 4 and 10 (`src/tasks.py`'
              ', `memory_batch`).' if number == 1 else
              'Not measured in this run.', '']
      continue
    for p in here:
      out += [f'**{p.title}** (part `{p.name}`): `{p.command}`', '',
              f'![{p.name}]({p.name}/{p.figure})', '']
      table = run_dir.path / p.name / record.TABLE_FILE
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
                 fields=fields)
  print('\n' + record.table([[c['lesson'], c['verdict'], c['claim'][:70]]
                              for c in claims], ['#', 'verdict', 'claim']))
  print(f'\nReport: {run_dir.path / "REPORT.md"}')
  return summary
