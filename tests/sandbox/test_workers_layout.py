"""sandbox/workers/ keeps the shape its README maps: a folder per concern, module names unique across
them (the workers import each other by name alone), every script started by path reaching its
siblings through siblings.py, and nothing imported but torch, the standard library and each other."""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

from sandbox.base import WORKERS_DIR
from sandbox.workers import siblings

SCRIPTS = sorted(p for p in WORKERS_DIR.rglob("*.py") if "__pycache__" not in p.parts)
OWN_NAMES = {p.stem for p in SCRIPTS} | {"protocol"}
# hub_offline builds a level-4 task's Hugging Face model, and imports transformers only for such a task.
ALSO_ALLOWED = {"hub_offline.py": {"transformers", "huggingface_hub"}}


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_groups_are_the_folders_that_hold_workers() -> None:
    folders = {p.parent.name for p in SCRIPTS if p.parent != WORKERS_DIR} - {"protocol"}
    assert folders == set(siblings.GROUPS)
    for group in siblings.GROUPS:
        assert (WORKERS_DIR / group / "README.md").is_file(), f"{group}/ has no README.md"


def test_module_names_are_unique_across_the_groups() -> None:
    stems = Counter(p.stem for p in SCRIPTS if p.parent.name in siblings.GROUPS and p.stem != "__init__")
    assert [name for name, count in stems.items() if count > 1] == []


def test_every_script_started_by_path_imports_siblings_before_any_sibling() -> None:
    for path in SCRIPTS:
        source = path.read_text(encoding="utf-8")
        if 'if __name__ == "__main__"' not in source:
            continue
        lines = source.splitlines()
        first_sibling = next(
            (
                i
                for i, line in enumerate(lines)
                if line.startswith(("import ", "from "))
                and line.split()[1].split(".")[0] in OWN_NAMES - {"siblings"}
            ),
            len(lines),
        )
        assert "import siblings" in "\n".join(lines[:first_sibling]), path.relative_to(WORKERS_DIR)


def test_workers_import_only_torch_the_standard_library_and_each_other() -> None:
    for path in SCRIPTS:
        allowed = OWN_NAMES | {"torch"} | ALSO_ALLOWED.get(path.name, set())
        foreign = {n for n in _imported(path) if n not in allowed and n not in sys.stdlib_module_names}
        assert not foreign, f"{path.relative_to(WORKERS_DIR)} imports {sorted(foreign)}"
