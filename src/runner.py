"""The runner every experiment shares: an experiment says what it measures
(`src/experiment.py`), the runner does the rest.

In one loop (`train_and_evaluate`), read top to bottom, and in this order:
skips what is finished (a group whose rows are in results.csv is never
redone), builds each ensemble from the group's recipe (the one
`analysis.load_seed` rebuilds from), resumes from its checkpoint, trains
in chunks (`Ensemble.train_chunk`, which scans `train.train_step`; then
`evaluation.after_chunk`, the test curve) while logging (`src/tblog.py`:
TensorBoard, curves.csv, progress) and checkpointing between them,
measures and times, writes every probe value into one long table
(measurements.csv: the probe at step 0 where the experiment asks, every
chunk, the end), drops the padding seeds, logs per-seed values and seed
means, closes the group's TensorBoard metrics before its rows (a group
with rows is never redone, so its metrics must be there first), writes the
rows, shows progress, then summarizes, publishes (summary.json, the
figures, the config in TensorBoard), and prints the table and the claims.
"""

import concurrent.futures
import dataclasses
import contextlib
import io
import signal
import time

import numpy as np

from src import checkpoint as checkpoint_lib
from src import claim_text
from src import claims as claims_lib
from src import distributed
from src import evaluation
from src import experiment
from src import record
from src import rundir
from src import stats
from src import storage
from src import streams
from src import tblog
from src import train as train_lib


