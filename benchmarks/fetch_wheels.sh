#!/usr/bin/env bash
# Download, on a machine with PyPI, the wheels a lent GPU machine (Python 3.12, no network) lacks
# for the product: its runtime dependencies at the versions installed here, with their own
# dependencies, minus what that machine's image already has (torch, numpy, ninja). Carry the
# folder with the run; benchmarks/gpu_setup.sh installs it into /tmp/site.
#
# Usage: bash benchmarks/fetch_wheels.sh [DEST]     (DEST default: .whl, git-ignored)
set -euo pipefail
dest=${1:-.whl}
pins=()
for name in pydantic openai anthropic docker tenacity typer rich pygments; do
    version=$(python3 -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p')
    [ -n "$version" ] || { echo "fetch_wheels: $name is not installed here: pip install -e . first"; exit 1; }
    pins+=("$name==$version")
done
mkdir -p "$dest"
platforms=()
for p in manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_28_x86_64 manylinux_2_34_x86_64 manylinux1_x86_64; do
    platforms+=(--platform "$p")
done
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d "$dest" "${pins[@]}"
echo "fetch_wheels: $(ls "$dest" | wc -l) wheels, $(du -sh "$dest" | cut -f1) in $dest"
