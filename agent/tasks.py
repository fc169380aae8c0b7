"""Tasks: KernelBench-style module files (`Model`, `get_inputs`, `get_init_inputs`).

A task file is parsed here without running it; running it (to learn its input spec) happens
in a sandbox (the one candidates run in: allowlisted environment, no network, a private home and
/tmp, only a scratch copy writable), so no task can reach the harness, its keys or its globals.
"""

from __future__ import annotations

import ast
import hashlib
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, Field

from sandbox.workers.protocol import InspectResult, TaskFailed, TaskInspected, TaskProblem
from sandbox.workers.protocol import parse as parse_worker_result

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
_LEVEL_DIR = re.compile(r"^level[_-]?(\d+)$", re.IGNORECASE)
_PROBLEM_ID = re.compile(r"^(\d+)[_-]")
INSPECT_FILE_SIZE_LIMIT = 256 * 2**20
"""The largest file a task may write while it is inspected (RLIMIT_FSIZE): shapes need no files."""


class TaskLoadError(Exception):
    """A task file cannot be used; the message names the file and the problem."""

    def __init__(self, path: Path, problem: str, *, line: int | None = None) -> None:
        super().__init__(f"{path}:{line}: {problem}" if line is not None else f"{path}: {problem}")
        self.path = path
        self.problem = problem
        self.line = line


class ArgSpec(BaseModel):
    """One value that `get_inputs()` or `get_init_inputs()` returns."""

    kind: Literal["tensor", "int", "float", "bool", "none", "list", "tuple", "other"]
    shape: list[int] | None = None
    dtype: str | None = None
    device: str | None = None
    value: str | None = None
    items: list[ArgSpec] | None = None

    def describe(self) -> str:
        if self.kind == "tensor":
            return f"{self.dtype}[{', '.join(map(str, self.shape or []))}]"
        if self.items is not None:
            inner = ", ".join(item.describe() for item in self.items)
            return f"({inner})" if self.kind == "tuple" else f"[{inner}]"
        return self.value if self.value is not None else self.kind

    @property
    def nbytes(self) -> int:
        if self.kind != "tensor" or self.shape is None:
            return sum(item.nbytes for item in self.items or [])
        count = 1
        for dim in self.shape:
            count *= dim
        return count * _DTYPE_BYTES.get(self.dtype or "", 4)


_DTYPE_BYTES = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2}


class InputSpec(BaseModel):
    """What a task's model is built from and called with, learned by running it once."""

    inputs: list[ArgSpec]
    init_inputs: list[ArgSpec]
    parameters: int = Field(description="number of parameter elements in Model(*init_inputs)")
    buffers: int = 0
    built_on: str = Field(
        default="meta", description='"meta" (shapes only, nothing allocated) or "cpu (on meta: WHY)"'
    )
    outputs: list[ArgSpec] | None = Field(
        default=None, description="what forward returns, from a call on meta; None where it cannot run there"
    )

    def describe(self) -> str:
        return ", ".join(arg.describe() for arg in self.inputs)


class Task(BaseModel):
    path: Path
    name: str
    level: int | None = None
    problem_id: int | None = None
    sha256: str = Field(description="content hash of the task file")
    spec: InputSpec | None = Field(default=None, description="set once instantiated")

    @property
    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def key(self) -> str:
        """Identity for caches and stores: level, name and content hash."""
        level = f"level{self.level}/" if self.level is not None else ""
        return f"{level}{self.name}@{self.sha256[:12]}"


class TaskRef(BaseModel):
    """Which task a verdict or a transcript is about (the referee's results, the transcript header)."""

    name: str
    key: str
    sha256: str
    path: str
    level: int | None = None
    problem_id: int | None = None

    @classmethod
    def of(cls, task: Task) -> TaskRef:
        return cls(
            name=task.name,
            key=task.key,
            sha256=task.sha256,
            path=str(task.path),
            level=task.level,
            problem_id=task.problem_id,
        )


def parse_task(path: Path) -> Task:
    """Read and statically check one task file without running any of it."""
    path = Path(path)
    if path.is_dir():
        raise TaskLoadError(path, "is a folder; give a task file (a .py defining Model)")
    if not path.is_file():
        raise TaskLoadError(path, "no such file")
    raw = path.read_bytes()
    if path.suffix != ".py":
        raise TaskLoadError(path, "not a Python file (task files end in .py)")
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark is valid Python source, as it runs
    except UnicodeDecodeError:
        raise TaskLoadError(path, "not a Python file (it is not UTF-8 text)") from None
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise TaskLoadError(path, f"SyntaxError: {exc.msg}", line=exc.lineno) from None
    defined = _top_level_names(tree)
    missing = [name for name in REQUIRED_NAMES if name not in defined]
    if missing:
        names = ", ".join(f"`{name}`" for name in missing)
        raise TaskLoadError(
            path,
            f"missing {names}: a task defines class Model(nn.Module), get_inputs() and get_init_inputs()",
        )
    level, problem_id = _level_and_id(path)
    return Task(
        path=path.resolve(),
        name=path.stem,
        level=level,
        problem_id=problem_id,
        sha256=hashlib.sha256(raw).hexdigest(),
    )


