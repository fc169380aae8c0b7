#!/usr/bin/env bash
# The hot-region tables of KernelBench level 3 measured on a GPU (torch.profiler, agent profile):
# one JSON document a task under benchmarks/results/regions/<gpu>-<date>/, and the table of
# regions (estimated shares) beside them. Run from the repository root on a machine with a GPU.
set -euo pipefail
LEVEL_DIR=${1:-../shared/kernelbench/level3}
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '-' | tr -cd 'A-Za-z0-9-')
OUT=benchmarks/results/regions/${GPU:-gpu}-$(date -u +%Y-%m-%d)
mkdir -p "$OUT"
for task in "$LEVEL_DIR"/*.py; do
  name=$(basename "$task" .py)
  if agent profile "$task" --json > "$OUT/$name.json" 2> "$OUT/$name.err"; then
    rm -f "$OUT/$name.err"
  else
    echo "$name: profiling failed (see $OUT/$name.err)"
  fi
done
python benchmarks/regions_table.py --level-dir "$LEVEL_DIR" --out "$OUT/level3_regions.md"
echo "wrote $OUT"
