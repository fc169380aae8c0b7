#!/usr/bin/env bash
# Source this first on a lent GPU machine (no network): installs the Python packages carried as
# wheels in .whl/ into /tmp/site, unpacks bubblewrap carried in .gl/ (the local sandbox's
# filesystem isolation), and prints what the machine is. Usage: source benchmarks/gpu_setup.sh
# Two versions of one package in .whl/ make pip refuse them all (2026-12-07: two pygments wheels
# cost a whole device call): keep the newest of each.
if ls .whl/*.whl >/dev/null 2>&1; then
    for dup in $(ls .whl/*.whl | sed 's|.*/||; s|-.*||' | sort | uniq -d); do
        ls -v .whl/"$dup"-*.whl | head -n -1 | while read -r old; do echo "dropping the older $old"; rm -f "$old"; done
    done
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if ls .gl/bubblewrap*.deb >/dev/null 2>&1 && ! command -v bwrap >/dev/null 2>&1; then
    mkdir -p /tmp/bw && dpkg -x .gl/bubblewrap*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:$PATH
fi
export PYTHONUNBUFFERED=1
echo "== machine: $(hostname) $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader || true
python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "gpus", torch.cuda.device_count())'
python3 -c 'import pydantic, openai, anthropic, tenacity, typer, rich; print("pydantic", pydantic.VERSION)' \
    || echo "MISSING python packages: the lanes need them (session_gpu.sh start refuses to run)"
if command -v bwrap >/dev/null; then
    bwrap --ro-bind / / --dev /dev --proc /proc --unshare-pid --cap-drop ALL true && echo "bwrap $(bwrap --version) works" || echo "bwrap does NOT work here"
else
    echo "no bwrap: the local sandbox runs without filesystem isolation"
fi
nproc
export KERNEL_AGENT_BUILD_CACHE=${KERNEL_AGENT_BUILD_CACHE:-$HOME/.cache/kernel-agent-builds}  # one toolchain build for every step
