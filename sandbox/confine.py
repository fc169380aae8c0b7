"""Host workers that run task code: the referee's judge and the tuner's judge.

They are trusted by the referee (no candidate code ever enters them), but they build the task's
`Model`, call its `get_inputs` and time it, and a task file is untrusted too. So they start with
the sandbox's allowlisted environment (never the harness's keys) and, where bubblewrap works,
inside the same allowlisted read-only view as the local sandbox: no network, no home, a private
/tmp, and write access only to the folders named (the judge's torch.compile cache). They keep the
harness's process group and pid namespace, so the harness still kills them by group and they
still see their parent's pid (sandbox/workers/gpu/lifetime.py).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

from sandbox.base import ENV_ALLOWLIST, ENV_DEFAULTS, SandboxError
from sandbox.bwrap import bwrap_prefix
from sandbox.unsandboxed import bwrap_broken, bwrap_missing, refusal, unsandboxed_accepted


def worker_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """ENV_ALLOWLIST of this process's environment, a home that holds nothing, and `extra`."""
    env = {name: os.environ[name] for name in ENV_ALLOWLIST if name in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update(ENV_DEFAULTS)
    env.update({"HOME": "/tmp", "TMPDIR": "/tmp", "PYTHONNOUSERSITE": "1"})
    env.update(extra or {})
    return env


@cache
def _working_bwrap() -> tuple[str | None, str]:
    """(bwrap, "") when it confines a host worker here, else (None, why not)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None, bwrap_missing()
    probe = bwrap_prefix(bwrap, None, [], [], True, [], own_session=False)
    run = subprocess.run([*probe, "true"], capture_output=True, timeout=30, check=False)
    return (bwrap, "") if run.returncode == 0 else (None, bwrap_broken(run.stderr.decode(errors="replace")))


def confined(
    argv: Sequence[str],
    *,
    writable: Sequence[str | Path] = (),
    visible: Sequence[str | Path] = (),
    gpu: bool = True,
) -> list[str]:
    """`argv` under bubblewrap (see the module docstring). Without a working bwrap this is an
    error unless the user accepted running unsandboxed (`--unsandboxed`, which sets
    KERNEL_AGENT_UNSANDBOXED=1), and then `argv` is returned as it is."""
    bwrap, problem = _working_bwrap()
    if bwrap is None:
        if unsandboxed_accepted():
            return list(argv)
        raise SandboxError(refusal(problem))
    rw = []
    for folder in writable:
        Path(folder).mkdir(parents=True, exist_ok=True)
        rw.append(str(Path(folder).resolve()))
    nodes = sorted(glob.glob("/dev/nvidia*")) if gpu else []
    prefix = bwrap_prefix(bwrap, None, rw, nodes, True, list(visible), own_session=False)
    return [*prefix, *argv]
