"""torch's bytecode for the local sandbox's workers, made by the harness and read-only to them.

Some machines ship torch without `.pyc` files (one H200 install had none for its 2141 modules), and a
sandboxed worker cannot write them next to torch's read-only sources, so every build, candidate
and trace process compiled all of torch before its first line of work: `import torch` took 1.3-4.4
s there. The harness, a trusted process, imports once what the workers import, with
`-X pycache_prefix=<folder>`, and the local sandbox's workers then start with the same flag over
that folder, which bubblewrap shows them read-only (Python ignores a bytecode write that fails).

Read-only is the point: a folder a sandbox could write would let one solution plant code in the
next one's build. So the folder sits in the harness's own state (`harness_state_dir()`), is only
used under bubblewrap, and only when it is not below a path the sandbox may write. Where torch
has bytecode of its own nothing is made or used. A stale `.pyc` (torch upgraded) is never run:
Python checks each one against its source's size and mtime and compiles afresh when they differ.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from sandbox.base import WORKERS_DIR

# Run by the harness's python, outside any sandbox: torch and cpp_extension, every module a
# worker script imports (found in their source, so a new import is never forgotten), and the
# workers themselves, each compiled into sys.pycache_prefix.
_WARM = """
import ast, compileall, importlib, sys
from pathlib import Path
workers = Path(sys.argv[1])
sys.path.insert(0, str(workers))
import torch, torch.utils.cpp_extension
scripts = [p for p in workers.rglob("*.py") if "__pycache__" not in p.parts]
names, own = set(), {p.stem for p in scripts} | {p.name for p in workers.rglob("*") if p.is_dir()}
for path in scripts:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
for name in sorted(n for n in names if n.split(".")[0] not in own):
    try:
        importlib.import_module(name)
    except Exception:
        pass
compileall.compile_dir(str(workers), quiet=1, workers=0)
"""
_started: set[Path] = set()
_started_lock = threading.Lock()


class BytecodeCache:
    """The bytecode folder for this python's torch under `root` (one per torch installation)."""

    def __init__(self, root: Path, python: str = sys.executable) -> None:
        self.python = python
        self.root = root
        torch_init = _torch_init(python)
        self.needed = torch_init is not None and not has_bytecode(torch_init)
        identity = f"{Path(python).resolve()}|{sys.version}|{torch_init}|{_mtime(torch_init)}"
        self.folder = root / hashlib.sha256(identity.encode()).hexdigest()[:16]

    def ready(self) -> Path | None:
        """The folder once it is complete (made in a temporary folder and renamed), else None."""
        return self.folder if self.needed and self.folder.is_dir() else None

    def make(self, timeout: float = 600) -> Path | None:
        """Make the folder unless it exists or torch has its own bytecode; blocks, also while
        another thread or process makes it. None when it cannot be made."""
        if not self.needed or self.ready():
            return self.ready()
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{self.folder.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.ready():
                return self.folder
            scratch = Path(tempfile.mkdtemp(prefix=f"{self.folder.name}.", dir=self.root))
            try:
                subprocess.run(
                    [self.python, "-I", "-X", f"pycache_prefix={scratch}", "-c", _WARM, str(WORKERS_DIR)],
                    capture_output=True,
                    timeout=timeout,
                    check=True,
                )
                scratch.chmod(0o755)
                scratch.rename(self.folder)
            except (OSError, subprocess.SubprocessError):
                return None  # workers then compile what they import, as without this cache
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        return self.folder

    def make_in_background(self) -> None:
        """Start `make` on a daemon thread, once per folder and process: sandboxes open at once."""
        if not self.needed or self.ready():
            return
        with _started_lock:
            if self.folder in _started:
                return
            _started.add(self.folder)
        threading.Thread(target=self.make, name="bytecode-cache", daemon=True).start()


def has_bytecode(source: Path) -> bool:
    """Whether `source` has a `.pyc` beside it (in its `__pycache__`)."""
    return Path(importlib.util.cache_from_source(str(source))).is_file()


def _torch_init(python: str) -> Path | None:
    if Path(python).resolve() != Path(sys.executable).resolve():
        return None  # another interpreter's torch: not ours to inspect without running it
    with contextlib.suppress(ImportError, ValueError):
        spec = importlib.util.find_spec("torch")
        if spec and spec.origin:
            return Path(spec.origin)
    return None


def _mtime(path: Path | None) -> int:
    with contextlib.suppress(OSError):
        return os.stat(path).st_mtime_ns if path else 0
    return 0
