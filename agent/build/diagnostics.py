"""Turn a compiler log (nvcc, g++, ptxas, the linker, a Python import) into the few errors a
model can act on: file, line, column and message of the first real errors, not the warnings."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from agent.build.source_scope import FileKind, SourceScope, confine_log

Severity = Literal["error", "warning"]


class Diagnostic(BaseModel):
    file: str | None = None
    line: int | None = None
    column: int | None = None
    severity: Severity = "error"
    message: str
    context: str = ""

    def render(self) -> str:
        where = self.file or "<build>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        # A Python error names itself (model_new.py:3: SyntaxError: ...); a compiler's gets its severity.
        named = _PY_EXC.match(self.message) or self.message.startswith("SyntaxError")
        text = f"{where}: {self.message}" if named else f"{where}: {self.severity}: {self.message}"
        return text + ("\n" + self.context if self.context else "")


_GCC = re.compile(
    r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|error|warning): (?P<msg>.*)$"
)
_NVCC = re.compile(
    r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?P<sev>catastrophic error|error|warning)(?: #[\w-]+)?: (?P<msg>.*)$"
)
_PTXAS = re.compile(r"^ptxas (?:fatal|error)\s*: (?P<msg>.*)$")
_LINKER = re.compile(r"^(?:/usr/bin/ld|ld|collect2|nvlink)[^:]*: (?:error: )?(?P<msg>.*)$")
_UNDEFINED = re.compile(r"undefined (?:reference to|symbol:?) [`'‘]?(?P<sym>[^'’`]+?)['’`]?\s*$")
_PY_EXC = re.compile(r"^(?P<exc>[A-Za-z_][\w.]*(?:Error|Exception)): (?P<msg>.*)$")
OUTSIDE_MESSAGE = (
    "outside the workspace: its text is not shown; include only workspace files (kernels/...) "
    "and the toolchain's headers"
)


def parse_log(
    log: str, *, root: Path | None = None, scope: SourceScope | None = None, limit: int = 50
) -> tuple[list[Diagnostic], int]:
    """(errors in order of appearance, deduplicated, at most `limit`; number of warnings).

    With a workspace (`scope`, or just its `root`), nothing outside it is quoted: a workspace
    file's line is quoted from the file itself, a toolchain header is named only, and any other
    file is named with a note that it is outside."""
    if scope is None and root is not None:
        scope = SourceScope(host_root=root)
    errors: list[Diagnostic] = []
    seen: set[tuple[str | None, int | None, str]] = set()
    warnings = 0
    lines = log.splitlines()
    for index, raw in enumerate(lines):
        found = _match(raw.rstrip(), scope)
        if found is None:
            continue
        diag, kind = found
        if diag.severity == "warning":
            warnings += 1
            continue
        key = (diag.file, diag.line, diag.message)
        if key in seen:
            continue
        seen.add(key)
        diag.context = _quoted(diag, kind, scope, lines, index)
        errors.append(diag)
    if not errors:
        errors += _fallback(confine_log(log, scope).splitlines() if scope is not None else lines)
    return errors[:limit], warnings


def _match(line: str, scope: SourceScope | None) -> tuple[Diagnostic, FileKind | None] | None:
    for pattern in (_NVCC, _GCC):
        m = pattern.match(line)
        if m:
            severity: Severity = "warning" if m.group("sev") == "warning" else "error"
            col = m.groupdict().get("col")
            named = m.group("file")
            kind, shown = scope.classify(named) if scope is not None else (None, _short_name(named))
            if kind == "outside":
                return Diagnostic(file=shown, severity=severity, message=OUTSIDE_MESSAGE), kind
            diag = Diagnostic(
                file=shown,
                line=int(m.group("line")),
                column=int(col) if col else None,
                severity=severity,
                message=m.group("msg").strip(),
            )
            return diag, kind
    m = _PTXAS.match(line)
    if m:
        return Diagnostic(message="ptxas: " + m.group("msg").strip()), None
    if "undefined reference" in line or "undefined symbol" in line:
        sym = _UNDEFINED.search(line)
        name = sym.group("sym") if sym else line.strip()
        message = f'undefined symbol {name} (declared but never defined, or not extern "C" on both sides)'
        return Diagnostic(message=message), None
    m = _LINKER.match(line)
    if m and ("cannot find" in line or "error" in line):
        return Diagnostic(message="linker: " + m.group("msg").strip()), None
    return None


def _short_name(file: str) -> str:
    # Without a workspace to tell by, an absolute path (a single file's generated main.cpp /
    # cuda.cu) is named by its file name: the model never saw the build folder.
    path = Path(file.strip())
    return path.name if path.is_absolute() else file.strip()


def _quoted(
    diag: Diagnostic, kind: FileKind | None, scope: SourceScope | None, lines: list[str], index: int
) -> str:
    """What is shown under an error: a workspace file's own line (the compiler's excerpt is
    macro-expanded, so an edit copied from it would not match), the excerpt of a generated file
    (moved to the solution's line later), nothing from anywhere else."""
    if kind in ("outside", "toolchain"):
        return ""
    if kind == "workspace" and scope is not None and diag.file and diag.line is not None:
        own = scope.own_line(diag.file, diag.line)
        if own is not None:
            return own
        if scope.exists_on_host(diag.file):
            return ""  # a link or a special file: never quoted
    return _context(lines, index)


def _context(lines: list[str], index: int) -> str:
    """The source line and caret that compilers print after an error, when present."""
    following = []
    for line in lines[index + 1 : index + 4]:
        if (
            not line.strip()
            or _GCC.match(line)
            or _NVCC.match(line)
            or line.startswith(("FAILED", "[", "ninja"))
        ):
            break
        following.append(line.rstrip())
    return "\n".join(following[:3])


def _fallback(lines: list[str]) -> list[Diagnostic]:
    # No compiler diagnostics: a Python exception (single-file import), or a tool failure.
    for line in reversed(lines):
        m = _PY_EXC.match(line.strip())
        if m:
            return [Diagnostic(message=f"{m.group('exc')}: {m.group('msg')}")]
    # A configure step that failed before any compiler ran (torch rejecting TORCH_CUDA_ARCH_LIST,
    # a missing toolkit): its first real error line, not the generic "Error building extension".
    for line in lines:
        if _CONFIGURE_ERROR.search(line) and not line.lstrip().startswith(("warning", "Warning", "File ")):
            return [Diagnostic(message=line.strip()[:500])]
    for line in lines:
        if line.startswith("FAILED:") or "Error building extension" in line:
            return [Diagnostic(message=line.strip()[:500])]
    return []


_CONFIGURE_ERROR = re.compile(
    r"Unknown CUDA arch|not supported|No such file or directory|not found|CUDA_HOME|\berror\b", re.IGNORECASE
)
