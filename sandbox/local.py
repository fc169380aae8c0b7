"""Local process sandbox: each command in its own process group, killed whole on timeout.

(Minimal first version; resource limits, network denial and output caps are added by the
sandbox issue.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from sandbox.base import ENV_ALLOWLIST, WORKERS_DIR, ExecResult, Sandbox, register_sandbox


def default_cache_dir() -> Path:
    root = os.environ.get("KERNEL_AGENT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kernel-agent"
    )
    return Path(root)


@register_sandbox("local")
class LocalSandbox(Sandbox):
    kind = "local"

    def __init__(self, *, workspace: Path, cache_dir: Path | None = None, **_: object) -> None:
        self.workspace_path = str(Path(workspace).resolve())
        self.workers_path = str(WORKERS_DIR)
        self.cache_path = str((cache_dir or default_cache_dir()).resolve())
        Path(self.cache_path).mkdir(parents=True, exist_ok=True)
        self.python = sys.executable

    def exec(
        self,
        cmd: Sequence[str],
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        full_env = {k: v for k, v in os.environ.items() if k in ENV_ALLOWLIST}
        full_env.update(env or {})
        start = time.monotonic()
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd or self.workspace_path,
            env=full_env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        timed_out = False
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            out, err = proc.communicate()
        _kill_group(proc.pid)  # stragglers the command left behind
        return ExecResult(
            returncode=proc.returncode,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
        )

    def put_file(self, path: str, content: bytes) -> None:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)

    def get_file(self, path: str) -> bytes:
        return Path(path).read_bytes()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