def train_and_evaluate(module, config, run_dir, *, stop=None,
                       slice_members: int | None = None) -> dict:
  """The training loop: trains, measures and records every group of
  experiment `module` into `run_dir`, then summarises; returns the
  summary. `stop`: a `checkpoint.StopRequest`; `slice_members`: at most so
  many members of a group at once (the memory plan, `config.memory_plan`;
  None: all)."""
  if isinstance(module, experiment.Cells):
    return _run_cells(module, config, run_dir, stop)
  tables = {name: record.ResultsCsv(run_dir.path / name, with_rates(cols))
            for name, cols in module.tables.items()}
  results = record.ResultsCsv(run_dir.path / 'results.csv',
                              with_rates(module.columns))
  measurements = record.ResultsCsv(run_dir.path / 'measurements.csv',
                                   experiment.MEASUREMENT_COLUMNS)
  groups = [experiment.with_settings(g, config) for g in module.groups(config)]
  log = tblog.RunLog(
      run_dir, config, groups,
      steps=max(max(g.budgets or (config.steps,)) for g in groups),
      step_work={g.name: g.work for g in groups},
      final_examples=config.eval_examples if module.final_test else None,
      tags=module.tags)
  # What is done is never redone: a group (or budget) with rows is finished.
  todo = {g.name: [b for b in (g.budgets or (config.steps,)) if not
                   results.has(**g.key, **({'steps': b} if g.budgets
                                           else {}))] for g in groups}
  queue = [g for g in groups if todo[g.name]]
  if not queue:
    log.progress.say(f'nothing to do: {len(groups)} groups already '
                     'finished (their rows are in results.csv); below, the '
                     'summary of what they recorded')
    log.progress.quiet = True  # no bar over work found done
  ahead = _CompileAhead(module, config, slice_members)
  if queue:  # the first compiles while the main thread initialises it
    ahead.prepare(queue[0], todo[queue[0].name])
  kept = {}
  try:
    for g in groups:
      ensemble, params = None, None
      for budget in g.budgets or (config.steps,):
        if budget not in todo[g.name]:
          log.skip(g, budget)
          continue
        # Build: the ensemble of every seed and rate (compiled ahead while
        # the group before it trained), then the next group's in its turn.
        if ensemble is None:
          ensemble = ahead.take(g)
          after = queue.index(g) + 1
          if after < len(queue):
            ahead.prepare(queue[after], todo[queue[after].name])
        S, rates = ensemble.num_seeds, ensemble.learning_rates
        _probe_at_start(module, g, ensemble, measurements)
        # Resume: the latest good checkpoint of this group's own recipe
        # (never another run's), else step 0.
        start_time = time.perf_counter()
        folder = run_dir.checkpoint_dir / g.name
        rundir.claim_group(folder, ensemble.recipe, run_dir.path,
                           is_writer=run_dir.is_writer)
        checkpoints = checkpoint_lib.GroupCheckpoints(folder)
        step, state = checkpoint_lib.resume_or_init(ensemble, checkpoints)
        glog = log.open_group(g, ensemble, step, budget)
        # Train in chunks. A chunk's metrics are logged once the next is
        # dispatched (the device never waits on the host), and all of them
        # before a checkpoint (a resume starts after it and must find
        # everything before it written). Every process stops at the same
        # boundary, whichever got the signal.
        last_saved, pending = step, []
        try:
          for num_steps in train_lib.chunks(step, budget, config.chunk_steps):
            state, metrics = ensemble.train_chunk(state, step, num_steps)
            step += num_steps
            # The test curve's point; with an early stop, who stops.
            state, metrics = evaluation.after_chunk(ensemble, state, metrics,
                                                    step)
            for done in pending:
              _log_chunk(module, config, g, ensemble, glog, measurements,
                         *done)
            pending = [(step, metrics)]
            stopping = stop is not None and distributed.any_process(
                stop.requested)
            due = (config.checkpoint_every
                   and step - last_saved >= config.checkpoint_every)
            if due or stopping or step == budget:
              for done in pending:
                _log_chunk(module, config, g, ensemble, glog, measurements,
                           *done)
              pending = []
              checkpoints.save(step, state)
              last_saved = step
            if stopping:
              raise checkpoint_lib.Preempted(stop.signum or signal.SIGTERM,
                                             f'{g.name} step {step}')
        except BaseException:
          glog.abort()
          raise
        finally:
          checkpoints.close()
        params = state['params']
        # Measure: the experiment's final measurement, and with a grid of
        # rates, each rate's accuracy on fresh strings neither training nor
        # the tests see; the rate is chosen on those.
        start = time.perf_counter()
        train_s = start - start_time
        final = module.measure(g, ensemble, params, config)
        validation = None
        if len(rates) > 1:
          validation = evaluation.evaluate(
              ensemble, params, stream=streams.VALIDATION_STREAM,
              num_examples=config.eval_examples)['accuracy']
        selected = 0 if validation is None else select_rate(validation, S)
        wall_s = train_s + time.perf_counter() - start
        # Write: the TensorBoard metrics first (a group with rows is never
        # redone), then the measurements, the rows, the progress line.
        for r in range(len(rates)):
          for tag, values in module.final_scalars(
              g, config, ensemble.members.at_rate(final, r)).items():
            at, values = values if isinstance(values, tuple) else (budget,
                                                                  values)
            glog.per_seed(r, {tag: values}, at)
        measurements.drop(lambda r: r['group'] == g.name
                          and r['step'] == str(budget)
                          and r['key'].startswith('final/'))
        measurements.append(measurement_rows(g, rates, budget, {
            f'final/{k}': v for k, v in final.items()
            if np.ndim(v) >= 1 and len(v) == S * len(rates)}))
        accuracy = np.asarray(final['accuracy'], float)
        glog.close(budget, accuracy.reshape(len(accuracy), -1).mean(axis=1),
                   selected)
        _write_rows(module, config, g, ensemble, final, validation, selected,
                    ensemble.members.unpad(state['diverged']), wall_s, budget,
                    results, tables, log.progress)
        params = ensemble.members.rate_first(params, selected)
      if module.keeps:  # what the experiment keeps of the trained group
        ensemble = ensemble or experiment.build(
            g, config, slice_members=slice_members)
        if params is None:
          params = _restore_params(ensemble, run_dir.checkpoint_dir / g.name,
                                   run_dir.path)
          rate = selected_rate(g, results.rows)
          if params is not None and rate is not None:
            params = ensemble.members.rate_first(
                params, config.rates.index(float(rate)))
        if params is not None:
          kept[g.name] = module.keep(g, ensemble, params, config)
  finally:
    ahead.close()
  # Summarise: the claims judged on the selected rates' rows, and on every
  # rate's alone.
  rates = {g.name: selected_rate(g, results.rows) for g in groups}
  chosen = lambda rows: [r for r in rows if r.get('selected') != '0']
  at_selected = lambda table: [
      c for c in table if c.get('learning_rate', '') in ('', rates.get(
          c['group']))]
  data = experiment.Measured(
      curves=at_selected(log.curves.rows),
      tables={k: chosen(t.rows) for k, t in tables.items()}, kept=kept,
      measurements=experiment.Measurements(at_selected(measurements.rows)),
      learning_rates=_rate_summary(config, groups, results.rows))
  everything = experiment.Measured(
      curves=log.curves.rows,
      tables={k: t.rows for k, t in tables.items()},
      measurements=experiment.Measurements(measurements.rows))
  return finish(module, config, run_dir, chosen(results.rows), data,
                by_rate=verdicts_by_rate(module, config, results.rows,
                                         everything))


