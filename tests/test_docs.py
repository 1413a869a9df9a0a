"""What a reader meets: code that says what it does, not when or where it
was measured; a README that points at what the runs write."""

import re

from tests.helpers import ROOT

# A date, a machine, a load or a timing as measured on one: history, which
# belongs in docs/ENGINEERING.md (and git), not in the code.
HISTORY = re.compile(
    r'20[0-9]{2}-[01][0-9]-[0-3][0-9]|\bVM\b|CPU-minutes|\b2-core\b|'
    r'\bat load [0-9]|\btook [0-9][0-9.]* ?(s|ms|minutes)\b|'
    r'[0-9][0-9.]* ?(ms|seconds|minutes|hours) (on|of) (a|the|this)\b')


def test_no_dates_machines_or_timings_in_the_code():
  offenders = []
  for path in [ROOT / 'run.py', *sorted((ROOT / 'src').rglob('*.py')),
               *sorted((ROOT / 'experiments').glob('*.py'))]:
    for number, line in enumerate(path.read_text().splitlines(), 1):
      if HISTORY.search(line):
        offenders.append(f'{path.relative_to(ROOT)}:{number}: {line.strip()}')
  assert not offenders, '\n'.join(offenders)


def test_the_history_check_catches_what_it_is_for():
  for line in ('# 83 minutes on a 2-core CPU', '(2026-12-02)', 'the VM',
               'took 1.4 s', '34 minutes on a shared CPU at load 7'):
    assert HISTORY.search(line), line
  for line in ('about 15 steps', 'L x L', 'every 100 training steps'):
    assert not HISTORY.search(line), line
