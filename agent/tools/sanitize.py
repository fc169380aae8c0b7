"""The `sanitize` tool: ModelNew's forward once under compute-sanitizer (memcheck, or racecheck on
request), in the sandbox, with each finding read into kernel, source line, block, thread and
address. The seconds it ran are charged to the run's GPU budget.

memcheck's report of one bad access:

    ========= Invalid __global__ write of size 4 bytes
    =========     at relu_kernel(const float *, float *, long)+0x90 in /workspace/kernels/relu.cu:14
    =========     by thread (31,0,0) in block (4095,0,0)
    =========     Address 0x7f1c2e400000 is out of bounds
    =========     and is 1 bytes after the nearest allocation at 0x7f1c2e000000 of size 4194304 bytes

racecheck's:

    ========= Error: Race reported between Write access at reduce(const float *, float *)+0x1a0 in /workspace/kernels/reduce.cu:20
    =========     and Read access at reduce(const float *, float *)+0x1f0 in /workspace/kernels/reduce.cu:24 [248 hazards]
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

from .base import ToolError, ToolReply, tool
from .context import ToolContext
from .ncu import find_cuda_tool, refuse_without, run_candidate_under

SANITIZER_TOOLS = ("memcheck", "racecheck")
PRINT_LIMIT = 20
SHOWN = 5
_PREFIX = re.compile(r"^=========\s?")
_AT = re.compile(r"^\s+at (?P<kernel>.+?)(?:\+0x[0-9a-f]+)? in (?P<where>\S+?)(?::(?P<line>\d+))?\s*$")
_BY = re.compile(r"^\s+by thread (?P<thread>\([\d, ]+\)) in block (?P<block>\([\d, ]+\))")
_ADDRESS = re.compile(r"^\s+(?:Address|Access(?: at| to)?) (?P<address>0x[0-9a-fA-F]+)\s*(?P<what>.*)$")
_AND_IS = re.compile(r"^\s+and is (?P<what>.*)$")
_RACE = re.compile(
    r"^(?P<sev>Error|Warning): Race reported between (?P<first>\w+) access at (?P<kernel>.+?)(?:\+0x[0-9a-f]+)? "
    r"in (?P<where>\S+?)(?::(?P<line>\d+))?\s*$"
)
_RACE_OTHER = re.compile(
    r"^\s+and (?P<second>\w+) access at .+? in (?P<where>\S+?)(?::(?P<line>\d+))?\s*(?:\[(?P<hazards>\d+) hazards?\])?\s*$"
)
_SUMMARY = re.compile(r"^(?:ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY): (?P<text>.*)$")
_PROGRAM_HIT = re.compile(r"^Program hit (?P<text>.*)$")
_NOT_FINDINGS = (
    "COMPUTE-SANITIZER",
    "Saved host backtrace",
    "Host Frame",
    "Target application",
    "Device Frame",
)


class SanitizerFinding(BaseModel):
    what: str = Field(description="the report's headline, e.g. 'Invalid __global__ write of size 4 bytes'")
    kernel: str | None = None
    location: str | None = Field(default=None, description="file:line in the workspace when known")
    other_location: str | None = Field(default=None, description="racecheck: the other access's file:line")
    thread: str | None = None
    block: str | None = None
    address: str | None = None
    detail: str = ""
    count: int = Field(default=1, description="identical reports (other threads) folded into this one")


class SanitizerReport(BaseModel):
    tool: str
    findings: list[SanitizerFinding] = Field(default_factory=list)
    summary: str | None = None
    api_errors: list[str] = Field(default_factory=list, description="'Program hit ...' lines")


def _place(where: str | None, line: str | None, workspace_root: str, sources: tuple[str, ...]) -> str | None:
    """A workspace file by its workspace path (under the sandbox's root, or a path ending in one
    of the workspace's sources: the build may name it through another folder); any other file by
    its name only."""
    if not where:
        return None
    prefix = workspace_root.rstrip("/") + "/"
    own = next((rel for rel in sources if where.endswith("/" + rel)), None)
    shown = where.removeprefix(prefix) if where.startswith(prefix) else own or where.rsplit("/", 1)[-1]
    return f"{shown}:{line}" if line else shown


def parse_sanitizer(
    output: str, tool_name: str, workspace_root: str, sources: tuple[str, ...] = ()
) -> SanitizerReport:
    """compute-sanitizer's text output (its own lines start with =========) as findings; a finding
    repeated for other threads is folded into the first (count)."""
    report = SanitizerReport(tool=tool_name)
    current: SanitizerFinding | None = None
    seen: dict[tuple[str, str | None, str | None], SanitizerFinding] = {}

    def close() -> None:
        if current is None:
            return
        key = (current.what, current.kernel, current.location)
        if key in seen:
            seen[key].count += current.count
        else:
            seen[key] = current
            report.findings.append(current)

    for raw in output.splitlines():
        if not _PREFIX.match(raw):
            continue
        line = _PREFIX.sub("", raw, count=1).rstrip()
        if not line.strip():
            continue
        if (summary := _SUMMARY.match(line)) is not None:
            report.summary = summary.group("text")
            continue
        if (hit := _PROGRAM_HIT.match(line)) is not None:
            if len(report.api_errors) < 3:
                report.api_errors.append(hit.group("text")[:300])
            continue
        if not line.startswith((" ", "\t")):
            if line.startswith(_NOT_FINDINGS):
                continue
            close()
            race = _RACE.match(line)
            if race is not None:
                current = SanitizerFinding(
                    what=f"{race.group('sev')}: race between a {race.group('first').lower()} access",
                    kernel=race.group("kernel").strip(),
                    location=_place(race.group("where"), race.group("line"), workspace_root, sources),
                )
            else:
                current = SanitizerFinding(what=line.strip()[:200])
            continue
        if current is None:
            continue
        if (at := _AT.match(line)) is not None and current.kernel is None:
            current.kernel = at.group("kernel").strip()
            current.location = _place(at.group("where"), at.group("line"), workspace_root, sources)
        elif (by := _BY.match(line)) is not None:
            current.thread, current.block = by.group("thread"), by.group("block")
        elif (address := _ADDRESS.match(line)) is not None:
            current.address = address.group("address")
            current.detail = address.group("what").strip()
        elif (more := _AND_IS.match(line)) is not None:
            current.detail = f"{current.detail}, {more.group('what').strip()}".strip(", ")
        elif (other := _RACE_OTHER.match(line)) is not None:
            current.what += f" and a {other.group('second').lower()} access"
            current.other_location = _place(
                other.group("where"), other.group("line"), workspace_root, sources
            )
            if other.group("hazards"):
                current.detail = f"{other.group('hazards')} hazards"
    close()
    return report


def render_sanitizer(report: SanitizerReport) -> str:
    head = f"compute-sanitizer {report.tool}: " + (
        f"{len(report.findings)} distinct finding(s)" if report.findings else "no findings"
    )
    if report.summary:
        head += f" ({report.summary})"
    lines = [head]
    for number, f in enumerate(report.findings[:SHOWN], start=1):
        parts = [f.what]
        if f.kernel:
            parts.append(f"in {f.kernel}")
        if f.location:
            parts.append(f"at {f.location}")
        if f.other_location:
            parts.append(f"and {f.other_location}")
        if f.block or f.thread:
            parts.append(f"block {f.block}, thread {f.thread}")
        if f.address:
            parts.append(f"address {f.address}")
        text = " ".join(parts[:1]) + (" " + ", ".join(parts[1:]) if parts[1:] else "")
        if f.detail:
            text += f": {f.detail}"
        if f.count > 1:
            text += f" (x{f.count} reports, first shown)"
        lines.append(f"{number}. {text}")
    if len(report.findings) > SHOWN:
        lines.append(f"... and {len(report.findings) - SHOWN} more")
    lines += [f"CUDA API error: {e}" for e in report.api_errors]
    return "\n".join(lines)


@tool
def sanitize(ctx: ToolContext, check: Literal["memcheck", "racecheck"] = "memcheck") -> ToolReply:
    """Run ModelNew's forward once under compute-sanitizer to find out-of-bounds or misaligned accesses
    (memcheck) or shared-memory races (racecheck). Each finding names the kernel, the source line, the
    block and thread, and the address. Use it after a crash (illegal memory access) or a result that
    changes from run to run. Slow (10-100x a normal run); costs GPU budget.

    Args:
        check: "memcheck" (out-of-bounds and misaligned accesses) or "racecheck" (shared-memory races).
    """
    if check not in SANITIZER_TOOLS:
        raise ToolError(f"sanitize: check must be one of {', '.join(SANITIZER_TOOLS)}, not {check!r}")
    binary = refuse_without(
        ctx,
        "sanitize",
        find_cuda_tool("compute-sanitizer"),
        "the CUDA toolkit's compute-sanitizer was not found",
    )
    prefix = [binary, "--tool", check, "--print-limit", str(PRINT_LIMIT), "--show-backtrace", "no"]
    outcome = run_candidate_under(ctx, "sanitize", prefix)
    sources = tuple(p.relative_to(ctx.workspace.root).as_posix() for p in ctx.workspace.sources())
    report = parse_sanitizer(
        outcome.stdout + "\n" + outcome.stderr, check, ctx.sandbox.workspace_path, sources
    )
    data = report.model_dump(mode="json")
    if not report.findings and report.summary is None and not outcome.ok:
        raise ToolError(
            f"sanitize: compute-sanitizer {outcome.describe_failure()} without a report", data=data
        )
    return ToolReply(render_sanitizer(report), data=data)
