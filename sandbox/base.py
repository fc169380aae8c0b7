"""The Sandbox seam: where untrusted code (everything a model wrote) builds and runs.

A sandbox runs commands with a hard timeout and returns what happened; it never raises
because a command failed. What the host may rely on beyond that (same user and files, pinned
GPUs, what builds depend on) each backend declares in `capabilities`. Backends register
themselves by name (`register_sandbox`) and are opened with `open_sandbox(kind, workspace=...)`;
this module imports none of them: the built-in ones are imported by name, when first asked for,
from the table in sandbox/__init__.py (`BACKENDS`).
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TypeVar

from pydantic import BaseModel, Field

# What a candidate process may see of the harness environment. Everything else (API keys,
# tokens, cloud credentials, the user's shell state) is dropped.
ENV_ALLOWLIST: tuple[str, ...] = (
    "PATH",
    "LANG",
    "LC_ALL",
    "TERM",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "TORCH_CUDA_ARCH_LIST",
    "LD_LIBRARY_PATH",
    "MAX_JOBS",
)

# Set for every sandboxed command. A sandbox has no network: Hugging Face's libraries (KernelBench's
# level-4 tasks load models by name) then answer from the local cache at once instead of retrying
# the Hub for about a minute per file.
ENV_DEFAULTS: dict[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
}


class ExecResult(BaseModel):
    """What one command did. `returncode` is negative (-signal) when a signal killed it."""

    returncode: int
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    timed_out: bool = False
    truncated: bool = Field(default=False, description="stdout or stderr hit the output cap")
    limits_hit: list[str] = Field(
        default_factory=list,
        description="sandbox limits the command ran into: pids, memory, cpu_time, file_size, output",
    )

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def signal(self) -> int | None:
        return -self.returncode if self.returncode < 0 else None

    def describe_failure(self) -> str:
        """One line saying why the command did not succeed (empty when it did)."""
        limits = f" (limits hit: {', '.join(self.limits_hit)})" if self.limits_hit else ""
        if self.timed_out:
            return f"timed out after {self.duration_s:.1f}s and was killed{limits}"
        if self.signal is not None:
            import signal as _signal

            try:
                name = _signal.Signals(self.signal).name
            except ValueError:
                name = f"signal {self.signal}"
            return f"killed by {name}{limits}"
        if self.returncode != 0:
            return f"exited with status {self.returncode}{limits}"
        return ""


class SandboxError(RuntimeError):
    """The sandbox itself is broken (no daemon, no image, cannot start): not the candidate's fault."""


OUTPUT_CAP_BYTES = 4 * 1024 * 1024
"""Default cap on what is kept of each of stdout and stderr; the rest is read and dropped."""