def _probe_at_start(module, g, ensemble, measurements) -> None:
  """The probe before training, where the experiment asks (once)."""
  if module.probe_at_start and g.probe is not None and not any(
      r['group'] == g.name and r['step'] == '0' for r in measurements.rows):
    at_start = evaluation.measure(
        ensemble, ensemble.init()['params'], g.probe,
        stream=streams.PROBE_STREAM, num_examples=g.probe_examples)
    measurements.append(measurement_rows(g, ensemble.learning_rates, 0,
                                         at_start))


def _log_chunk(module, config, g, ensemble, glog, measurements, step,
               metrics) -> None:
  """A chunk ending at `step`: its curves, its probe values (measurements.csv
  and the experiment's own per-chunk scalars), the progress line."""
  metrics = distributed.to_host(metrics)
  glog.chunk(step, metrics)
  probe = None
  if 'probe' in metrics:
    probe = ensemble.members.unpad(metrics['probe'])
    # Rows a killed run wrote past its last checkpoint: not twice.
    measurements.drop(lambda r: r['group'] == g.name
                      and int(r['step']) >= step)
    measurements.append(measurement_rows(g, ensemble.learning_rates, step,
                                         probe))
  for r in range(len(ensemble.learning_rates)):
    writer = glog.writers[r] if glog.writers else None
    glog.per_seed(r, module.on_chunk(
        g, config, step, None if probe is None else ensemble.members.at_rate(
            probe, r), writer), step)
  if checkpoint_lib.fault_due(f'{g.name}@{step}'):
    glog.flush()  # the events past the last checkpoint must be purged
    checkpoint_lib.die(f'{g.name}@{step}')
  glog.counted(step, metrics)


def _write_rows(module, config, g, ensemble, final, validation, selected,
                diverged, wall_s, budget, results, tables, progress) -> None:
  """The group's rows at every rate (tagged with the rate, whether it was
  selected and its validation accuracy) into results.csv and the
  experiment's tables, and its line under the progress bar."""
  rates = ensemble.learning_rates
  timing = lambda r: experiment.Timing(
      budget, wall_s, ensemble.programs.compile_s, ensemble.num_params,
      ensemble.members.at_rate(diverged, r), ensemble.programs.compiled_s)
  out = {}
  for r, rate in enumerate(rates):
    rows = module.rows(g, ensemble.members.at_rate(final, r), config, timing(r))
    valid = (None if validation is None
             else ensemble.members.at_rate(validation, r))
    tag = lambda row: {**row, 'learning_rate': rate,
                       'selected': r == selected,
                       'validation_accuracy': (
                           '' if valid is None else
                           valid[int(row['seed'])] if 'seed' in row
                           else float(np.mean(valid)))}
    for name, table in (rows if isinstance(rows, dict)
                        else {'results.csv': rows}).items():
      out.setdefault(name, []).extend(tag(row) for row in table)
  for name, table in tables.items():
    # Rows a killed run wrote before this group's results: not twice.
    table.drop(lambda r: all(r[k] == str(v) for k, v in g.key.items()))
    table.append(out.get(name, []))
  results.append(out['results.csv'])
  progress.say(module.line(g, ensemble.members.at_rate(final, selected), config,
                           timing(selected))
               + (f' (lr {rates[selected]:g} of {len(rates)})'
                  if len(rates) > 1 else ''))


