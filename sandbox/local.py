"""Local process sandbox: the embedded default for machines without Docker.

Every command runs in its own process group and (unless the user passed --unsandboxed: without
bubblewrap the sandbox refuses to open rather than run untrusted code unconfined):
- under bubblewrap (`bwrap`): a read-only view of the host with the workspace, the build cache
  and a private /tmp writable, the home directory and /run hidden, a fresh /dev with only the
  GPU device nodes, its own pid, network, ipc and uts namespaces, and no capabilities;
- in its own control group: a pids limit (fork bombs), a memory limit that counts resident
  memory (works with the CUDA driver), and a kill that reaches processes that left the group;
- with resource limits: CPU seconds, file size, no core dumps, address space (only when no GPU
  is used and no memory cgroup exists: the CUDA driver maps huge virtual ranges).
What could not be set up is found when the sandbox opens and stated by `isolation()`.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path

from sandbox.base import (
    ENV_ALLOWLIST,
    ENV_DEFAULTS,
    OUTPUT_CAP_BYTES,
    WORKERS_DIR,
    Capabilities,
    ExecResult,
    Isolation,
    Sandbox,
    SandboxError,
    pinned_gpu_ids,
    register_sandbox,
    returncode_from_wait_status,
)
from sandbox.bwrap import bwrap_prefix
from sandbox.bytecode import BytecodeCache
from sandbox.cgroups import CgroupPlan, CommandCgroup, command_cgroup_name
from sandbox.launch import launch_prefix, processes_of_uid
from sandbox.paths import bytecode_cache_dir, default_cache_dir, gpu_gate_dir
from sandbox.pump import pump
from sandbox.unsandboxed import bwrap_broken, bwrap_missing, refusal, unsandboxed_accepted

GiB = 1024**3
_ids = itertools.count()
_cgroup_plan: CgroupPlan | None = None
_TMP_PREFIX = "kernel-agent-tmp-"
_stale_tmp_checked = False


def _remove_stale_tmp_dirs() -> None:
    """Private /tmp dirs of harness processes that died without running their finalizers."""
    global _stale_tmp_checked
    if _stale_tmp_checked:
        return
    _stale_tmp_checked = True
    for path in Path(tempfile.gettempdir()).glob(f"{_TMP_PREFIX}*-*"):
        owner = path.name[len(_TMP_PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            shutil.rmtree(path, ignore_errors=True)


def cgroup_plan() -> CgroupPlan:
    global _cgroup_plan
    if _cgroup_plan is None:
        _cgroup_plan = CgroupPlan.probe()
        _cgroup_plan.remove_stale()
    return _cgroup_plan


@register_sandbox("local")
class LocalSandbox(Sandbox):
    """Options: `isolation` "auto" (bwrap; "none" when the user passed --unsandboxed), "bwrap"
    or "none" (process group and rlimits only: unsandboxed); without a working bwrap, "auto" and
    "bwrap" raise a SandboxError saying how to install it; `gpus` "all",
    "0,1" or None; `memory_limit` bytes or None; `pids_limit`; `file_size_limit` bytes;
    `cpu_time_limit` seconds per process (default: timeout x cores); `ro_paths` host paths to
    keep visible when the home directory is hidden; `output_cap` bytes per stream."""

    kind = "local"

    def __init__(
        self,
        *,
        workspace: Path,
        cache_dir: Path | None = None,
        isolation: str = "auto",
        gpus: str | None = "all",
        memory_limit: int | None = 16 * GiB,
        pids_limit: int = 1024,
        file_size_limit: int | None = 4 * GiB,
        cpu_time_limit: int | None = None,
        hide_home: bool = True,
        ro_paths: Sequence[str | Path] = (),
        output_cap: int = OUTPUT_CAP_BYTES,
        env: Mapping[str, str] | None = None,
        **_: object,
    ) -> None:
        if isolation not in ("auto", "bwrap", "none"):
            raise SandboxError(f"local sandbox: isolation={isolation!r}; use auto, bwrap or none")
        self.workspace_path = str(Path(workspace).resolve())
        if not Path(self.workspace_path).is_dir():
            raise SandboxError(f"local sandbox: workspace {self.workspace_path} is not a directory")
        self.workers_path = str(WORKERS_DIR)
        self.cache_path = str((cache_dir or default_cache_dir()).resolve())
        Path(self.cache_path).mkdir(parents=True, exist_ok=True)
        self.python = sys.executable
        _remove_stale_tmp_dirs()
        self.tmp_path = tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{os.getpid()}-")
        # Also removed when the sandbox is dropped without close() or at interpreter exit.
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.tmp_path, True)
        self._id = f"{os.getpid()}-{next(_ids)}"
        self._seq = itertools.count()
        self._closed = False
        self.gpus = gpus
        self.memory_limit = memory_limit
        self.pids_limit = pids_limit
        self.file_size_limit = file_size_limit
        self.cpu_time_limit = cpu_time_limit
        self.output_cap = output_cap
        self.extra_env = dict(env or {})
        self._gpu_nodes = sorted(glob.glob("/dev/nvidia*")) if gpus is not None else []
        self._cgroups = cgroup_plan()
        self._prlimit = shutil.which("prlimit")
        self._notes: list[str] = []
        self._prefix: list[str] = []
        self._bwrap = False
        self._bytecode: BytecodeCache | None = None
        self._net: str | None = None
        # --unsandboxed (sandbox/unsandboxed.py) turns the default into an explicit "none".
        self._unsandboxed = isolation == "none" or (isolation == "auto" and unsandboxed_accepted())
        if self._unsandboxed:
            self._notes.append("isolation 'none' was asked for (--unsandboxed)")
        else:
            self._setup_namespaces(hide_home, ro_paths)
        self._die_with_us = self._parent_death_prefix()

    # -- setup ----------------------------------------------------------------------------

    def _setup_namespaces(self, hide_home: bool, ro_paths: Sequence[str | Path]) -> None:
        """bwrap around every command, or a SandboxError: without it untrusted code would run
        unconfined, which only an explicit isolation "none" (--unsandboxed) accepts."""
        bwrap = shutil.which("bwrap")
        if not bwrap:
            raise SandboxError(refusal(bwrap_missing()))
        writable = [self.cache_path, self.workspace_path]
        gates = gpu_gate_dir()
        gates.mkdir(parents=True, exist_ok=True)
        visible = [*ro_paths, gates]
        bytecode = self._usable_bytecode(writable)
        if bytecode:
            visible.append(bytecode.root)
        prefix = bwrap_prefix(bwrap, self.tmp_path, writable, self._gpu_nodes, hide_home, visible)
        probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=30, check=False)
        if probe.returncode != 0:
            raise SandboxError(refusal(bwrap_broken(probe.stderr.decode(errors="replace"))))
        self._prefix, self._bwrap = prefix, True
        if bytecode:
            self._bytecode = bytecode
            bytecode.make_in_background()
        self._net = "own network namespace (bwrap --unshare-net): loopback only"

    def _usable_bytecode(self, writable: Sequence[str]) -> BytecodeCache | None:
        """The harness's torch bytecode folder, where torch ships none and no sandbox could write it."""
        root = bytecode_cache_dir()
        if root is None or _under(root := root.resolve(), *writable, self.tmp_path):
            return None
        bytecode = BytecodeCache(root, self.python)
        if not bytecode.needed:
            return None
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SandboxError(
                f"local sandbox: cannot make torch's bytecode folder {root} ({exc.strerror}); set "
                "KERNEL_AGENT_BYTECODE_CACHE to a folder this user can write, or to `off`"
            ) from exc
        return bytecode

    def python_flags(self) -> list[str]:
        # torch's bytecode from the harness's read-only folder, once made (sandbox/bytecode.py).
        folder = self._bytecode.ready() if self._bytecode else None
        return ["-X", f"pycache_prefix={folder}"] if folder else []

    def _parent_death_prefix(self) -> list[str]:
        """Commands end with the harness thread that started them: bwrap's --die-with-parent, or
        else the kernel's parent-death signal set by setpriv before it execs the command (a
        killed batch left candidates running on the GPU otherwise: each has a session of its own,
        out of reach of the batch's process group)."""
        if self._bwrap:
            return []
        setpriv = shutil.which("setpriv")
        if (
            setpriv
            and subprocess.run([setpriv, "--pdeathsig", "KILL", "--", "true"], check=False).returncode == 0
        ):
            return [setpriv, "--pdeathsig", "KILL", "--"]
        self._notes.append(
            "commands may outlive a killed harness: no bwrap, and setpriv --pdeathsig is missing"
        )
        return []

    # -- what is enforced -----------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        # Commands run as this process's user on the host's own paths and toolchain.
        return Capabilities(shares_host_user=True, sees_gpu_gates=True, pinned_gpus=pinned_gpu_ids(self.gpus))

    def _gpu_in_use(self) -> bool:
        return bool(self._gpu_nodes)

    def isolation(self) -> Isolation:
        notes = list(self._notes)
        if self._bwrap:
            filesystem = (
                "bwrap: read-only system folders, python, torch and CUDA toolkit only; writable: "
                "workspace, cache, private /tmp; home, /run, the harness's state and the rest hidden"
            )
            if self._bytecode:
                notes.append(
                    f"torch ships no bytecode: workers read the harness's, read-only ({self._bytecode.folder})"
                )
            host_procs = "own pid namespace"
        else:
            filesystem = None
            host_procs = None
            notes.append("without bwrap a command can write wherever its uid can and read /proc/*/environ")
        if self._cgroups.pids:
            processes = f"pids.max={self.pids_limit} ({self._cgroups.describe('pids')})"
        elif self._nproc_enforced():
            processes = f"RLIMIT_NPROC (counts every process of uid {os.getuid()}; approximate)"
        else:
            processes = None
            notes.append(
                f"no writable pids cgroup ({self._cgroups.reason}); RLIMIT_NPROC never binds root, so "
                "a fork bomb is only stopped by the timeout"
            )
        memory: str | None = None
        if self.memory_limit is None:
            notes.append("memory limit switched off (memory_limit=None)")
        elif self._cgroups.memory:
            memory = f"{self.memory_limit // 2**20} MiB resident ({self._cgroups.describe('memory')})"
        elif not self._gpu_in_use():
            memory = f"RLIMIT_AS {self.memory_limit // 2**20} MiB (address space)"
        else:
            notes.append("memory not limited: no memory cgroup, and RLIMIT_AS breaks the CUDA driver")
        if self.gpus is None:
            gpus = None
        else:
            gpus = f"{self.gpus}: {len(self._gpu_nodes)} /dev/nvidia* nodes"
            if self.gpus != "all":
                gpus += " (choice by CUDA_VISIBLE_DEVICES: advisory, every GPU node is visible)"
        how = "prlimit" if self._prlimit else "a preexec_fn (prlimit missing: ~70 ms more per command)"
        notes.append(
            f"stragglers killed after each command; RLIMIT_CPU, RLIMIT_FSIZE, no core dumps via {how}"
        )
        return Isolation(
            backend="local",
            unsandboxed=self._unsandboxed,
            filesystem=filesystem,
            network=self._net,
            processes=processes,
            memory=memory,
            host_processes_hidden=host_procs,
            gpus=gpus,
            output_cap_bytes=self.output_cap,
            notes=notes,
        )

    @staticmethod
    def _nproc_enforced() -> bool:
        # The kernel never applies RLIMIT_NPROC to the initial root user (copy_process exempts
        # INIT_USER), capabilities or not; for other users it counts all their processes.
        return os.geteuid() != 0

    # -- running commands -----------------------------------------------------------------

    def exec(
        self,
        cmd: Sequence[str],
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        if self._closed:
            raise SandboxError("local sandbox: exec after close(); open a new sandbox")
        cwd = cwd or self.workspace_path
        group = self._make_cgroup()
        launcher, preexec = launch_prefix(self._prlimit, self._limits(timeout), group)
        argv = [
            *launcher,
            *self._die_with_us,
            *self._prefix,
            *(["--chdir", cwd] if self._bwrap else []),
            *cmd,
        ]
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                cwd=self.workspace_path if self._bwrap else cwd,
                env=self._env(env),
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=preexec,
            )
        except OSError as exc:
            if group:
                group.remove()
            return ExecResult(returncode=127, stderr=f"sandbox: cannot start {cmd[0]!r} in {cwd}: {exc}\n")

        def kill() -> None:
            _kill_group(proc.pid)
            if group:
                group.kill_all()

        deadline = time.monotonic() + timeout
        try:
            out, err, timed_out = pump(proc, stdin, deadline, self.output_cap, kill)
            if not timed_out:  # its output is closed, but the command may still be running
                try:
                    proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
                except subprocess.TimeoutExpired:
                    timed_out = True
            kill()  # the command on timeout; otherwise the stragglers it left behind
            returncode = proc.wait()
            limits = group.limits_hit() if group else []
        finally:
            if group:
                group.remove()
        if self._bwrap:
            returncode = returncode_from_wait_status(returncode)
        # A limit that killed a shell's child shows as the shell's 128+N status, with or without bwrap.
        limits += _limits_from_signal(returncode_from_wait_status(returncode))
        if out.truncated or err.truncated:
            limits.append("output")
        return ExecResult(
            returncode=returncode,
            stdout=out.text(),
            stderr=err.text(),
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
            truncated=out.truncated or err.truncated,
            limits_hit=limits,
        )

    def _env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        full = {k: v for k, v in os.environ.items() if k in ENV_ALLOWLIST}
        full.update(ENV_DEFAULTS)
        full.update(
            HOME=self.tmp_path if not self._bwrap else "/tmp",
            TMPDIR=self.tmp_path if not self._bwrap else "/tmp",
            XDG_CACHE_HOME=self.cache_path,
            TORCH_EXTENSIONS_DIR=os.path.join(self.cache_path, "torch_extensions"),
            PYTHONDONTWRITEBYTECODE="1",
        )
        if self.gpus is None:
            full["CUDA_VISIBLE_DEVICES"] = ""
        elif self.gpus != "all":
            full["CUDA_VISIBLE_DEVICES"] = self.gpus
        full.update(self.extra_env)
        full.update(env or {})
        return full

    def _make_cgroup(self) -> CommandCgroup | None:
        if not self._cgroups.pids:
            return None
        memory = self.memory_limit if self._cgroups.memory else None
        name = command_cgroup_name(self._id, next(self._seq))
        try:
            return self._cgroups.create(name, pids_max=self.pids_limit, memory_max=memory)
        except OSError as exc:
            raise SandboxError(f"local sandbox: cannot create cgroup {name}: {exc}") from exc

    def _limits(self, timeout: float) -> list[tuple[str, int, int]]:
        """(prlimit name, soft, hard) for one command."""
        cpu = self.cpu_time_limit or math.ceil(timeout * (os.cpu_count() or 1)) + 1
        # CPU: the hard limit a second above the soft one, so SIGXCPU (reported as cpu_time)
        # comes before the kernel's SIGKILL.
        wanted = [("cpu", cpu, cpu + 1), ("core", 0, 0)]
        if self.file_size_limit is not None:
            wanted.append(("fsize", self.file_size_limit, self.file_size_limit))
        if self.memory_limit is not None and not self._cgroups.memory and not self._gpu_in_use():
            wanted.append(("as", self.memory_limit, self.memory_limit))
        if not self._cgroups.pids and self._nproc_enforced():
            nproc = processes_of_uid(os.getuid()) + self.pids_limit
            wanted.append(("nproc", nproc, nproc))
        return wanted

    # -- files ----------------------------------------------------------------------------

    def host_path(self, path: str) -> Path:
        """The host file behind a path inside the sandbox (under bwrap, /tmp is the private dir)."""
        p = Path(path)
        if self._bwrap and not _under(p, self.workspace_path, self.cache_path) and _under(p, "/tmp"):
            return Path(self.tmp_path) / p.relative_to("/tmp")
        return p

    def put_file(self, path: str, content: bytes) -> None:
        """Write under one of the sandbox's writable places, never through a link its commands
        may have left there (a link at `path` is replaced; a linked folder on the way refuses)."""
        from sandbox.safe_files import UnsafePathError, write_file

        target = Path(os.path.normpath(self.host_path(path)))
        writable = sorted((self.workspace_path, self.cache_path, self.tmp_path), key=len)
        root = next((Path(r) for r in writable if target != Path(r) and target.is_relative_to(r)), None)
        if root is None:
            raise PermissionError(
                f"local sandbox: {path} is outside the sandbox's writable places "
                f"({self.workspace_path}, {self.cache_path}, /tmp)"
            )
        try:
            write_file(root, target.relative_to(root).as_posix(), content)
        except UnsafePathError as exc:
            raise PermissionError(f"local sandbox: {path} not written: {exc}") from None

    def get_file(self, path: str) -> bytes:
        """Read a file; under the writable places only a regular file reached without links."""
        from sandbox.safe_files import SkippedEntry, read_regular

        target = Path(os.path.normpath(self.host_path(path)))
        writable = sorted((self.workspace_path, self.cache_path, self.tmp_path), key=len)
        root = next((Path(r) for r in writable if target != Path(r) and target.is_relative_to(r)), None)
        if root is None:
            return target.read_bytes()
        skipped: list[SkippedEntry] = []
        data = read_regular(root, target.relative_to(root).as_posix(), skipped)
        if data is None and skipped:
            raise PermissionError(f"local sandbox: {path} not read: {skipped[0].reason}")
        if data is None:
            raise FileNotFoundError(f"local sandbox: {path}: no such file")
        return data

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._cleanup()


def _under(path: Path, *roots: str) -> bool:
    resolved = Path(os.path.normpath(path))
    return any(resolved == Path(root) or resolved.is_relative_to(root) for root in roots)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _limits_from_signal(returncode: int) -> list[str]:
    if returncode == -signal.SIGXCPU:
        return ["cpu_time"]
    if returncode == -signal.SIGXFSZ:
        return ["file_size"]
    return []
