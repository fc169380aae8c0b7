#!/usr/bin/env bash
# Issue 7's GPU evidence, on one H200: the scripted session test records a transcript and replays
# it in-process, then `agent replay` replays the recording again in a fresh process.
#
#   OUT=/some/folder bash benchmarks/transcripts_gpu.sh      # from the repository root
#
# (after `source benchmarks/gpu_setup.sh`, or it sources that itself when the packages are missing).
# Writes $OUT/transcripts/transcripts_gpu.log (every step's output, with timings) and
# $OUT/transcripts/solve-h200.tar.gz: a solve-h200/ folder laid out as benchmarks/results/solve-h200/
#   2_Scale_Bias_Sigmoid_Residual-scripted/   the recording (transcript.jsonl, result.json, report.md,
#                                             model_new.py, run.json)
#   2_Scale_Bias_Sigmoid_Residual-replayed/   the test's replay of it, with replay.json and replay.txt
#   replay-on-h200/                           `agent replay` of the recording, with replay.json, replay.log
#   replay-of-replayed-on-h200/               only when replay-on-h200 diverged: `agent replay` of the
#                                             test's replay, to tell a recording's outlier from a replay fault
#   pytest_gpu_agent.log
# Only two files go under $OUT because the device machine returns at most 8. The folder is packed
# again after every step, so a later step that hangs loses nothing. Each step is time-boxed and a
# failed step does not stop the next; the whole script stays inside TRANSCRIPTS_GPU_BUDGET_S
# (default 560 s, under the device's 600 s per command). Previous run: the test took 88 s, a replay
# about 45 s. Exit status: the number of failed steps.
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 2

: "${OUT:?set OUT to the folder that comes back from the GPU machine}"
DEST="$OUT/transcripts"
WORK="$(mktemp -d /tmp/transcripts-gpu.XXXXXX)"
STAGE="$WORK/solve-h200"
LOG="$DEST/transcripts_gpu.log"
BUDGET_S="${TRANSCRIPTS_GPU_BUDGET_S:-560}"
RESERVE_S=20 # packing and the last log lines
mkdir -p "$DEST" "$STAGE"
: >"$LOG"
export PYTHONUNBUFFERED=1 COLUMNS=220
STEPS_NAME=transcripts_gpu
# shellcheck source=benchmarks/gpu_steps.sh
source benchmarks/gpu_steps.sh

pack() {
    tar -C "$WORK" -czf "$DEST/solve-h200.tar.gz.part" solve-h200 && mv "$DEST/solve-h200.tar.gz.part" "$DEST/solve-h200.tar.gz"
}

# Keep a replay's output folder to what benchmarks/results/ holds: its files, not its workspace copies.
prune() {
    find "$1" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
}

prepare_machine

# 1. The GPU session test: records the scripted run and replays it in-process (agent.run.replay).
KERNEL_AGENT_GPU_ARTIFACTS="$STAGE" step "pytest" 430 "$STAGE/pytest_gpu_agent.log" \
    python3 -m pytest -m gpu tests/agent/test_session.py -k end_to_end_on_the_gpu \
    -q -p no:cacheprovider --timeout 400
pack

# 2. `agent replay` of the recording, in a new process (the baselines come from the same cache).
RECORDING="$STAGE/2_Scale_Bias_Sigmoid_Residual-scripted/transcript.jsonl"
replay_rc=2
if [ -f "$RECORDING" ]; then
    step "agent replay" 240 "$WORK/replay.log" \
        python3 -m agent.cli.app replay "$RECORDING" --out "$STAGE/replay-on-h200"
    replay_rc=$?
    mkdir -p "$STAGE/replay-on-h200"
    [ -f "$WORK/replay.log" ] && mv "$WORK/replay.log" "$STAGE/replay-on-h200/replay.log"
    prune "$STAGE/replay-on-h200"
else
    say "agent replay: skipped, the test recorded no $RECORDING"
    failed=$((failed + 1))
fi
pack

# 3. Only when step 2 diverged: replay the test's own replay (recorded later in the same session),
#    so the log shows whether the recording or the replaying is off.
REPLAYED="$STAGE/2_Scale_Bias_Sigmoid_Residual-replayed/transcript.jsonl"
if ((replay_rc == 1)) && [ -f "$REPLAYED" ]; then
    step "agent replay (of the test's replay)" 240 "$WORK/replay2.log" \
        python3 -m agent.cli.app replay "$REPLAYED" --out "$STAGE/replay-of-replayed-on-h200"
    mkdir -p "$STAGE/replay-of-replayed-on-h200"
    [ -f "$WORK/replay2.log" ] && mv "$WORK/replay2.log" "$STAGE/replay-of-replayed-on-h200/replay.log"
    prune "$STAGE/replay-of-replayed-on-h200"
    pack
fi

say "done: $failed step(s) failed; $(tar -tzf "$DEST/solve-h200.tar.gz" | grep -c -v '/$') files in $DEST/solve-h200.tar.gz"
rm -rf "$WORK"
exit "$failed"
