"""How `agent tasks` reports task files that did not load: one line each, then one hint per cause a
user can act on (a Python package to install, a model that would be downloaded)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from agent.tasks import TaskLoadError

_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")
_HUB_DOWNLOAD = re.compile(r"huggingface\.co|Hugging Face Hub|HF_HUB_OFFLINE|offline mode", re.IGNORECASE)

# KernelBench's tasks import these beyond torch; kernel-agent's own install brings them.
KERNELBENCH_PACKAGES = ("einops", "transformers")


def first_line(error: TaskLoadError) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else str(error.path)


def load_hints(errors: Sequence[TaskLoadError]) -> list[str]:
    """One line per cause shared by the failed files, most files first."""
    missing: Counter[str] = Counter()
    downloads = 0
    for error in errors:
        found = _MISSING_MODULE.search(error.problem)
        if found:
            missing[found.group(1).split(".")[0]] += 1
        elif _HUB_DOWNLOAD.search(error.problem):
            downloads += 1
    hints = []
    for module, count in missing.most_common():
        install = (
            f"pip install {module} (kernel-agent's install includes it: pip install -e .)"
            if module in KERNELBENCH_PACKAGES
            else f"pip install {module} (if that is the package's name) in the environment kernel-agent runs in"
        )
        hints.append(f"{_files(count, 'import')} '{module}', which is not installed: {install}")
    if downloads:
        hints.append(
            f"{_files(downloads, 'load')} a Hugging Face model by name (from_pretrained) whose config does not "
            "come with kernel-agent (sandbox/workers/tasks/hub_configs); task files run with no network, so they "
            "cannot be loaded"
        )
    return hints


def print_load_errors(errors: Sequence[TaskLoadError], console: Console) -> None:
    for error in errors:
        console.print(f"[red]✗[/] {escape(first_line(error))}", highlight=False)
    for hint in load_hints(errors):
        console.print(f"hint: {hint}", highlight=False, markup=False)


def _files(count: int, verb: str) -> str:
    return f"1 task file {verb}s" if count == 1 else f"{count} task files {verb}"
