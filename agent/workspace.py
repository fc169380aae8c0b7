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
import logging
import os
import shutil
import threading
from collections.abc import Collection
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, Field

from agent.paths import cache_dir, skills_dir
from agent.tasks import Task
from sandbox.safe_files import (
    SkippedEntry,
    UnsafePathError,
    copy_tree_regular,
    iter_regular_files,
    read_regular,
    read_text,
    remove_file,
    write_file,
)

DEFAULT_TEMPLATE = "cuda-extension"
HARNESS_FILES = ("reference.py", "binding_registry.h", "binding.cpp")
MODEL_ENTRY = "model_new.py"
KERNEL_SUFFIXES = (".cu", ".cuh", ".cpp", ".h", ".hpp", ".json")  # .json: kernels/tune.json
EXTENSION_NAME = "cuda_extension"
SNAPSHOTS = ".harness/snapshots"
MANIFEST = ".harness/workspace.json"
SAVED_REFERENCE = ".harness/reference.py"

log = logging.getLogger(__name__)


class WorkspaceError(Exception):
    """A workspace or solution path cannot be used; the message says why and what to do."""


class Snapshot(BaseModel):
    """The model's files at one moment, by content hash."""

    content_hash: str
    files: dict[str, str]
    skipped: list[str] = Field(
        default_factory=list,
        description="entries of the workspace left out (links, FIFOs, hard links...), one line each",
    )


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
        return read_regular(self.root, MANIFEST) is not None

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

    def model_files(self, skipped: list[SkippedEntry] | None = None) -> dict[str, str]:
        """relative path -> text of every model-owned file that is a regular file; links (never
        followed), hard links, FIFOs and devices are left out and noted in `skipped`."""
        files: dict[str, str] = {}
        entry = read_text(self.root, MODEL_ENTRY, skipped)
        if entry is not None:
            files[MODEL_ENTRY] = entry
        for rel in iter_regular_files(self.root, "kernels", KERNEL_SUFFIXES, skipped):
            if self.is_model_file(rel) and (text := read_text(self.root, rel, skipped)) is not None:
                files[rel] = text
        return files

    def sources(self) -> list[Path]:
        """Files the extension is built from: the harness entry plus kernels/*.cu and *.cpp (regular
        files only, as in the snapshot)."""
        kernels = [self.root / rel for rel in iter_regular_files(self.root, "kernels", (".cu", ".cpp"))]
        return [self.root / "binding.cpp", *kernels]

    def content_hash(self) -> str:
        return content_hash(self.model_files())

    # -- harness-owned files --------------------------------------------------------------
    def restore_harness_files(self, task_source: str | None = None) -> list[str]:
        """Put the harness-owned files back as the harness made them; returns what had changed. A
        link or hard link in their place is replaced, never written through. Raises UnsafePathError
        when one of them is a folder."""
        template_dir = skills_dir() / self.template / "template"
        wanted: dict[str, bytes] = {
            name: (template_dir / name).read_bytes() for name in HARNESS_FILES if name != "reference.py"
        }
        if task_source is not None:
            wanted["reference.py"] = task_source.encode()
        elif (saved := read_regular(self.root, SAVED_REFERENCE)) is not None:
            wanted["reference.py"] = saved
        changed = []
        for name, content in wanted.items():
            if read_regular(self.root, name) == content:
                continue
            if os.path.lexists(self.root / name):
                changed.append(name)
            write_file(self.root, name, content, 0o444)
        if task_source is not None:
            write_file(self.root, SAVED_REFERENCE, task_source.encode())
        return changed

    # -- snapshots ------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The model's files now, also stored under .harness/snapshots (unless a link is there)."""
        skipped: list[SkippedEntry] = []
        files = self.model_files(skipped)
        snap = Snapshot(content_hash=content_hash(files), files=files, skipped=[s.line() for s in skipped])
        for line in snap.skipped:
            log.warning("workspace %s: %s", self.root, line)
        try:
            write_file(self.root, f"{SNAPSHOTS}/{snap.content_hash}.json", snap.model_dump_json().encode())
        except UnsafePathError as exc:
            log.warning("workspace %s: snapshot not stored: %s", self.root, exc)
        return snap

    def load_snapshot(self, content_hash_prefix: str) -> Snapshot:
        matches = [
            rel
            for rel in iter_regular_files(self.root, SNAPSHOTS, (".json",))
            if PurePosixPath(rel).name.startswith(content_hash_prefix)
        ]
        data = read_regular(self.root, matches[0]) if len(matches) == 1 else None
        if data is None:
            raise WorkspaceError(f"{self.root}: no single snapshot matches {content_hash_prefix!r}")
        return Snapshot.model_validate_json(data)

    def restore(self, snap: Snapshot) -> None:
        """Make the model's files exactly those of `snap` (files it lacks are removed); a link in
        the way is replaced, never written through."""
        for rel in snap.files:
            if not self.is_model_file(rel):
                raise WorkspaceError(f"snapshot {snap.content_hash[:12]}: {rel} is not a model file")
        for rel in self.model_files():
            if rel not in snap.files:
                remove_file(self.root, rel)
        for rel, text in snap.files.items():
            data = text.encode("utf-8")
            if read_regular(self.root, rel) != data:
                write_file(self.root, rel, data)

    def copy_to(
        self, dest: Path, *, exclude: Collection[str] = (), skipped: list[SkippedEntry] | None = None
    ) -> Workspace:
        """A copy of the workspace's regular files (model files, harness files, manifest) at `dest`;
        links, FIFOs and devices are not copied and are noted in `skipped`."""
        left_out = copy_tree_regular(self.root, Path(dest), exclude=(SNAPSHOTS, "__pycache__", *exclude))
        if skipped is not None:
            skipped.extend(left_out)
        return Workspace(dest)

    # -- manifest -------------------------------------------------------------------------
    def _manifest(self) -> dict[str, str]:
        data = read_regular(self.root, MANIFEST)
        return json.loads(data) if data is not None else {}

    def _write_manifest(self, manifest: dict[str, str]) -> None:
        write_file(self.root, MANIFEST, json.dumps(manifest, indent=2).encode())


