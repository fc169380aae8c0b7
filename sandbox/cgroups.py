"""Per-command control groups for the local sandbox: a pids limit (fork bombs), an optional
memory limit that counts resident memory (so it works with the CUDA driver's huge virtual
mappings), and a way to kill every process a command started, even ones that left its
process group.

Both cgroup v2 (a writable, delegated subtree) and v1 (pids/memory/freezer hierarchies) are
handled. When neither is writable, `CgroupPlan.probe()` says why and the caller falls back.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from pydantic import BaseModel

from sandbox.workers.gpu.lifetime import alive

_PREFIX = "kernel-agent"


class CgroupPlan(BaseModel):
    """Where per-command groups can be made, found once per process."""

    version: int | None = None
    # controller name -> parent directory under which per-command groups are created
    parents: dict[str, str] = {}
    reason: str = ""

    @property
    def pids(self) -> bool:
        return "pids" in self.parents

    @property
    def memory(self) -> bool:
        return "memory" in self.parents

    @classmethod
    def probe(cls) -> CgroupPlan:
        v2 = _probe_v2()
        if v2.pids:
            return v2
        v1 = _probe_v1()
        if v1.pids:
            return v1
        return cls(reason=f"cgroup v2: {v2.reason}; cgroup v1: {v1.reason}")

    def describe(self, controller: str) -> str:
        return f"cgroup v{self.version} {controller} controller"

    def create(self, name: str, *, pids_max: int | None, memory_max: int | None) -> CommandCgroup:
        dirs: dict[str, Path] = {}
        for controller, parent in self.parents.items():
            if controller == "memory" and memory_max is None:
                continue
            path = Path(parent) / name  # in v2 every controller maps to the same directory
            path.mkdir(exist_ok=True)
            dirs[controller] = path
        group = CommandCgroup(self.version or 1, dirs)
        if pids_max is not None and self.pids:
            group.write("pids", "pids.max", str(pids_max))
        if memory_max is not None and self.memory:
            if self.version == 2:
                group.write("memory", "memory.max", str(memory_max))
                group.write("memory", "memory.swap.max", "0", missing_ok=True)
            else:
                group.write("memory", "memory.limit_in_bytes", str(memory_max))
                group.write("memory", "memory.memsw.limit_in_bytes", str(memory_max), missing_ok=True)
        return group

    def remove_stale(self) -> None:
        """Remove groups left by harness processes that are gone (named after their pid)."""
        for parent in {Path(p) for p in self.parents.values()}:
            with contextlib.suppress(OSError):
                for child in parent.iterdir():
                    owner = child.name.split("-")[2] if child.name.count("-") >= 3 else ""
                    if owner.isdigit() and not alive(int(owner)):
                        with contextlib.suppress(OSError):
                            child.rmdir()


class CommandCgroup:
    """The groups of one command: join it from the child, then read, kill and remove it."""

    def __init__(self, version: int, dirs: dict[str, Path]) -> None:
        self.version = version
        self.dirs = dirs
        # Opened now so the child only has to write its pid (no Python path work after fork).
        self.procs_files = [str(d / "cgroup.procs") for d in {*dirs.values()}]

    def write(self, controller: str, name: str, value: str, *, missing_ok: bool = False) -> None:
        try:
            (self.dirs[controller] / name).write_text(value)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def join_from_child(self) -> None:
        """Called in the forked child before exec (preexec_fn): only raw system calls."""
        pid = str(os.getpid()).encode()
        for path in self.procs_files:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def pids(self) -> list[int]:
        found: set[int] = set()
        for d in self.dirs.values():
            with contextlib.suppress(OSError):
                found.update(int(x) for x in (d / "cgroup.procs").read_text().split())
        return sorted(found)

    def limits_hit(self) -> list[str]:
        hit: list[str] = []
        if "pids" in self.dirs and _counter(self.dirs["pids"] / "pids.events", "max") > 0:
            hit.append("pids")
        if "memory" in self.dirs:
            d = self.dirs["memory"]
            if self.version == 2:
                events = d / "memory.events"
                if _counter(events, "oom_kill") > 0 or _counter(events, "max") > 0:
                    hit.append("memory")
            elif _counter(d / "memory.oom_control", "oom_kill") > 0:
                hit.append("memory")
        return hit

    def kill_all(self) -> None:
        """SIGKILL every process in the group. pids.max bounds how many a fork bomb can make,
        so repeated sweeps converge."""
        if self.version == 2:
            kill_file = next(iter(self.dirs.values())) / "cgroup.kill"
            if kill_file.exists():
                with contextlib.suppress(OSError):
                    kill_file.write_text("1")
        for _ in range(200):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.001)

    def remove(self) -> None:
        """Remove the group directories; killed processes may take a moment to leave."""
        for d in {*self.dirs.values()}:
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    self.kill_all()
                    time.sleep(0.01)


def command_cgroup_name(sandbox_id: str, seq: int) -> str:
    return f"{_PREFIX}-{sandbox_id}-{seq}"


def _probe_v2() -> CgroupPlan:
    root = Path("/sys/fs/cgroup")
    if not (root / "cgroup.controllers").exists():
        return CgroupPlan(reason="not mounted at /sys/fs/cgroup")
    own = _own_path("")
    base = root / own.lstrip("/")
    # A child of our own group holds the commands; enabling controllers for it needs our group to
    # have no processes of its own (the "no internal processes" rule) unless it is the root.
    try:
        enabled = (base / "cgroup.subtree_control").read_text().split()
        if "pids" not in enabled:
            (base / "cgroup.subtree_control").write_text("+pids")
            enabled = (base / "cgroup.subtree_control").read_text().split()
        if "memory" not in enabled and "memory" in (base / "cgroup.controllers").read_text().split():
            with contextlib.suppress(OSError):
                (base / "cgroup.subtree_control").write_text("+memory")
                enabled = (base / "cgroup.subtree_control").read_text().split()
    except OSError as exc:
        return CgroupPlan(reason=f"cannot enable the pids controller under {base}: {exc.strerror}")
    parents = {c: str(base) for c in ("pids", "memory") if c in enabled}
    return _check_writable(CgroupPlan(version=2, parents=parents))


def _probe_v1() -> CgroupPlan:
    mounts: dict[str, Path] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) >= 4 and fields[2] == "cgroup":
                for option in fields[3].split(","):
                    if option in ("pids", "memory", "freezer"):
                        mounts[option] = Path(fields[1])
    if "pids" not in mounts:
        return CgroupPlan(reason="no pids hierarchy mounted")
    parents = {c: str(m / _own_path(c).lstrip("/")) for c, m in mounts.items() if c != "freezer"}
    return _check_writable(CgroupPlan(version=1, parents=parents))


def _check_writable(plan: CgroupPlan) -> CgroupPlan:
    usable: dict[str, str] = {}
    errors: list[str] = []
    for controller, parent in plan.parents.items():
        probe = Path(parent) / f"{_PREFIX}-probe-{os.getpid()}"
        try:
            probe.mkdir(exist_ok=True)
            probe.rmdir()
            usable[controller] = parent
        except OSError as exc:
            errors.append(f"{parent}: {exc.strerror}")
    reason = "; ".join(errors) if errors else ""
    if "pids" not in usable and not reason:
        reason = "no pids controller"
    return CgroupPlan(version=plan.version, parents=usable, reason=reason)


def _own_path(controller: str) -> str:
    """Our group's path in the hierarchy of `controller` ("" means the v2 hierarchy)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(",") or (controller == "" and controllers == ""):
                return path
    return "/"


def _counter(path: Path, key: str) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


def process_limit_counters(pid: int) -> dict[str, int]:
    """How often the groups of process `pid` (e.g. a container's init, seen from the host) hit
    their pids and memory limits; empty when they cannot be read."""
    mounts: dict[str, Path] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) >= 4 and fields[2] == "cgroup2":
                mounts.setdefault("", Path(fields[1]))
            elif len(fields) >= 4 and fields[2] == "cgroup":
                for option in fields[3].split(","):
                    if option in ("pids", "memory"):
                        mounts[option] = Path(fields[1])
    counters: dict[str, int] = {}
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return counters
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            if controller not in mounts:
                continue
            d = mounts[controller] / path.lstrip("/")
            if controller in ("pids", "") and (d / "pids.events").exists():
                counters["pids"] = _counter(d / "pids.events", "max")
            if controller == "memory":
                counters["memory"] = _counter(d / "memory.oom_control", "oom_kill")
            elif controller == "" and (d / "memory.events").exists():
                counters["memory"] = _counter(d / "memory.events", "oom_kill")
    return counters
