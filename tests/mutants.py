"""Do the tests catch the bugs they are meant to? Run:

  python tests/mutants.py [WORDS]   # WORDS: only the mutants whose name has them

Each mutant below is a deliberate bug, one per verdict rule: it is
applied to a fresh copy of the tracked tree, the fast in-process tests run
there, and the mutant must make at least one of them fail. Not part of the
suite (pytest does not collect this file); each mutant stops at its first
failing test.
"""

import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
TESTS = ['tests/test_stats.py', 'tests/test_verdicts.py', 'tests/test_claims.py',
         'tests/test_calibration.py',
         'tests/test_attention.py::'
         'test_rows_label_the_classes_by_their_first_symbol',
         'tests/test_tuning.py', 'tests/test_cost.py::test_fourfold_from',
         'tests/test_cost.py::test_crossover_of_a_known_polynomial',
         'tests/test_cost.py::test_fourfold_past_the_declared_window',
         'tests/test_attention.py::test_uses_the_beam_rule',
         'tests/test_heads_induction.py::test_positive_control_verdicts',
         'tests/test_routing.py::'
         'test_cannot_compute_is_judged_against_what_routing_allows',
         'tests/test_recall.py::test_claims_on_hand_made_tables',
         'tests/test_gradient.py::'
         'test_across_lengths_fits_only_what_has_not_underflowed',
         'tests/test_gradient.py::'
         'test_along_one_string_leaves_out_a_profile_too_short_to_fit',
         '-k', 'not run_py and not judged_at_it and '
         'not together and not trains_as']

