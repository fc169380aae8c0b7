#!/usr/bin/env bash
# The diag probes of the tenth session's batch, on a GPU machine from the repository root after
# `source benchmarks/gpu_setup.sh` (about 3 min, the machine otherwise idle). Writes under $OUT/diag/.
#   KB=.kb bash benchmarks/diag/run_gpu.sh
out="${OUT:-/tmp/out}/diag"
mkdir -p "$out"
kb="${KB:-.kb}"
echo "== sync_contention $(date -u +%T)"
timeout -k 10 240 python3 benchmarks/diag/sync_contention.py --loads 0 24 --nice 10 0 --out "$out/sync_contention.md" 2>&1 | tee "$out/sync_contention.log" | tail -n 30
echo "== baseline_memory, level-1 HuberLoss at full size $(date -u +%T)"
timeout -k 10 150 python3 benchmarks/diag/baseline_memory.py "$kb/level1/96_HuberLoss.py" 2>&1 | tee "$out/baseline_memory_huber.log" | tail -n 70
echo "== done $(date -u +%T)"
