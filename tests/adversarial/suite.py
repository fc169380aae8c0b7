"""The adversarial suite's candidates: where they live, what each must get, how to build one.

A candidate is a folder under candidates/ with an expected.json and either a workspace
(model_new.py + kernels/) or a single-file solution (solution.py). A legitimate solution may
instead point at one of benchmarks/solutions/ ("solution": "level1/19_ReLU").

expected.json:
  task       benchmarks/tasks/<task>.py, e.g. "level1/19_ReLU"
  verdict    the verdict the referee must give on the GPU
  accept     optional: other verdicts that are an equally correct rejection
  why        what the candidate does and what must catch it
  pattern    the pattern id (docs/referee-hardening.md), e.g. "B3"; "legit" for the must-pass set
  catch      yes (rejected), flagged (passes, with a flag or a static finding), neutralized
             (passes, but the defense removes the advantage), no (not caught; documented)
  policy     strict | kernelbench (kernelbench isolates the defense under test from the op policy)
  precision  optional: the precision policy it is judged under (docs/precision.md; default fp32)
  profile    whether timing/profiling must run (timing attacks only)
  flag       optional: a performance flag code the result must carry
  static     optional: codes agent.referee.guard_static must report
  quiet      optional: judged alone after the others, against baselines timed alone (attacks on
             timing, and C1's race, whose defenses need a GPU and CPUs nobody else is using)
  cpu_task   optional: tests/adversarial/tasks/<name>.py for the CPU end-to-end subset
  cpu_verdict optional: the verdict on the CPU (defaults to `verdict`)
  cpu_flag   optional: the flag on the CPU (defaults to `flag`; null: none, the CPU has no bandwidth floor)
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.tasks import Task
from agent.workspace import Workspace

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CANDIDATES = HERE / "candidates"
CPU_TASKS = HERE / "tasks"
TASKS = ROOT / "benchmarks" / "tasks"
SOLUTIONS = ROOT / "benchmarks" / "solutions"
VERDICTS = {"correct", "incorrect", "policy_violation", "runtime_error", "timeout", "compile_error"}
CATCHES = {"yes", "flagged", "neutralized", "no"}


@dataclass(frozen=True)
class Candidate:
    name: str
    folder: Path
    expected: dict[str, Any] = field(hash=False, compare=False)

    @property
    def task_path(self) -> Path:
        return TASKS / f"{self.expected['task']}.py"

    @property
    def kind(self) -> str:
        if "solution" in self.expected:
            return "workspace"
        return "single_file" if (self.folder / "solution.py").is_file() else "workspace"

    @property
    def source_dir(self) -> Path:
        """Where the candidate's own files are (a benchmark solution for the legit set)."""
        return SOLUTIONS / self.expected["solution"] if "solution" in self.expected else self.folder

    @property
    def verdicts(self) -> set[str]:
        return {self.expected["verdict"], *self.expected.get("accept", [])}

    @property
    def policy(self) -> str:
        return self.expected.get("policy", "strict")

    @property
    def precision(self) -> str:
        return self.expected.get("precision", "fp32")

    @property
    def profile(self) -> bool:
        return bool(self.expected.get("profile", False))

    def sources(self) -> dict[str, str]:
        """Every source the candidate wrote, by relative path (for the static guard)."""
        base = self.source_dir
        files = {}
        for path in sorted(base.rglob("*")):
            wanted = path.suffix in (".py", ".cu", ".cuh", ".cpp", ".h", ".hpp")
            if (
                path.is_file()
                and wanted
                and path.name not in ("binding.cpp", "binding_registry.h", "reference.py")
            ):
                files[path.relative_to(base).as_posix()] = path.read_text(errors="replace")
        return files


def load_candidates() -> list[Candidate]:
    found = []
    for folder in sorted(p for p in CANDIDATES.iterdir() if (p / "expected.json").is_file()):
        expected = json.loads((folder / "expected.json").read_text())
        found.append(Candidate(folder.name, folder, expected))
    return found


def materialize(candidate: Candidate, task: Task, dest: Path) -> Path:
    """The candidate as the referee sees a model's work: a fresh workspace made from the task
    (harness files and reference.py included) with the candidate's files copied in, or its
    single solution file."""
    if candidate.kind == "single_file":
        dest.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy(candidate.folder / "solution.py", dest / "solution.py"))
    Workspace.create(dest, task)
    source = candidate.source_dir
    shutil.copy(source / "model_new.py", dest / "model_new.py")
    for path in sorted((source / "kernels").glob("*")):
        shutil.copy(path, dest / "kernels" / path.name)
    return dest


@dataclass
class Row:
    candidate: str
    pattern: str
    expected: str
    got: str
    catch: str
    ok: bool
    note: str = ""


def summary_table(rows: list[Row]) -> str:
    header = f"{'candidate':38} {'pattern':7} {'expected':17} {'got':17} {'catch':11} ok"
    lines = [header, "-" * len(header)]
    for r in sorted(rows, key=lambda r: (r.pattern, r.candidate)):
        mark = "PASS" if r.ok else "FAIL"
        lines.append(f"{r.candidate:38} {r.pattern:7} {r.expected:17} {r.got:17} {r.catch:11} {mark}")
        if r.note:
            lines.append(f"    {r.note[:160]}")
    failed = sum(not r.ok for r in rows)
    lines.append(f"{len(rows)} candidates, {len(rows) - failed} as expected, {failed} not")
    return "\n".join(lines)


SUMMARIES: list[str] = []  # printed at the end of the session by conftest.py


def write_summary(rows: list[Row], title: str) -> str:
    text = f"== {title}\n{summary_table(rows)}\n"
    SUMMARIES.append(text)
    out = os.environ.get("KERNEL_AGENT_SUITE_OUT")
    if out:
        with open(out, "a", encoding="utf-8") as handle:
            handle.write(text)
    return text
