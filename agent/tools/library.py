"""The `start_from_template` tool: the built-in template library's workspace for this task, written
into the model's workspace as a starting point.

The task is traced on meta tensors in a sandbox (agent.templates.graph), matched to the library's
families (recognize), and the first candidate the template policy (`--model templates`) would judge
is instantiated: pure-CUDA stage kernels, the lean binding, model_new.py, and kernels/tune.json with
the slots the tune tool may search. A task the library does not cover gets the operators it lacks.
"""

from __future__ import annotations

from agent.templates.graph import TraceError, trace_task
from agent.templates.instantiate import instantiate
from agent.templates.plan import NotCovered, Plan
from agent.templates.recognize import recognize
from agent.templates.slots import Observation, SlotSpace, default_makers, initial_config
from agent.tune.space import DeviceLimits

from .base import ToolError, ToolReply, tool
from .context import ToolContext
from .files import _check_writable, _write


def template_files(plan: Plan, gpu: DeviceLimits) -> dict[str, str]:
    """The files of the template policy's first candidate for `plan`."""
    space = SlotSpace(plan, gpu)
    config = initial_config(space, default_makers(), Observation(plan=plan, gpu=gpu))
    return instantiate(plan, config, sm_count=gpu.sm_count, tunable=space.tunable())


@tool
def start_from_template(ctx: ToolContext) -> ToolReply:
    """Write the built-in template library's solution for this task into your workspace as a starting
    point: kernels for each stage, their binding, model_new.py and kernels/tune.json (the parameters the
    tune tool may search). It overwrites model_new.py and any kernels/ file of the same name. When the
    library does not cover the task, nothing is written and the reply names the operators it lacks.
    Compile and profile it next, then improve it or tune it."""
    try:
        graph = trace_task(ctx.task.path, sandbox_kind=ctx.sandbox.kind)
    except TraceError as exc:
        raise ToolError(f"the task could not be traced, so the library cannot match it: {exc}") from None
    plan = recognize(graph)
    if isinstance(plan, NotCovered):
        lacking = f"; it lacks: {', '.join(plan.ops)}" if plan.ops else ""
        raise ToolError(
            f"the template library does not cover this task ({plan.reason}){lacking}. Nothing was written; "
            "write your own kernels.",
            data={"covered": False, "ops": plan.ops},
        )
    files = template_files(plan, DeviceLimits.visible() or DeviceLimits())
    for rel in files:
        _check_writable(ctx, rel)
    written = []
    for rel, content in sorted(files.items()):
        existed = (ctx.workspace.root / rel).is_file()
        _write(ctx, rel, content)
        written.append(f"{rel} ({'overwrote' if existed else 'created'}, {content.count(chr(10))} lines)")
    lines = [
        f"wrote the template library's start for {plan.describe()}",
        *[f"  {entry}" for entry in written],
        "kernels/tune.json declares the slots the tune tool may search. Next: compile, then profile; "
        "then improve the kernels or call tune.",
    ]
    return ToolReply("\n".join(lines), data={"covered": True, "family": plan.family, "files": sorted(files)})