class CappedBuffer:
    """Keeps the first `cap` bytes fed to it and counts the rest."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._parts: list[bytes] = []
        self.kept = 0
        self.dropped = 0

    def feed(self, data: bytes) -> None:
        room = self.cap - self.kept
        if room > 0:
            self._parts.append(data[:room])
            self.kept += min(room, len(data))
        self.dropped += max(0, len(data) - max(room, 0))

    @property
    def truncated(self) -> bool:
        return self.dropped > 0

    def text(self) -> str:
        out = b"".join(self._parts).decode("utf-8", "replace")
        if self.dropped:
            out += f"\n[... {self.dropped} more bytes dropped: output cap of {self.cap} bytes]\n"
        return out


def returncode_from_wait_status(code: int) -> int:
    """A wrapper (bwrap, sh, timeout) reports a child killed by signal N as 128+N: make it -N.

    A command that really exits with 129..159 is reported as a signal too; shells make the
    same call.
    """
    return -(code - 128) if 128 < code < 160 else code


class Isolation(BaseModel):
    """What a sandbox enforces. Each field says by what means, or is None when not enforced."""

    backend: str
    filesystem: str | None = None
    network: str | None = None
    processes: str | None = None
    memory: str | None = None
    host_processes_hidden: str | None = None
    gpus: str | None = None
    env: str = "allowlist (ENV_ALLOWLIST); API keys and tokens are not passed"
    output_cap_bytes: int = OUTPUT_CAP_BYTES
    notes: list[str] = Field(default_factory=list)
    unsandboxed: bool = Field(
        default=False, description="isolation was switched off on the user's request (--unsandboxed)"
    )

    def line(self) -> str:
        def part(name: str, value: str | None) -> str:
            return f"{name}: {value if value else 'NOT enforced'}"

        parts = [
            part("filesystem", self.filesystem),
            part("network", self.network),
            part("fork bombs", self.processes),
            part("memory", self.memory),
            part("host processes", self.host_processes_hidden),
            f"gpus: {self.gpus or 'none'}",
            f"env: {self.env}",
            f"output cap: {self.output_cap_bytes // 1024} KiB/stream",
        ]
        notes = f" [{'; '.join(self.notes)}]" if self.notes else ""
        unsandboxed = " (unsandboxed: no filesystem or network isolation)" if self.unsandboxed else ""
        what = f"{self.backend} sandbox{unsandboxed}"
        return f"{what}; " + "; ".join(parts) + notes


@dataclass(frozen=True)
class Capabilities:
    """What the host may rely on about a sandbox, declared by its backend (never inferred from its
    kind). The defaults promise nothing."""

    shares_host_user: bool = False
    """Commands run as the host's own user on the host's files, so a folder only that user may
    enter (0o700) is still theirs. Otherwise (a container's user may be another) the referee's
    exchange folders are opened to every user."""

    pinned_gpus: tuple[str, ...] | None = None
    """The machine's GPU ids the commands are limited to (() for none); None when they are not
    limited to a list (all GPUs)."""

    sees_gpu_gates: bool = False
    """Commands see the host's GPU gate folder (sandbox/paths.py gpu_gate_dir), so a candidate's
    supervisor can take its GPU's gate itself for just its timing window. Otherwise the host holds
    the gate exclusively around the whole candidate run."""

    runtime_identity: str = ""
    """What a build inside depends on beyond the solution and the host's toolchain: the image of
    a container, "" for commands on the host's own. Part of the build cache's key."""


def pinned_gpu_ids(gpus: str | None) -> tuple[str, ...] | None:
    """The `gpus` option both backends take ("all", "0", "0,1" or None) as `pinned_gpus`."""
    if gpus is None:
        return ()
    ids = tuple(gpus.split(","))
    return ids if all(part.isdigit() for part in ids) else None


class Sandbox(abc.ABC):
    """Runs commands for one workspace.

    Paths given to `exec`, `put_file` and `get_file` are paths *inside* the sandbox. The
    workspace is visible at `self.workspace_path`, the worker scripts at `self.workers_path`,
    and a writable build cache at `self.cache_path` (kept across sandboxes of the same kind).
    """

    kind: ClassVar[str]

    workspace_path: str
    workers_path: str
    cache_path: str
    python: str

    @abc.abstractmethod
    def exec(
        self,
        cmd: Sequence[str],
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        """Run `cmd` and wait at most `timeout` seconds; never raises for a failing command."""

    @abc.abstractmethod
    def put_file(self, path: str, content: bytes) -> None: ...

    @abc.abstractmethod
    def get_file(self, path: str) -> bytes: ...

    def close(self) -> None:  # noqa: B027 - backends without resources need nothing here
        """Release everything the sandbox holds. Safe to call twice."""

    def worker(self, name: str) -> str:
        """Path inside the sandbox of a worker script, named by its place in sandbox/workers/
        (`"referee/candidate.py"`)."""
        return f"{self.workers_path}/{name}"

    def python_flags(self) -> list[str]:
        """Interpreter flags for a python this sandbox starts, after `-I` (none by default)."""
        return []

    def python_command(self, *args: str) -> list[str]:
        """`python -I` in this sandbox with the backend's flags, then `args` (a worker and its
        arguments, `-c CODE`, ...): how every worker is started."""
        return [self.python, "-I", *self.python_flags(), *args]

    @property
    def capabilities(self) -> Capabilities:
        """What the host may rely on (Capabilities); each backend says what it offers."""
        return Capabilities()

    def isolation(self) -> Isolation:
        """What this sandbox enforces, as found when it was opened."""
        return Isolation(backend=self.kind, notes=["this backend states no isolation"])

    def describe(self) -> str:
        """One line for logs and transcripts: which backend and what it isolates."""
        return self.isolation().line()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


SandboxFactory = Callable[..., Sandbox]
_Factory = TypeVar("_Factory", bound=SandboxFactory)
_REGISTRY: dict[str, SandboxFactory] = {}


def register_sandbox(kind: str) -> Callable[[_Factory], _Factory]:
    """Register a backend (a Sandbox class, or any callable that opens one) under `kind`."""

    def decorate(factory: _Factory) -> _Factory:
        _REGISTRY[kind] = factory
        return factory

    return decorate


def sandbox_kinds() -> list[str]:
    """The kinds that can be opened here: every built-in backend whose module imports, and any
    other registered one (`auto` chooses among them)."""
    from sandbox import BACKENDS

    for kind in BACKENDS:
        _load_backend(kind)
    return sorted(_REGISTRY)


def open_sandbox(kind: str, *, workspace: Path, **options: object) -> Sandbox:
    """Open a sandbox of `kind` (`local`, `docker`, `auto`, or a registered one) over the host
    folder `workspace`."""
    from sandbox import BACKENDS

    if kind == "auto":
        image = options.get("image")
        chooser = importlib.import_module(BACKENDS["auto"])
        kind = chooser.choose_kind(image=str(image) if image else None).kind
    factory = _REGISTRY.get(kind) or _load_backend(kind)
    if factory is None:
        raise SandboxError(f"unknown sandbox {kind!r}; choose one of: {', '.join(sandbox_kinds())}, auto")
    return factory(workspace=workspace, **options)


def _load_backend(kind: str) -> SandboxFactory | None:
    """The factory of `kind`, importing a built-in backend's module (it registers itself) the
    first time. A backend whose module needs a package that is not installed (the docker SDK is
    optional) is not offered; an import error of our own modules is raised."""
    from sandbox import BACKENDS

    module = BACKENDS.get(kind)
    if module is not None and kind not in _REGISTRY:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            if exc.name is not None and exc.name.partition(".")[0] == "sandbox":
                raise
    return _REGISTRY.get(kind)


WORKERS_DIR = Path(__file__).resolve().parent / "workers"
