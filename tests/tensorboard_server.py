"""A real TensorBoard on a logdir, asked as its dashboards ask (its HTTP
API), and a headless Chromium that renders its pages: shared by the
TensorBoard tests and `docs/screenshots.py`."""

import contextlib
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

# Chromium's options for a page TensorBoard draws without a GPU: forceSVG
# makes its line charts SVG (headless WebGL draws none), smoothing=0 the
# values as logged.
CHROMIUM_FLAGS = ('--headless', '--no-sandbox', '--disable-gpu',
                  '--disable-quic', '--no-first-run',
                  '--disable-background-networking',
                  '--disable-component-update', '--disable-sync',
                  '--hide-scrollbars')
VIEW = '/?smoothing=0&forceSVG=true'


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


class Server:
  """`get(route, **params)` and `post(route, body)` answer as JSON."""

  def __init__(self, port: int):
    self.port = port
    self.url = f'http://127.0.0.1:{port}'

  def get(self, route, **params):
    url = self.url + route + ('?' + urllib.parse.urlencode(params)
                              if params else '')
    with urllib.request.urlopen(url, timeout=10) as r:
      return json.loads(r.read())

  def raw(self, route, **params) -> bytes:
    url = self.url + route + '?' + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as r:
      return r.read()

  def post(self, route, body: dict):
    request = urllib.request.Request(
        self.url + route, data=json.dumps(body).encode(),
        headers={'Content-Type': 'application/json'})
    with urllib.request.urlopen(request, timeout=10) as r:
      return json.loads(r.read())


@contextlib.contextmanager
def serve(logdir, runs=(), timeout: float = 60):
  """A TensorBoard on `logdir` (127.0.0.1, a free port), once its loader
  has read the scalars of every run in `runs` and its list of runs holds
  still; stopped at the end."""
  port = _free_port()
  proc = subprocess.Popen(
      [sys.executable, '-m', 'tensorboard.main', '--logdir', str(logdir),
       '--port', str(port), '--host', '127.0.0.1'],
      stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL)
  server = Server(port)
  try:
    deadline, seen = time.time() + timeout, None
    while True:  # until `runs` are read and the run list stops growing
      try:
        tags = server.get('/data/plugin/scalars/tags')
        now = server.get('/data/runs')
        if all(r in tags for r in runs) and now and now == seen:
          break
        seen = now
      except OSError:
        pass
      if proc.poll() is not None or time.time() > deadline:
        raise RuntimeError(f'TensorBoard on {logdir} did not come up')
      time.sleep(0.5)
    yield server
  finally:
    proc.terminate()
    proc.wait(timeout=20)


def chromium() -> str | None:
  """The headless browser's command, or None where none is installed."""
  for name in ('chromium', 'chromium-browser', 'google-chrome'):
    if shutil.which(name):
      return shutil.which(name)
  return None


def render(url: str, profile, *, screenshot=None, size=(1400, 1100),
           wait_ms: int = 20000) -> str:
  """The page at `url` as Chromium draws it after `wait_ms` of (virtual)
  time: its DOM, and a PNG at `screenshot` if given. `profile`: an empty
  folder of its own."""
  size_flag = f'--window-size={size[0]},{size[1]}'
  common = [chromium(), *CHROMIUM_FLAGS, f'--user-data-dir={profile}',
            size_flag, f'--virtual-time-budget={wait_ms}']
  if screenshot is not None:
    subprocess.run([*common, f'--screenshot={screenshot}', url],
                   capture_output=True, timeout=120, check=True)
  return subprocess.run([*common, '--dump-dom', url], capture_output=True,
                        text=True, timeout=120, check=True).stdout
