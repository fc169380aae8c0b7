"""The bubblewrap command line that confines one local sandbox command."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from sandbox.base import WORKERS_DIR


def bwrap_prefix(
    bwrap: str,
    private_tmp: str,
    writable: Sequence[str],
    gpu_nodes: Sequence[str],
    hide_home: bool,
    ro_paths: Sequence[str | Path],
) -> list[str]:
    """A read-only view of the host with `writable` bind-mounted read-write and `private_tmp` as
    /tmp; /run (daemon sockets) and the home directory (keys, tokens) hidden; a fresh /dev with
    only `gpu_nodes`; own pid, network, ipc and uts namespaces; no capabilities."""
    args = [bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc"]
    args += ["--unshare-uts", "--unshare-cgroup-try", "--unshare-net"]
    args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run"]
    args += ["--bind", private_tmp, "/tmp"]
    for node in gpu_nodes:
        args += ["--dev-bind", node, node]
    hidden = [Path("/tmp"), Path("/run")]
    home = Path.home().resolve()
    if hide_home and home != Path("/") and home.is_dir():
        args += ["--tmpfs", str(home)]
        hidden.append(home)
    # What the sandbox must still run from a hidden place (home, or /tmp when the checkout
    # lives there): the python and the worker scripts, read-only.
    keep = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(sys.executable).resolve().parent)}
    keep |= {str(WORKERS_DIR), *(str(p) for p in ro_paths)}
    bound: list[Path] = []
    for resolved in sorted({Path(p).resolve() for p in keep}):
        nested = any(resolved.is_relative_to(outer) for outer in bound)
        if any(resolved.is_relative_to(h) for h in hidden) and resolved.exists() and not nested:
            bound.append(resolved)
            args += ["--ro-bind", str(resolved), str(resolved)]
    for path in writable:
        args += ["--bind", path, path]
    if os.geteuid() == 0:
        args += ["--cap-drop", "ALL"]
    return args
