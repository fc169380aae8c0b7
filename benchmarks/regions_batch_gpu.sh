#!/usr/bin/env bash
# Issue 44 on a GPU machine: `agent batch --model templates` over KernelBench level 3 models that the
# template library covers only region by region, once with gain allocation and once with uniform
# allocation (same tasks, same per-model budget), then the tables (benchmarks/regions_batch_table.py)
# under benchmarks/results/regions/<gpu>-<date>/regions_batch.md.
#
#   source benchmarks/gpu_setup.sh
#   bash benchmarks/regions_batch_gpu.sh start          # returns at once; the batches run on
#   OUT=... bash benchmarks/regions_batch_gpu.sh wait 540   # again until it prints "finished"
#   bash benchmarks/regions_batch_gpu.sh stop           # give it up
#
# `start` copies the repository to /tmp (each device call lays the working tree out anew) and runs
# both batches in a process session of its own that outlives the call while
# the machine stays held; `wait` follows them for up to SECONDS, then writes the tables of what is
# done so far into $OUT (and the results folder), with both stores and the batch logs.
# Env: LEVEL_DIR (default .kb/level3, a copy of ../shared/kernelbench/level3 carried along, else
# ../shared/kernelbench/level3), TASKS (task file names in it; default three small models with an
# operator the library lacks: 17, 43, 44; the others of that kind include 6, 14, 18, 33, 49),
# BUDGET (each model's, default turns=3: three candidates split across its regions), BATCH_ARGS (extra `agent batch` flags),
# ALLOCATIONS (default "gain uniform"), SEQUENTIAL=1 (one batch after the other; by default both
# run at once, under the same load: the referee's GPU gates keep every timing exclusive).
set -u
RUN=/tmp/regions-batch
LEVEL_DIR=${LEVEL_DIR:-.kb/level3}  # only the repository travels: carry KernelBench as .kb/
[ -d "$LEVEL_DIR" ] || LEVEL_DIR=../shared/kernelbench/level3
TASKS=${TASKS:-"17_SqueezeNetFireModule.py 43_MinGPTCausalAttention.py 44_MiniGPTBlock.py"}
case "${1:-}" in
start)
    rm -rf "$RUN" && mkdir -p "$RUN/out"
    export TASKS
    given=$(cd "$LEVEL_DIR" && pwd) || exit 2
    cp -r . "$RUN/repo"
    cd "$RUN/repo" || exit 2
    # the copy's tasks where it has them: a later device call lays the working tree out anew
    level_dir=$( (cd "$LEVEL_DIR" 2>/dev/null && pwd) || echo "$given")
    # shellcheck disable=SC2016  # expanded by the inner shell
    setsid nohup bash -c '
        set -u -o pipefail
        run=$0; level_dir=$1; out=$run/out
        export PYTHONUNBUFFERED=1 COLUMNS=160
        nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -l 5 > "$out/gpu.csv" 2>/dev/null &
        files=(); for name in $TASKS; do files+=("$level_dir/$name"); done
        one() {
            echo "$1 start $(date -u +%FT%TZ): ${files[*]} budget ${BUDGET:-turns=3} ${BATCH_ARGS:-}" >> "$out/batch.log"
            local started=$(date +%s)
            python3 -m agent.cli.app batch "${files[@]}" --model templates --budget "${BUDGET:-turns=3}" \
                --region-allocation "$1" --out "$run/$1" --quiet ${BATCH_ARGS:-} >> "$out/batch_$1.log" 2>&1
            echo "$1 exit $? after $(( $(date +%s) - started )) s, $(date -u +%FT%TZ)" >> "$out/batch.log"
        }
        for allocation in ${ALLOCATIONS:-gain uniform}; do
            if [ "${SEQUENTIAL:-0}" = 1 ]; then one "$allocation"; else one "$allocation" & fi
        done
        wait
        echo done > "$run/exit"
    ' "$RUN" "$level_dir" > "$RUN/console.log" 2>&1 < /dev/null &
    echo $! > "$RUN/pid"
    echo "started: pid $!, log $RUN/out/batch.log"
    ;;
stop)
    [ -f "$RUN/pid" ] && kill -- -"$(cat "$RUN/pid")" 2>/dev/null
    for _ in $(seq 60); do
        [ -z "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null)" ] && break
        sleep 1
    done
    echo "stopped"
    ;;
wait)
    : "${OUT:?set OUT to the folder that comes back from the GPU machine}"
    deadline=$((SECONDS + ${2:-540}))
    while [ ! -f "$RUN/exit" ] && ((SECONDS < deadline)); do sleep 5; done
    [ -d /tmp/site ] && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '-' | tr -cd 'A-Za-z0-9-')
    results=benchmarks/results/regions/${gpu:-gpu}-$(date -u +%Y-%m-%d)
    stores=()
    for allocation in ${ALLOCATIONS:-gain uniform}; do
        store=$RUN/$allocation/store.sqlite
        [ -f "$store" ] || continue
        python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d)" \
            "$store" "$RUN/out/store_$allocation.sqlite"
        stores+=(--store "$allocation=$RUN/out/store_$allocation.sqlite")
        (cd "$RUN/repo" && python3 -m agent.cli.app report "$RUN/out/store_$allocation.sqlite" \
            --out "$RUN/out/report_$allocation") > "$RUN/out/report_$allocation.txt" 2>&1
    done
    state=$([ -f "$RUN/exit" ] && echo finished || echo "still running")
    if [ ${#stores[@]} -gt 0 ]; then
        mkdir -p "$results"
        (cd "$RUN/repo" && python3 benchmarks/regions_batch_table.py "${stores[@]}" --out "$RUN/out/regions_batch.md" \
            --title "KernelBench level 3 region by region, --model templates, budget ${BUDGET:-turns=3} a model ($gpu, $(date -u +%F), $state)")
        cp "$RUN/out/regions_batch.md" "$results/"
        echo "tables in $results/regions_batch.md and $OUT/regions_batch.md"
    else
        echo "no batch store yet: see $OUT/batch*.log"
    fi
    cp -r "$RUN/out/." "$OUT/" 2>/dev/null
    echo "$state"
    ;;
*)
    echo "usage: $0 start|wait [SECONDS]|stop" >&2
    exit 2
    ;;
esac
