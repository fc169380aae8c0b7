"""The ncu and sanitize tools: Nsight Compute's CSV and compute-sanitizer's report read into tables,
and the clear refusals where the tool or the GPU is missing."""

from __future__ import annotations

import importlib
import json
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.build.compile import CompileResult
from agent.messages import ToolCall
from agent.referee.results import FailureReport
from agent.tools import Toolbox, ToolContext, default_tools
from agent.tools.ncu import ncu, ncu_problem, parse_ncu_csv, render_ncu, workspace_kernels
from agent.tools.sanitize import parse_sanitizer, render_sanitizer, sanitize

# The modules (the package's names `ncu` and `sanitize` are the tools).
ncu_module = importlib.import_module("agent.tools.ncu")
sanitize_module = importlib.import_module("agent.tools.sanitize")
REPO = Path(__file__).resolve().parents[2]
MakeContext = Callable[..., ToolContext]

NCU_STDOUT = """\
==PROF== Connected to process 4121 (/usr/bin/python3.11)
==PROF== Profiling "relu_kernel" - 0: 0%....50%....100% - 31 passes
==PROF== Profiling "relu_tail_kernel" - 1: 0%....50%....100% - 31 passes
==PROF== Disconnected from process 4121
@@KERNEL_AGENT_RESULT@@ {"ok": true, "seconds": 3.2}
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4121","python3.11","127.0.0.1","relu_kernel","1","7","(256, 1, 1)","(16384, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","91.52"
"0","4121","python3.11","127.0.0.1","relu_kernel","1","7","(256, 1, 1)","(16384, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","11,392"
"0","4121","python3.11","127.0.0.1","relu_kernel","1","7","(256, 1, 1)","(16384, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","18.07"
"0","4121","python3.11","127.0.0.1","relu_kernel","1","7","(256, 1, 1)","(16384, 1, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","83.4"
"0","4121","python3.11","127.0.0.1","relu_kernel","1","7","(256, 1, 1)","(16384, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","ratio","0"
"0","4121","python3.11","127.0.0.1","relu_kernel","1","7","(256, 1, 1)","(16384, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","ratio","24.61"
"0","4121","python3.11","127.0.0.1","relu_kernel","1","7","(256, 1, 1)","(16384, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio","ratio","3.05"
"0","4121","python3.11","127.0.0.1","relu_kernel","1","7","(256, 1, 1)","(16384, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","ratio","1.12"
"0","4121","python3.11","127.0.0.1","relu_kernel","1","7","(256, 1, 1)","(16384, 1, 1)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio","ratio","0.08"
"1","4121","python3.11","127.0.0.1","relu_tail_kernel","1","7","(256, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","0.41"
"1","4121","python3.11","127.0.0.1","relu_tail_kernel","1","7","(256, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","2.3"
"1","4121","python3.11","127.0.0.1","relu_tail_kernel","1","7","(256, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","0.2"
"1","4121","python3.11","127.0.0.1","relu_tail_kernel","1","7","(256, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","n/a"
"""

