#!/usr/bin/env bash
# The referee's GPU evidence (issues 4 and 8), from the repository root on a GPU machine, after
# `source benchmarks/gpu_setup.sh`. Writes under $OUT/referee/. Each step is time-boxed and runs
# whatever the previous one did.
out="${OUT:-/tmp/out}/referee"
mkdir -p "$out"
set -o pipefail
step() {  # step SECONDS NAME COMMAND...
    local limit=$1 name=$2
    shift 2
    echo "== $name (limit ${limit}s) $(date -u +%T)"
    local started=$SECONDS
    timeout -k 10 "$limit" "$@" 2>&1 | tee "$out/$name.log" | tail -n 60
    echo "== $name: exit ${PIPESTATUS[0]} in $((SECONDS - started))s"
}
# The quiet tests time to the microsecond: alone, after the others (which share the GPU and the CPUs).
[ "${REFEREE_GPU_TESTS:-1}" = 1 ] && step "${REFEREE_GPU_LIMIT_S:-330}" pytest_gpu_referee python3 -m pytest -m "gpu and not quiet" tests/referee tests/sandbox -v --tb=short \
    -p no:cacheprovider --timeout 200 -n "${REFEREE_GPU_WORKERS:-4}"
[ "${REFEREE_GPU_TESTS:-1}" = 1 ] && step "${REFEREE_GPU_QUIET_LIMIT_S:-150}" pytest_gpu_referee_quiet python3 -m pytest -m "gpu and quiet" tests/referee tests/sandbox -v --tb=short \
    -p no:cacheprovider --timeout 140
[ "${REFEREE_GPU_ADVERSARIAL:-1}" = 1 ] && KERNEL_AGENT_SUITE_OUT="$out/adversarial_suite.txt" \
    step "${ADVERSARIAL_GPU_LIMIT_S:-300}" pytest_gpu_adversarial python3 -m pytest -m gpu tests/adversarial -q \
    -p no:cacheprovider --timeout 280 -rA
[ "${REFEREE_GPU_EVAL_BENCH:-1}" = 1 ] && step 150 eval_bench python3 benchmarks/eval_bench.py --runs 5 --out "$out/eval_bench_h200.md"
