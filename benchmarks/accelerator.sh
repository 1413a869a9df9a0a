#!/usr/bin/env bash
# The accelerator check: one script, each step time-boxed, its table written
# as it goes (a step cut short leaves the rows before it).
#   bash benchmarks/accelerator.sh [RESULTS]        (default runs/accelerator)
# RESULTS gets accelerator.md (the table) and accelerator.log; the runs go
# to $WORK (default a fresh temporary folder). PYTHON names the interpreter.
# Steps: versions and the device; the headline twice in two workdirs (cold,
# then with the compilation cache warm), compared value for value; a run
# killed mid-way and resumed, compared with the first; --exp=cost to
# L=16,384; a throughput slice of each published run with its full-length
# estimate. For a dry run on a CPU: HEADLINE_FLAGS (flags added to the
# headline, e.g. "--lengths=5,10 --seeds=2 --steps=50"), COST_LENGTHS and
# SLICE_STEPS.
set -uo pipefail
cd "$(dirname "$0")/.."
results="${1:-runs/accelerator}"
work="${WORK:-$(mktemp -d -t searchlight-accelerator.XXXX)}"
py="${PYTHON:-python}"
slice_steps="${SLICE_STEPS:-8192}"
mkdir -p "$results" "$work"
table="$results/accelerator.md"
log="$results/accelerator.log"
: >"$log"
cache="$work/cache"  # empty at the start: the first headline compiles cold
row() { echo "$*" | tee -a "$table"; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
headline_run() {  # workdir, then what comes before the command (timeout ...)
  local w=$1; shift
  # shellcheck disable=SC2086
  "$@" "$py" run.py --exp=distance ${HEADLINE_FLAGS:-} --workdir="$w" \
    --checkpoint_dir="$w/checkpoints" --compilation_cache_dir="$cache" \
    >>"$log" 2>&1
}

echo "# Accelerator check, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null)" >"$table"
echo >>"$table"
"$py" - >>"$table" 2>>"$log" <<'EOF'
import importlib.metadata as m, jax
names = ('jax', 'jaxlib', 'jax-cuda13-plugin', 'jax-cuda12-plugin', 'flax',
         'optax', 'orbax-checkpoint', 'tensorboard', 'tensorboardX', 'numpy')
found = []
for n in names:
  try:
    found.append(f'{n} {m.version(n)}')
  except m.PackageNotFoundError:
    pass
d = jax.devices()
print(f'{len(d)} x {d[0].device_kind} ({d[0].platform}); ' + ', '.join(found))
EOF
row
row '| step | wall | result |'
row '|---|---|---|'

compare() {  # two workdirs: their results.csv and measurements.csv, timing aside
  "$py" - "$1" "$2" <<'EOF'
import csv, sys
TIMING = {'wall_s', 'compile_s'}
out = []
for name in ('results.csv', 'measurements.csv'):
  tables = []
  for folder in sys.argv[1:]:
    with open(f'{folder}/{name}') as f:
      tables.append([{k: v for k, v in r.items() if k not in TIMING}
                     for r in csv.DictReader(f)])
  a, b = tables
  same = sum(x == y for x, y in zip(a, b))
  out.append(f'{name}: {same} of {len(a)} rows the same'
             + ('' if len(a) == len(b) else f' ({len(b)} against {len(a)})'))
print('; '.join(out))
EOF
}

t0=$(now)
headline_run "$work/h1" timeout 240
code=$?
cold=$(secs "$t0" "$(now)")
ops=$("$py" -c "import json; print(json.load(open('$work/h1/config.json'))['provenance']['determinism'])" 2>>"$log")
row "| headline, empty compilation cache (exit $code) | $cold s | determinism: ${ops:-not recorded} |"
t0=$(now)
headline_run "$work/h2" timeout 180
code=$?
warm=$(secs "$t0" "$(now)")
row "| headline again, second workdir, warm cache (exit $code) | $warm s | $(compare "$work/h1" "$work/h2" 2>>"$log") |"

# Stopped with SIGTERM a third of the way through, then resumed.
t0=$(now)
# shellcheck disable=SC2086
"$py" run.py --exp=distance ${HEADLINE_FLAGS:-} --workdir="$work/h3" \
  --checkpoint_dir="$work/h3/checkpoints" --compilation_cache_dir="$cache" \
  >>"$log" 2>&1 &
pid=$!  # the run itself, not a subshell: the signal must reach it
kill_at=$(awk -v w="$warm" 'BEGIN { printf "%d", w / 3 + 1 }')
sleep "$kill_at"
kill -TERM "$pid" 2>/dev/null
wait "$pid"
stopped=$?
headline_run "$work/h3" timeout 180
code=$?
row "| stopped at ${kill_at} s (exit $stopped), resumed (exit $code) | $(secs "$t0" "$(now)") s | $(compare "$work/h1" "$work/h3" 2>>"$log") |"

t0=$(now)
timeout 100 "$py" run.py --exp=cost --models=attention,lstm,mamba \
  --lengths="${COST_LENGTHS:-1024,16384}" --widths=32 --workdir="$work/cost" \
  --compilation_cache_dir="$cache" >>"$log" 2>&1
code=$?
walls=$("$py" - "$work/cost/results.csv" <<'EOF' 2>>"$log"
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r['pass'] == 'train']
print('; '.join(f"{r['model']} L={r['length']} {1e3 * float(r['wall_s']):.2f} ms"
                for r in rows))
EOF
)
row "| --exp=cost, one training step (exit $code) | $(secs "$t0" "$(now)") s | ${walls:-no rows} |"

slice() {  # name, the run's full steps, time box, flags: steps/s of a slice
  local name=$1 full=$2 box=$3; shift 3
  local t0 code rate; t0=$(now)
  timeout "$box" "$py" run.py "$@" --steps="$slice_steps" \
    --workdir="$work/$name" --compilation_cache_dir="$cache" \
    >"$work/$name.log" 2>&1
  code=$?
  cat "$work/$name.log" >>"$log"
  # The rate between the first and the last progress line: the compiles and
  # the first chunk come before the first, the final test after the last.
  rate=$("$py" - "$work/$name.log" "$full" <<'EOF' 2>>"$log"
import re, sys
text = open(sys.argv[1]).read().replace('\r', '\n')
seen = [(int(s), int(e)) for s, e in
        re.findall(r'step (\d+)/\d+ .*?elapsed\s+(\d+)s', text)]
(s1, e1), (s2, e2) = seen[0], seen[-1]
rate = (s2 - s1) / (e2 - e1)
full = int(sys.argv[2])
print(f'{rate:.0f} steps/s, every member together (steps {s1:,} to {s2:,} '
      f'in {e2 - e1} s); all {full:,} steps: about {full / rate / 60:.0f} min')
EOF
)
  row "| $name, $slice_steps steps (exit $code) | $(secs "$t0" "$(now)") s | ${rate:-too few progress lines} |"
}
slice table2_mamba 204800 75 --flagfile=configs/mamba_table2_mamba.flags \
  --test_lengths=512 --chunk_steps=1024 --checkpoint_every=4096
slice table2_rope 409600 45 --flagfile=configs/mamba_table2_rope.flags \
  --test_lengths=512 --chunk_steps=1024 --checkpoint_every=4096
slice zoology_L512_attention 50048 45 \
  --flagfile=configs/zoology_figure2_L512.flags --models=attention \
  --widths=64 --chunk_steps=1024 --checkpoint_every=4096
echo "table: $table; log: $log; runs: $work"