class SingleFileSolution:
    """A KernelBench generation: one `.py` defining `ModelNew`, typically via `load_inline`.

    `path` is the file that builds and runs and `root` its folder, the sandbox's writable
    workspace; `source` is the file the user named. `stage` makes `root` a harness-made copy, so
    the user's folder is never writable to the code in the file."""

    kind: Literal["single_file"] = "single_file"

    def __init__(self, path: Path, *, source: Path | None = None) -> None:
        self.path = Path(path).resolve()
        self.root = self.path.parent
        self.source = Path(source).resolve() if source is not None else self.path

    @classmethod
    def stage(cls, source: Path) -> SingleFileSolution:
        """A copy of `source` in a folder of its own under the harness cache, keyed by the file's
        path and content (the same file again reuses its folder and build). The copy is written
        afresh each time: whatever ran there before cannot have changed what is built now."""
        source = Path(source).resolve()
        try:
            data = source.read_bytes()
        except OSError as exc:
            raise WorkspaceError(
                f"{source}: cannot be read ({exc.strerror}); give a regular .py file"
            ) from None
        root = cls.staging_root(source, data)
        root.mkdir(parents=True, exist_ok=True)
        try:
            write_file(root, source.name, data)
        except UnsafePathError as exc:
            raise WorkspaceError(
                f"{root}: cannot stage {source.name} there ({exc}); remove that folder"
            ) from None
        return cls(root / source.name, source=source)

    @staticmethod
    def staging_root(source: Path, data: bytes) -> Path:
        """The folder `stage` copies the file at `source` (resolved) with content `data` into."""
        digest = hashlib.sha256(str(source).encode() + b"\0" + data).hexdigest()
        return cache_dir() / "single-file" / digest[:20]

    @property
    def entry(self) -> Path:
        return self.path

    def model_files(self) -> dict[str, str]:
        skipped: list[SkippedEntry] = []
        text = read_text(self.root, self.path.name, skipped)
        if text is None:
            why = skipped[0].reason if skipped else "no such file"
            raise WorkspaceError(f"{self.path}: cannot be read ({why}); give a regular .py file")
        return {self.path.name: text}

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
            write_file(ws.root, rel, text.encode("utf-8"))
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
    ws.restore(Snapshot(content_hash="", files=source.model_files()))
    return ws


def open_solution(path: Path) -> Solution:
    """A workspace folder or a single-file solution, by what `path` is; a single file is staged
    into a harness-made folder (`SingleFileSolution.stage`), never built or run beside itself."""
    path = Path(path)
    if path.is_dir():
        return Workspace.open(path)
    if path.is_file() and path.suffix == ".py":
        text = path.read_text(encoding="utf-8", errors="replace")
        if "ModelNew" not in text:
            raise WorkspaceError(f"{path}: defines no `ModelNew`; a solution file declares class ModelNew")
        return SingleFileSolution.stage(path)
    raise WorkspaceError(f"{path}: not a workspace folder or a .py solution file")
