"""Define mode: one build per point, several at once, each in a slot of its own.

A slot is a copy of the workspace (model files and harness files) outside it, under the cache,
with its own `kernels/tune_config.h`. Slots are reused across points, so after the first build
of a slot ninja recompiles only the sources that include the header. The built .so lives in
the sandbox's shared build cache, where the tuning worker loads it from.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agent.build.compile import compile_solution
from agent.paths import cache_dir
from agent.tune.apply import write_tune_header
from agent.tune.space import Point, Space
from agent.workspace import HARNESS_FILES, Snapshot, Workspace
from sandbox.base import Sandbox, open_sandbox
from sandbox.safe_files import read_regular, write_file


class VariantBuilder:
    def __init__(
        self,
        workspace: Workspace,
        space: Space,
        *,
        sandbox_kind: str,
        arch: str | None,
        slots: int,
        timeout: float = 600,
        on_compile: Callable[[float], None] | None = None,
        root: Path | None = None,
    ) -> None:
        self.workspace = workspace
        self.space = space
        self.sandbox_kind = sandbox_kind
        self.arch = arch
        self.timeout = timeout
        self.on_compile = on_compile or (lambda _s: None)
        ident = hashlib.sha256(str(workspace.root).encode()).hexdigest()[:16]
        base = root or cache_dir() / "tune" / "slots" / ident
        self.slots = [base / f"slot_{i}" for i in range(max(1, slots))]
        self._boxes: dict[Path, Sandbox] = {}

    def _sync(self, slot: Path) -> Workspace:
        """Make `slot` hold the workspace's files; both folders are sandbox-writable, so files are
        read and written without following links (see sandbox/safe_files.py)."""
        source_root = self.workspace.root
        if read_regular(slot, ".harness/workspace.json") is None:
            slot.mkdir(parents=True, exist_ok=True)
            for name in (".harness/workspace.json", ".harness/reference.py"):
                if (data := read_regular(source_root, name)) is not None:
                    write_file(slot, name, data)
        ws = Workspace(slot)
        ws.restore(Snapshot(content_hash="", files=self.workspace.model_files()))
        for name in HARNESS_FILES:
            data = read_regular(source_root, name) if name != "reference.py" else None
            if data is not None and read_regular(slot, name) != data:
                write_file(slot, name, data, 0o444)
        return ws

    def _box(self, slot: Path) -> Sandbox:
        if slot not in self._boxes:
            self._boxes[slot] = open_sandbox(self.sandbox_kind, workspace=slot)
        return self._boxes[slot]

    def _build_one(self, slot: Path, point: Point) -> tuple[str | None, str]:
        ws = self._sync(slot)
        write_tune_header(slot, self.space.config(point), note=f"variant {self.space.describe(point)}")
        box = self._box(slot)
        result = compile_solution(ws, box, arch=self.arch, timeout=self.timeout)
        if not result.ok or result.module_path is None:
            return None, "compile error: " + (
                result.feedback(max_errors=1).splitlines()[1:2] or [result.message]
            )[0]
        # The slot's .so is rebuilt in place for its next point: keep this one under a name of its own.
        kept = f"{result.build_dir}/variant_{self.space.key(point).replace(',', '_')}.so"
        copied = box.exec(["cp", result.module_path, kept], timeout=120)
        if not copied.ok:
            return None, f"could not keep the built variant: {copied.describe_failure()}"
        return kept, ""

    def build(self, points: Sequence[Point]) -> list[tuple[str | None, str]]:
        """Build up to len(slots) points at a time; returns (module path or None, error) per point."""
        out: list[tuple[str | None, str]] = []
        started = time.monotonic()
        for i in range(0, len(points), len(self.slots)):
            chunk = points[i : i + len(self.slots)]
            with ThreadPoolExecutor(max_workers=len(chunk)) as pool:
                out.extend(pool.map(self._build_one, self.slots[: len(chunk)], chunk))
        self.on_compile(time.monotonic() - started)
        return out

    def close(self) -> None:
        for box in self._boxes.values():
            box.close()
        self._boxes.clear()
