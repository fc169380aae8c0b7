"""A referee process that dies with the process that started it (stdlib only, Linux).

The judge runs in a session of its own (so a timeout can kill its whole group), which also means
that killing the batch or `agent eval` that started it leaves it running: minutes of baselines,
torch.compile and timing loops on the GPU for nobody, beside whatever runs there next (seen on the
H200: the timing tests run after a killed batch failed while its judges finished). The kernel's
parent-death signal ends it with its parent instead.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when `parent_pid` (the process that started it) exits; exit now if it
    already has. The signal follows the parent *thread* that forked this process, so the caller
    must start it from the thread that waits for it. Does nothing where prctl does not exist."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid and not alive(parent_pid):  # it died before the signal was asked for
        os._exit(1)


def alive(pid: int) -> bool:
    """Whether process `pid` exists (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def parent_from_argv(argv: list[str]) -> int | None:
    """`--parent PID` from a worker's arguments."""
    if "--parent" not in argv:
        return None
    return int(argv[argv.index("--parent") + 1])
