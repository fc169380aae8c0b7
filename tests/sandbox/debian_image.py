"""A small local Docker image for the sandbox tests and benchmark: no registry can be reached
here, so it is a Debian bookworm root from debootstrap (Debian's mirror is reachable), imported
with `docker import`. It has g++ and the shared libraries the host's pyenv python needs; the host
python with torch and the CUDA toolkit are mounted read-only at their host paths. Built once
and reused by tag."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docker
import docker.errors

TEST_IMAGE = "kernel-agent-test:bookworm-1"
PACKAGES = "g++,libffi8,libssl3,libbz2-1.0,libexpat1,libsqlite3-0,zlib1g,liblzma5,libuuid1"
MIRROR = os.environ.get("KERNEL_AGENT_DEBIAN_MIRROR", "http://deb.debian.org/debian")
CUDA_HOME = "/usr/local/cuda"


class ImageUnavailable(RuntimeError):
    pass


def ensure_test_image(client: docker.DockerClient, tag: str = TEST_IMAGE) -> str:
    """Return `tag`, building it first when it is missing (about 45 s)."""
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise ImageUnavailable("debootstrap is not installed (run .ci/setup-docker.sh)")
    if os.geteuid() != 0:
        raise ImageUnavailable("debootstrap needs root to build the test image")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kernel-agent-rootfs-") as root:
        boot = subprocess.run(
            [debootstrap, "--variant=minbase", f"--include={PACKAGES}", "bookworm", root, MIRROR],
            capture_output=True,
            text=True,
            check=False,
        )
        if boot.returncode != 0:
            raise ImageUnavailable(f"debootstrap failed: {boot.stderr.strip()[-2000:]}")
        shutil.rmtree(Path(root, "var/cache/apt/archives"), ignore_errors=True)
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            ["docker", "import", "-", tag], stdin=tar.stdout, capture_output=True, text=True, check=False
        )
        tar.wait()
        if imported.returncode != 0:
            raise ImageUnavailable(f"docker import failed: {imported.stderr.strip()}")
    print(f"built {tag} in {time.monotonic() - start:.0f}s", file=sys.stderr)
    return tag


def host_python_mounts() -> dict[str, str]:
    """Read-only mounts that let the container run this python (with torch) and nvcc."""
    mounts = {p: p for p in {sys.prefix, sys.base_prefix}}
    if Path(CUDA_HOME).exists():
        mounts[str(Path(CUDA_HOME).resolve())] = CUDA_HOME
    return mounts


def host_python_env() -> dict[str, str]:
    return {
        "PATH": f"{Path(sys.executable).parent}:{CUDA_HOME}/bin:/usr/local/bin:/usr/bin:/bin",
        "CUDA_HOME": CUDA_HOME,
    }
