#!/usr/bin/env bash
# benchmarks/batch_gpu.sh for longer than one device command (600 s): `start` runs it in its own
# process session, which outlives the command while the machine stays held; `wait` follows it for
# up to SECONDS and copies what it has written so far to $OUT/batch. Call `wait` again (at once: a
# machine left idle goes back) until it prints "finished".
#
#   bash benchmarks/batch_gpu_detached.sh start        # env as for batch_gpu.sh (BATCH_GPU_*)
#   bash benchmarks/batch_gpu_detached.sh wait 560
set -u
RUN_DIR=/tmp/batch-gpu-detached
case "${1:-}" in
start)
    mkdir -p "$RUN_DIR/out"
    rm -f "$RUN_DIR/exit"
    # shellcheck disable=SC2016  # $? and $0 belong to the inner shell
    OUT="$RUN_DIR/out" setsid nohup bash -c 'bash benchmarks/batch_gpu.sh; echo $? >"$0/exit"' "$RUN_DIR" \
        >"$RUN_DIR/console.log" 2>&1 </dev/null &
    echo "started: pid $!, log $RUN_DIR/console.log"
    ;;
wait)
    : "${OUT:?set OUT to the folder that comes back from the GPU machine}"
    deadline=$((SECONDS + ${2:-560}))
    while [ ! -f "$RUN_DIR/exit" ] && ((SECONDS < deadline)); do sleep 5; done
    mkdir -p "$OUT/batch"
    cp "$RUN_DIR"/out/batch/* "$OUT/batch/" 2>/dev/null
    tail -n 30 "$RUN_DIR/console.log"
    if [ -f "$RUN_DIR/exit" ]; then
        echo "finished: exit $(cat "$RUN_DIR/exit")"
        exit "$(cat "$RUN_DIR/exit")"
    fi
    echo "still running: call wait again"
    exit 124
    ;;
*)
    echo "usage: $0 start | wait [SECONDS]" >&2
    exit 2
    ;;
esac
