"""Workspaces: the model's working folder, in CUDA-Agent's layout.

    reference.py          the task (harness-owned, read-only to the model)
    binding_registry.h    harness-owned: REGISTER_BINDING for kernels/*_binding.cpp
    binding.cpp           harness-owned: the module's PYBIND11_MODULE entry
    kernels/*.cu          model-owned: pure CUDA with extern "C" launchers
    kernels/*_binding.cpp model-owned: lean torch bindings (REGISTER_BINDING)
    model_new.py          model-owned: class ModelNew calling `cuda_extension`
    .harness/             harness state: manifest and snapshots

A KernelBench single-file solution (a `.py` with `ModelNew` built by `load_inline`) is the
other kind of solution the referee accepts; `open_solution` tells them apart.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel

from agent.paths import cache_dir, skills_dir
from agent.tasks import Task

DEFAULT_TEMPLATE = "cuda-extension"
HARNESS_FILES = ("reference.py", "binding_registry.h", "binding.cpp")
MODEL_ENTRY = "model_new.py"
KERNEL_SUFFIXES = (".cu", ".cuh", ".cpp", ".h", ".hpp", ".json")  # .json: kernels/tune.json
EXTENSION_NAME = "cuda_extension"


class WorkspaceError(Exception):
    """A workspace or solution path cannot be used; the message says why and what to do."""


class Snapshot(BaseModel):
    """The model's files at one moment, by content hash."""

    content_hash: str
    files: dict[str, str]


