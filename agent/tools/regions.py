"""The region tools of a whole model: open a region as a sub-workspace of its own, go back to the
whole model, and compose the regions' best verified solutions into the whole model's `model_new.py`.

Offered when the task partitions into more than one fusible region (the brief's hot-region table).
A region's task is extracted from the traced forward (agent/regions/extract.py: the region's own
aten operators at the model's shapes and dtypes), so compile, verify, profile and tune judge a
region exactly as they judge any task. `compose_regions` writes the composition
(agent/regions/compose.py: each chosen region's best verified candidate as a standalone module,
the rest of the model in torch) into the whole model's workspace and verifies it there: what is
submitted is always the whole model, judged end to end.
"""

from __future__ import annotations

from pathlib import Path

from agent.build.standalone import BUILD_DIR_PRELUDE, HARNESS_BUILD_FILES, standalone_model
from agent.regions.compose import composed_source
from agent.regions.extract import region_task_filename, region_task_source
from agent.regions.partition import Region, partition
from agent.tasks import TaskLoadError
from agent.templates.graph import TraceError
from agent.workspace import MODEL_ENTRY, Workspace
from sandbox.safe_files import read_text, write_file

from .base import ToolError, ToolReply, tool
from .candidates import Candidate, CandidateBook
from .context import ToolContext
from .pipeline import is_dry_run_pass, verdict_reply
from .region_desk import Focus, RegionDesk


def _desk(ctx: ToolContext) -> RegionDesk:
    if ctx.regions is None:
        raise ToolError("this task is one region: there are no regions to open; work on the task itself")
    return ctx.regions


def _traced(desk: RegionDesk) -> list[Region]:
    if desk.graph is None:
        try:
            desk.graph = desk.trace()
        except TraceError as exc:
            raise ToolError(f"the model could not be traced, so it has no regions to open: {exc}") from None
        desk.regions = partition(desk.graph)
    return desk.regions


def _region_line(region: Region) -> str:
    inputs = ", ".join(f"{v.meta.dtype}{list(v.meta.shape)}" for v in region.inputs) or "none"
    return f"{region.label} (inputs {inputs}; {region.flops / 1e9:.3g} GFLOP, {region.bytes / 1e6:.3g} MB)"


def _open(ctx: ToolContext, desk: RegionDesk, region: Region) -> Focus:
    assert desk.graph is not None
    folder = desk.folder / f"r{region.index:02d}"
    task_file = desk.folder / "tasks" / region_task_filename(region)
    task_file.parent.mkdir(parents=True, exist_ok=True)
    task_file.write_text(
        region_task_source(desk.graph, region, model_path=Path(desk.graph.path).name), encoding="utf-8"
    )
    try:
        task = desk.load_task(task_file)
    except TaskLoadError as exc:
        raise ToolError(f"region r{region.index:02d} could not be loaded as a task: {exc}") from None
    workspace = Workspace.create(folder / "workspace", task)
    sandbox = desk.enter_sandbox(workspace.root)
    book = CandidateBook(baseline=ctx.candidates.baseline)
    return Focus(task, workspace, sandbox, book)


@tool
def open_region(ctx: ToolContext, region: int) -> ToolReply:
    """Open one region of this whole model (a row of the hot-region table) as a sub-workspace of its
    own: a task holding only that region's operators, at the model's shapes and dtypes, with its own
    reference.py and model_new.py. Until you call open_whole_model or compose_regions, the file tools,
    compile, verify, profile, tune and start_from_template act on this region, and its verdicts are
    kept apart from the whole model's. Reopening a region keeps its files. Solve the regions with the
    most headroom this way, then call compose_regions.

    Args:
        region: The region's number: 5 for r05 in the hot-region table.
    """
    desk = _desk(ctx)
    regions = _traced(desk)
    chosen = next((r for r in regions if r.index == region), None)
    if chosen is None:
        raise ToolError(f"there is no region r{region:02d}; the regions are r00 to r{len(regions) - 1:02d}")
    if chosen.kind == "view":
        raise ToolError(f"{chosen.label} only reshapes or views tensors: there is nothing to compute")
    fresh = region not in desk.opened
    if fresh:
        desk.opened[region] = _open(ctx, desk, chosen)
    if desk.current != region:
        desk.focus_region(ctx, region)
    best = ctx.candidates.best
    lines = [
        f"{'opened' if fresh else 'reopened'} region {_region_line(chosen)} as its own sub-workspace; "
        "the workspace tools now act on it (reference.py is the region's task)",
        f"its best verified candidate: {best.describe(ctx.candidates.baseline)}"
        if best is not None
        else "no verified candidate yet: write model_new.py and kernels/ for it, then compile and verify",
        "when its kernels are verified and fast, open another region, or call compose_regions",
    ]
    return ToolReply("\n".join(lines), data={"region": region, "label": chosen.label, "fresh": fresh})


