#!/usr/bin/env bash
# Issue 17 on a GPU machine, from the repository root, after `source benchmarks/gpu_setup.sh`:
# KernelBench at its full, current sizes with single-file generations (benchmarks/kb_corpus.py).
# KB: the KernelBench folder (default .kb, a copy of ../shared/kernelbench carried along, since
# only the repository travels). Writes under $OUT/fullsize/. Each step is time-boxed (gpu_steps.sh),
# within BUDGET_S for the whole script.
KB="${KB:-.kb}"
out="${OUT:-/tmp/out}/fullsize"
corpus=/tmp/kb-corpus
mkdir -p "$out"
set -o pipefail
STEPS_NAME=fullsize LOG="$out/fullsize.log" BUDGET_S="${BUDGET_S:-570}" RESERVE_S=0 WORK="$out"
# shellcheck source=benchmarks/gpu_steps.sh
source benchmarks/gpu_steps.sh
sha256sum "$KB"/level1/19_ReLU.py "$KB"/level1/23_Softmax.py "$KB"/level1/40_LayerNorm.py > "$out/task_sha256.txt"
python3 benchmarks/kb_corpus.py --kernelbench "$KB" --levels 1 2 3 --out "$corpus" | grep -v '^  note' > "$out/corpus.log"
sol() { echo "$corpus/level_$1_problem_$2_sample_0_kernel.py"; }
# GPU memory every half second while the script runs: the peaks of the full-size evaluations.
nvidia-smi --query-gpu=timestamp,memory.used,memory.total,utilization.gpu --format=csv -lms 500 > "$out/gpu_memory.csv" 2>/dev/null &
memlog=$!
trap 'kill $memlog 2>/dev/null' EXIT
if [ "${FULLSIZE_HANDOFF_TESTS:-1}" = 1 ]; then
    step handoff_tests 120 "$out/handoff_tests.log" python3 -m pytest -q -m gpu -p no:cacheprovider \
        tests/referee/test_gpu_handoff.py tests/referee/test_gpu_memory.py
fi
if [ "${FULLSIZE_BUILDS:-1}" = 1 ]; then
    step inline_build "${BUILD_LIMIT_S:-300}" "$out/inline_build.log" python3 benchmarks/inline_build_bench.py \
        "$(sol 1 19)" "$(sol 1 23)" "$(sol 2 1)" "$(sol 3 1)" ${TORCH_BASELINE:+--torch-baseline} \
        --out "$out/inline_build_h200.md"
fi
if [ "${FULLSIZE_EVALS:-1}" = 1 ]; then
    for task in ${FULLSIZE_TASKS:-19_ReLU 23_Softmax 40_LayerNorm}; do
        id=${task%%_*}
        step "eval_$task" "${EVAL_LIMIT_S:-150}" "$out/eval_$task.log" python3 benchmarks/eval_bench.py --task "$KB/level1/$task.py" \
            --solution "$(sol 1 "$id")" --policy kernelbench --runs "${EVAL_RUNS:-2}" \
            --out "$out/eval_$task.md" --json-dir "$out/json_$task"
    done
fi