class _CompileAhead:
  """Builds the next group's ensemble and compiles its training and test
  programs in a thread while the group before it initialises and trains.
  XLA compiles a program on about one core: a small group's training
  leaves the other core idle, and on an accelerator the host is idle while
  it trains."""

  def __init__(self, module, config, slice_members=None):
    self.config, self.slice_members = config, slice_members
    # The final test's strings, where the runner tests (and validates) with
    # `evaluate`; an experiment's own `measure` has programs of its own.
    self.eval_examples = config.eval_examples if module.final_test else None
    self._pool = concurrent.futures.ThreadPoolExecutor(
        1, thread_name_prefix='compile_ahead')
    self._built = {}

  def prepare(self, group, budgets) -> None:
    """Builds `group`'s ensemble (here) and compiles the chunks that
    training it to each of `budgets` runs (in the thread)."""
    ensemble = self._built[group.name] = experiment.build(
        group, self.config, slice_members=self.slice_members)
    done = [b for b in (group.budgets or ()) if b < min(budgets)]
    sizes, start = set(), max(done, default=0)
    for budget in budgets:
      sizes.update(train_lib.chunks(start, budget, self.config.chunk_steps))
      start = budget
    def compile_all():
      state = ensemble.abstract_state()
      ensemble.compile_ahead(state, sorted(sizes))
      evaluation.compile_ahead(ensemble, state['params'], self.eval_examples)
    self._pool.submit(compile_all)

  def take(self, group):
    """`group`'s ensemble, which `prepare` built."""
    return self._built.pop(group.name)

  def close(self) -> None:
    self._pool.shutdown(wait=False, cancel_futures=True)


def verdicts_by_rate(module, config, rows, data: experiment.Measured) -> dict:
  """With a grid of rates, {rate: [(claim, setting, verdict)]}: each claim
  judged again on every rate's rows alone (its curves, tables and
  measurements too), Holm within its family at that rate, as if the run
  had trained that rate only. The summary's verdicts stay the selected
  rates'; these show whether one depends on the rate. {} with one rate."""
  if len(config.rates) < 2:
    return {}
  out = {}
  for rate in config.rates:
    at = lambda table: [r for r in table
                        if float(r.get('learning_rate') or 'nan') == rate]
    mine = experiment.Measured(
        curves=at(data.curves),
        tables={n: at(t) for n, t in data.tables.items()},
        measurements=experiment.Measurements(at(data.measurements.rows)))
    # As if the run had trained that rate only: its one-rate gates apply.
    alone = dataclasses.replace(config, learning_rates=(rate,))
    summary = module.summarize(alone, at(rows), mine)
    out[f'{rate:g}'] = [(c['claim'], claim_text.claim_setting(c),
                         c['verdict'])
                        for c in judged(summary.get('claims', []))]
  return out


def judged(claims: list) -> list[dict]:
  """An experiment's claims (`claims.Claim`) judged (Holm within each
  family) and as summary.json holds them."""
  return [c.to_json() for c in claims_lib.judge(claims)]


def with_rate_verdicts(claims, by_rate) -> list[dict]:
  """Each claim with `by_rate`: its verdict at each rate of the grid alone,
  found by its text (and its setting where the text repeats), the setting
  named where that rate judged it elsewhere (a wall's L* is the data's).
  Where they differ, `measured` names them: the verdict depends on the
  rate, and the report shows it at each one."""
  out = []
  for c in claims:
    setting, verdicts = claim_text.claim_setting(c), {}
    for rate, judged in by_rate.items():
      same = [j for j in judged if j[0] == c['claim']]
      if len(same) > 1:
        same = [j for j in same if j[1] == setting]
      if len(same) == 1:
        _, where, verdict = same[0]
        verdicts[rate] = verdict + (where if where != setting else '')
    if verdicts:
      c = {**c, 'by_rate': verdicts}
      if len(set(verdicts.values())) > 1:
        c['measured'] += claims_lib.BY_RATE + ', '.join(
            f'{rate} {v}' for rate, v in verdicts.items())
    out.append(c)
  return out


# The runner's columns in results.csv (and an experiment's other tables):
# each row's learning rate, whether it is its group's selected rate, and the
# validation accuracy of its seed at that rate (empty with a single rate).
RATE_COLUMNS = ('learning_rate', 'selected', 'validation_accuracy')


def with_rates(columns) -> list[str]:
  return list(columns) + [c for c in RATE_COLUMNS if c not in columns]


def _matches(g: experiment.Group, row: dict) -> bool:
  return all(row[k] == str(v) for k, v in g.key.items())