def load_task(
    path: Path, *, instantiate: bool = True, timeout: float = 120, sandbox_kind: str = "local"
) -> Task:
    """Parse a task and (by default) run it once in a sandbox of `sandbox_kind` to learn its input spec."""
    task = parse_task(path)
    if instantiate:
        task = instantiate_tasks([task], timeout=timeout, sandbox_kind=sandbox_kind)[0]
    return task


def discover_task_files(folder: Path) -> list[Path]:
    """Task files under `folder` (recursively), in KernelBench order: level, then problem id."""
    folder = Path(folder)
    if folder.is_file():
        return [folder]
    if not folder.is_dir():
        raise TaskLoadError(folder, "no such file or folder")
    files = [
        p for p in folder.rglob("*.py") if not p.name.startswith(("_", ".")) and "__pycache__" not in p.parts
    ]

    def order(p: Path) -> tuple[Any, ...]:
        level, problem_id = _level_and_id(p)
        return (level if level is not None else 99, problem_id if problem_id is not None else 10**9, str(p))

    return sorted(files, key=order)


def load_folder(
    folder: Path, *, instantiate: bool = True, timeout: float = 120, sandbox_kind: str = "local"
) -> tuple[list[Task], list[TaskLoadError]]:
    """Every task under `folder`; files that fail are returned as errors, not raised."""
    tasks: list[Task] = []
    errors: list[TaskLoadError] = []
    for path in discover_task_files(folder):
        try:
            tasks.append(parse_task(path))
        except TaskLoadError as exc:
            errors.append(exc)
    if instantiate and tasks:
        instantiated, failed = _instantiate_collecting(tasks, timeout=timeout, sandbox_kind=sandbox_kind)
        tasks, errors = instantiated, errors + failed
    return tasks, errors


def instantiate_tasks(tasks: list[Task], *, timeout: float = 300, sandbox_kind: str = "local") -> list[Task]:
    """Run each task once in a sandbox; raise the first TaskLoadError."""
    done, failed = _instantiate_collecting(tasks, timeout=timeout, sandbox_kind=sandbox_kind)
    if failed:
        raise failed[0]
    return done


def _instantiate_collecting(
    tasks: list[Task], *, timeout: float, sandbox_kind: str
) -> tuple[list[Task], list[TaskLoadError]]:
    """One sandbox command for all `tasks` (torch is imported once; each file runs in a forked
    child of sandbox/workers/tasks/inspect_task.py) over copies of the files in a scratch folder the
    harness made: the sandbox's only writable folder, removed afterwards. A SandboxError (the
    sandbox cannot open) is raised."""
    from sandbox.base import open_sandbox

    scratch = Path(tempfile.mkdtemp(prefix="kernel-agent-inspect-"))
    try:
        names = []
        for index, task in enumerate(tasks):
            name = f"task_{index}_{task.path.name}"
            shutil.copyfile(task.path, scratch / name)
            names.append(name)
        with open_sandbox(
            sandbox_kind, workspace=scratch, gpus=None, file_size_limit=INSPECT_FILE_SIZE_LIMIT
        ) as box:
            inside = [f"{box.workspace_path}/{name}" for name in names]
            cmd = box.python_command(box.worker("tasks/inspect_task.py"), "--timeout", str(timeout), *inside)
            proc = box.exec(cmd, timeout=timeout * len(tasks) + 60, cwd=box.workspace_path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if proc.timed_out:
        return [], [TaskLoadError(t.path, "the task inspector hung; try the file alone") for t in tasks]
    result = cast("InspectResult | None", parse_worker_result(proc.stdout))
    if result is None or len(result["tasks"]) != len(tasks):
        reason = _last_line(proc.stderr) or f"it {proc.describe_failure() or 'wrote no result'}"
        return [], [TaskLoadError(t.path, f"the task inspector failed: {reason}") for t in tasks]
    done: list[Task] = []
    failed: list[TaskLoadError] = []
    for task, report in zip(tasks, result["tasks"], strict=True):
        if report["ok"]:  # the reports are a sandboxed child's JSON: pydantic checks what is in them
            inspected = cast("TaskInspected", report)
            spec = InputSpec.model_validate(
                {k: v for k, v in inspected.items() if k in InputSpec.model_fields}
            )
            done.append(task.model_copy(update={"spec": spec}))
        else:
            failed.append(TaskLoadError(task.path, _describe_failure(cast("TaskFailed", report)["error"])))
    return done, failed


def _describe_failure(error: TaskProblem) -> str:
    stage, message = error["stage"], error["message"]
    if message.startswith(("it defines no", f"{stage}() must return")):
        return message
    prefix = {
        "import": "running the file failed",
        "get_init_inputs": "get_init_inputs() raised",
        "get_inputs": "get_inputs() raised",
        "Model": "Model(*get_init_inputs()) raised",
        "timeout": "running it",
        "crash": "running it crashed the worker",
    }.get(stage, stage)
    return f"{prefix}: {message}"


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def _level_and_id(path: Path) -> tuple[int | None, int | None]:
    level = None
    for part in reversed(path.parent.parts):
        match = _LEVEL_DIR.match(part)
        if match:
            level = int(match.group(1))
            break
    id_match = _PROBLEM_ID.match(path.name)
    return level, int(id_match.group(1)) if id_match else None


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""
