"""The template library: `agent solve TASK.py` with no API key. A task's forward is traced on
meta tensors (graph.py), matched to template families (recognize.py), and solved by
`TemplatePolicy`, a `Model` whose slot agents fill the templates' slots and whose every
candidate the referee judges through the loop's ordinary tools. See README.md."""

from __future__ import annotations

from pathlib import Path

from agent.templates.graph import OpGraph, TraceError, trace_task, trace_tasks
from agent.templates.plan import NotCovered, Plan
from agent.templates.policy import TemplatePolicy
from agent.templates.recognize import recognize
from agent.tune.space import DeviceLimits


def plan_task(task_path: Path, *, sandbox_kind: str = "local") -> Plan | NotCovered:
    """Trace the task in a sandbox and match it to the library."""
    try:
        graph = trace_task(Path(task_path), sandbox_kind=sandbox_kind)
    except TraceError as exc:
        return NotCovered(task=Path(task_path).stem, reason=f"the task could not be traced: {exc}")
    return recognize(graph)


def build_policy(
    task_path: Path,
    *,
    sandbox_kind: str = "local",
    gpu: DeviceLimits | None = None,
    allow_tf32: bool = False,
    max_candidates: int = 12,
    use_tune: bool = False,
) -> TemplatePolicy | NotCovered:
    """The policy for a task, or why the library does not cover it. `gpu` (SM count, shared
    memory) sizes the first guesses; None assumes an H100/H200 of the visible GPU's compute
    capability."""
    plan = plan_task(task_path, sandbox_kind=sandbox_kind)
    if isinstance(plan, NotCovered):
        return plan
    return TemplatePolicy.for_task(
        task_path,
        plan,
        gpu=gpu or visible_device_limits(),
        allow_tf32=allow_tf32,
        max_candidates=max_candidates,
        use_tune=use_tune,
    )


def visible_device_limits() -> DeviceLimits | None:
    """The visible GPU's compute capability as DeviceLimits (DeviceLimits.visible: nvidia-smi)."""
    return DeviceLimits.visible()


__all__ = [
    "DeviceLimits",
    "NotCovered",
    "OpGraph",
    "Plan",
    "TemplatePolicy",
    "TraceError",
    "build_policy",
    "plan_task",
    "recognize",
    "trace_task",
    "trace_tasks",
    "visible_device_limits",
]