def selected_rate(g: experiment.Group, rows) -> str | None:
  """The learning rate (as results.csv writes it) selected for group `g`
  at its largest budget; None before it has rows."""
  picks = [r for r in rows if _matches(g, r) and r.get('selected') != '0']
  if not picks:
    return None
  return max(picks, key=lambda r: int(r.get('steps') or 0))['learning_rate']


def _rate_summary(config, groups, rows) -> dict:
  """Per group (and budget), the rate selected and every rate's mean
  validation accuracy: the tuning, in summary.json."""
  if len(config.rates) < 2:
    return {'grid': list(config.rates), 'rule': 'one rate: no selection'}
  out = {'grid': list(config.rates),
         'rule': 'per group (and budget): the rate with the best mean '
                 'validation accuracy over the seeds, on fresh strings '
                 'disjoint from training, test and curve strings; ties: the '
                 'smaller rate', 'selected': {}}
  for g in groups:
    for budget in g.budgets or (None,):
      mine = [r for r in rows if _matches(g, r) and (
          budget is None or r.get('steps') == str(budget))]
      if not mine:
        continue
      by_rate = {}
      for r in mine:
        if r.get('validation_accuracy', '') != '':
          by_rate.setdefault(float(r['learning_rate']), {})[r['seed']] = \
              float(r['validation_accuracy'])
      pick = next(float(r['learning_rate']) for r in mine
                  if r.get('selected') == '1')
      name = g.name if budget is None else f'{g.name}@{budget}'
      out['selected'][name] = {
          'learning_rate': pick,
          'validation_accuracy': {f'{k:g}': float(np.mean(list(v.values())))
                                  for k, v in sorted(by_rate.items())}}
  return out


def select_rate(validation_accuracy, num_seeds: int) -> int:
  """The index of the rate with the best mean validation accuracy over the
  seeds (ties: the first, the smallest rate of a sorted grid)."""
  acc = np.asarray(validation_accuracy, float).reshape(-1, num_seeds)
  return int(np.argmax(np.nan_to_num(acc, nan=-1.0).mean(axis=1)))


