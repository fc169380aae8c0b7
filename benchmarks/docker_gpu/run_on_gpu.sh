#!/usr/bin/env bash
# Issue 22 on a lent GPU machine, in one device call, from the repository root, carrying .whl
# (the harness's wheels) and .gl (bubblewrap, and .gl/docker from fetch_debs.sh):
#
#     bash benchmarks/docker_gpu/run_on_gpu.sh          (run(..., carry=[".whl", ".gl"]))
#
# Steps, each time-boxed against one budget (RUN_BUDGET_S, default 540 s, under the 600 s a
# device call gets), each logged as docker_gpu/<step>.log in $OUT/docker_gpu.tgz, later steps skipped (and said
# so) when the budget is gone or what they need failed:
#   1. start_dockerd.sh .gl/docker            (dockerd from the carried .debs; docker info)
#   2. host_gpu                               (the host's /dev/nvidia*, driver libraries, /proc/driver/nvidia)
#   3. agent sandbox build --host-stack       (kernel-agent-gpu:host; nothing fetched)
#   4. agent sandbox info --sandbox docker    (which GPU mode; what the container enforces)
#   5. agent eval --sandbox docker            (19_ReLU with skills/cuda-extension/examples/relu; --json)
#   6. pytest -m "gpu and docker" tests/sandbox/test_docker_on_gpu.py (only the GPU asked for is
#      seen, nvidia-smi, a real extension on the GPU, the referee's verdict in docker = local)
#   7. agent eval --sandbox local             (the same, for comparison)
#   8. pytest -m docker tests/sandbox          (the docker contract suite on the host-stack image)
#   9. docker_vs_local.py                     (per-evaluation overhead table; DOCKER_GPU_BENCH=0 skips)
#  10. solve_docker: agent solve --model templates --sandbox docker on 19_ReLU (a scripted session)
#  11. adversarial_docker: the whole adversarial suite judged in docker (KERNEL_AGENT_SUITE_SANDBOX)
# Steps 10-11 do not fit one call after 1-9: run them in a second call on the warm machine,
#   DOCKER_GPU_STEPS="start_dockerd image solve_docker adversarial_docker" bash benchmarks/docker_gpu/run_on_gpu.sh
# tests/referee judges in the local sandbox only, so the referee's verdict in docker is step 6.
# DOCKER_GPU_STEPS="image eval_docker ..." runs only the steps named (a second call on a warm
# machine, say: dockerd and the image are kept). At the end: $OUT/docker_gpu_summary.md (each
# step's exit status and time) and $OUT/docker_gpu.tgz (every log). Nothing here says
# whether a GPU was used: read the logs.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
# The step logs are many files and a device call brings back at most 8: they are written outside
# $OUT and packed into $OUT/docker_gpu.tgz at the end (and whenever the script exits).
out=$(mktemp -d /tmp/docker-gpu-out.XXXXXX)/docker_gpu
mkdir -p "$out" "${OUT:-/tmp/out}"
pack() { tar -C "$(dirname "$out")" -czf "${OUT:-/tmp/out}/docker_gpu.tgz" docker_gpu; cp "$out/summary.md" "${OUT:-/tmp/out}/docker_gpu_summary.md"; }
trap pack EXIT
budget=${RUN_BUDGET_S:-540}
started_at=$SECONDS
work=$(mktemp -d /tmp/docker-gpu.XXXXXX)
export KERNEL_AGENT_IMAGE=${KERNEL_AGENT_IMAGE:-kernel-agent-gpu:host}
export DOCKER_PREFIX=${DOCKER_PREFIX:-/opt/kernel-agent-docker}
echo "| step | exit | seconds |" >"$out/summary.md"
echo "|---|---|---|" >>"$out/summary.md"

say() { echo "== $* ($(date -u +%T), $((SECONDS - started_at))s of ${budget}s)"; }
left() { echo $((budget - (SECONDS - started_at))); }
step() {  # step SECONDS NAME COMMAND...: at most SECONDS, and never past the budget
    local limit=$1 name=$2 remaining
    shift 2
    if [ -n "${DOCKER_GPU_STEPS:-}" ] && [[ " $DOCKER_GPU_STEPS " != *" $name "* ]]; then
        say "$name: not in DOCKER_GPU_STEPS"
        return 0
    fi
    remaining=$(left)
    ((remaining - 5 < limit)) && limit=$((remaining - 5))
    if ((limit < 10)); then
        say "$name: SKIPPED (budget spent)"
        echo "| $name | skipped (budget) | 0 |" >>"$out/summary.md"
        return 125
    fi
    say "$name (limit ${limit}s)"
    local t0=$SECONDS rc
    timeout -k 5 "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    tail -n 40 "$out/$name.log"
    say "$name: exit $rc in $((SECONDS - t0))s"
    echo "| $name | $rc | $((SECONDS - t0)) |" >>"$out/summary.md"
    return $rc
}