# name: (file, exact text, its mutation)
MUTANTS = {
    'class swap when the attention rows are written': (
        'experiments/attention.py', 'first_symbol=CLASSES[c],',
        'first_symbol=CLASSES[1 - c],'),
    'critical distance: break -> continue': (
        'src/stats.py', '    if not reaches(accuracy, threshold):\n'
        '      break', '    if not reaches(accuracy, threshold):\n'
        '      continue'),
    'solved: >= -> >': (
        'src/stats.py', 'value >= threshold - ROUNDING',
        'value > threshold - ROUNDING'),
    'critical distance: the sort dropped': (
        'src/stats.py', 'in sorted(length_accuracy):',
        'in length_accuracy:'),
    'the "both" bug of the old dispersed rule': (
        'experiments/attention.py', "return 'both' if dispersed else",
        "return 'B' if dispersed else"),
    # -- the kinds' tests
    'threshold: tested the wrong way round': (
        'src/claims.py', "  return (over, under) if above else (under, over)",
        "  return (under, over) if above else (over, under)"),
    'threshold: a seed at the threshold counted as short of it': (
        'src/claims.py', 'under = int(np.sum(v > threshold)), int(np.sum(v < '
        'threshold))', 'under = int(np.sum(v > threshold)), int(np.sum(v <= '
        'threshold))'),
    'reliability: against 1/2, not the declared rate': (
        'src/claims.py', "  rate = e.get('rate', RELIABLE_RATE)\n  held",
        '  rate = 0.5\n  held'),
    'reliability: the seeds the lengths cannot judge dropped': (
        'src/claims.py', '  if undetermined:  # bounded both ways',
        '  if False:  # bounded both ways'),
    'capability: no Bonferroni over the seeds searched': (
        'src/claims.py',
        'return min(1.0, float(p[best]) * acc.size), best',
        'return float(p[best]), best'),
    'impossibility: judged at the null, no margin': (
        'src/claims.py',
        "bar = min(e['null'] + e.get('margin', IMPOSSIBLE_MARGIN), 1.0)",
        'bar = 1.0'),
    'gates ignored (a failure still learning, one rate)': (
        'src/claims.py', 'return stats.INCONCLUSIVE if direction in gates '
        'else direction', 'return direction'),
    'comparison: ties counted as not ahead (the old rule)': (
        'src/claims.py', "  held = stats.binomial(w, w + l + z, 0.5, 'greater')",
        "  held = stats.binomial(w, w + l + z + n['ties'], 0.5, 'greater')"),
    'comparison: ties at the ceiling not censored': (
        'src/claims.py', "  held = stats.binomial(w, w + l + z, 0.5, 'greater')",
        "  held = stats.binomial(w, w + l, 0.5, 'greater')"),
    'as far as: the share behind not bounded (ties as wins)': (
        'src/claims.py', "p_held=stats.rate_below(l, judged, AS_FAR_MARGIN),",
        "p_held=stats.binomial(w + n['ties'], judged, 0.5, 'greater'),"),
    'Holm: raw p judged, not the adjusted one': (
        'src/claims.py',
        "direction,\n                         p_adj, steps)", "direction,\n"
        "                         m['p'], steps)"),
    'Holm: excluded on the leaning direction\'s floor alone': (
        'src/claims.py', "p_floor=float(min(t['p_min_held'], t['p_min_not'])),",
        "p_floor=float(t['p_min_held' if held else 'p_min_not']),"),
    'Holm: the tests that cannot decide kept in the family': (
        'src/claims.py', 'can = [i for i, why in enumerate(whys) if not why]',
        'can = list(range(len(members)))'),
    'Holm: each run\'s family alone, not across the parts': (
        'src/claims.py', "      families.setdefault(c['family'], []).append(i)"
        "\n  out = [dict(c) for c in claims]", "      families.setdefault("
        "(c['family'], c['measured']), []).append(i)\n  out = [dict(c) for c "
        "in claims]"),
    'Holm: no step-down maximum': (
        'src/stats.py', 'running = max(running, min(1.0, (m - rank) * ps[i]))',
        'running = min(1.0, (m - rank) * ps[i])'),
    'Benjamini-Hochberg: no step-up minimum': (
        'src/claims.py', 'running = min(running, ps[i] * m / (rank + 1))',
        'running = ps[i] * m / (rank + 1)'),
    'power: the underpowered check dropped': (
        'src/claims.py', '  if size * p_min >= stats.ALPHA:',
        '  if False:'),
    'power: underpowered read from these data, not from the seeds': (
        'src/claims.py', "p_min=float(t['p_best']),",
        "p_min=float(t['p_min_held' if held else 'p_min_not']),"),
    'power: the screen overrides a significant result': (
        'src/claims.py', '  if p_adjusted < stats.ALPHA:\n    return '
        'stats.INCONCLUSIVE if direction in gates else direction\n  if size '
        '* p_min >= stats.ALPHA:\n    return stats.underpowered(seeds)\n',
        '  if size * p_min >= stats.ALPHA:\n    return stats.underpowered('
        'seeds)\n  if p_adjusted < stats.ALPHA:\n    return '
        'stats.INCONCLUSIVE if direction in gates else direction\n'),
    # -- the rules
    'wall: L* back on the knife edge (fewer than half)': (
        'src/stats.py', "return n > 0 and binomial(k, n, 0.5, 'less') < alpha",
        'return 2 * k < n'),
    'wall: the bound two-sided (97.5%), not one-sided': (
        'src/stats.py', 'sps().beta.ppf(confidence, k + 1, n - k)',
        'sps().beta.ppf((1 + confidence) / 2, k + 1, n - k)'),
    'wall: L* taken at the first budget, stable or not': (
        'experiments/memory_task.py',
        '    if here is not None and here == after:',
        '    if here is not None:'),
    'wall: the seeds still stuck not trained out': (
        'experiments/memory_task.py',
        'trained_out(curves, still, last, model=model,',
        'trained_out(curves, [], last, model=model,'),
    'wall: escapes counted over every seed, not the stuck ones': (
        'experiments/memory_task.py',
        'stuck = [s for s in seeds if not stats.solved(small[model, L][s])]',
        'stuck = list(seeds)'),
    'wall: seeds needed as if every seed were stuck': (
        'experiments/memory_task.py', 'if n - stats.most_below_half(n) >= need)',
        'if n >= need)'),
    'trained out: the failing seeds\' median, not every one': (
        'src/gates.py', 'fall = float(np.max(falls)) if falls',
        'fall = float(np.median(falls)) if falls'),
    'trained out: a still-falling loss accepted': (
        'src/gates.py', 'and np.isfinite(fall) and fall < FLAT),',
        'and np.isfinite(fall)),'),
    'trained out: a group still leaving its plateau ignored': (
        'src/gates.py', "return max(0, solved_by(step) - solved_by(step // 2))",
        'return 0'),
    'tuning: the worst rate selected': (
        'src/runner.py', 'return int(np.argmax(np.nan_to_num(acc, '
        'nan=-1.0).mean(axis=1)))', 'return int(np.argmin(np.nan_to_num('
        'acc, nan=-1.0).mean(axis=1)))'),
    'searchlight: the entropy gap\'s sign kept (one direction only)': (
        'experiments/attention.py',
        "values=[abs(p['entropy_gap_A_minus_B']) for p in seeds]",
        "values=[p['entropy_gap_A_minus_B'] for p in seeds]"),
    'beam use: the control position not checked': (
        'experiments/attention.py', 'and no_pos0 <= CHANCE_BAND\n'
        '                                 and stats.solved(no_filler)))',
        'and no_pos0 <= CHANCE_BAND))'),
    'beam use: a fall to chance not needed': (
        'experiments/attention.py', 'and no_pos0 <= CHANCE_BAND', 'and True'),
    'positive control: every seed at the bar, whatever it scored': (
        'experiments/induction.py',
        'successes=[stats.reaches(two[s], CONTROL) for s in seeds]',
        'successes=[True for s in seeds]'),
    'a failure at an end of the rate grid judged as if inside it': (
        'src/gates.py', '                 and not min(rates) < c < max(rates)})',
        '                 and not min(rates) <= c <= max(rates)})'),
    'gating: the gated net\'s best rate not asked where it fell short': (
        'experiments/memory_task.py',
        'gates = rates.gate(stats.NOT_HELD, gated, short.values())',
        'gates = {}'),
    'routing: "cannot" judged on a model that never learned to route': (
        'experiments/routing.py', "not_applicable='' if learned else (",
        "not_applicable='' if True else ("),
    'price at widths: judged short of the declared window too': (
        'experiments/cost.py', '            if L >= start]', '            ]'),
    'routing: "cannot" judged against chance, not what routing allows': (
        'experiments/routing.py', '  ceiling = null(task)\n',
        '  ceiling = 1 / num_classes(task)\n'),
    'routing ceiling: the fewest pairs right, not the most': (
        'src/tasks.py', 'cost[2 * classes * k:] = -1',
        'cost[2 * classes * k:] = 1'),
    'recall: the fill-up against attention dropped (no interaction)': (
        'experiments/recall.py',
        'dict(x=pick(fall(model)), y=pick(fall(attention)), x_name=model,',
        'dict(x=pick(fall(model)), y=[0.0] * len(learned), x_name=model,'),
    'price at widths: one fourfold doubling is enough': (
        'experiments/cost.py', 'start = (start or L) if r >= FOURFOLD else None',
        'start = start or (L if r >= FOURFOLD else None)'),
    'a decay fit: the underflowed tail fitted': (
        'src/stats.py', 'bad = ~(np.isfinite(v) & (v > floor))',
        'bad = ~np.isfinite(v)'),
    'a decay fit: a seed too short to fit counted against the decay': (
        'experiments/gradient.py',
        "fitted = [f for f in fits if f['better'] is not None]",
        'fitted = list(fits)'),
    'across lengths: fitted past the floor': (
        'experiments/gradient.py', 'fits = {s: stats.fits_above_floor(lengths',
        'fits = {s: stats.decay_fits(lengths'),
    'along one string: a rising exponential counts as dying away': (
        'src/stats.py', "return fit['better'] == 'exponential' "
        "and fit['exponential']['slope'] < 0",
        "return fit['better'] == 'exponential'"),
    'price at widths: the crossover as b / a': (
        'src/costs.py', "'crossover_length': float(a / b) if b > 0 else None",
        "'crossover_length': float(b / a) if b > 0 else None"),
    'by rate: a verdict that differs by rate not shown': (
        'src/runner.py', '      if len(set(verdicts.values())) > 1:',
        '      if False:'),
    'by rate: every rate\'s rows judged together': (
        'src/runner.py',
        "if float(r.get('learning_rate') or 'nan') == rate]", 'if True]'),
}