def measurement_rows(g: experiment.Group, rates, step: int,
                     values: dict) -> list[dict]:
  """measurements.csv rows of per-member `values` ({key: member-stacked
  array}, unpadded) at `step`: a scalar per seed is one row; a few values
  per seed (classes, heads: at most 16) are `key/i`; larger ones stay the
  experiment's."""
  S = len(next(iter(values.values()))) // len(rates) if values else 0
  out = []
  for key, v in values.items():
    v = np.asarray(v, float)
    v = v.reshape(v.shape[0], -1)
    if v.shape[1] > 16:
      continue
    names = [key] if v.shape[1] == 1 else [f'{key}/{i}'
                                           for i in range(v.shape[1])]
    out += [dict(group=g.name, model=g.model, length=g.length, seed=m % S,
                 learning_rate=rates[m // S], step=step, key=name,
                 value=v[m, i]) for m in range(v.shape[0])
            for i, name in enumerate(names)]
  return out


def _restore_params(ensemble, folder, workdir):
  """The final parameters of a group finished in an earlier run, from its
  checkpoint (None when there is none)."""
  rundir.check_recipe(folder, ensemble.recipe, workdir)
  checkpoints = checkpoint_lib.GroupCheckpoints(folder)
  try:
    _, state = checkpoint_lib.restore(ensemble, checkpoints)
  finally:
    checkpoints.close()
  return None if state is None else state['params']


def _run_cells(module, config, run_dir, stop) -> dict:
  results = record.ResultsCsv(run_dir.path / 'results.csv', module.columns)
  context = module.context(config)
  cells = module.cells(config)
  progress = record.Progress(sum(c.work for c in cells)
                             + module.after_work(config))
  for cell in cells:
    if stop is not None and stop.requested:
      raise checkpoint_lib.Preempted(stop.signum, cell.name)
    done_before = results.has(**cell.key)
    if not done_before:
      rows = module.measure_cell(cell, config, context)
      results.append(rows)
      line = module.cell_line(cell, rows)
      if line:
        progress.say(line)
    progress.update(cell.work, cell.name, done_before=done_before)
  context = {**context, **module.after(config, results.rows, context,
                                       progress)}
  return finish(module, config, run_dir, results.rows,
                experiment.Measured(context=context))


def finish(module, config, run_dir, rows: list[dict],
           data: experiment.Measured, *, by_rate=None) -> dict:
  """Summary (with the training time the rows record), summary.json, the
  figures and the config in TensorBoard, the table and the claims."""
  summary = module.summarize(config, rows, data)
  if data.learning_rates:
    summary['learning_rates'] = data.learning_rates
  if 'claims' in summary:  # typed claims: each kind's test, Holm by family
    summary['claims'] = with_rate_verdicts(judged(summary['claims']),
                                           by_rate or {})
    if config.decoys:  # judged on the task variant: claims of their own
      for c in summary['claims']:
        c['decoys'] = config.decoys
  if 'wall_s' in module.columns and not isinstance(module, experiment.Cells):
    summary.update(training_time(module, config, rows))
  record.publish(run_dir, config, summary, lambda writer: module.figure(
      config, summary, rows, data, run_dir.path, writer),
                 fields=module.fields)
  printed = io.StringIO()
  with contextlib.redirect_stdout(printed):
    module.print_table(config, summary)
  print(printed.getvalue(), end='')
  if summary.get('compile_share') is not None and 'wall_s' in summary:
    print(f'Training wall time, as the groups recorded it when they ran: '
          f'{summary["wall_s"]:.0f}s, of which waiting for compiles '
          f'{summary["compile_s"]:.0f}s '
          f'({100 * summary["compile_share"]:.0f}%)')
  print_claims(summary)
  if run_dir.is_writer:  # the same lines for the report to quote
    storage.write_whole(run_dir.path / record.TABLE_FILE,
                        printed.getvalue())
    print(tensorboard_lines(run_dir.path))
  return summary


# TensorBoard's TIME SERIES with no smoothing (its default 0.6 would bend
# a curve of a few lengths): the URL the runs print.
TENSORBOARD_URL = 'http://localhost:6006/?smoothing=0#timeseries'


def tensorboard_lines(workdir) -> str:
  """The commands and the URL that open what a run wrote."""
  return (f'\nTensorBoard, the finding first: tensorboard --logdir '
          f'{workdir}/tb/overview\n  then open {TENSORBOARD_URL} (no '
          f'smoothing; its bare address smooths by 0.6)\n'
          f'every group and seed: tensorboard --logdir {workdir}/tb')


def training_time(module, config, rows) -> dict:
  """The groups' wall time (training and measuring, in the process that did
  it) and compile time, from their rows: one value per group's row set."""
  walls = {}
  for g in module.groups(config):
    for r in rows:
      if all(r[k] == str(v) for k, v in g.key.items()):
        key = (g.name, r.get('steps'))
        walls[key] = (float(r['wall_s']), float(r.get('compile_s') or 0.0))
  wall = sum(w for w, _ in walls.values())
  out = {'wall_s': wall}
  if 'compile_s' in module.columns:
    compile_s = sum(c for _, c in walls.values())
    out.update(compile_s=compile_s,
               compile_share=compile_s / wall if wall else None)
  return out


def claim_line(c: dict) -> str:
  """One printed line of a judged claim: its verdict, its sentence, the
  count that decides it and p (Holm-adjusted where it was tested); the
  per-seed numbers are in summary.json and REPORT.md."""
  p = c.get('p_adjusted') if c.get('p_adjusted') is not None else c.get('p')
  # An inconclusive comparison says which way its pairs lean, where they do.
  lean = (f'leans {c["if_significant"]}' if c['verdict'].startswith(
      stats.INCONCLUSIVE) and c.get('kind') == claims_lib.COMPARISON
          and c.get('p') is not None and c['p'] < 0.5 else None)
  said = '; '.join(x for x in (claim_text.headline(c), lean,
                               None if p is None else f'p {p:.2g}') if x)
  role = {claims_lib.SIDE: ' [side claim]',
          claims_lib.SANITY: ' [sanity check: not counted]'}.get(
              c.get('role'), '')
  return (f'- {c["verdict"].upper()}{role}'
          f'{claim_text.claim_setting(c)}: {c["claim"]}'
          + (f' ({said})' if said else ''))


def print_claims(summary: dict) -> None:
  lines = [claim_line(c) for c in summary.get('claims', [])]
  if lines:
    print('\n'.join(lines) + '\n(each claim\'s test and per-seed numbers: '
          'summary.json\'s claims)')
