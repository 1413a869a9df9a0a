#!/usr/bin/env bash
# The three published results Searchlight reproduces as published, each at
# its paper's largest setting, one after another, on whatever accelerator JAX
# finds (GPU or TPU; a CPU is refused: these runs are days there):
#   Zoology's Figure 2, its largest cell (L=512, 64 pairs, widths 64-512);
#   the Mamba paper's Table 2, its three rows (Mamba, MHA-Abs, MHA-RoPE);
#   LSTM'97's task 2b at p=100 (cheap anywhere).
# Before each run it prints the run's estimate (--only_check_args); while it
# trains, its progress line gives steps/s and the time left; after, its
# table (table.txt) and claims. A run that fails is reported and the next
# one runs; the script ends with one table (each run, its time, the paper's
# result beside Searchlight's verdicts) and exits 1 if any run failed. Every
# run resumes where it stopped: rerunning this script goes on.
#   bash configs/published.sh [WORKDIR_ROOT]      (default runs/published)
# PYTHON names the interpreter (default python); PUBLISHED_RUNS, a
# space-separated subset of the names below, runs only those.
set -uo pipefail
cd "$(dirname "$0")/.."
root="${1:-runs/published}"
py="${PYTHON:-python}"
platform="$($py -c 'import jax; print(jax.default_backend())')"
if [[ "$platform" == cpu && -z "${PUBLISHED_ON_CPU:-}" ]]; then
  echo "configs/published.sh: no accelerator found (jax backend: cpu); set PUBLISHED_ON_CPU=1 to run anyway" >&2
  exit 2
fi
# name|flags|the paper's result
runs=(
  "lstm97|--exp=lstm97|18 of 18 trials solved, mean 5,680 sequences (Hochreiter & Schmidhuber 1997, sec. 5.2)"
  "table2_mamba|--flagfile=configs/mamba_table2_mamba.flags|Mamba keeps 100% from 2^6 to 2^20 (Gu & Dao 2023, Table 2)"
  "table2_rope|--flagfile=configs/mamba_table2_rope.flags|MHA-RoPE: 100% at the training length, falls off beyond 2x (Table 2)"
  "table2_abs|--flagfile=configs/mamba_table2_abs.flags|MHA-Abs: 100% at the training length, falls off beyond it (Table 2)"
  "zoology_L512|--flagfile=configs/zoology_figure2_L512.flags|attention solves MQAR at every width at L=512 (Arora et al. 2023, Figure 2)"
)
verdicts() {  # the claims' verdicts of a finished run, counted
  "$py" - "$1/summary.json" <<'EOF' 2>/dev/null || echo "no summary"
import collections, json, sys
claims = json.load(open(sys.argv[1])).get('claims', [])
n = collections.Counter(c['verdict'] for c in claims)
print(', '.join(f'{v} {k}' for k, v in sorted(n.items())) or 'no claims')
EOF
}
table=()
failed=0
for entry in "${runs[@]}"; do
  IFS='|' read -r name flags paper <<<"$entry"
  if [[ -n "${PUBLISHED_RUNS:-}" && " $PUBLISHED_RUNS " != *" $name "* ]]; then
    continue
  fi
  echo "=== $name: $py run.py $flags --workdir=$root/$name"
  # shellcheck disable=SC2086
  "$py" run.py $flags --workdir="$root/$name" --only_check_args | tail -3
  start=$(date +%s)
  # shellcheck disable=SC2086
  "$py" run.py $flags --workdir="$root/$name"
  code=$?
  secs=$(( $(date +%s) - start ))
  if [[ $code == 0 ]]; then
    status="ok"
    echo "=== $name: ${secs} s; results in $root/$name (table.txt, summary.json)"
  else
    status="failed (exit $code)"
    failed=1
    echo "=== $name: FAILED with exit status $code after ${secs} s; going on" >&2
  fi
  table+=("| $name | ${secs} s | $status | $paper | $(verdicts "$root/$name") |")
done
echo
echo "| run | time | status | published | Searchlight's verdicts |"
echo "|---|---|---|---|---|"
printf '%s\n' "${table[@]}"
exit $failed
