"""The op graph of a task's forward, traced on meta tensors in a sandboxed worker.

`trace_tasks` copies each task file into a scratch folder, runs `sandbox/workers/tasks/trace_task.py`
over them in one sandbox (torch is imported once; each file runs in its own forked child) and
parses the worker's JSON into `OpGraph`s. Nothing of the task runs in this process.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from sandbox.base import open_sandbox
from sandbox.workers.protocol import parse as parse_worker_result


class TraceError(Exception):
    """A task could not be traced; the message says at which stage and why."""


class TensorMeta(BaseModel):
    shape: list[int]
    stride: list[int]
    offset: int = 0
    dtype: str

    @property
    def numel(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count


class Ref(BaseModel):
    """An argument: a task input, a parameter or buffer, a node's output, a constant or a list."""

    t: Literal["input", "param", "node", "const", "list", "constant"]
    index: int | None = None
    name: str | None = None
    id: int | None = None
    out: int = 0
    value: Any = None
    items: list[Ref] | None = None
    shape: list[int] | None = None
    dtype: str | None = None

    def describe(self) -> str:
        match self.t:
            case "input":
                return f"in{self.index}"
            case "param":
                return f"self.{self.name}"
            case "node":
                return f"%{self.id}" + (f".{self.out}" if self.out else "")
            case "list":
                return "[" + ", ".join(item.describe() for item in self.items or []) + "]"
            case "constant":
                return f"constant{self.shape}"
            case _:
                return repr(self.value)


class InputInfo(BaseModel):
    index: int
    kind: str
    shape: list[int] | None = None
    stride: list[int] | None = None
    offset: int = 0
    dtype: str | None = None
    value: Any = None


class ParamInfo(TensorMeta):
    name: str
    kind: Literal["parameter", "buffer"]


class OpNode(BaseModel):
    id: int
    op: str = Field(description="aten.relu.default")
    args: list[Ref]
    kwargs: dict[str, Ref] = Field(default_factory=dict)
    outputs: list[TensorMeta | None]
    view_of: int | None = Field(default=None, description="the argument the output is a view of")
    writes: int | None = Field(default=None, description="the argument an in-place op writes and returns")
    mutates: list[int] = Field(default_factory=list)

    @property
    def name(self) -> str:
        """The operator without namespace and overload: relu, addmm, _softmax."""
        parts = self.op.split(".")
        return parts[1] if len(parts) >= 2 else parts[0]

    def describe(self) -> str:
        args = [a.describe() for a in self.args] + [f"{k}={v.describe()}" for k, v in self.kwargs.items()]
        shapes = ", ".join(str(o.shape) if o else "-" for o in self.outputs)
        return f"%{self.id} = {self.op}({', '.join(args)}) -> {shapes}"


class OpGraph(BaseModel):
    path: str
    device: Literal["meta", "cpu"]
    notes: list[str] = Field(default_factory=list)
    inputs: list[InputInfo]
    params: list[ParamInfo]
    nodes: list[OpNode]
    outputs: list[Ref]
    output_is_tuple: bool = False
    training: bool = True

    def param(self, name: str) -> ParamInfo:
        return next(p for p in self.params if p.name == name)

    def describe(self) -> str:
        head = ", ".join(
            f"in{i.index}: {i.dtype}{i.shape}" if i.kind == "tensor" else f"in{i.index}: {i.value!r}"
            for i in self.inputs
        )
        lines = [f"inputs {head}"]
        lines += [f"param {p.name}: {p.dtype}{p.shape}" for p in self.params]
        lines += [n.describe() for n in self.nodes]
        lines.append("return " + ", ".join(o.describe() for o in self.outputs))
        return "\n".join(lines)


def trace_tasks(
    paths: list[Path], *, sandbox_kind: str = "local", timeout: float = 120.0
) -> list[OpGraph | TraceError]:
    """Trace every task file (one worker, one forked child per file); a file that fails gives a
    TraceError in its place."""
    if not paths:
        return []
    scratch = Path(tempfile.mkdtemp(prefix="kernel-agent-trace-"))
    try:
        names = []
        for i, path in enumerate(paths):
            name = f"task_{i}_{Path(path).name}"
            shutil.copyfile(path, scratch / name)
            names.append(name)
        with open_sandbox(sandbox_kind, workspace=scratch, gpus=None) as box:
            inside = [f"{box.workspace_path}/{name}" for name in names]
            cmd = box.python_command(box.worker("tasks/trace_task.py"), "--timeout", str(timeout), *inside)
            result = box.exec(cmd, timeout=timeout * len(paths) + 60, cwd=box.workspace_path)
        report = parse_worker_result(result.stdout)
        if report is None:
            tail = result.stderr.strip().splitlines()[-1:] or [result.describe_failure()]
            error = TraceError(f"the trace worker failed: {tail[0]}")
            return [error for _ in paths]
        return [_graph(Path(path), entry) for path, entry in zip(paths, report["tasks"], strict=True)]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def trace_task(path: Path, *, sandbox_kind: str = "local", timeout: float = 120.0) -> OpGraph:
    """The op graph of one task; raises TraceError."""
    graph = trace_tasks([Path(path)], sandbox_kind=sandbox_kind, timeout=timeout)[0]
    if isinstance(graph, TraceError):
        raise graph
    return graph


def _graph(path: Path, entry: dict[str, Any]) -> OpGraph | TraceError:
    if not entry.get("ok"):
        error = entry.get("error") or {}
        return TraceError(f"{path}: tracing failed at {error.get('stage', '?')}: {error.get('message', '?')}")
    return OpGraph.model_validate({**entry, "path": str(path)})