def content_hash(files: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    return digest.hexdigest()


class Workspace:
    kind: Literal["workspace"] = "workspace"

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()

    # -- creation -------------------------------------------------------------------------
    @classmethod
    def create(cls, root: Path, task: Task, *, template: str = DEFAULT_TEMPLATE) -> Workspace:
        root = Path(root)
        if root.exists() and any(root.iterdir()):
            raise WorkspaceError(f"{root}: folder exists and is not empty; pick a new workspace folder")
        (root / "kernels").mkdir(parents=True, exist_ok=True)
        ws = cls(root)
        ws._write_manifest({"task": task.name, "task_sha256": task.sha256, "template": template})
        ws.restore_harness_files(task_source=task.source)
        return ws

    @classmethod
    def open(cls, root: Path) -> Workspace:
        ws = cls(root)
        if not (ws.root / MODEL_ENTRY).is_file():
            raise WorkspaceError(
                f"{root}: not a workspace (no {MODEL_ENTRY}); see skills/{DEFAULT_TEMPLATE}/"
            )
        return ws

    def is_harness_made(self) -> bool:
        """Whether the harness created this workspace (its manifest is there), as opposed to a bare
        solution folder of model files only (benchmarks/solutions/...)."""
        return (self.root / ".harness" / "workspace.json").is_file()

    # -- files ----------------------------------------------------------------------------
    @property
    def entry(self) -> Path:
        return self.root / MODEL_ENTRY

    @property
    def template(self) -> str:
        return self._manifest().get("template", DEFAULT_TEMPLATE)

    def is_model_file(self, relpath: str) -> bool:
        """Whether the model may create or change `relpath` (relative to the workspace)."""
        path = PurePosixPath(relpath)
        if path.is_absolute() or ".." in path.parts or not path.parts:
            return False
        if str(path) == MODEL_ENTRY:
            return True
        return path.parts[0] == "kernels" and len(path.parts) >= 2 and path.suffix in KERNEL_SUFFIXES

    def model_files(self) -> dict[str, str]:
        """relative path -> text of every model-owned file."""
        files: dict[str, str] = {}
        if self.entry.is_file():
            files[MODEL_ENTRY] = self.entry.read_text(encoding="utf-8", errors="replace")
        kernels = self.root / "kernels"
        if kernels.is_dir():
            for path in sorted(kernels.rglob("*")):
                rel = path.relative_to(self.root).as_posix()
                if path.is_file() and self.is_model_file(rel):
                    files[rel] = path.read_text(encoding="utf-8", errors="replace")
        return files

    def sources(self) -> list[Path]:
        """Files the extension is built from: the harness entry plus kernels/*.cu and *.cpp."""
        kernels = sorted(
            p for p in (self.root / "kernels").rglob("*") if p.suffix in (".cu", ".cpp") and p.is_file()
        )
        return [self.root / "binding.cpp", *kernels]

    def content_hash(self) -> str:
        return content_hash(self.model_files())

    # -- harness-owned files --------------------------------------------------------------
    def restore_harness_files(self, task_source: str | None = None) -> list[str]:
        """Put the harness-owned files back as the harness made them; returns what had changed."""
        template_dir = skills_dir() / self.template / "template"
        wanted: dict[str, bytes] = {
            name: (template_dir / name).read_bytes() for name in HARNESS_FILES if name != "reference.py"
        }
        if task_source is not None:
            wanted["reference.py"] = task_source.encode()
        else:
            saved = self.root / ".harness" / "reference.py"
            if saved.is_file():
                wanted["reference.py"] = saved.read_bytes()
        changed = []
        for name, content in wanted.items():
            target = self.root / name
            if target.is_file() and target.read_bytes() == content:
                continue
            if target.exists():
                changed.append(name)
                target.chmod(0o644)
            target.write_bytes(content)
            target.chmod(0o444)
        if task_source is not None:
            saved = self.root / ".harness" / "reference.py"
            saved.parent.mkdir(parents=True, exist_ok=True)
            saved.write_bytes(task_source.encode())
        return changed

    # -- snapshots ------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        files = self.model_files()
        snap = Snapshot(content_hash=content_hash(files), files=files)
        store = self.root / ".harness" / "snapshots"
        store.mkdir(parents=True, exist_ok=True)
        (store / f"{snap.content_hash}.json").write_text(snap.model_dump_json())
        return snap

    def load_snapshot(self, content_hash_prefix: str) -> Snapshot:
        store = self.root / ".harness" / "snapshots"
        matches = sorted(store.glob(f"{content_hash_prefix}*.json")) if store.is_dir() else []
        if len(matches) != 1:
            raise WorkspaceError(f"{self.root}: no single snapshot matches {content_hash_prefix!r}")
        return Snapshot.model_validate_json(matches[0].read_text())

    def restore(self, snap: Snapshot) -> None:
        """Make the model's files exactly those of `snap` (files it lacks are removed)."""
        for rel in self.model_files():
            if rel not in snap.files:
                (self.root / rel).unlink()
        for rel, text in snap.files.items():
            target = self.root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")

    def copy_to(self, dest: Path) -> Workspace:
        """A copy of the workspace (model files, harness files, manifest) at `dest`."""
        dest = Path(dest)
        shutil.copytree(self.root, dest, ignore=shutil.ignore_patterns("snapshots", "__pycache__"))
        return Workspace(dest)

    # -- manifest -------------------------------------------------------------------------
    def _manifest(self) -> dict[str, str]:
        path = self.root / ".harness" / "workspace.json"
        return json.loads(path.read_text()) if path.is_file() else {}

    def _write_manifest(self, manifest: dict[str, str]) -> None:
        path = self.root / ".harness" / "workspace.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(manifest, indent=2))


class SingleFileSolution:
    """A KernelBench generation: one `.py` defining `ModelNew`, typically via `load_inline`."""

    kind: Literal["single_file"] = "single_file"

    def __init__(self, path: Path) -> None:
        self.path = Path(path).resolve()
        self.root = self.path.parent

    @property
    def entry(self) -> Path:
        return self.path

    def model_files(self) -> dict[str, str]:
        return {self.path.name: self.path.read_text(encoding="utf-8", errors="replace")}

    def content_hash(self) -> str:
        return content_hash(self.model_files())


Solution = Workspace | SingleFileSolution


def materialize(task: Task, path: Path) -> Solution:
    """The solution at `path`, ready to build: a bare solution folder (model files only, e.g.
    benchmarks/solutions/...) is copied into a scratch workspace made from the task, so judging
    never writes into the user's folder. Same folder and content -> same scratch workspace, so
    builds stay incremental across evaluations."""
    path = Path(path)
    if path.is_file() or (path / ".harness" / "workspace.json").is_file():
        return open_solution(path)
    source = open_solution(path)
    files = source.model_files()
    digest = hashlib.sha256(f"{path.resolve()}\0{task.sha256}\0{content_hash(files)}".encode()).hexdigest()
    root = cache_dir() / "workspaces" / digest[:20]
    if not (root / ".harness" / "workspace.json").is_file():
        staging = root.with_name(f"{root.name}.{os.getpid()}.{threading.get_ident()}")
        ws = Workspace.create(staging, task)
        for rel, text in files.items():
            target = ws.root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        try:
            staging.rename(root)
        except OSError:  # another evaluation of the same content got there first
            shutil.rmtree(staging, ignore_errors=True)
    return Workspace.open(root)


def build_copy(source: Workspace) -> Workspace:
    """A scratch workspace under the cache holding `source`'s model files, to build a bare solution
    folder without writing harness files into it. One per source folder: files are rewritten only
    when they changed, so ninja rebuilds only what did."""
    digest = hashlib.sha256(str(source.root).encode()).hexdigest()
    root = cache_dir() / "builds" / digest[:20]
    ws = Workspace(root)
    if not ws.is_harness_made():
        (root / "kernels").mkdir(parents=True, exist_ok=True)
        ws._write_manifest({"template": DEFAULT_TEMPLATE, "source": str(source.root)})
    files = source.model_files()
    for rel in ws.model_files():
        if rel not in files:
            (root / rel).unlink()
    for rel, text in files.items():
        target = root / rel
        if target.is_file() and target.read_text(encoding="utf-8", errors="replace") == text:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return ws


def open_solution(path: Path) -> Solution:
    """A workspace folder or a single-file solution, by what `path` is."""
    path = Path(path)
    if path.is_dir():
        return Workspace.open(path)
    if path.is_file() and path.suffix == ".py":
        text = path.read_text(encoding="utf-8", errors="replace")
        if "ModelNew" not in text:
            raise WorkspaceError(f"{path}: defines no `ModelNew`; a solution file declares class ModelNew")
        return SingleFileSolution(path)
    raise WorkspaceError(f"{path}: not a workspace folder or a .py solution file")
