"""Per-kernel hardware facts from the build itself: ptxas's resource lines (the build passes
`--resource-usage`) read into registers, spills, static shared and constant memory, and the
theoretical occupancy those allow on the target architecture.

ptxas prints, for every entry function it compiles:

    ptxas info    : Compiling entry function '_Z5scalePffi' for 'sm_90'
    ptxas info    : Function properties for _Z5scalePffi
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 8 registers, used 1 barriers, 512 bytes smem, 368 bytes cmem[0]

An incremental build recompiles only edited files, so a workspace's facts are kept per source
file in `.harness/logs/kernel_resources.json` and replaced for the files the log shows rebuilt.
A single file's `load_inline` builds report the same lines (sandbox/workers/build/inline_build.py
compiles them with `--resource-usage` and keeps ninja's output); their kernels are named by the
extension's folder and the `.cu` load_inline wrote, e.g. `relu_ext/cuda.cu`.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import shutil
import subprocess

from pydantic import BaseModel, Field, ValidationError

from agent.workspace import Workspace
from sandbox.safe_files import UnsafePathError, read_regular, read_text, write_file

RESOURCES_FILE = ".harness/logs/kernel_resources.json"
ASSUMED_BLOCK = 256
REGISTER_ALLOCATION = 256  # registers are granted per warp in units of 256
SHARED_ALLOCATION = 128  # bytes
SUB_PARTITIONS = 4  # an SM's register file is split between 4 schedulers

_ENTRY = re.compile(r"Compiling entry function '(?P<name>[^']+)' for '(?P<arch>sm_\w+)'")
_PROPERTIES = re.compile(
    r"(?P<stack>\d+) bytes stack frame, (?P<stores>\d+) bytes spill stores, (?P<loads>\d+) bytes spill loads"
)
_INFO = re.compile(r"^ptxas info\s*:")
_USED = re.compile(r"ptxas info\s*: Used (?P<regs>\d+) registers(?P<rest>.*)")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[\d+\]")
_BARRIERS = re.compile(r"used (\d+) barriers")
_NVCC_SOURCE = re.compile(r"\s-c\s+(?P<source>\S+\.cu)(?:\s|$)")
_LAUNCH_BOUNDS = re.compile(
    r"__global__\s+(?:[\w:<>]+\s+)*?__launch_bounds__\s*\(\s*(?P<bound>[^,)]+)[^)]*\)\s*(?:[\w:<>*]+\s+)*?"
    r"(?P<name>\w+)\s*\("
)
_TIER_COPY = re.compile(r"\.(?:min|lean)\.cu$")  # inline_build's cut-down copies of a load_inline .cu
_CONSTANT = re.compile(
    r"(?:#define\s+(?P<macro>\w+)\s+|constexpr\s+\w+\s+(?P<const>\w+)\s*=\s*)\(?(?P<value>\d+)"
)


class ArchLimits(BaseModel):
    """Per-SM limits of one compute capability (CUDA C Programming Guide, table of technical
    specifications)."""

    registers: int = 65536
    max_threads: int
    max_blocks: int
    shared_per_sm: int = Field(description="bytes an SM can give its resident blocks")
    reserved_per_block: int = Field(default=1024, description="shared memory the system keeps per block")


ARCH_LIMITS: dict[str, ArchLimits] = {
    "sm_70": ArchLimits(max_threads=2048, max_blocks=32, shared_per_sm=96 * 1024, reserved_per_block=0),
    "sm_75": ArchLimits(max_threads=1024, max_blocks=16, shared_per_sm=64 * 1024, reserved_per_block=0),
    "sm_80": ArchLimits(max_threads=2048, max_blocks=32, shared_per_sm=164 * 1024),
    "sm_86": ArchLimits(max_threads=1536, max_blocks=16, shared_per_sm=100 * 1024),
    "sm_87": ArchLimits(max_threads=2048, max_blocks=16, shared_per_sm=164 * 1024),
    "sm_89": ArchLimits(max_threads=1536, max_blocks=24, shared_per_sm=100 * 1024),
    "sm_90": ArchLimits(max_threads=2048, max_blocks=32, shared_per_sm=228 * 1024),
    "sm_100": ArchLimits(max_threads=2048, max_blocks=32, shared_per_sm=228 * 1024),
    "sm_120": ArchLimits(max_threads=1536, max_blocks=32, shared_per_sm=100 * 1024),
}


class Occupancy(BaseModel):
    threads_per_block: int
    block_size_from: str = Field(description="'launch bounds' or 'assumed'")
    blocks_per_sm: int
    active_warps: int
    max_warps: int
    limiter: str = Field(description="registers | shared memory | threads | blocks per SM")

    @property
    def fraction(self) -> float:
        return self.active_warps / self.max_warps if self.max_warps else 0.0


class KernelResources(BaseModel):
    """One kernel as ptxas compiled it for one architecture."""

    kernel: str = Field(description="demangled name (the mangled one when c++filt is missing)")
    mangled: str
    arch: str = Field(description="e.g. sm_90")
    source: str | None = Field(default=None, description="the workspace file it came from")
    registers: int
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    stack_frame_bytes: int = 0
    shared_bytes: int = Field(default=0, description="static shared memory (dynamic is set at launch)")
    constant_bytes: int = Field(default=0, description="all constant banks (cmem[0] holds the parameters)")
    barriers: int = 0
    occupancy: Occupancy | None = None


def parse_ptxas(log: str) -> list[tuple[str | None, KernelResources]]:
    """(source file as the compile command named it, facts) for each entry function in the log,
    in order. The source is the `-c FILE.cu` of the nvcc command ninja printed before its output."""
    found: list[tuple[str | None, KernelResources]] = []
    source: str | None = None
    current: dict[str, object] | None = None
    for line in log.splitlines():
        command = _NVCC_SOURCE.search(line) if "nvcc" in line and " -c " in line else None
        if command is not None:
            source = command.group("source")
            continue
        if (entry := _ENTRY.search(line)) is not None:
            current = {"mangled": entry.group("name"), "arch": entry.group("arch")}
            continue
        if current is None:
            continue
        if (props := _PROPERTIES.search(line)) is not None:
            current.update(
                stack_frame_bytes=int(props.group("stack")),
                spill_store_bytes=int(props.group("stores")),
                spill_load_bytes=int(props.group("loads")),
            )
        elif (used := _USED.search(line)) is not None:
            rest = used.group("rest")
            smem = _SMEM.search(rest)
            barriers = _BARRIERS.search(rest)
            facts = KernelResources(
                kernel=str(current["mangled"]),
                registers=int(used.group("regs")),
                shared_bytes=int(smem.group(1)) if smem else 0,
                constant_bytes=sum(int(c) for c in _CMEM.findall(rest)),
                barriers=int(barriers.group(1)) if barriers else 0,
                **current,  # type: ignore[arg-type]
            )
            found.append((source, facts))
            current = None
    return found


def demangle(names: list[str]) -> dict[str, str]:
    """Mangled -> readable, through one c++filt call; names stay as they are without it."""
    tool = shutil.which("c++filt")
    if not names or tool is None:
        return {name: name for name in names}
    try:
        done = subprocess.run(
            [tool], input="\n".join(names) + "\n", capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return {name: name for name in names}
    readable = done.stdout.splitlines()
    if len(readable) != len(names):
        return {name: name for name in names}
    return dict(zip(names, readable, strict=True))


def base_name(kernel: str) -> str:
    """`void ns::scale<128>(float*, int)` -> `scale`: what a __global__ declaration names."""
    depth, cut = 0, len(kernel)
    for index, char in enumerate(kernel):
        if char in "<(":
            if depth == 0 and char == "(":
                cut = index
                break
            depth += char == "<"
        elif char == ">":
            depth -= 1
    head = re.sub(r"<.*>$", "", kernel[:cut].strip())
    return head.split("::")[-1].split()[-1] if head.split() else head


def launch_bounds(sources: dict[str, str]) -> dict[str, int]:
    """Kernel name -> the max threads per block its `__launch_bounds__` declares (a number, or a
    #define / constexpr of one in the same file)."""
    bounds: dict[str, int] = {}
    for text in sources.values():
        constants = {
            (m.group("macro") or m.group("const")): int(m.group("value")) for m in _CONSTANT.finditer(text)
        }
        for m in _LAUNCH_BOUNDS.finditer(text):
            raw = m.group("bound").strip()
            value = int(raw) if raw.isdigit() else constants.get(raw)
            if value:
                bounds[m.group("name")] = value
    return bounds


def occupancy(registers: int, shared_bytes: int, arch: str, threads: int, source: str) -> Occupancy | None:
    """Theoretical occupancy of one block size, as the CUDA occupancy calculator computes it
    (static shared memory only); None for an architecture not in ARCH_LIMITS."""
    limits = ARCH_LIMITS.get(re.sub(r"[af]$", "", arch))
    if limits is None or threads <= 0:
        return None
    warps_per_block = math.ceil(threads / 32)
    max_warps = limits.max_threads // 32
    by_limit = {
        "threads": max_warps // warps_per_block,
        "blocks per SM": limits.max_blocks,
    }
    if registers > 0:
        per_warp = math.ceil(registers * 32 / REGISTER_ALLOCATION) * REGISTER_ALLOCATION
        warps = SUB_PARTITIONS * ((limits.registers // SUB_PARTITIONS) // per_warp)
        by_limit["registers"] = warps // warps_per_block
    per_block = math.ceil((shared_bytes + limits.reserved_per_block) / SHARED_ALLOCATION) * SHARED_ALLOCATION
    if per_block > 0:
        by_limit["shared memory"] = limits.shared_per_sm // per_block
    order = ["threads", "blocks per SM", "registers", "shared memory"]  # ties: the hard limit first
    limiter = min(by_limit, key=lambda name: (by_limit[name], order.index(name)))
    blocks = by_limit[limiter]
    return Occupancy(
        threads_per_block=threads,
        block_size_from=source,
        blocks_per_sm=blocks,
        active_warps=blocks * warps_per_block,
        max_warps=max_warps,
        limiter=limiter,
    )


def kernel_resources(
    log: str, *, sandbox_root: str, sources: dict[str, str]
) -> tuple[set[str], list[KernelResources]]:
    """(workspace files the log shows compiled, their kernels' facts with occupancy). `sources`
    maps workspace-relative .cu paths to their text (for launch bounds)."""
    parsed = parse_ptxas(log)
    names = demangle(sorted({facts.mangled for _, facts in parsed}))
    bounds = launch_bounds(sources)
    compiled: set[str] = set()
    kernels: list[KernelResources] = []
    prefix = sandbox_root.rstrip("/") + "/"
    for source, facts in parsed:
        relative = source.removeprefix(prefix) if source else None
        if relative:
            compiled.add(relative)
        readable = names.get(facts.mangled, facts.mangled)
        bound = bounds.get(base_name(readable))
        threads, how = (bound, "launch bounds") if bound else (ASSUMED_BLOCK, "assumed")
        kernels.append(
            facts.model_copy(
                update={
                    "kernel": readable,
                    "source": relative,
                    "occupancy": occupancy(facts.registers, facts.shared_bytes, facts.arch, threads, how),
                }
            )
        )
    return compiled, kernels


def workspace_resources(workspace: Workspace, log: str | None, sandbox_root: str) -> list[KernelResources]:
    """The workspace's kernels now: the ones this build's log compiled, and the kept facts of the
    sources it did not recompile (an incremental build). Kept in .harness/, never following links."""
    kept = _load(workspace)
    present = {p.relative_to(workspace.root).as_posix() for p in workspace.sources()}
    if log is not None:
        texts = {
            rel: text
            for rel in present
            if rel.endswith(".cu") and (text := read_text(workspace.root, rel)) is not None
        }
        compiled, fresh = kernel_resources(log, sandbox_root=sandbox_root, sources=texts)
        kept = [k for k in kept if k.source not in compiled] + fresh
        kept = [k for k in kept if k.source is None or k.source in present]
        # Not written (a link in .harness/): the facts are still shown; the next incremental
        # build just lacks the kept ones.
        with contextlib.suppress(UnsafePathError):
            write_file(
                workspace.root,
                RESOURCES_FILE,
                json.dumps([k.model_dump(mode="json") for k in kept]).encode(),
            )
    return [k for k in kept if k.source is None or k.source in present]


def inline_resources(
    log: str | None, *, build_dir: str, solution_text: str, kept: list[KernelResources]
) -> list[KernelResources]:
    """A single file's kernels: those of the load_inline builds this log shows (in `build_dir`, one
    folder per extension; a cut-down copy's kernels named by the .cu load_inline wrote), and the
    `kept` facts of the extensions it did not recompile."""
    if log is None:
        return kept
    compiled, fresh = kernel_resources(log, sandbox_root=build_dir, sources={"solution": solution_text})
    rebuilt = {_TIER_COPY.sub(".cu", rel) for rel in compiled}
    fresh = [k.model_copy(update={"source": _TIER_COPY.sub(".cu", k.source or "") or None}) for k in fresh]
    return [k for k in kept if k.source not in rebuilt] + fresh


def parse_kept(raw: bytes | None) -> list[KernelResources]:
    """Facts kept by an earlier build (a JSON list); none when missing or unreadable."""
    if raw is None:
        return []
    try:
        return [KernelResources.model_validate(item) for item in json.loads(raw)]
    except (ValueError, TypeError, ValidationError):
        return []


def _load(workspace: Workspace) -> list[KernelResources]:
    return parse_kept(read_regular(workspace.root, RESOURCES_FILE))


def render_resources(kernels: list[KernelResources], limit: int = 12) -> str:
    """A compact table for the compile reply; empty without kernels."""
    if not kernels:
        return ""
    rows = [
        "kernel resources (ptxas; occupancy from registers and static shared memory, theoretical):",
        "kernel | arch | regs | spill st/ld B | smem B | cmem B | occupancy",
    ]
    for k in kernels[:limit]:
        name = k.kernel if len(k.kernel) <= 60 else k.kernel[:57] + "..."
        where = f" ({k.source})" if k.source else ""
        rows.append(
            f"{name}{where} | {k.arch} | {k.registers} | {k.spill_store_bytes}/{k.spill_load_bytes} | "
            f"{k.shared_bytes} | {k.constant_bytes} | {_occupancy_text(k.occupancy)}"
        )
    if len(kernels) > limit:
        rows.append(f"... and {len(kernels) - limit} more kernels")
    spilled = [k for k in kernels if k.spill_store_bytes or k.spill_load_bytes]
    if spilled:
        rows.append(
            f"{len(spilled)} kernel(s) spill registers to local memory: fewer live values, smaller "
            "per-thread arrays, or a looser __launch_bounds__"
        )
    return "\n".join(rows)


def _occupancy_text(value: Occupancy | None) -> str:
    if value is None:
        return "- (unknown architecture)"
    block = (
        f"{value.threads_per_block} threads/block (launch bounds)"
        if value.block_size_from == "launch bounds"
        else f"at {value.threads_per_block} threads/block"
    )
    if value.blocks_per_sm == 0:
        return f"0% {block}: the block does not fit ({value.limiter})"
    text = f"{100 * value.fraction:.0f}% {block}, {value.blocks_per_sm} blocks/SM"
    return text if value.fraction >= 1 else f"{text}, limited by {value.limiter}"


def without_resource_lines(log: str) -> str:
    """The log without ptxas's resource report (info lines and their property lines): what error
    summaries read, so a failed build's diagnostics are not flooded with it."""
    return "\n".join(
        line for line in log.splitlines() if not (_INFO.match(line) or _PROPERTIES.fullmatch(line.strip()))
    )
