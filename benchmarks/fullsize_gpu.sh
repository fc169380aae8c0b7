#!/usr/bin/env bash
# Issue 17 on a GPU machine, from the repository root, after `source benchmarks/gpu_setup.sh`:
# KernelBench at its full, current sizes with single-file generations (benchmarks/kb_corpus.py).
# KB: the KernelBench folder (default .kb, a copy of ../shared/kernelbench carried along, since
# only the repository travels). Writes under $OUT/fullsize/. Each step is time-boxed.
KB="${KB:-.kb}"
out="${OUT:-/tmp/out}/fullsize"
corpus=/tmp/kb-corpus
mkdir -p "$out"
set -o pipefail
step() {  # step SECONDS NAME COMMAND...
    local limit=$1 name=$2
    shift 2
    echo "== $name (limit ${limit}s) $(date -u +%T)"
    local started=$SECONDS
    timeout -k 10 "$limit" "$@" 2>&1 | tee "$out/$name.log" | tail -n 40
    echo "== $name: exit ${PIPESTATUS[0]} in $((SECONDS - started))s"
}
sha256sum "$KB"/level1/19_ReLU.py "$KB"/level1/23_Softmax.py "$KB"/level1/40_LayerNorm.py > "$out/task_sha256.txt"
python3 benchmarks/kb_corpus.py --kernelbench "$KB" --levels 1 2 3 --out "$corpus" | grep -v '^  note' > "$out/corpus.log"
sol() { echo "$corpus/level_$1_problem_$2_sample_0_kernel.py"; }
if [ "${FULLSIZE_BUILDS:-1}" = 1 ]; then
    step "${BUILD_LIMIT_S:-300}" inline_build python3 benchmarks/inline_build_bench.py \
        "$(sol 1 19)" "$(sol 1 23)" "$(sol 2 1)" "$(sol 3 1)" --torch-baseline \
        --out "$out/inline_build_h200.md"
fi
if [ "${FULLSIZE_EVALS:-1}" = 1 ]; then
    for task in 19_ReLU 23_Softmax 40_LayerNorm; do
        id=${task%%_*}
        step "${EVAL_LIMIT_S:-150}" "eval_$task" python3 benchmarks/eval_bench.py --task "$KB/level1/$task.py" \
            --solution "$(sol 1 "$id")" --policy kernelbench --runs "${EVAL_RUNS:-2}" \
            --out "$out/eval_$task.md" --json-dir "$out/json_$task"
    done
fi
