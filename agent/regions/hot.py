"""The hot-region table: where a model's time goes, region by region.

With a GPU, `sandbox/workers/tasks/profile_regions.py` times every operator of the forward under
torch.profiler in a sandbox, and `join_times` maps those operators onto the traced graph's nodes
by name and order (difflib's matching blocks: eager on the GPU may dispatch an operator the meta
trace did not, e.g. cuDNN's batch norm; an unmatched operator's time goes to the trace node before
it). Without one, each region's time is the estimate from its operators' floors at the nominal
rates (cost.py), and the table says so.
"""

from __future__ import annotations

import difflib
import shutil
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

from agent.regions.cost import H200, Rates
from agent.regions.partition import Region, partition
from agent.regions.whole import RegionCoverage, coverage
from agent.templates.graph import OpGraph, trace_task


class HotRegion(BaseModel):
    region: int
    label: str
    kind: str
    covered: bool
    share: float = Field(description="the region's share of the model's time")
    time_s: float
    flops: float
    bytes: int
    floor_s: float
    pct_of_floor: float = Field(description="floor / time, in percent: 100 is speed of light")
    headroom_s: float = Field(description="time above the floor")
    not_covered_reason: str = ""


class HotRegionTable(BaseModel):
    task: str
    source: str = Field(description="measured (torch.profiler on DEVICE) or estimated from the floors")
    measured: bool
    rates: Rates
    total_s: float
    covered_share: float
    regions: list[HotRegion]

    @property
    def title(self) -> str:
        how = self.source if self.measured else f"{self.source} (no GPU: shares estimated, not measured)"
        return f"{Path(self.task).name}: hot regions, {how}"


def join_times(graph: OpGraph, ops: list[dict]) -> list[float]:
    """Seconds per trace node from the profiler's operators (name, ms) in dispatch order."""
    trace_names = [n.op for n in graph.nodes]
    run_names = [str(o["op"]) for o in ops]
    seconds = [0.0] * len(trace_names)
    matcher = difflib.SequenceMatcher(a=trace_names, b=run_names, autojunk=False)
    last = 0
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            for k in range(a1 - a0):
                seconds[a0 + k] += float(ops[b0 + k]["ms"]) / 1000.0
            last = max(a1 - 1, 0)
        else:
            target = a0 if a1 > a0 else last
            if trace_names:
                seconds[min(target, len(seconds) - 1)] += sum(float(o["ms"]) for o in ops[b0:b1]) / 1000.0
    return seconds


def build_table(
    graph: OpGraph,
    regions: list[Region],
    covered: list[RegionCoverage],
    *,
    node_seconds: list[float] | None = None,
    source: str = "estimated from the floors at nominal rates",
    rates: Rates = H200,
) -> HotRegionTable:
    times = []
    for region in regions:
        if node_seconds is None:
            times.append(region.eager_s)
        else:
            times.append(sum(node_seconds[i] for i in region.nodes))
    total = sum(times) or 1e-30
    rows = []
    for region, cov, time_s in zip(regions, covered, times, strict=True):
        rows.append(
            HotRegion(
                region=region.index,
                label=region.label,
                kind=region.kind,
                covered=cov.covered,
                share=time_s / total,
                time_s=time_s,
                flops=region.flops,
                bytes=region.bytes,
                floor_s=region.floor_s,
                pct_of_floor=100.0 * region.floor_s / time_s if time_s > 0 else 0.0,
                headroom_s=max(0.0, time_s - region.floor_s),
                not_covered_reason=cov.reason,
            )
        )
    rows.sort(key=lambda r: -r.time_s)
    return HotRegionTable(
        task=graph.path,
        source=source,
        measured=node_seconds is not None,
        rates=rates,
        total_s=sum(times),
        covered_share=sum(r.share for r in rows if r.covered),
        regions=rows,
    )


def measure(
    task_path: Path, *, sandbox_kind: str = "local", iters: int = 10, timeout: float = 600.0
) -> list[dict]:
    """The profiler's operators of the task's forward on the GPU, run in a sandbox."""
    from sandbox.base import open_sandbox
    from sandbox.workers.protocol import parse as parse_worker_result

    scratch = Path(tempfile.mkdtemp(prefix="kernel-agent-profile-"))
    try:
        shutil.copyfile(task_path, scratch / "task.py")
        with open_sandbox(sandbox_kind, workspace=scratch, gpus="0") as box:
            cmd = box.python_command(box.worker("tasks/profile_regions.py"), "task.py", "--iters", str(iters))
            result = box.exec(cmd, timeout=timeout, cwd=box.workspace_path)
        report = parse_worker_result(result.stdout)
        if report is None or not report.get("ok"):
            why = (report or {}).get("error") or (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"{task_path}: profiling on the GPU failed: {why}")
        return list(report["ops"])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def hot_regions(task_path: Path, *, sandbox_kind: str = "local", gpu: bool = False) -> HotRegionTable:
    graph = trace_task(Path(task_path), sandbox_kind=sandbox_kind)
    regions = partition(graph)
    covered = coverage(graph, regions)
    if not gpu:
        return build_table(graph, regions, covered)
    seconds = join_times(graph, measure(Path(task_path), sandbox_kind=sandbox_kind))
    return build_table(
        graph, regions, covered, node_seconds=seconds, source="measured (torch.profiler on the GPU)"
    )
