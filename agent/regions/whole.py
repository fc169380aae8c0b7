"""A whole model, region by region: trace it, partition it, and compose it back.

`scaled_source` makes a copy of a task small enough for the CPU by lowering its top-level
`batch_size = N` (the KernelBench convention its `get_inputs` reads); a task without one is used
as it is. `compose_reference_check` traces a task, partitions it, composes the regions' reference
Models and checks the composition against the task on the CPU, in a sandbox.
"""

from __future__ import annotations

import ast
import tempfile
from pathlib import Path

from pydantic import BaseModel

from agent.regions.compose import CompositionCheck, check_composition, composed_source
from agent.regions.partition import Region, partition
from agent.templates.graph import OpGraph, trace_task
from agent.templates.plan import Plan
from agent.templates.recognize import recognize


class RegionCoverage(BaseModel):
    region: int
    covered: bool
    reason: str = ""


def scaled_source(source: str, batch: int) -> tuple[str, bool]:
    """The task text with its top-level `batch_size` set to `batch` (when it was larger), and
    whether it changed."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "batch_size"
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, int)
            and node.value.value > batch
            and node.lineno == node.end_lineno
        ):
            line = lines[node.lineno - 1]
            start, end = node.value.col_offset, node.value.end_col_offset
            lines[node.lineno - 1] = line[:start] + str(batch) + line[end:]
            return "".join(lines), True
    return source, False


def coverage(graph: OpGraph, regions: list[Region]) -> list[RegionCoverage]:
    """Which regions the template library covers, each judged as its own task."""
    from agent.regions.subgraph import region_graph

    found = []
    for region in regions:
        plan = recognize(region_graph(graph, region))
        covered = isinstance(plan, Plan)
        found.append(
            RegionCoverage(region=region.index, covered=covered, reason="" if covered else plan.reason)
        )
    return found


def compose_reference_check(
    task_path: Path, *, batch: int | None = 2, sandbox_kind: str = "local"
) -> tuple[list[Region], CompositionCheck]:
    """Trace (a batch-scaled copy of) the task, compose its regions' reference Models, and check
    the composition against the task's Model on the CPU."""
    source = Path(task_path).read_text(encoding="utf-8")
    if batch is not None:
        source, _ = scaled_source(source, batch)
    with tempfile.TemporaryDirectory(prefix="kernel-agent-regions-") as scratch:
        copy = Path(scratch) / Path(task_path).name
        copy.write_text(source, encoding="utf-8")
        graph = trace_task(copy, sandbox_kind=sandbox_kind)
        regions = partition(graph)
        check = check_composition(copy, composed_source(graph, regions, source), sandbox_kind=sandbox_kind)
    return regions, check


def region_summary(graph: OpGraph) -> str:
    """One clause: how much of an uncovered model the template library covers region by region;
    empty when no region is covered (then the reason alone says it)."""
    regions = partition(graph)
    found = coverage(graph, regions)
    total = sum(r.eager_s for r in regions) or 1e-30
    share = sum(r.eager_s for r, c in zip(regions, found, strict=True) if c.covered) / total
    covered = sum(c.covered for c in found)
    if covered == 0:
        return ""
    return (
        f"by region, {covered} of {len(regions)} regions are covered ({100 * share:.0f}% of the estimated time); "
        f"`agent profile {Path(graph.path).name}` lists them"
    )
