"""Running untrusted code without the local sandbox's isolation is the user's explicit choice.

Without a working bubblewrap the local sandbox cannot keep untrusted code (task files, solutions,
builds, the shell tool) off the user's files, keys and network, so it refuses to open. The user
accepts the risk with `--unsandboxed` (or KERNEL_AGENT_UNSANDBOXED=1): the local sandbox then
opens with isolation "none", and says `unsandboxed` wherever it describes itself.
"""

from __future__ import annotations

import os
import shutil
import subprocess

UNSANDBOXED_ENV = "KERNEL_AGENT_UNSANDBOXED"
_TRUE = ("1", "true", "yes", "on")


def unsandboxed_accepted() -> bool:
    """Whether the user asked for untrusted code to run with no isolation (--unsandboxed)."""
    return os.environ.get(UNSANDBOXED_ENV, "").strip().lower() in _TRUE


def accept_unsandboxed() -> None:
    """Record the user's --unsandboxed for every local sandbox this process (and its children)
    opens. The variable is not in the sandbox's environment allowlist: untrusted code never sees it."""
    os.environ[UNSANDBOXED_ENV] = "1"


def refusal(problem: str) -> str:
    """The one line a command ends with when the local sandbox cannot confine untrusted code."""
    return (
        f"{problem}, so untrusted code would run unconfined; install it (apt-get install bubblewrap) "
        "or pass --unsandboxed to accept the risk"
    )


def bwrap_missing() -> str:
    return "bubblewrap (bwrap) is not installed"


def bwrap_broken(stderr: str) -> str:
    first = next((line.strip() for line in stderr.splitlines() if line.strip()), "it failed")
    return f"bubblewrap (bwrap) does not work here ({first})"


def confinement_problem() -> str | None:
    """Why the local sandbox could not confine a command here (None when bubblewrap works): a
    quick check a command makes before it writes anything; opening the sandbox checks again."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return bwrap_missing()
    probe = [bwrap, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=30, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return bwrap_broken(str(exc))
    return None if done.returncode == 0 else bwrap_broken(done.stderr.decode(errors="replace"))
