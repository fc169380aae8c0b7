#!/usr/bin/env bash
# Issue #9's GPU evidence in one call, on one H200, from any folder (after
# `source benchmarks/gpu_setup.sh` where wheels or bwrap travel):
#
#   OUT=/some/folder bash benchmarks/tuning/run_gpu.sh
#
# 1. (background, CPU only) build the six benchmark kernels, check that each built extension
#    loads and that every task's space is as expected. It overlaps step 2, so step 3 finds its
#    builds up to date; if it fails or is cut short, step 3 builds what is missing itself;
# 2. the tuner's GPU tests: `agent tune` from the CLI, the agent's tune tool, define mode;
# 3. the brute force: every valid point of the 12 benchmark tasks (one cache per task, written as
#    each task ends), then one adaptive run at 25% of a space. Replay them on a CPU (replay.py).
# Each step is time-boxed and runs whatever became of the one before; the whole stays inside
# TUNE_GPU_BUDGET_S (default 285). Expected on a fresh H200: step 2 about 90 s (the first
# toolchain build included), step 3 about 110 s; about 3.5 minutes in all.
# Writes under $OUT/tune/ (no deeper than $OUT/tune/cache/):
#   summary.txt            the summary printed last
#   pytest_gpu_tune.log    pytest -m gpu tests/tune
#   build.log, build/build.json   step 1
#   brute_force.log        step 3
#   cache/                 <task>.json for the 12 tasks, summary.json, e2e_<task>.txt and .json
# Exit status: the number of steps that failed.
set -u -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 2
: "${OUT:?set OUT to the folder whose contents come back}"
PY="${PYTHON:-python3}"
DEST="$OUT/tune"
BUDGET_S="${TUNE_GPU_BUDGET_S:-285}"
mkdir -p "$DEST/cache" "$DEST/build"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/kernel-agent-tune-gpu.XXXXXX")"
export PYTHONUNBUFFERED=1
failed=0

say() { echo "[tune_gpu $(date -u +%H:%M:%S) +${SECONDS}s] $*"; }

# Seconds a step may take: its own cap, or what is left of the budget, whichever is less (at
# least 1: `timeout 0` would mean no limit at all).
box() {
  local left=$((BUDGET_S - 10 - SECONDS))
  left=$(($1 < left ? $1 : left))
  echo $((left > 1 ? left : 1))
}

# A time-boxed step can leave sandboxed processes behind (they run in sessions of their own):
# they are found by the step's own folder, which nothing else uses, and ended by pid.
end_leftovers() {
  local dir="$1" proc pid cmd
  for proc in /proc/[0-9]*; do
    pid="${proc#/proc/}"
    [ "$pid" = "$$" ] && continue
    cmd="$({ tr '\0' ' ' <"$proc/cmdline"; } 2>/dev/null)"
    if [[ "$(readlink "$proc/cwd" 2>/dev/null)" == "$dir"* || "$cmd" == *"$dir"* ]]; then
      kill -9 "$pid" 2>/dev/null && say "ended leftover process $pid (under $dir)"
    fi
  done
}

# 1. Builds in the background, niced and with fewer nvcc jobs each, so the tests' builds go first.
say "builds (background) started"
(
  MAX_JOBS="${MAX_JOBS:-4}" timeout -k 5 "$(box 170)" nice -n 10 \
    "$PY" benchmarks/tuning/brute_force.py --build-only --out-dir "$DEST/build" --work-dir "$WORK/bench" \
    >"$DEST/build.log" 2>&1
  echo $? >"$DEST/build.rc"
) &
BUILD_PID=$!

# 2. The GPU tests.
say "pytest -m gpu tests/tune (limit $(box 150)s)"
timeout -k 5 "$(box 150)" "$PY" -m pytest -m gpu tests/tune -q -p no:cacheprovider --timeout 300 \
  --basetemp "$WORK/pytest" 2>&1 | tee "$DEST/pytest_gpu_tune.log"
PYTEST_RC=$?
PYTEST_S=$SECONDS
((PYTEST_RC == 0)) || failed=$((failed + 1))
end_leftovers "$WORK/pytest"

wait "$BUILD_PID"
BUILD_RC=$(cat "$DEST/build.rc" 2>/dev/null || echo "?")
[ "$BUILD_RC" = 0 ] || failed=$((failed + 1))
BUILD_S=$SECONDS
end_leftovers "$WORK/bench"

# 3. The brute force, in the workspaces step 1 built.
say "brute force (limit $(box 330)s)"
timeout -k 5 "$(box 330)" "$PY" benchmarks/tuning/brute_force.py --out-dir "$DEST/cache" \
  --work-dir "$WORK/bench" >"$DEST/brute_force.log" 2>&1
BRUTE_RC=$?
BRUTE_S=$SECONDS
((BRUTE_RC == 0)) || failed=$((failed + 1))
end_leftovers "$WORK"
rm -rf "$WORK"

{
  echo "== issue 9 (tuning) on $(hostname), $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "pytest -m gpu tests/tune: exit $PYTEST_RC (124: time limit), ended at ${PYTEST_S}s: $(grep -E '[0-9]+ (passed|failed|error|skipped)' "$DEST/pytest_gpu_tune.log" | tail -1)"
  echo "builds (background): exit $BUILD_RC, joined at ${BUILD_S}s: $(grep -E '^build-only' "$DEST/build.log" | tail -1)"
  grep -E '^build .*FAILED|^space .*PROBLEM|^task error' "$DEST/build.log" | cut -c1-300
  echo "brute force: exit $BRUTE_RC (124: time limit), ended at ${BRUTE_S}s"
  grep -E '^build |^task error|^[a-z]+_[0-9x]+: [0-9]+/|^done in|^adaptive run|^(best|default|spent) |^Traceback|^[A-Za-z]*Error' \
    "$DEST/brute_force.log" | cut -c1-240 | head -60
  echo "caches: $(find "$DEST/cache" -maxdepth 1 -name '*_*.json' ! -name 'e2e_*' | wc -l) of 12 in $DEST/cache; failed steps: $failed"
} | tee "$DEST/summary.txt"
exit "$failed"
