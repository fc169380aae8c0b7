"""The Sandbox seam: where untrusted code (everything a model wrote) builds and runs.

A sandbox runs commands with a hard timeout and returns what happened; it never raises
because a command failed. Backends register themselves by name (`local`, `docker`) and are
opened with `open_sandbox(kind, workspace=...)`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar

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


class ExecResult(BaseModel):
    """What one command did. `returncode` is negative (-signal) when a signal killed it."""

    returncode: int
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    timed_out: bool = False
    truncated: bool = Field(default=False, description="stdout or stderr hit the output cap")

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def signal(self) -> int | None:
        return -self.returncode if self.returncode < 0 else None

    def describe_failure(self) -> str:
        """One line saying why the command did not succeed (empty when it did)."""
        if self.timed_out:
            return f"timed out after {self.duration_s:.1f}s and was killed"
        if self.signal is not None:
            import signal as _signal

            try:
                name = _signal.Signals(self.signal).name
            except ValueError:
                name = f"signal {self.signal}"
            return f"killed by {name}"
        if self.returncode != 0:
            return f"exited with status {self.returncode}"
        return ""


class SandboxError(RuntimeError):
    """The sandbox itself is broken (no daemon, no image, cannot start): not the candidate's fault."""


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
        """Path inside the sandbox of a worker script in sandbox/workers/."""
        return f"{self.workers_path}/{name}"

    def describe(self) -> str:
        """One line for logs and transcripts: which backend and what it isolates."""
        return self.kind

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


SandboxFactory = Callable[..., Sandbox]
_REGISTRY: dict[str, SandboxFactory] = {}


def register_sandbox(kind: str) -> Callable[[SandboxFactory], SandboxFactory]:
    def decorate(factory: SandboxFactory) -> SandboxFactory:
        _REGISTRY[kind] = factory
        return factory

    return decorate


def sandbox_kinds() -> list[str]:
    _load_builtin_backends()
    return sorted(_REGISTRY)


def open_sandbox(kind: str, *, workspace: Path, **options: object) -> Sandbox:
    """Open a sandbox of `kind` (`local`, `docker`, or `auto`) over the host folder `workspace`."""
    _load_builtin_backends()
    if kind == "auto":
        from sandbox.auto import choose_kind

        kind = choose_kind()
    try:
        factory = _REGISTRY[kind]
    except KeyError:
        raise SandboxError(
            f"unknown sandbox {kind!r}; choose one of: {', '.join(sorted(_REGISTRY))}, auto"
        ) from None
    return factory(workspace=workspace, **options)


def _load_builtin_backends() -> None:
    # Imported for their @register_sandbox side effect.
    import sandbox.local

    try:
        import sandbox.docker  # noqa: F401
    except ImportError:  # the docker SDK is optional at run time
        pass


WORKERS_DIR = Path(__file__).resolve().parent / "workers"
