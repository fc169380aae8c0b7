"""Define mode: one build per point, several at once, each in a slot of its own.

A slot is a copy of the workspace (model files and harness files) outside it, under the cache,
with its own `kernels/tune_config.h`. Slots are reused across points, so after the first build
of a slot ninja recompiles only the sources that include the header. The built .so lives in
the sandbox's shared build cache, where the tuning worker loads it from.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agent.build.compile import compile_solution
from agent.paths import cache_dir
from agent.tune.apply import write_tune_header
from agent.tune.space import Point, Space
from agent.workspace import HARNESS_FILES, Workspace
from sandbox.base import Sandbox, open_sandbox


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
        if not (slot / ".harness").is_dir():
            slot.mkdir(parents=True, exist_ok=True)
            (slot / ".harness").mkdir()
            for name in ("workspace.json", "reference.py"):
                source = self.workspace.root / ".harness" / name
                if source.is_file():
                    shutil.copy(source, slot / ".harness" / name)
        wanted = self.workspace.model_files()
        current = Workspace(slot).model_files()
        for rel in current.keys() - wanted.keys():
            (slot / rel).unlink()
        for rel, text in wanted.items():
            target = slot / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.is_file() or target.read_text(encoding="utf-8", errors="replace") != text:
                target.write_text(text, encoding="utf-8")
        for name in HARNESS_FILES:
            source = self.workspace.root / name
            if source.is_file() and name != "reference.py":
                target = slot / name
                if target.exists():
                    target.chmod(0o644)
                shutil.copy(source, target)
        return Workspace(slot)

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
