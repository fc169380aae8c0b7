"""Which files a compiler message may quote to the model: only the workspace's own.

A build sees more than the workspace (the toolchain's headers, and whatever else the sandbox can
read), and compilers quote what they include: `#include "/etc/shadow"` would put a line of that
file into an error. Every file a log names is classified here, as the sandbox saw it and on the
host: the workspace's files are quoted from the files themselves (read without following links,
so the quoted line is the one an edit matches, not the compiler's macro-expanded text); the
toolchain's headers are named, never quoted; any other file is one line saying it is outside.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sandbox.safe_files import read_text, write_file

FileKind = Literal["workspace", "generated", "toolchain", "outside"]
# The files torch's load_inline writes from a single-file solution's own strings.
GENERATED_NAMES = frozenset({"main.cpp", "cuda.cu", "cuda.min.cu", "cuda.lean.cu"})
MODEL_LOG = "compile.log"
_MAX_QUOTED_LINE = 400


@dataclass(frozen=True)
class SourceScope:
    """The workspace on the host and in the sandbox, and where a build's generated files live."""

    host_root: Path
    sandbox_root: str | None = None
    build_dir: str | None = None  # a single file's load_inline folder; None: any generated name
    toolchain: tuple[str, ...] = field(default_factory=lambda: toolchain_roots())

    def classify(self, named: str) -> tuple[FileKind, str]:
        """(kind, name to show): the workspace-relative path, or the path as the compiler gave it."""
        raw = named.strip()
        path = os.path.normpath(raw) if os.path.isabs(raw) else raw
        for root in (self.sandbox_root, str(self.host_root)):
            if root and os.path.isabs(path) and _under(path, os.path.normpath(root)):
                rel = os.path.relpath(path, os.path.normpath(root))
                return ("workspace", rel) if self._stays_inside(rel) else ("outside", path)
        if Path(path).name in GENERATED_NAMES and (
            self.build_dir is None or _under(path, os.path.normpath(self.build_dir))
        ):
            return "generated", Path(path).name
        if not os.path.isabs(path):
            # Builds name sources by absolute path; a relative name is relative to where the
            # compiler ran, so it is the workspace's only when the workspace has that file.
            inside = self._stays_inside(path) and os.path.lexists(os.path.join(self.host_root, path))
            return ("workspace", path) if inside else ("outside", path)
        if any(_under(path, root) for root in self.toolchain) and any(
            _under(os.path.realpath(path), root) for root in self.toolchain
        ):
            return "toolchain", path
        return "outside", path

    def _stays_inside(self, rel: str) -> bool:
        """`rel` names a workspace file that does not lead out of the workspace through a link."""
        if rel == ".." or rel.startswith("../") or os.path.isabs(rel):
            return False
        root = os.path.realpath(self.host_root)
        return _under(os.path.realpath(os.path.join(root, rel)), root)

    def own_line(self, rel: str, line: int) -> str | None:
        """Line `line` of the workspace file `rel`, read without following a link; None when the
        file is not a regular file of the workspace or has no such line."""
        try:
            text = read_text(self.host_root, rel)
        except (OSError, ValueError):  # UnsafePathError: an absolute path or '..'
            return None
        if text is None or line < 1:
            return None
        lines = text.splitlines()
        return lines[line - 1][:_MAX_QUOTED_LINE] if line <= len(lines) else None

    def exists_on_host(self, rel: str) -> bool:
        return os.path.lexists(os.path.join(self.host_root, rel))


def outside_note(shown: str) -> str:
    return (
        f"{shown} is outside the workspace: its text is not shown. Include only files of the "
        "workspace (kernels/...) and the toolchain's headers"
    )


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@functools.cache
def toolchain_roots() -> tuple[str, ...]:
    """Folders of the compilers' and torch's own headers: named in messages, never quoted."""
    roots = {"/usr/include", "/usr/lib/gcc", "/usr/local/include", "/usr/local/cuda"}
    roots.update(str(p) for p in Path("/usr/local").glob("cuda-*"))
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            roots.add(os.environ[variable])
    torch_spec = importlib.util.find_spec("torch")
    if torch_spec is not None and torch_spec.origin:
        roots.add(str(Path(torch_spec.origin).parent))
    for prefix in {sys.prefix, sys.base_prefix}:
        roots.add(os.path.join(prefix, "include"))
        roots.add(os.path.join(prefix, "lib"))
    expanded = set()
    for root in roots:
        expanded.add(os.path.normpath(root))
        expanded.add(os.path.realpath(root))
    return tuple(sorted(expanded))


# -- the log ------------------------------------------------------------------------------------
# A line naming a file: a compiler's diagnostic, gcc's include chain and context lines, a Python
# traceback frame. What follows such a line (an excerpt, a caret) belongs to the file it names.
_NAMED_FILE = re.compile(
    r"^(?:In file included from |\s+from |\s*File \")?"
    r"(?P<file>/[^\s:()\"]+|[\w.][\w./+-]*\.(?:cu|cuh|cpp|cc|c|h|hpp|hh|inl|inc|py))"
    r"(?:\(\d+\)|:|\",)"
)
_BOUNDARY = re.compile(
    r"^(?:\[\d+/\d+\] |FAILED: |ninja: |\d+ errors? detected|Traceback |Error building|"
    r"[A-Za-z_][\w.]*(?:Error|Exception): |--- )"
)


def confine_log(log: str, scope: SourceScope) -> str:
    """The log with nothing quoted from outside the workspace: a line naming an outside file
    becomes one note, and the lines quoting it (the excerpt under an error, a traceback's source
    line) are dropped; a toolchain header's lines are named but their excerpts dropped."""
    kept: list[str] = []
    quoting_outside = False
    noted: set[str] = set()
    for line in log.splitlines():
        named = _NAMED_FILE.match(line)
        kind = scope.classify(named.group("file"))[0] if named else None
        if kind is not None and named is not None:
            if kind == "outside":
                shown = scope.classify(named.group("file"))[1]
                if shown not in noted:
                    noted.add(shown)
                    kept.append(outside_note(shown))
                quoting_outside = True
                continue
            quoting_outside = kind == "toolchain"
            kept.append(line)
            continue
        if _BOUNDARY.match(line):
            quoting_outside = False
            kept.append(line)
            continue
        if not quoting_outside:
            kept.append(line)
    return "\n".join(kept) + ("\n" if log.endswith("\n") else "")


def write_model_log(root: Path, text: str) -> str | None:
    """Write `text` as the workspace's model-readable compile log (a link there is replaced, never
    followed); its workspace-relative path, or None when it cannot be written."""
    try:
        write_file(root, MODEL_LOG, text.encode("utf-8", errors="replace"))
    except OSError:  # UnsafePathError (a folder by that name), a full disk
        return None
    return MODEL_LOG
