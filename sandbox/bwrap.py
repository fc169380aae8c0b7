"""The bubblewrap command line that confines one local sandbox command.

The view is an allowlist, not the host's root with holes: the system folders a toolchain runs
from (`SYSTEM_DIRS`, read-only), `/etc` read-only with its secrets masked (`MASKED_ETC`), the
python, torch and the CUDA toolkit wherever they live, the worker scripts, and the folders the
caller names. Everything else of the machine (`/root`, `/home`, `/srv`, `/mnt`, `/var`, `/opt`,
the harness's state, the user's files) does not exist inside.
"""

from __future__ import annotations

import importlib.util
import os
import site
import sys
from collections.abc import Sequence
from pathlib import Path

from sandbox.base import WORKERS_DIR

# What compilers, the dynamic loader and python need from the system; /sys for the CUDA driver.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc", "/sys")
# Files of /etc a sandboxed process must not read (root inside can read root's 0600 files).
MASKED_ETC = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/security/opasswd",
    "/etc/machine-id",
)
MASKED_ETC_DIRS = ("/etc/ssh", "/etc/ssl/private", "/etc/sudoers.d", "/etc/docker", "/etc/kubernetes")


def runtime_paths() -> list[Path]:
    """The python the sandbox runs (its prefixes), its site folders, torch and the CUDA toolkit."""
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(sys.executable).resolve().parent)}
    found |= set(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        found.add(site.getusersitepackages())
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.origin:
        found.add(str(Path(spec.origin).resolve().parent.parent))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            found.add(os.environ[var])
    found.add("/usr/local/cuda")
    return [Path(p).resolve() for p in found if Path(p).exists()]


def bwrap_prefix(
    bwrap: str,
    private_tmp: str | None,
    writable: Sequence[str],
    gpu_nodes: Sequence[str],
    hide_home: bool,
    ro_paths: Sequence[str | Path],
    *,
    own_session: bool = True,
) -> list[str]:
    """The allowlisted view (module docstring) with `writable` bind-mounted read-write,
    `private_tmp` as /tmp (None: an empty tmpfs), an empty /run and home, a fresh /dev with only
    `gpu_nodes`, own network, ipc and uts namespaces, no capabilities. `own_session`: also its own
    session and pid namespace (off for a host worker the harness kills by process group and that
    watches its parent's pid). `hide_home=False` shows the home folder read-only (for a toolchain
    installed there and nowhere else)."""
    args = [bwrap, "--die-with-parent", "--unshare-ipc"]
    if own_session:
        args += ["--new-session", "--unshare-pid"]
    args += ["--unshare-uts", "--unshare-cgroup-try", "--unshare-net"]
    for top in SYSTEM_DIRS:
        path = Path(top)
        if path.is_symlink():  # merged /usr: /bin -> usr/bin
            args += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            args += ["--ro-bind", top, top]
    for secret in MASKED_ETC:
        if Path(secret).is_file():
            args += ["--ro-bind", "/dev/null", secret]
    for folder in MASKED_ETC_DIRS:
        if Path(folder).is_dir() and not Path(folder).is_symlink():
            args += ["--tmpfs", folder, "--remount-ro", folder]
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run"]
    args += ["--bind", private_tmp, "/tmp"] if private_tmp else ["--tmpfs", "/tmp"]
    for node in gpu_nodes:
        args += ["--dev-bind", node, node]
    home = Path.home().resolve()
    if home != Path("/") and home.is_dir():
        args += ["--tmpfs", str(home)] if hide_home else ["--ro-bind", str(home), str(home)]
    shown = [*runtime_paths(), WORKERS_DIR.resolve(), *(Path(p).resolve() for p in ro_paths)]
    for path in _outermost(p for p in shown if p.exists() and not _covered(p)):
        args += ["--ro-bind", str(path), str(path)]
    for path in writable:
        args += ["--bind", path, path]
    args += ["--remount-ro", "/"]  # bwrap's own root (a tmpfs holding the mount points) too
    if os.geteuid() == 0:
        args += ["--cap-drop", "ALL"]
    return args


def _covered(path: Path) -> bool:
    """Already visible, read-only, through a system folder (and not masked there)."""
    return any(
        path.is_relative_to(top) and not Path(top).is_symlink() for top in SYSTEM_DIRS if top != "/etc"
    )


def _outermost(paths: object) -> list[Path]:
    kept: list[Path] = []
    for path in sorted(set(paths)):  # type: ignore[call-overload]
        if not any(path.is_relative_to(outer) for outer in kept):
            kept.append(path)
    return kept