@tool
def open_whole_model(ctx: ToolContext) -> str:
    """Go back to the whole model's workspace (after open_region): the workspace tools act on the whole
    model again. Region work is kept; compose_regions puts it together."""
    desk = _desk(ctx)
    if desk.current is None:
        return "the whole model's workspace is already the one the tools act on"
    left = desk.current
    desk.focus_whole(ctx)
    return f"back to the whole model's workspace (region r{left:02d} keeps its files and verdicts)"


@tool
def compose_regions(ctx: ToolContext, regions: list[int] | None = None) -> ToolReply:
    """Compose the whole model from its regions: each chosen region's best verified candidate becomes a
    module inside the whole model's model_new.py (it overwrites it), every other region runs its torch
    operators as the model does, and the composition is verified on the whole model. Then profile and
    submit it as usual. Under the strict policy every region that computes must have a solution;
    under the kernelbench policy the rest may stay in torch.

    Args:
        regions: Region numbers to compose (5 for r05); default: every opened region with a verified
            candidate.
    """
    desk = _desk(ctx)
    desk.focus_whole(ctx)
    all_regions = _traced(desk)
    assert desk.graph is not None
    wanted = sorted(regions) if regions else sorted(desk.opened)
    found = {i: _composable(ctx, desk.opened[i]) for i in wanted if i in desk.opened}
    missing = [f"r{i:02d}" for i in wanted if found.get(i) is None]
    if regions and missing:
        raise ToolError(
            f"no verified candidate for {', '.join(missing)}: open_region it, then verify its workspace"
        )
    solutions = {i: _solution_text(desk.opened[i], c) for i, c in found.items() if c is not None}
    chosen = sorted(solutions)
    if not chosen:
        raise ToolError("no region has a verified candidate yet: open_region one, then verify its workspace")
    try:
        text = composed_source(desk.graph, all_regions, ctx.task.source, solutions)
    except ValueError as exc:
        raise ToolError(f"the regions cannot be composed into this model: {exc}") from None
    write_file(ctx.workspace.root, MODEL_ENTRY, text.encode("utf-8"))
    in_torch = [r.label for r in all_regions if r.index not in chosen and r.kind != "view"]
    head = (
        f"wrote model_new.py composing {', '.join(f'r{i:02d}' for i in chosen)}"
        + (f"; in torch: {', '.join(in_torch)}" if in_torch else "")
        + ". The composition, verified on the whole model:"
    )
    reply = verdict_reply(ctx, *ctx.judge("verify", profile=False), head=head)
    return ToolReply(reply.text, data=(reply.data or {}) | {"composed": chosen, "in_torch": in_torch})


def _composable(ctx: ToolContext, focus: Focus) -> Candidate | None:
    """The region's best verified candidate; in a compile-only dry run (no GPU), its latest build."""
    if focus.candidates.best is not None:
        return focus.candidates.best
    built = [c for c in focus.candidates.history if is_dry_run_pass(ctx, c)]
    return built[-1] if built else None


def _solution_text(focus: Focus, candidate: Candidate) -> str:
    """A region's candidate as one module: its model_new.py with its kernels embedded."""
    harness = {name: read_text(focus.workspace.root, name) or "" for name in HARNESS_BUILD_FILES}
    return BUILD_DIR_PRELUDE + standalone_model(candidate.snapshot, harness, task=focus.task.name)
