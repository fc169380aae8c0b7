# Time-boxed steps for the GPU evidence scripts (batch_gpu.sh, transcripts_gpu.sh). Source it after
# setting: STEPS_NAME (the prefix of every line), LOG (the script's log), BUDGET_S (seconds for the
# whole script), RESERVE_S (seconds kept for what runs after the last step) and WORK (a scratch
# folder). It sets `failed` to 0; each failed or skipped step adds one.
# shellcheck shell=bash
failed=0

say() { echo "[$STEPS_NAME $(date -u +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$LOG"; }

# Seconds a step may take: its own cap, or what is left of the budget, whichever is less.
box() {
    local left=$((BUDGET_S - RESERVE_S - SECONDS))
    echo $(($1 < left ? $1 : left))
}

# One step: name, cap in seconds, log file, command... Its output goes to the log file, to stdout
# and to $LOG; its exit status and time to $LOG.
step() {
    local name=$1 cap=$2 log=$3 limit rc started=$SECONDS
    shift 3
    limit=$(box "$cap")
    if ((limit < 30)); then
        say "$name: skipped, ${limit}s of the budget left"
        failed=$((failed + 1))
        return 125
    fi
    say "$name: start (limit ${limit}s): $*"
    timeout -k 10 "$limit" "$@" 2>&1 | tee "$log" | tee -a "$LOG"
    rc=${PIPESTATUS[0]}
    say "$name: exit $rc after $((SECONDS - started))s"
    ((rc == 0)) || failed=$((failed + 1))
    return "$rc"
}

# The device image lacks some of kernel-agent's dependencies (pydantic, openai, anthropic, ...),
# carried as wheels in .whl/, and bubblewrap: benchmarks/gpu_setup.sh installs them (source it
# first, or this does). Then what the machine is, into $LOG.
prepare_machine() {
    local imports="import pydantic, typer, rich, openai, anthropic, tenacity, docker, httpx"
    say "repo $(git rev-parse --short HEAD 2>/dev/null || echo '?') (+ working tree), budget ${BUDGET_S}s, work $WORK"
    if ! python3 -c "$imports" 2>/dev/null; then
        say "sourcing benchmarks/gpu_setup.sh"
        set +u # someone else's script
        # shellcheck source=/dev/null
        source benchmarks/gpu_setup.sh >"$WORK/setup.log" 2>&1
        set -u
        tee -a "$LOG" <"$WORK/setup.log"
        python3 -c "$imports" 2>&1 | tee -a "$LOG" \
            || say "missing Python packages (above): carry their wheels in .whl/ (/work/.library/device/README.md)"
    fi
    {
        nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu --format=csv
        python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"
        nvcc --version | tail -n 2
        echo "cores $(nproc)"
    } 2>&1 | tee -a "$LOG"
}
