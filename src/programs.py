"""A group's compiled programs: each compiled once per name, possibly ahead
of time in another thread, and the seconds it took counted.

The runner compiles the next group's programs in a thread while this group
trains (`Ensemble.compile_ahead`, `evaluation.compile_ahead`); a program
that thread is still compiling is waited for, never compiled twice.
"""

import concurrent.futures
import threading
import time

import jax


class Programs:
  """AOT-compiled programs by name (the name holds every static choice)."""

  def __init__(self):
    self.compile_s = 0.0  # what callers waited for programs
    self.compiled_s = 0.0  # compiling them, in whichever thread
    self._compiled = {}  # name -> Future of the compiled program
    self._lock = threading.Lock()

  def get(self, name, fn, *args, donate=(), ahead: bool = False):
    """`fn` jitted and compiled for `args` once per `name`. `compile_s`
    counts the time callers waited, so a program compiled `ahead` while
    another group trained costs it nothing; `ahead`, a failure returns
    None (the caller that asks for the program later raises it)."""
    with self._lock:
      future = self._compiled.get(name)
      mine = future is None
      if mine:
        future = self._compiled[name] = concurrent.futures.Future()
    start = time.perf_counter()
    if mine:
      try:
        future.set_result(
            jax.jit(fn, donate_argnums=donate).lower(*args).compile())
        with self._lock:
          self.compiled_s += time.perf_counter() - start
      except BaseException as e:
        with self._lock:
          del self._compiled[name]  # a later call tries again, and raises
        future.set_exception(e)
        if ahead:
          return None
        raise
    compiled = future.result()
    if not ahead:
      self.compile_s += time.perf_counter() - start
    return compiled
