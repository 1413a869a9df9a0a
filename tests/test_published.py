"""configs/published.sh goes on past a failing run and ends with its table.
The interpreter is a stand-in (PYTHON): it says the backend is a GPU, fails
one run and writes a summary for the others, so no training is needed."""

import os
import stat
import subprocess
import sys

from tests.helpers import ROOT

FAKE_PYTHON = '''#!/usr/bin/env bash
if [[ "$1" == -c ]]; then echo gpu; exit 0; fi
if [[ "$1" == - ]]; then exec "$REAL_PYTHON" "$@"; fi
for a in "$@"; do case $a in --workdir=*) w=${a#--workdir=};; esac; done
echo "$*" >> "$CALLS"
if [[ "$*" == *--only_check_args* ]]; then echo "estimated: 1 minute"; exit 0; fi
if [[ "$*" == *mamba_table2_rope* ]]; then exit 3; fi
mkdir -p "$w"
echo '{"claims": [{"verdict": "held"}, {"verdict": "held"}]}' > "$w/summary.json"
'''


def test_published_goes_on_past_a_failing_run(tmp_path):
  fake = tmp_path / 'python'
  fake.write_text(FAKE_PYTHON)
  fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
  calls = tmp_path / 'calls'
  done = subprocess.run(
      ['bash', str(ROOT / 'configs' / 'published.sh'), str(tmp_path / 'runs')],
      capture_output=True, text=True, timeout=60,
      env={**os.environ, 'PYTHON': str(fake), 'REAL_PYTHON': sys.executable,
           'CALLS': str(calls)})
  assert done.returncode == 1, done.stderr
  assert 'table2_rope: FAILED with exit status 3' in done.stderr
  trained = [line for line in calls.read_text().splitlines()
             if '--only_check_args' not in line]
  assert len(trained) == 5  # the runs after the failing one ran too
  table = done.stdout[done.stdout.index('| run |'):].splitlines()
  rows = {line.split('|')[1].strip(): line for line in table[2:]}
  assert list(rows) == ['lstm97', 'table2_mamba', 'table2_rope',
                        'table2_abs', 'zoology_L512']
  assert 'failed (exit 3)' in rows['table2_rope']
  assert '2 held' in rows['zoology_L512'] and 'Table 2' in rows['table2_mamba']