# shellcheck source=/dev/null
source benchmarks/gpu_setup.sh >"$out/gpu_setup.log" 2>&1
cat "$out/gpu_setup.log"

# 1. Docker
step 150 start_dockerd bash benchmarks/docker_gpu/start_dockerd.sh .gl/docker
cp "$DOCKER_PREFIX/dockerd.log" "$out/dockerd.log" 2>/dev/null
# shellcheck source=/dev/null
[ -f "$DOCKER_PREFIX/env.sh" ] && source "$DOCKER_PREFIX/env.sh"
timeout 20 docker info >/dev/null 2>&1
docker_rc=$?

# 2. What the host shows of its GPUs (what host-devices mode maps)
# shellcheck disable=SC2016  # expanded by the inner sh
step 30 host_gpu sh -c 'ls -l /dev/nvidia* /dev/nvidia-caps 2>&1; echo; ldconfig -p | grep -E "libcuda|libnvidia"; echo;
    for f in /proc/driver/nvidia/gpus/*/information; do echo "$f"; cat "$f"; done; nvidia-smi -L'

if [ "$docker_rc" != 0 ]; then
    say "no Docker daemon: the docker steps are skipped; see start_dockerd.log and dockerd.log"
    echo "| (docker steps) | skipped: dockerd did not start | 0 |" >>"$out/summary.md"
    cat "$out/summary.md"
    exit 0
fi

# 3. The image, from nothing fetched
step 120 image python3 -m agent.cli.app sandbox build --host-stack --tag "$KERNEL_AGENT_IMAGE"
timeout 20 docker image inspect "$KERNEL_AGENT_IMAGE" >/dev/null 2>&1
image_rc=$?

# 4. Which GPU mode, what the container enforces
step 90 info python3 -m agent.cli.app sandbox info --sandbox docker --workspace "$work"
timeout 60 python3 -m agent.cli.app sandbox info --sandbox docker --workspace "$work" --json >"$out/info.json" 2>&1

# 5. The product in docker
cp -r skills/cuda-extension/examples/relu "$work/relu_docker"
cp -r skills/cuda-extension/examples/relu "$work/relu_local"
if [ "$image_rc" = 0 ]; then
    step 200 eval_docker python3 -m agent.cli.app eval benchmarks/tasks/level1/19_ReLU.py "$work/relu_docker" \
        --sandbox docker --json
    # 6. The docker sandbox's GPU tests
    step 240 pytest_docker_gpu python3 -m pytest -m "gpu and docker" tests/sandbox/test_docker_on_gpu.py \
        -v -s --tb=short -p no:cacheprovider -rA
fi

# 7. The same evaluation in the local sandbox
step 150 eval_local python3 -m agent.cli.app eval benchmarks/tasks/level1/19_ReLU.py "$work/relu_local" \
    --sandbox local --json

# 8. The docker contract suite on the host-stack image (the debootstrap test image cannot be built offline)
if [ "$image_rc" = 0 ]; then
    KERNEL_AGENT_TEST_IMAGE="$KERNEL_AGENT_IMAGE" step 200 pytest_docker_contract python3 -m pytest -m "docker and not slow" \
        tests/sandbox -q --tb=short -p no:cacheprovider -rs
fi

# 9. Overhead benchmark
if [ "$image_rc" = 0 ] && [ "${DOCKER_GPU_BENCH:-1}" = 1 ]; then
    step 240 docker_vs_local python3 benchmarks/docker_gpu/docker_vs_local.py --runs "${DOCKER_GPU_RUNS:-3}" \
        --adversarial "${DOCKER_GPU_ADVERSARIAL:-6}" --out "$out/docker_vs_local_h200.md"
fi

# 10. One agent session in docker: the built-in template policy (scripted, no key) on the ReLU task
if [ "$image_rc" = 0 ]; then
    step 240 solve_docker python3 -m agent.cli.app solve benchmarks/tasks/level1/19_ReLU.py --model templates \
        --sandbox docker --out "$work/solve_docker"
    cp "$work/solve_docker/result.json" "$out/solve_docker_result.json" 2>/dev/null
fi

# 11. The adversarial suite, every candidate built and judged in docker
if [ "$image_rc" = 0 ]; then
    KERNEL_AGENT_SUITE_SANDBOX=docker KERNEL_AGENT_SUITE_OUT="$out/adversarial_docker_suite.txt" \
        step 540 adversarial_docker python3 -m pytest -m gpu tests/adversarial/test_suite.py -q --tb=line \
        -p no:cacheprovider
fi

docker ps -a >"$out/docker_ps.txt" 2>&1
docker images >>"$out/docker_ps.txt" 2>&1
cp "$DOCKER_PREFIX/dockerd.log" "$out/dockerd.log" 2>/dev/null
say "done"
cat "$out/summary.md"
