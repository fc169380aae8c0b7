#!/usr/bin/env bash
# Where a single-file generation's cold build spends its time on this machine: `import torch`,
# the routed load_inline build (ninja's own per-edge log), then the .cu's compile command again
# with `nvcc --time` (per phase: preprocessing, cudafe++, cicc, ptxas, host compile).
#   bash benchmarks/diag/build_phases.sh SOLUTION.py OUT_DIR
# BUILD_PHASES_CACHE: the toolchain cache (precompiled header) to use, default /tmp/build-phases-cache.
set -u
solution=$1; out=$2; mkdir -p "$out"
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} TORCH_EXTENSIONS_DIR=/tmp/build-phases-ext TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
rm -rf "$TORCH_EXTENSIONS_DIR"
python3 -c 'import time; t = time.monotonic(); import torch; print(f"import torch {time.monotonic() - t:.2f} s")' | tee "$out/phases.txt"
for label in "first (PCH and header probes)" "again, from scratch"; do
    rm -rf "$TORCH_EXTENSIONS_DIR"
    python3 - "$solution" "$label" <<'PY' 2>&1 | grep -v "No CUDA runtime" | tee -a "$out/phases.txt"
import os, runpy, sys, time
sys.path.insert(0, "sandbox/workers")
import siblings
import inline_build
inline_build.install(os.environ.get("BUILD_PHASES_CACHE", "/tmp/build-phases-cache"))
start = time.monotonic()
runpy.run_path(sys.argv[1])
print(f"load_inline build, {sys.argv[2]}: {time.monotonic() - start:.2f} s")
PY
done
folder=$(dirname "$(ls "$TORCH_EXTENSIONS_DIR"/*/build.ninja | head -1)")
cp "$folder/.ninja_log" "$out/ninja_log.txt"; cp "$folder/build.ninja" "$out/build.ninja"
workers=$PWD/sandbox/workers
cd "$folder" && ninja -t commands | grep nvcc | head -1 > "$out/nvcc_command.txt"
command=$(cat "$out/nvcc_command.txt")
plain=${command#*nvcc_parallel.py }  # a tier copy's edge runs nvcc through nvcc_parallel.py
echo "nvcc alone, its phases in a row (nvcc --time):" | tee -a "$out/phases.txt"
start=$EPOCHREALTIME
bash -c "${plain/ -o / --time $out/nvcc_time.csv -o }" >/dev/null 2>&1
echo "  wall $(awk "BEGIN {printf \"%.2f\", $EPOCHREALTIME - $start}") s" | tee -a "$out/phases.txt"
awk -F' , ' 'NR > 1 {printf "  %-24s %8.0f ms\n", $2, $7}' "$out/nvcc_time.csv" | tee -a "$out/phases.txt"
echo "nvcc's steps as a graph (nvcc_parallel.py), each step's span in s:" | tee -a "$out/phases.txt"
start=$EPOCHREALTIME
NVCC_PARALLEL_TIMES="$out/graph_times.jsonl" bash -c "python3 $workers/nvcc_parallel.py $plain" >/dev/null 2>&1
echo "  wall $(awk "BEGIN {printf \"%.2f\", $EPOCHREALTIME - $start}") s" | tee -a "$out/phases.txt"
tail -1 "$out/graph_times.jsonl" | tee -a "$out/phases.txt"
