"""Runs `run.py` once per argument list, each in a process forked from this
one after it has imported `run.py` and every experiment (jax, flax, orbax,
scipy, matplotlib: about 4 s), so that the tests pay the imports once. Each
child is a real process as `tests/helpers.run_py` starts one: its own flags,
exit status, stdout and stderr; it starts its own JAX backend (this process
never does, and holds no thread but its main one when it forks).

  python tests/forked_run.py CASES.json OUT.json
CASES.json: [[arg, ...], ...]; OUT.json: [{returncode, stdout, stderr}, ...].

  python tests/forked_run.py --serve
reads one case per line on stdin and answers each with one JSON line
{returncode, stdout, stderr} on stdout, until stdin closes. A case is an
argument list for `run.py`, or {"args": [...], "env": {...}, "script": PATH,
"cwd": FOLDER, "session": BOOL}: the variables set in the child before it
runs (only ones read at run time: this process has imported everything
already), a script to run as `python PATH ARGS` would, in place of
`run.py`, the folder it runs in (default the repository's root), and
whether it starts a session of its own (its own process group).
"""

import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_case(case: list[str] | dict) -> dict:
  from absl import app
  import run
  if isinstance(case, list):
    case = {'args': case}
  args, script = case['args'], case.get('script')
  with tempfile.TemporaryFile('w+') as out, tempfile.TemporaryFile('w+') as err:
    pid = os.fork()
    if pid == 0:  # the child: run.py with these arguments, then exit
      if case.get('session'):
        os.setsid()
      os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
      os.dup2(out.fileno(), 1)
      os.dup2(err.fileno(), 2)
      os.environ.update(case.get('env', {}))
      if case.get('cwd'):
        os.chdir(case['cwd'])
      if script is not None:
        sys.argv = [script, *args]
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
      else:
        sys.argv = [os.path.join(ROOT, 'run.py'), *args]
      # As if run.py were the main program: its docstring and its flags
      # (absl files them under the defining module) are what --help shows.
      sys.modules['__main__'] = run
      for by_module in (app.FLAGS.flags_by_module_dict(),
                        app.FLAGS.key_flags_by_module_dict()):
        if 'run' in by_module:
          by_module[sys.argv[0]] = by_module.pop('run')
      code = 1
      try:
        if script is not None:
          import runpy
          runpy.run_path(script, run_name='__main__')
        else:
          app.run(run.main, flags_parser=run.parse_flags)
        code = 0
      except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None
                                                       else 1)
      except BaseException:
        import traceback
        traceback.print_exc()
      finally:  # never back into the server's own stack
        try:
          sys.stdout.flush()
          sys.stderr.flush()
        finally:
          os._exit(code)
    _, status = os.waitpid(pid, 0)
    out.seek(0)
    err.seek(0)
    return {'returncode': os.waitstatus_to_exitcode(status),
            'stdout': out.read(), 'stderr': err.read()}


def serve():
  """One case per line of stdin, one answer per line of stdout."""
  answers = os.fdopen(os.dup(1), 'w')
  for line in sys.stdin:
    answers.write(json.dumps(run_case(json.loads(line))) + '\n')
    answers.flush()


def main():
  sys.path.insert(0, ROOT)
  os.chdir(ROOT)
  import run  # noqa: F401  (the imports every child inherits)
  import experiments
  for name in experiments.EXPERIMENTS:
    experiments.load(name)
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot  # noqa: F401  (every run draws its figures)
  import scipy.stats  # noqa: F401  (and judges its claims)
  if sys.argv[1:] == ['--serve']:
    return serve()
  with open(sys.argv[1]) as f:
    cases = json.load(f)
  results = [run_case(args) for args in cases]
  with open(sys.argv[2], 'w') as f:
    json.dump(results, f)


if __name__ == '__main__':
  main()
