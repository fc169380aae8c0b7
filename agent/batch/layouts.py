"""Solution folders the batch can judge, matched to tasks, and copied before anything runs.

Two layouts are recognised anywhere under the folder given to `--solutions`:

- KernelBench's generations: `level_1_problem_19_sample_0_kernel.py` (one file, `ModelNew` built
  with `load_inline`), matched to the task by level and problem id; the candidate is `sample_0`.
- Our workspaces: `levelN/<task_stem>/` holding `model_new.py` and `kernels/`; a sibling
  `<task_stem>__<variant>/` is another candidate (`<variant>`) for the same task.

Compiling and judging write into the solution's folder (harness files, build logs, the referee's
exchange folder), so every candidate is copied into a fresh private folder first: a workspace
becomes `Workspace.create(task)` plus its model-owned files, a single file is copied alone.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from agent.batch.config import WorkItem
from agent.tasks import Task
from agent.workspace import MODEL_ENTRY, Workspace

GENERATION_FILE = re.compile(
    r"^level_(?P<level>\d+)_problem_(?P<problem>\d+)_sample_(?P<sample>\d+)_kernel\.py$"
)
VARIANT_SEPARATOR = "__"
_LEVEL_DIR = re.compile(r"^level[_-]?(\d+)$", re.IGNORECASE)
_PROBLEM_ID = re.compile(r"^(\d+)[_-]")


@dataclass
class Discovered:
    items: list[WorkItem] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    """Solutions that match no task, each with the reason."""


def discover_solutions(root: Path, tasks: list[Task]) -> Discovered:
    """Every candidate under `root`, in task order, each matched to one of `tasks`."""
    root = Path(root).resolve()
    index = _TaskIndex(tasks)
    found = Discovered()
    if not root.is_dir():
        found.unmatched.append(f"{root}: not a folder")
        return found
    for path in _walk(root):
        if path.is_file():
            match = GENERATION_FILE.match(path.name)
            assert match is not None
            task = index.by_level_and_id(int(match["level"]), int(match["problem"]))
            candidate = _qualified(path.parent, root, f"sample_{match['sample']}")
        else:
            stem, _, variant = path.name.partition(VARIANT_SEPARATOR)
            task = index.by_folder(stem, _level_of(path))
            candidate = _qualified(path.parent, root, variant or "base", skip_level=True)
        if task is None:
            found.unmatched.append(
                f"{path}: no task with this level and problem id/name among the tasks given"
            )
            continue
        found.items.append(WorkItem(task=task, candidate=candidate, source=path))
    order = {t.key: i for i, t in enumerate(tasks)}
    found.items.sort(key=lambda item: (order[item.task.key], item.candidate))
    _check_unique(found.items)
    return found


def copy_solution(item: WorkItem, dest: Path) -> Path:
    """A private copy of `item.source` at `dest`: the path to judge (a workspace or a .py file)."""
    source = item.source
    if source is None:
        raise ValueError(f"{item.label}: no solution to copy")
    if dest.exists():
        shutil.rmtree(dest)
    if source.is_file():
        dest.mkdir(parents=True)
        target = dest / source.name
        shutil.copyfile(source, target)
        return target
    files = Workspace(source).model_files()
    if MODEL_ENTRY not in files:
        raise FileNotFoundError(f"{source}: no {MODEL_ENTRY}")
    ws = Workspace.create(dest, item.task)
    for rel, text in files.items():
        target = ws.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return ws.root


class _TaskIndex:
    def __init__(self, tasks: list[Task]) -> None:
        self.tasks = tasks

    def by_level_and_id(self, level: int, problem_id: int) -> Task | None:
        hits = [t for t in self.tasks if t.level == level and t.problem_id == problem_id]
        return hits[0] if len(hits) == 1 else None

    def by_folder(self, stem: str, level: int | None) -> Task | None:
        same_level = [t for t in self.tasks if level is None or t.level == level]
        for hits in (
            [t for t in same_level if t.name == stem],
            [t for t in same_level if t.problem_id is not None and t.problem_id == _problem_id(stem)]
            if level is not None
            else [],
        ):
            if len(hits) == 1:
                return hits[0]
        return None


def _walk(root: Path) -> list[Path]:
    """Generation files and workspace folders; nothing inside a workspace is looked at."""
    found: list[Path] = []
    stack = [root]
    while stack:
        folder = stack.pop()
        if folder != root and (folder / MODEL_ENTRY).is_file():
            found.append(folder)
            continue
        for child in sorted(folder.iterdir()):
            if child.name.startswith((".", "_")):
                continue
            if child.is_dir():
                stack.append(child)
            elif GENERATION_FILE.match(child.name):
                found.append(child)
    return sorted(found)


def _level_of(folder: Path) -> int | None:
    for part in reversed(folder.parent.parts):
        match = _LEVEL_DIR.match(part)
        if match:
            return int(match.group(1))
    return None


def _problem_id(stem: str) -> int | None:
    match = _PROBLEM_ID.match(stem)
    return int(match.group(1)) if match else None


def _qualified(parent: Path, root: Path, name: str, *, skip_level: bool = False) -> str:
    """`name`, prefixed by the folders between `root` and it, so two runs' sample_0 stay apart."""
    parts = list(parent.relative_to(root).parts)
    if skip_level and parts and _LEVEL_DIR.match(parts[-1]):
        parts = parts[:-1]
    return "/".join([*parts, name])


def _check_unique(items: list[WorkItem]) -> None:
    seen: dict[str, Path | None] = {}
    for item in items:
        if item.item_key in seen:
            raise ValueError(
                f"two solutions for the same task and candidate: {seen[item.item_key]} and {item.source}"
            )
        seen[item.item_key] = item.source
