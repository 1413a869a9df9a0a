"""Runs `run.py` once per argument list, each in a process forked from this
one after it has imported `run.py` (jax, flax, orbax: seconds), so that a
test of many refusals pays the imports once. Each child is a real process
as `tests/helpers.run_py` starts one: its own flags, exit status, stdout and
stderr.

  python tests/forked_run.py CASES.json OUT.json
CASES.json: [[arg, ...], ...]; OUT.json: [{returncode, stdout, stderr}, ...].
"""

import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_case(args: list[str]) -> dict:
  from absl import app
  import run
  with tempfile.TemporaryFile('w+') as out, tempfile.TemporaryFile('w+') as err:
    pid = os.fork()
    if pid == 0:  # the child: run.py with these arguments, then exit
      os.dup2(out.fileno(), 1)
      os.dup2(err.fileno(), 2)
      sys.argv = [os.path.join(ROOT, 'run.py'), *args]
      code = 1
      try:
        app.run(run.main, flags_parser=run.parse_flags)
        code = 0
      except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None
                                                       else 1)
      except BaseException:
        import traceback
        traceback.print_exc()
      finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    out.seek(0)
    err.seek(0)
    return {'returncode': os.waitstatus_to_exitcode(status),
            'stdout': out.read(), 'stderr': err.read()}


def main():
  sys.path.insert(0, ROOT)
  os.chdir(ROOT)
  import run  # noqa: F401  (the imports every child inherits)
  import experiments
  for name in experiments.EXPERIMENTS:
    experiments.load(name)
  with open(sys.argv[1]) as f:
    cases = json.load(f)
  results = [run_case(args) for args in cases]
  with open(sys.argv[2], 'w') as f:
    json.dump(results, f)


if __name__ == '__main__':
  main()
