#!/usr/bin/env bash
# Issue 17's batch at full scale on a GPU machine: `agent batch` over KernelBench level 1-3 (task
# files unchanged, carried as .kb/) with one single-file load_inline generation per task from
# benchmarks/kb_corpus.py (each its own extension: every one is built cold), baselines included
# (a fresh machine has none cached), then `agent report` with where the time went.
#
#   bash benchmarks/kb_batch_gpu.sh start     # from the repository root, after gpu_setup.sh
#   OUT=... bash benchmarks/kb_batch_gpu.sh wait 540    # again until it prints "finished"
#   bash benchmarks/kb_batch_gpu.sh stop        # give it up; returns once the GPU runs nothing of it
#
# `start` copies the repository to /tmp first (each device call lays the working tree out anew)
# and runs the batch in its own process session, which outlives the call while the machine stays
# held; `wait` follows it for up to SECONDS and packs what it wrote so far into $OUT/kb_batch.tgz.
# Env: KB (default .kb), BATCH_ARGS (extra `agent batch` flags), LEVELS (default "1 2 3"),
# MODEL (e.g. templates: run that agent on every task instead of judging the corpus, issue 19),
# SEED_STORE (a store.sqlite[.gz] of an earlier run of the same batch: its finished tasks are kept,
# the rest run; the batch key, not the concurrency, says what "the same batch" is).
set -u
RUN=/tmp/kb-batch
case "${1:-}" in
start)
    rm -rf "$RUN" && mkdir -p "$RUN/out" "$RUN/batch"
    case "${SEED_STORE:-}" in
    "") ;;
    *.gz) gunzip -c "$SEED_STORE" > "$RUN/batch/store.sqlite" || exit 2 ;;
    *) cp "$SEED_STORE" "$RUN/batch/store.sqlite" || exit 2 ;;
    esac
    cp -r . "$RUN/repo"
    cd "$RUN/repo" || exit 2
    # shellcheck disable=SC2016  # expanded by the inner shell
    setsid nohup bash -c '
        set -u -o pipefail
        run=$0; kb=${KB:-.kb}; out=$run/out; corpus=$run/corpus
        export PYTHONUNBUFFERED=1 COLUMNS=160
        nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -l 1 > "$out/gpu.csv" 2>/dev/null &
        folders=(); for level in ${LEVELS:-1 2 3}; do folders+=("$kb/level$level"); done
        if [ -n "${MODEL:-}" ]; then
            what=(--model "$MODEL")
        else
            python3 benchmarks/kb_corpus.py --kernelbench "$kb" --levels ${LEVELS:-1 2 3} --out "$corpus" \
                | grep -v "^  note" > "$out/corpus.log"
            what=(--solutions "$corpus" --policy kernelbench)
        fi
        echo "batch start $(date -u +%FT%TZ): ${what[*]} ${BATCH_ARGS:-}" > "$out/batch.log"
        started=$(date +%s)
        python3 -m agent.cli.app batch "${folders[@]}" "${what[@]}" \
            --out "$run/batch" --quiet ${BATCH_ARGS:-} >> "$out/batch.log" 2>&1
        status=$?
        echo "batch exit $status after $(( $(date +%s) - started )) s, $(date -u +%FT%TZ)" >> "$out/batch.log"
        python3 -m agent.cli.app report "$run/batch" --out "$run/batch" > "$out/report.txt" 2>&1
        cp "$run/batch/report.md" "$out/" 2>/dev/null
        echo "$status" > "$run/exit"
    ' "$RUN" > "$RUN/console.log" 2>&1 < /dev/null &
    echo $! > "$RUN/pid"
    echo "started: pid $!, log $RUN/out/batch.log"
    ;;
stop)
    # The batch, its evaluation workers and nvidia-smi share the process group; the judges and the
    # sandboxed candidates have sessions of their own and die with their parents.
    [ -f "$RUN/pid" ] && kill -- -"$(cat "$RUN/pid")" 2>/dev/null
    for _ in $(seq 60); do
        [ -z "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null)" ] && break
        sleep 1
    done
    echo "stopped; processes on the GPU now: $(nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader | tr '\n' ' ')"
    ;;
wait)
    : "${OUT:?set OUT to the folder that comes back from the GPU machine}"
    deadline=$((SECONDS + ${2:-540}))
    while [ ! -f "$RUN/exit" ] && ((SECONDS < deadline)); do sleep 5; done
    cp "$RUN/console.log" "$RUN/out/" 2>/dev/null
    if [ ! -f "$RUN/exit" ]; then  # what is done so far, from the live store
        # A later device call may not have sourced gpu_setup.sh: the wheels it installed are still there.
        [ -d /tmp/site ] && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
        (cd "$RUN/repo" && python3 -m agent.cli.app report "$RUN/batch") > "$RUN/out/report_so_far.txt" 2>&1
    fi
    sqlite3 "$RUN/batch/store.sqlite" ".backup '$RUN/out/store.sqlite'" 2>/dev/null \
        || python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d)" \
            "$RUN/batch/store.sqlite" "$RUN/out/store.sqlite"
    tar -C "$RUN" -czf "$OUT/kb_batch.tgz" out
    grep -c '' "$RUN/out/batch.log" | sed 's/^/batch.log lines: /'
    tail -n 25 "$RUN/out/batch.log"
    if [ -f "$RUN/exit" ]; then
        tail -n 60 "$RUN/out/report.txt"
        echo "finished: exit $(cat "$RUN/exit")"
        exit 0
    fi
    tail -n 40 "$RUN/out/report_so_far.txt"
    echo "still running: call wait again"
    exit 124
    ;;
*)
    echo "usage: $0 start | wait [SECONDS] | stop" >&2
    exit 2
    ;;
esac