def main() -> int:
  files = subprocess.run(['git', 'ls-files'], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
  survivors = []
  only = ' '.join(sys.argv[1:])
  for name, (path, text, mutated) in MUTANTS.items():
    if only not in name:
      continue
    with tempfile.TemporaryDirectory() as tmp:
      tree = pathlib.Path(tmp)
      for f in files:
        (tree / f).parent.mkdir(parents=True, exist_ok=True)
        (tree / f).write_bytes((ROOT / f).read_bytes())
      source = (tree / path).read_text()
      if source.count(text) != 1:
        print(f'{name}: the text to mutate is not there once; update me')
        return 2
      (tree / path).write_text(source.replace(text, mutated))
      proc = subprocess.run(
          [sys.executable, '-m', 'pytest', '-q', '-x', '-p', 'no:cacheprovider',
           *TESTS], cwd=tree, capture_output=True, text=True, timeout=600)
      failed = [l for l in proc.stdout.splitlines() if l.startswith('FAILED')]
      if proc.returncode not in (0, 1):  # not a test failing: the tree broke
        print(f'{name}: pytest exited {proc.returncode} (the tree does not '
              f'run as mutated; its last lines below)\n'
              + '\n'.join(proc.stdout.splitlines()[-5:]))
        return 2
      caught = proc.returncode == 1 and bool(failed)
      print(f'{"caught " if caught else "SURVIVED"} {name}: '
            f'{len(failed)} failing test(s)' + (f', e.g. {failed[0][7:90]}'
                                                 if failed else ''))
      if not caught:
        survivors.append(name)
  return 1 if survivors else 0


if __name__ == '__main__':
  sys.exit(main())
