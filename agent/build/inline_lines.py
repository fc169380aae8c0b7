"""Where an error in a `load_inline` build is in the solution the model wrote.

torch writes a single file's sources to `main.cpp` and `cuda.cu` in its build folder, behind
implicit headers; the compiler's errors name those files. A string literal passed to load_inline
(directly, or through a module-level name) is found in the solution, so `cuda.cu:14` becomes
`solution.py:52`: the line the model can edit, quoted from the solution itself. Literals whose
lines cannot be counted in the source (escapes like "\\n" in a one-line string, f-strings,
concatenation) keep the generated name.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from agent.build.diagnostics import Diagnostic

# The lines torch's load_inline puts before the sources it is given (no_implicit_headers=False).
IMPLICIT_HEADER_LINES = {"main.cpp": 1, "cuda.cu": 3}
_ARGUMENTS = {"main.cpp": ("cpp_sources", 1), "cuda.cu": ("cuda_sources", 2)}


@dataclass(frozen=True)
class SourceSpan:
    """Lines `first..last` of a generated file come from .py lines starting at `py_line`."""

    first: int
    last: int
    py_line: int


def locate(diagnostics: list[Diagnostic], solution: Path) -> list[Diagnostic]:
    """The diagnostics, those in main.cpp/cuda.cu moved to the solution's own lines."""
    try:
        source = solution.read_text()
        spans = generated_spans(source)
    except (OSError, SyntaxError, ValueError):
        return diagnostics
    source_lines = source.splitlines()
    located = []
    for diag in diagnostics:
        generated = "cuda.cu" if diag.file in ("cuda.min.cu", "cuda.lean.cu") else diag.file
        span = next(
            (
                s
                for s in spans.get(generated or "", [])
                if diag.line is not None and s.first <= diag.line <= s.last
            ),
            None,
        )
        if span is None or diag.line is None:
            located.append(diag)
            continue
        line = span.py_line + diag.line - span.first
        where = f"(in {generated}:{diag.line}, the file load_inline wrote)"
        # The solution's own line, not the compiler's macro-expanded excerpt: an edit copied
        # from it matches the file.
        own = source_lines[line - 1] if 0 < line <= len(source_lines) else ""
        located.append(
            diag.model_copy(
                update={"file": solution.name, "line": line, "context": where + ("\n" + own if own else "")}
            )
        )
    return located


def generated_spans(source: str) -> dict[str, list[SourceSpan]]:
    """For each generated file, the spans that come from string literals of the solution; only
    when the solution calls load_inline once (two calls write two folders we cannot tell apart)."""
    tree = ast.parse(source)
    names = _module_strings(tree)
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and _called(node) == "load_inline"]
    if len(calls) != 1 or _flag(calls[0], "no_implicit_headers"):
        return {}
    spans: dict[str, list[SourceSpan]] = {}
    for generated, (keyword, position) in _ARGUMENTS.items():
        literals = _literals(_argument(calls[0], keyword, position), names)
        line = IMPLICIT_HEADER_LINES[generated] + 1
        for literal in literals:
            count = literal.value.count("\n") + 1  # type: ignore[union-attr]
            if _lines_match(source, literal):
                spans.setdefault(generated, []).append(SourceSpan(line, line + count - 1, literal.lineno))
            line += count  # torch joins the sources with "\n"
    return spans


def _called(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _flag(call: ast.Call, name: str) -> bool:
    value = next((k.value for k in call.keywords if k.arg == name), None)
    return isinstance(value, ast.Constant) and bool(value.value)


def _argument(call: ast.Call, keyword: str, position: int) -> ast.expr | None:
    for item in call.keywords:
        if item.arg == keyword:
            return item.value
    return call.args[position] if len(call.args) > position else None


def _module_strings(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level `NAME = <expr>` assignments (the last one wins, as at import)."""
    found: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
    return found


def _literals(node: ast.expr | None, names: dict[str, ast.expr]) -> list[ast.Constant]:
    if isinstance(node, ast.Name) and node.id in names:
        node = names[node.id]
    items = node.elts if isinstance(node, ast.List | ast.Tuple) else [node]
    literals = []
    for item in items:
        if isinstance(item, ast.Name) and item.id in names:
            item = names[item.id]
        if not (isinstance(item, ast.Constant) and isinstance(item.value, str)):
            return []  # something we cannot count: no span after it would be right
        literals.append(item)
    return literals


def _lines_match(source: str, literal: ast.Constant) -> bool:
    """The literal's text spans as many source lines as its value has: no escaped newlines."""
    segment = ast.get_source_segment(source, literal)
    return segment is not None and segment.count("\n") == literal.value.count("\n")  # type: ignore[union-attr]
