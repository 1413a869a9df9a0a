#!/usr/bin/env bash
# The three published results Searchlight reproduces as published, each at
# its paper's largest setting, one after another, on whatever accelerator JAX
# finds (GPU or TPU; a CPU is refused: these runs are days there):
#   Zoology's Figure 2, its largest cell (L=512, 64 pairs, widths 64-512);
#   the Mamba paper's Table 2, its three rows (Mamba, MHA-Abs, MHA-RoPE);
#   LSTM'97's task 2b at p=100 (cheap anywhere).
# Before each run it prints the run's estimate (--only_check_args); while it
# trains, its progress line gives steps/s and the time left; after, its
# table (table.txt) and claims. Every run resumes where it stopped:
# rerunning this script after an interruption goes on.
#   bash configs/published.sh [WORKDIR_ROOT]      (default runs/published)
set -euo pipefail
cd "$(dirname "$0")/.."
root="${1:-runs/published}"
platform="$(python -c 'import jax; print(jax.default_backend())')"
if [[ "$platform" == cpu && -z "${PUBLISHED_ON_CPU:-}" ]]; then
  echo "configs/published.sh: no accelerator found (jax backend: cpu); set PUBLISHED_ON_CPU=1 to run anyway" >&2
  exit 2
fi
runs=(
  "lstm97 --exp=lstm97"
  "table2_mamba --flagfile=configs/mamba_table2_mamba.flags"
  "table2_rope --flagfile=configs/mamba_table2_rope.flags"
  "table2_abs --flagfile=configs/mamba_table2_abs.flags"
  "zoology_L512 --flagfile=configs/zoology_figure2_L512.flags"
)
for entry in "${runs[@]}"; do
  name="${entry%% *}"; flags="${entry#* }"
  echo "=== $name: python run.py $flags --workdir=$root/$name"
  # shellcheck disable=SC2086
  python run.py $flags --workdir="$root/$name" --only_check_args | tail -3
  start=$(date +%s)
  # shellcheck disable=SC2086
  python run.py $flags --workdir="$root/$name"
  echo "=== $name: $(( $(date +%s) - start )) s; results in $root/$name (table.txt, summary.json)"
done
