"""The same numbers twice on a GPU: XLA's deterministic GPU ops, switched on
before the backend starts wherever JAX may pick a GPU.

Without them a GPU run's reductions (and scatter-adds) may sum in another
order each time, so two runs of the same flags differ in the last bits and
a seed on a knife-edge ends elsewhere. XLA reads XLA_FLAGS once, when its
first client starts, so this must run before anything asks for a device.
A CPU run is left as it is (its programs are deterministic already).
"""

import importlib.util
import os
import pkgutil

FLAG = 'xla_gpu_deterministic_ops'
GPU_PLATFORMS = ('cuda', 'rocm', 'gpu')


def gpu_available(environ=None) -> bool:
  """Whether JAX may start a GPU backend, found without starting one: a CUDA
  or ROCm PJRT plugin is installed (`jax_plugins.xla_cuda12`, ...) and
  JAX_PLATFORMS, where set, names a GPU platform."""
  environ = os.environ if environ is None else environ
  platforms = environ.get('JAX_PLATFORMS', '').lower()
  if platforms and not any(p in platforms for p in GPU_PLATFORMS):
    return False
  spec = importlib.util.find_spec('jax_plugins')
  if spec is None or not spec.submodule_search_locations:
    return False
  return any(any(p in m.name.lower() for p in GPU_PLATFORMS)
             for m in pkgutil.iter_modules(spec.submodule_search_locations))


def configure(nondeterministic: bool = False, environ=None) -> dict:
  """Adds --xla_gpu_deterministic_ops=true to XLA_FLAGS where a GPU may be
  used, unless `nondeterministic` or the user's XLA_FLAGS already say;
  returns what config.json records."""
  environ = os.environ if environ is None else environ
  gpu = gpu_available(environ)
  flags = environ.get('XLA_FLAGS', '')
  if gpu and not nondeterministic and FLAG not in flags:
    flags = environ['XLA_FLAGS'] = f'{flags} --{FLAG}=true'.strip()
  given = [f for f in flags.split() if f.lstrip('-').startswith(FLAG)]
  value = given[-1].partition('=')[2].lower() if given else 'false'
  on = value in ('', 'true', '1')  # a bare --flag is true
  return {'gpu_found': gpu, 'deterministic_ops': on if gpu else None,
          'nondeterministic_flag': nondeterministic, 'xla_flags': flags}
