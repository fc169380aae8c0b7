"""inspect task: agent/tasks.py -> inspect_task.py (argv: --timeout S TASK.py ...)."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict


class ArgDescription(TypedDict):
    """One value of get_inputs() or get_init_inputs(): shape and dtype, never values of tensors."""

    kind: str  # tensor | int | float | bool | none | list | tuple | other
    shape: NotRequired[list[int]]
    dtype: NotRequired[str]
    device: NotRequired[str]
    value: NotRequired[str]
    items: NotRequired[list[ArgDescription]]


class TaskProblem(TypedDict):
    """Why a task file could not be used, and at which step."""

    stage: str  # import | get_init_inputs | get_inputs | Model | timeout | crash
    message: str


class TaskInspected(TypedDict):
    """A task that ran: its input specs and the size of its Model's state."""

    path: str
    ok: Literal[True]
    inputs: list[ArgDescription]
    init_inputs: list[ArgDescription]
    parameters: int
    buffers: int
    built_on: NotRequired[str]  # "meta" (nothing allocated), or "cpu (on meta: WHY)"
    outputs: NotRequired[list[ArgDescription] | None]  # forward's result on meta; None if it cannot run there


class TaskFailed(TypedDict):
    """A task that did not run."""

    path: str
    ok: Literal[False]
    error: TaskProblem


TaskReport = TaskInspected | TaskFailed


class InspectResult(TypedDict):
    """inspect_task.py's result line: one report per task file, in argv order."""

    tasks: list[TaskReport]