MEMCHECK_STDOUT = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at relu_kernel(const float *, float *, long)+0x90 in /workspace/kernels/relu.cu:14
=========     by thread (31,0,0) in block (4095,0,0)
=========     Address 0x7f1c2e400000 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f1c2e000000 of size 4194304 bytes
=========
========= Invalid __global__ write of size 4 bytes
=========     at relu_kernel(const float *, float *, long)+0x90 in /workspace/kernels/relu.cu:14
=========     by thread (30,0,0) in block (4095,0,0)
=========     Address 0x7f1c2e3ffffc is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f1c2e000000 of size 4194304 bytes
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cudaStreamSynchronize.
=========
========= ERROR SUMMARY: 3 errors
"""

RACECHECK_STDOUT = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at block_sum(const float *, float *, int)+0x1a0 in /workspace/kernels/reduce.cu:20
=========     and Read access at block_sum(const float *, float *, int)+0x1f0 in /workspace/kernels/reduce.cu:24 [248 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""


def tool_call(name: str, arguments: dict[str, object]) -> ToolCall:
    return ToolCall.from_raw(id="call_1", name=name, raw_arguments=json.dumps(arguments))


def test_ncu_csv_is_read_per_launch_after_the_programs_own_output() -> None:
    relu, tail = parse_ncu_csv(NCU_STDOUT)
    assert (relu.launch, relu.kernel, relu.grid, relu.block) == (
        0,
        "relu_kernel",
        "(16384, 1, 1)",
        "(256, 1, 1)",
    )
    assert (relu.dram_pct, relu.sm_pct, relu.achieved_occupancy_pct) == (91.52, 18.07, 83.4)
    assert relu.time_us == pytest.approx(11.392)  # "11,392" nanoseconds
    assert [(s.reason, s.cycles_per_issue) for s in relu.stalls] == [
        ("long_scoreboard", 24.61),
        ("lg_throttle", 3.05),
        ("wait", 1.12),
    ]
    assert tail.time_us == pytest.approx(2.3) and tail.achieved_occupancy_pct is None and tail.stalls == []


def test_the_ncu_table_reads_each_launch() -> None:
    table = render_ncu(parse_ncu_csv(NCU_STDOUT))
    assert "2 launch(es) of your kernels profiled" in table
    relu_row = next(line for line in table.splitlines() if line.startswith("relu_kernel |"))
    assert "(16384, 1, 1) x (256, 1, 1) | 11.4 | 91.5 | 18.1 | 83.4 | long_scoreboard 25" in relu_row
    assert relu_row.endswith("memory-bound")
    assert "latency-bound" in table  # the one-block tail kernel keeps nothing busy


def test_ncu_refusals_of_its_own_are_one_line() -> None:
    assert parse_ncu_csv("==PROF== Disconnected from process 1\n") == []
    restricted = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters"
    assert "restricted to administrators" in (ncu_problem(restricted) or "")
    assert ncu_problem("==ERROR== No supported GPU found\n") == "No supported GPU found"
    assert ncu_problem("all fine") is None


def test_memcheck_names_kernel_line_block_thread_and_address() -> None:
    report = parse_sanitizer(MEMCHECK_STDOUT, "memcheck", "/workspace")
    (finding,) = report.findings
    assert finding.what == "Invalid __global__ write of size 4 bytes"
    assert finding.kernel == "relu_kernel(const float *, float *, long)"
    assert finding.location == "kernels/relu.cu:14"
    assert (finding.block, finding.thread, finding.address) == ("(4095,0,0)", "(31,0,0)", "0x7f1c2e400000")
    assert "1 bytes after the nearest allocation" in finding.detail and finding.count == 2
    assert report.summary == "3 errors" and "cudaErrorLaunchFailure" in report.api_errors[0]
    text = render_sanitizer(report)
    assert text.splitlines()[0] == "compute-sanitizer memcheck: 1 distinct finding(s) (3 errors)"
    assert (
        "1. Invalid __global__ write of size 4 bytes in relu_kernel(const float *, float *, long), "
        "at kernels/relu.cu:14, block (4095,0,0), thread (31,0,0), address 0x7f1c2e400000: is out of bounds"
    ) in text
    assert "(x2 reports, first shown)" in text


def test_racecheck_names_both_accesses() -> None:
    report = parse_sanitizer(RACECHECK_STDOUT, "racecheck", "/workspace")
    (race,) = report.findings
    assert race.what == "Error: race between a write access and a read access"
    assert (race.location, race.other_location, race.detail) == (
        "kernels/reduce.cu:20",
        "kernels/reduce.cu:24",
        "248 hazards",
    )
    assert "1 hazard displayed" in render_sanitizer(report)


def test_a_clean_run_says_no_findings() -> None:
    report = parse_sanitizer(
        "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n", "memcheck", "/w"
    )
    assert render_sanitizer(report) == "compute-sanitizer memcheck: no findings (0 errors)"


def test_the_newer_access_line_and_a_workspace_reached_through_another_folder() -> None:
    text = MEMCHECK_STDOUT.replace(
        "Address 0x7f1c2e400000 is out of bounds", "Access to 0x7f1c2e400000 is out of bounds"
    )
    text = text.replace("/workspace/kernels/relu.cu", "/tmp/gpu-tools-x/ws/kernels/relu.cu")
    (finding,) = parse_sanitizer(text, "memcheck", "/workspace", ("binding.cpp", "kernels/relu.cu")).findings
    assert (finding.address, finding.detail.split(",")[0]) == ("0x7f1c2e400000", "is out of bounds")
    assert finding.location == "kernels/relu.cu:14"


def test_files_outside_the_workspace_are_named_by_file_name_only() -> None:
    text = MEMCHECK_STDOUT.replace("/workspace/kernels/relu.cu", "/usr/include/cuda/std/detail/x.h")
    (finding,) = parse_sanitizer(text, "memcheck", "/workspace").findings
    assert finding.location == "x.h:14"


def test_the_kernels_profiled_are_the_workspaces_own(make_context: MakeContext) -> None:
    ctx = make_context()
    (ctx.workspace.root / "kernels").mkdir(exist_ok=True)
    (ctx.workspace.root / "kernels" / "a.cu").write_text(
        "__global__ void __launch_bounds__(256) relu_kernel(const float* x, float* y, long n) {}\n"
        'extern "C" __global__ void tail(float* y) {}\n'
        "template <int N> __global__ void tiled(float* y) {}\n__device__ float helper(float x) { return x; }\n"
    )
    assert workspace_kernels(ctx) == ["relu_kernel", "tail", "tiled"]


@pytest.mark.parametrize(("name", "arguments"), [("ncu", {}), ("sanitize", {"check": "memcheck"})])
def test_a_missing_tool_is_refused_in_one_line(
    make_context: MakeContext, monkeypatch: pytest.MonkeyPatch, name: str, arguments: dict[str, object]
) -> None:
    for module in (ncu_module, sanitize_module):
        monkeypatch.setattr(module, "find_cuda_tool", lambda _name: None)
    output = Toolbox([ncu, sanitize]).call(make_context(), tool_call(name, arguments))
    assert output.is_error and "not installed on this machine" in output.content
    assert "\n" not in output.content


@pytest.mark.parametrize(("name", "arguments"), [("ncu", {}), ("sanitize", {"check": "racecheck"})])
def test_no_gpu_is_refused_before_anything_runs(
    make_context: MakeContext, monkeypatch: pytest.MonkeyPatch, name: str, arguments: dict[str, object]
) -> None:
    for module in (ncu_module, sanitize_module):
        monkeypatch.setattr(module, "find_cuda_tool", lambda _name: "/opt/nvidia/bin/tool")
    monkeypatch.setattr(ncu_module, "gpu_present", lambda: False)
    ctx = make_context()
    output = Toolbox([ncu, sanitize]).call(ctx, tool_call(name, arguments))
    assert output.is_error and output.content.endswith(
        "refused, there is no GPU on this machine; nothing was run"
    )
    assert ctx.budget.usage().gpu == 0


def test_an_unknown_sanitizer_check_is_refused(make_context: MakeContext) -> None:
    output = Toolbox([sanitize]).call(make_context(), tool_call("sanitize", {"check": "initcheck"}))
    assert output.is_error and "racecheck" in output.content


def test_the_tools_are_offered_only_where_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    import agent.tools as tools

    monkeypatch.setattr(tools, "find_cuda_tool", lambda name: None)
    assert not {"ncu", "sanitize"} & {t.name for t in default_tools()}
    monkeypatch.setattr(tools, "find_cuda_tool", lambda name: f"/usr/local/cuda/bin/{name}")
    names = [t.name for t in default_tools(shell_enabled=True)]
    assert {"ncu", "sanitize"} <= set(names) and names[-1] == "shell"


@pytest.mark.slow
def test_the_run_worker_reports_a_missing_gpu() -> None:
    done = subprocess.run(
        [sys.executable, "-I", str(REPO / "sandbox" / "workers" / "referee" / "ncu_run.py"), "{}"],
        capture_output=True,
        text=True,
        timeout=300,
        env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"},
    )
    record = json.loads(done.stdout.strip().splitlines()[-1].split(" ", 1)[1])
    assert record == {"ok": False, "kind": "no_gpu", "message": "CUDA is not available in the sandbox"}


@pytest.mark.slow
def test_a_sandbox_without_a_gpu_is_refused_after_the_build(
    make_context: MakeContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real sandbox runs the worker under a stand-in for compute-sanitizer (which just runs the
    program): the worker finds no CUDA, the tool says so, and the seconds are charged."""
    ctx = make_context()
    stand_in = ctx.workspace.root / "stand-in-sanitizer.sh"
    stand_in.write_text('#!/bin/sh\nshift 6\nexec "$@"\n')  # --tool X --print-limit N --show-backtrace no
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(
        sanitize_module, "find_cuda_tool", lambda _name: f"{ctx.sandbox.workspace_path}/{stand_in.name}"
    )
    monkeypatch.setattr(ncu_module, "gpu_present", lambda: True)
    built = CompileResult(
        ok=True,
        status="up_to_date",
        solution_kind="workspace",
        content_hash="x",
        arch="9.0",
        arch_source="test",
        build_dir="/nowhere",
        module_path="/nowhere/kernel_agent_extension.so",
        duration_s=0.0,
    )
    monkeypatch.setattr(ncu_module, "compile_solution", lambda *args, **kwargs: built)
    output = Toolbox([sanitize]).call(ctx, tool_call("sanitize", {}))
    assert (
        output.is_error
        and output.content == "sanitize: refused, the sandbox has no GPU (CUDA is not available there)"
    )
    assert ctx.budget.usage().gpu > 0


@pytest.mark.parametrize(("kind", "offered"), [("cuda_error", True), ("exception", False)])
def test_a_cuda_error_in_verify_offers_the_sanitizer(
    monkeypatch: pytest.MonkeyPatch, kind: str, offered: bool
) -> None:
    pipeline = importlib.import_module("agent.tools.pipeline")
    monkeypatch.setattr(pipeline, "find_cuda_tool", lambda name: f"/usr/local/cuda/bin/{name}")
    failure = FailureReport(stage="trial 0", kind=kind, message="an illegal memory access was encountered")
    candidate = SimpleNamespace(result=SimpleNamespace(failure=failure))
    offer = pipeline._sanitizer_offer(candidate)
    assert ("call sanitize (memcheck)" in offer) is offered
    monkeypatch.setattr(pipeline, "find_cuda_tool", lambda name: None)
    assert pipeline._sanitizer_offer(candidate) == ""  # never offered where it is not installed
