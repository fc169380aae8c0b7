"""How a local command starts: inside its cgroup and under its rlimits, without a preexec_fn.

`sh` joins the command's cgroups and `prlimit` sets the limits, each then exec'ing the next, so
nothing of them stays behind. A preexec_fn would do the same, but it forces a full fork() of
the harness (about 70 ms per command once torch is imported, against under 1 ms for the
vfork that subprocess uses otherwise) and is unsafe when the harness has threads; it is used
only when prlimit is missing.
"""

from __future__ import annotations

import contextlib
import glob
import resource
from collections.abc import Callable, Sequence
from pathlib import Path

from sandbox.cgroups import CommandCgroup

RLIMITS = {
    "cpu": resource.RLIMIT_CPU,
    "core": resource.RLIMIT_CORE,
    "fsize": resource.RLIMIT_FSIZE,
    "as": resource.RLIMIT_AS,
    "nproc": resource.RLIMIT_NPROC,
}
# $1.. the cgroup.procs files, then --, then the command.
_JOIN_CGROUP = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


def launch_prefix(
    prlimit: str | None, wanted: Sequence[tuple[str, int, int]], group: CommandCgroup | None
) -> tuple[list[str], Callable[[], None] | None]:
    """(argv prefix, preexec_fn or None) applying `wanted` (prlimit name, soft, hard) limits."""
    limits = []
    for name, soft, hard in wanted:  # never above what this process already has
        current = resource.getrlimit(RLIMITS[name])[1]
        if current != resource.RLIM_INFINITY:
            soft, hard = min(soft, current), min(hard, current)
        limits.append((name, soft, hard))
    if prlimit:
        join = ["/bin/sh", "-c", _JOIN_CGROUP, "sh", *group.procs_files, "--"] if group else []
        return [*join, prlimit, *(f"--{n}={soft}:{hard}" for n, soft, hard in limits), "--"], None

    def setup() -> None:  # in the forked child before exec: system calls only
        for name, soft, hard in limits:
            resource.setrlimit(RLIMITS[name], (soft, hard))
        if group is not None:
            group.join_from_child()

    return [], setup


def processes_of_uid(uid: int) -> int:
    count = 0
    for status in glob.glob("/proc/[0-9]*/status"):
        with contextlib.suppress(OSError):
            for line in Path(status).read_text().splitlines():
                if line.startswith("Uid:"):
                    count += line.split()[1] == str(uid)
                    break
    return count
