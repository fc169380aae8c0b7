"""The `ncu` tool: Nsight Compute metrics of the model's own kernels.

The workspace is compiled, then `sandbox/workers/referee/ncu_run.py` runs ModelNew's forward once on the
task's inputs under `ncu`, inside the sandbox, limited to the workspace's `__global__` functions
(`--kernel-name`) and a few launches (`--launch-count`). A handful of metrics per launch come back
as `--csv` and are read into a table: DRAM and SM throughput (% of peak), achieved occupancy and
the top warp stall reasons. The seconds it ran are charged to the run's GPU budget. This module
also holds what `sanitize` shares with it: finding a CUDA tool and running the candidate once
under one.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import secrets
import shutil
import time
from pathlib import Path

from pydantic import BaseModel, Field

from agent.build.compile import compile_solution
from agent.build.toolkit import ToolkitError
from agent.stops import RunAborted
from agent.workspace import EXTENSION_NAME, MODEL_ENTRY
from sandbox.base import ExecResult
from sandbox.safe_files import iter_regular_files, read_text
from sandbox.workers.protocol import parse as parse_worker_result

from .base import ToolError, ToolReply, tool
from .context import ToolContext

RUN_WORKER = "referee/ncu_run.py"
TOOL_TIMEOUT_S = 600.0
MAX_LAUNCHES = 20
THROUGHPUT = {
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "gpu__time_duration.sum": "time",
}
STALL_REASONS = (
    "long_scoreboard",
    "short_scoreboard",
    "mio_throttle",
    "lg_throttle",
    "barrier",
    "membar",
    "math_pipe_throttle",
    "tex_throttle",
    "wait",
    "not_selected",
    "dispatch_stall",
    "no_instruction",
    "branch_resolving",
    "drain",
    "imc_miss",
    "sleeping",
    "misc",
)
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"
METRICS = [*THROUGHPUT, *(f"{STALL_PREFIX}{reason}{STALL_SUFFIX}" for reason in STALL_REASONS)]
_TIME_UNITS = {
    "nsecond": 1e-3,
    "ns": 1e-3,
    "usecond": 1.0,
    "us": 1.0,
    "msecond": 1e3,
    "ms": 1e3,
    "second": 1e6,
}
_GLOBAL = re.compile(r"__global__\s+(?:[\w:<>,*&]+\s+)*?(?P<name>\w+)\s*\(")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")


# -- shared with sanitize ---------------------------------------------------------------------------
def find_cuda_tool(name: str) -> str | None:
    """An NVIDIA tool (`ncu`, `compute-sanitizer`): on PATH, under $CUDA_HOME/bin, or under
    /usr/local/cuda/bin; None when none of them has it."""
    found = shutil.which(name)
    if found:
        return found
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for home in homes:
        if home and (candidate := Path(home) / "bin" / name).is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def gpu_present() -> bool:
    """Whether this machine has an NVIDIA GPU driver node (what the sandbox's GPU comes from)."""
    return Path("/dev/nvidiactl").exists()


def workspace_kernels(ctx: ToolContext) -> list[str]:
    """The names of the workspace's `__global__` functions, as declared in kernels/*.cu."""
    names: list[str] = []
    for rel in iter_regular_files(ctx.workspace.root, "kernels", (".cu",)):
        text = read_text(ctx.workspace.root, rel) or ""
        for match in _GLOBAL.finditer(_LAUNCH_BOUNDS.sub(" ", text)):
            if match.group("name") not in names:
                names.append(match.group("name"))
    return names


def refuse_without(ctx: ToolContext, what: str, binary: str | None, install: str) -> str:
    """The tool's path, or a ToolError naming what is missing (the tool, or the GPU)."""
    if binary is None:
        raise ToolError(f"{what}: not installed on this machine ({install}); nothing was run")
    if not gpu_present():
        raise ToolError(f"{what}: refused, there is no GPU on this machine; nothing was run")
    ctx.budget.check_gpu()
    return binary


def run_candidate_under(ctx: ToolContext, what: str, prefix: list[str], *, runs: int = 1) -> ExecResult:
    """Compile the workspace, then run ModelNew's forward `runs` times under `prefix` (the tool and
    its flags) in the sandbox; the seconds charged to the GPU budget. A failed compile or a worker
    that found no GPU is a ToolError."""
    options = ctx.settings.referee
    try:
        built = compile_solution(
            ctx.workspace, ctx.sandbox, arch=options.arch, timeout=options.compile_timeout_s
        )
    except ToolkitError as exc:
        raise RunAborted("config_error", f"the CUDA toolkit cannot be used: {exc}") from exc
    if not built.ok:
        raise ToolError(f"{what}: the workspace does not compile; fix it first.\n{built.feedback()}")
    root = ctx.sandbox.workspace_path
    spec = {
        "module_path": built.module_path,
        "extension": EXTENSION_NAME,
        "entry": f"{root}/{MODEL_ENTRY}",
        "task": f"{root}/reference.py",
        "seed": secrets.randbelow(1 << 30),
        "runs": runs,
    }
    command = [*prefix, *ctx.sandbox.python_command(ctx.sandbox.worker(RUN_WORKER), json.dumps(spec))]
    started = time.monotonic()
    try:
        outcome = ctx.sandbox.exec(command, timeout=TOOL_TIMEOUT_S)
    finally:
        ctx.budget.charge_gpu(time.monotonic() - started)
    record = parse_worker_result(outcome.stdout) or {}
    if record.get("kind") == "no_gpu":
        raise ToolError(f"{what}: refused, the sandbox has no GPU (CUDA is not available there)")
    return outcome


# -- ncu's CSV --------------------------------------------------------------------------------------
class StallReason(BaseModel):
    reason: str
    cycles_per_issue: float = Field(
        description="average warps stalled for this reason per issued instruction"
    )


class NcuKernel(BaseModel):
    """One profiled launch."""

    launch: int
    kernel: str
    grid: str = ""
    block: str = ""
    time_us: float | None = None
    dram_pct: float | None = None
    sm_pct: float | None = None
    achieved_occupancy_pct: float | None = None
    stalls: list[StallReason] = Field(default_factory=list, description="largest first")


def _number(text: str) -> float | None:
    cleaned = text.strip().replace(",", "")
    try:
        return float(cleaned)
    except ValueError:
        return None


def parse_ncu_csv(stdout: str, top_stalls: int = 3) -> list[NcuKernel]:
    """Launches from `ncu --csv` (one row per metric, the "details" page): anything before the
    header (==PROF== lines, the program's own output) is skipped."""
    lines = stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        return []
    rows = csv.DictReader(io.StringIO("\n".join(line for line in lines[start:] if line.startswith('"'))))
    launches: dict[str, NcuKernel] = {}
    stalls: dict[str, list[StallReason]] = {}
    for row in rows:
        launch_id = row.get("ID", "")
        if not launch_id.strip().isdigit():
            continue
        kernel = launches.setdefault(
            launch_id,
            NcuKernel(
                launch=int(launch_id),
                kernel=row.get("Kernel Name", "").strip(),
                grid=row.get("Grid Size", "") or "",
                block=row.get("Block Size", "") or "",
            ),
        )
        metric = (row.get("Metric Name") or "").strip()
        value = _number(row.get("Metric Value") or "")
        if value is None:
            continue
        if metric.startswith(STALL_PREFIX) and metric.endswith(STALL_SUFFIX):
            reason = metric.removeprefix(STALL_PREFIX).removesuffix(STALL_SUFFIX)
            stalls.setdefault(launch_id, []).append(StallReason(reason=reason, cycles_per_issue=value))
        elif THROUGHPUT.get(metric) == "time":
            unit = (row.get("Metric Unit") or "nsecond").strip()
            kernel.time_us = value * _TIME_UNITS.get(unit, 1e-3)
        elif metric in THROUGHPUT:
            setattr(kernel, THROUGHPUT[metric], value)
    for launch_id, reasons in stalls.items():
        ranked = sorted(reasons, key=lambda s: s.cycles_per_issue, reverse=True)
        launches[launch_id].stalls = [s for s in ranked if s.cycles_per_issue > 0][:top_stalls]
    return sorted(launches.values(), key=lambda k: k.launch)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _bound(kernel: NcuKernel) -> str:
    dram, sm = kernel.dram_pct or 0.0, kernel.sm_pct or 0.0
    if dram >= 60 and dram >= sm:
        return "memory-bound"
    if sm >= 60:
        return "compute-bound"
    return "latency-bound (neither DRAM nor the SMs are busy: more work in flight, fewer stalls)"


def render_ncu(kernels: list[NcuKernel]) -> str:
    rows = [
        f"ncu (Nsight Compute): {len(kernels)} launch(es) of your kernels profiled",
        "kernel | grid x block | time us | DRAM % | SM % | achieved occupancy % | top stalls "
        "(warps stalled per issued instruction) | reading",
    ]
    for k in kernels:
        name = k.kernel if len(k.kernel) <= 50 else k.kernel[:47] + "..."
        stalls = ", ".join(f"{s.reason} {s.cycles_per_issue:.2g}" for s in k.stalls) or "-"
        time_us = "-" if k.time_us is None else f"{k.time_us:.1f}"
        rows.append(
            f"{name} | {k.grid} x {k.block} | {time_us} | {_pct(k.dram_pct)} | {_pct(k.sm_pct)} | "
            f"{_pct(k.achieved_occupancy_pct)} | {stalls} | {_bound(k)}"
        )
    return "\n".join(rows)


def ncu_problem(output: str) -> str | None:
    """ncu's own refusal, in one line: counters restricted, no supported device, no launch seen."""
    if "ERR_NVGPUCTRPERM" in output:
        return (
            "the GPU's performance counters are restricted to administrators on this machine "
            "(ERR_NVGPUCTRPERM); an operator can allow them (NVreg_RestrictProfilingToAdminUsers=0)"
        )
    for line in output.splitlines():
        if line.startswith("==ERROR=="):
            return line.removeprefix("==ERROR==").strip()[:300]
    return None


@tool
def ncu(ctx: ToolContext, launches: int = 6) -> ToolReply:
    """Profile your own kernels with Nsight Compute: compile, run ModelNew's forward once on the task's
    inputs under ncu, and return per launch the DRAM and SM throughput (% of peak), the achieved
    occupancy and the top warp stall reasons. Costs GPU budget (ncu replays each kernel many times).

    Args:
        launches: How many launches of your kernels to profile (1 to 20).
    """
    binary = refuse_without(ctx, "ncu", find_cuda_tool("ncu"), "Nsight Compute's `ncu` was not found")
    names = workspace_kernels(ctx)
    if not names:
        raise ToolError("ncu: kernels/*.cu declares no __global__ function; nothing to profile")
    count = min(max(launches, 1), MAX_LAUNCHES)
    prefix = [
        binary,
        "--csv",
        "--page",
        "details",
        "--print-units",
        "base",
        "--kernel-name-base",
        "function",
        "--kernel-name",
        "regex:(^|::)(" + "|".join(re.escape(n) for n in names) + r")(<.*)?$",
        "--launch-count",
        str(count),
        "--metrics",
        ",".join(METRICS),
    ]
    outcome = run_candidate_under(ctx, "ncu", prefix)
    kernels = parse_ncu_csv(outcome.stdout)
    data = {"launches": len(kernels), "kernels": [k.model_dump(mode="json") for k in kernels]}
    if kernels:
        return ToolReply(render_ncu(kernels), data=data)
    record = parse_worker_result(outcome.stdout) or {}
    problem = ncu_problem(outcome.stdout + "\n" + outcome.stderr)
    if problem is None and record.get("ok") is False:
        problem = f"the forward failed under ncu: {record.get('message', '')}"
    if problem is None and outcome.timed_out:
        problem = f"ncu {outcome.describe_failure()}"
    if problem is None:
        problem = f"no launch of your kernels ({', '.join(names)}) was seen in one forward"
    raise ToolError(f"ncu: {problem}", data=data)
