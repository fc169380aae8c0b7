"""Workspace file tools: list, read, write, and edit by exact string replacement.

The model may create and change only its own files (`Workspace.is_model_file`: model_new.py and
kernels/*.cu|.cuh|.cpp|.h|.hpp); the harness-owned files can be read but never written.
"""

from __future__ import annotations

import os

from agent.workspace import HARNESS_FILES, KERNEL_SUFFIXES, MODEL_ENTRY
from sandbox.safe_files import SkippedEntry, UnsafePathError, iter_regular_files, read_regular
from sandbox.safe_files import write_file as write_workspace_file

from .base import ToolError, tool
from .context import ToolContext

MAX_READ_LINES = 2000
_HIDDEN = (".harness", "__pycache__", ".git")
_WRITABLE = f"{MODEL_ENTRY} and files under kernels/ ending in {', '.join(KERNEL_SUFFIXES)}"


def _check_writable(ctx: ToolContext, rel: str) -> None:
    if ctx.workspace.is_model_file(rel):
        return
    if rel in HARNESS_FILES:
        raise ToolError(f"{rel} is harness-owned and read-only. You may create or change {_WRITABLE}.")
    raise ToolError(f"{rel}: not a file you may write. You may create or change {_WRITABLE}.")


def _read_text(ctx: ToolContext, path: str) -> tuple[str, str]:
    rel, host = ctx.workspace_path(path)
    if host.is_dir():
        raise ToolError(f"{rel} is a folder; use list_files")
    skipped: list[SkippedEntry] = []
    data = read_regular(ctx.workspace.root, rel, skipped)
    if data is None and skipped:
        raise ToolError(f"{rel}: {skipped[0].reason}; the harness reads regular files only")
    if data is None:
        raise ToolError(f"{rel}: no such file; list_files shows what exists")
    try:
        return rel, data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{rel}: not a UTF-8 text file") from None


def _write(ctx: ToolContext, rel: str, content: str) -> None:
    try:
        write_workspace_file(ctx.workspace.root, rel, content.encode("utf-8"))
    except UnsafePathError as exc:
        raise ToolError(str(exc)) from None


def _line_summary(text: str) -> str:
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    return f"{lines} lines, {len(text.encode())} bytes"


@tool
def list_files(ctx: ToolContext, path: str = ".") -> str:
    """List the files of the workspace (or of one folder in it) with their sizes; harness-owned
    files are marked read-only.

    Args:
        path: Folder relative to the workspace root; "." for the whole workspace.
    """
    rel, host = ctx.workspace_path(path)
    if not host.is_dir():
        raise ToolError(f"{rel}: no such folder")
    rows = []
    skipped: list[SkippedEntry] = []
    for name in iter_regular_files(ctx.workspace.root, rel, None, skipped, exclude=_HIDDEN):
        mark = "" if ctx.workspace.is_model_file(name) else "  (read-only)"
        rows.append(f"{name}  {os.lstat(ctx.workspace.root / name).st_size} B{mark}")
    rows += [f"{entry.path}  ({entry.reason}: never read or built)" for entry in skipped]
    return "\n".join(rows) if rows else f"{rel}: no files yet"


@tool
def read_file(ctx: ToolContext, path: str, start_line: int = 1, max_lines: int = 400) -> str:
    """Read a text file of the workspace, e.g. reference.py (the task) or one of your kernels.

    Args:
        path: File path relative to the workspace root, e.g. kernels/relu.cu.
        start_line: First line to show (1-based).
        max_lines: Most lines to show (up to 2000).
    """
    rel, text = _read_text(ctx, path)
    lines = text.splitlines(keepends=True)
    first = max(1, start_line)
    last = min(len(lines), first - 1 + max(1, min(max_lines, MAX_READ_LINES)))
    if len(lines) and first > len(lines):
        raise ToolError(f"{rel} has {len(lines)} lines; start_line {start_line} is past the end")
    shown = "".join(lines[first - 1 : last])
    whole = first == 1 and last >= len(lines)
    head = f"{rel} ({_line_summary(text)})" if whole else f"{rel}: lines {first}-{last} of {len(lines)}"
    return f"{head}\n{shown}"


@tool
def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Create or overwrite one of your files (model_new.py or kernels/...) with the full content.

    Args:
        path: File path relative to the workspace root, e.g. kernels/relu.cu.
        content: The complete new text of the file.
    """
    rel, host = ctx.workspace_path(path)
    _check_writable(ctx, rel)
    existed = host.is_file()
    _write(ctx, rel, content)
    return f"{'overwrote' if existed else 'created'} {rel} ({_line_summary(content)})"


@tool
def edit_file(ctx: ToolContext, path: str, old_string: str, new_string: str) -> str:
    """Replace one exact occurrence of old_string with new_string in one of your files. old_string must
    match the file exactly (whitespace included) and occur exactly once; include surrounding lines to
    make it unique.

    Args:
        path: File path relative to the workspace root.
        old_string: The exact text to replace; must occur exactly once in the file.
        new_string: The text to put in its place.
    """
    rel, _ = ctx.workspace_path(path)
    _check_writable(ctx, rel)
    rel, text = _read_text(ctx, rel)
    if not old_string:
        raise ToolError("old_string is empty; to write a whole file use write_file")
    if old_string == new_string:
        raise ToolError("old_string and new_string are the same; nothing to change")
    count = text.count(old_string)
    if count == 0:
        raise ToolError(
            f"old_string not found in {rel}. Read the file again and copy the text exactly, whitespace included."
        )
    if count > 1:
        starts = _match_lines(text, old_string)
        raise ToolError(
            f"old_string occurs {count} times in {rel} (at lines {', '.join(map(str, starts))}); "
            "include more surrounding text so that it matches once"
        )
    at_line = text[: text.index(old_string)].count("\n") + 1
    _write(ctx, rel, text.replace(old_string, new_string, 1))
    return (
        f"edited {rel} at line {at_line}: {old_string.count(chr(10)) + 1} lines replaced by "
        f"{new_string.count(chr(10)) + 1}"
    )


def _match_lines(text: str, needle: str) -> list[int]:
    lines, start = [], 0
    while (found := text.find(needle, start)) != -1:
        lines.append(text[:found].count("\n") + 1)
        start = found + 1
    return lines
