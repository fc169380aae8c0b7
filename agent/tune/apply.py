"""Where a workspace keeps its tuned values, and writing the winner back.

Runtime mode: a module-level dict literal `TUNE = {"BLOCK": 256, ...}` in model_new.py, read by
`forward` on every call; the tuner sets its entries between measurements and rewrites the
literal with the winner. Define mode: `kernels/tune_config.h`, one `#define` per parameter
(each inside `#ifndef`, so a `-D` flag still wins), included by the kernels; each variant is
built with its own copy of that header, and the winner's is written back.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from agent.tune.space import Config
from sandbox.safe_files import read_regular, write_file

TUNE_NAME = "TUNE"
HEADER = "kernels/tune_config.h"
_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)\s+(-?\d+)\s*$", re.MULTILINE)


def _tune_assignment(source: str) -> ast.Assign | None:
    tree = ast.parse(source)
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == TUNE_NAME
        ):
            return node
    return None


def _read_workspace_text(path: Path) -> str | None:
    """The file's text, None when it is missing or not a regular file (a link is not followed)."""
    data = read_regular(path.parent, path.name)
    return None if data is None else data.decode("utf-8", errors="replace")


def read_tune_literal(path: Path) -> Config | None:
    """The TUNE dict of model_new.py (int values only), or None when there is none."""
    try:
        node = _tune_assignment(_read_workspace_text(Path(path)) or "")
    except (OSError, SyntaxError, ValueError):
        return None
    if node is None:
        return None
    try:
        value = ast.literal_eval(node.value)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return {str(k): int(v) for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool)}


def write_tune_literal(path: Path, values: Config) -> None:
    """Replace the values of the TUNE literal's keys, keeping any other key as it was."""
    path = Path(path)
    source = _read_workspace_text(path) or ""
    node = _tune_assignment(source)
    if node is None or not isinstance(node.value, ast.Dict):
        raise ValueError(
            f"{path.name} has no top-level `TUNE = {{...}}` dict literal to write the tuned values into"
        )
    current = ast.literal_eval(node.value)
    merged = {**current, **values}
    literal = "{" + ", ".join(f'"{k}": {v!r}' for k, v in merged.items()) + "}"
    lines = source.splitlines(keepends=True)
    start, end = node.value.lineno - 1, (node.value.end_lineno or node.value.lineno) - 1
    head = lines[start][: _byte_to_char(lines[start], node.value.col_offset)]
    tail = lines[end][_byte_to_char(lines[end], node.value.end_col_offset or 0) :]
    lines[start : end + 1] = [head + literal + tail]
    write_file(path.parent, path.name, "".join(lines).encode("utf-8"))


def _byte_to_char(line: str, offset: int) -> int:
    return len(line.encode("utf-8")[:offset].decode("utf-8", "replace"))


def header_text(values: Config, note: str = "") -> str:
    lines = [
        "// Written by the tuner (agent tune): the values of kernels/tune.json's parameters.",
        *([f"// {note}"] if note else []),
        "#pragma once",
    ]
    for name, value in values.items():
        lines += [f"#ifndef {name}", f"#define {name} {int(value)}", "#endif"]
    return "\n".join(lines) + "\n"


def read_tune_header(root: Path) -> Config | None:
    data = read_regular(Path(root), HEADER)
    if data is None:
        return None
    return {name: int(value) for name, value in _DEFINE.findall(data.decode("utf-8", errors="replace"))}


def write_tune_header(root: Path, values: Config, note: str = "") -> Path:
    write_file(Path(root), HEADER, header_text(values, note).encode("utf-8"))
    return Path(root) / HEADER
