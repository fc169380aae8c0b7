"""The task brief (what the model is told before its first turn), the speed-of-light lines of a
profile, and the start_from_template tool."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.referee import EvalOptions
from agent.referee.report import feedback
from agent.referee.results import EvalResult
from agent.referee.roofline import WorkEstimate, gpu_peaks, speed_of_light_lines
from agent.run.brief import NO_GPU, BaselineTimes, TaskFacts, gather_facts, render_brief
from agent.run.prompts import build_prompts
from agent.run.solve import SolveConfig
from agent.tasks import Task, instantiate_tasks, parse_task
from agent.tools import ToolContext
from agent.tools.base import ToolError, ToolReply
from agent.tools.library import start_from_template
from agent.workspace import Workspace
from sandbox.base import open_sandbox

REPO = Path(__file__).resolve().parents[2]
KERNELBENCH = REPO.parent / "shared" / "kernelbench"
RELU = KERNELBENCH / "level1" / "19_ReLU.py"
GEMM = KERNELBENCH / "level2" / "76_Gemm_Add_ReLU.py"
GPT = KERNELBENCH / "level3" / "44_MiniGPTBlock.py"
RECORDED_PROFILE = REPO / "benchmarks/results/fullsize-h200-2026-12-02b/probe/eval_19_ReLU_run1.json"

pytestmark = pytest.mark.skipif(not KERNELBENCH.is_dir(), reason=f"KernelBench is not at {KERNELBENCH}")


@pytest.fixture(scope="module")
def tasks() -> dict[str, Task]:
    """The three tasks, inspected in a sandbox (output shapes learned on meta)."""
    loaded = instantiate_tasks([parse_task(p) for p in (RELU, GEMM, GPT)])
    return {task.name: task for task in loaded}


@pytest.fixture(scope="module")
def dry_run_facts(tasks: dict[str, Task]) -> dict[str, TaskFacts]:
    """Each task's facts as a dry run (no GPU) gathers them: traced, nothing timed."""
    return {
        name: gather_facts(task, options=EvalOptions(), gpu=None, baseline="compile")
        for name, task in tasks.items()
    }


def _row(brief: str, name: str) -> str:
    return next(line for line in brief.splitlines() if line.startswith(f"- {name} "))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "outputs", "matmul_flops"),
    [
        ("19_ReLU", "float32[4096, 393216]", 0),
        ("76_Gemm_Add_ReLU", "float32[1024, 8192]", 2 * 1024 * 8192 * 8192),
        ("44_MiniGPTBlock", "float32[128, 512, 768]", None),
    ],
)
def test_the_brief_of_a_dry_run_has_every_item(
    dry_run_facts: dict[str, TaskFacts], name: str, outputs: str, matmul_flops: int | None
) -> None:
    facts = dry_run_facts[name]
    brief = render_brief(facts)
    assert outputs in _row(brief, "Outputs")
    assert _row(brief, "Baselines").endswith(NO_GPU)
    assert re.search(
        r"[\d.]+ [kMGT]?FLOP \(.*in matrix products\), [\d.]+ [kMGT]?B compulsory", _row(brief, "Work")
    )
    assert f"memory: {NO_GPU}" in _row(brief, "Floors")
    assert "compute: no GPU" in _row(brief, "Floors")
    assert "float32: atol 0.001, rtol 0.001, norm 0.0001" in _row(brief, "Tolerance")
    assert "faster than torch.compile beyond the measured noise" in _row(brief, "Target")
    assert "speedup vs torch.compile" in _row(brief, "Ranking")
    assert facts.work is not None and facts.work.flops > 0
    if matmul_flops is not None:
        assert facts.work.matmul_flops == matmul_flops
    else:  # level 3: nearly all of a transformer block's work is in its matrix products
        assert facts.work.matmul_flops > 0.9 * facts.work.flops


def test_compulsory_bytes_are_inputs_weights_and_outputs(dry_run_facts: dict[str, TaskFacts]) -> None:
    relu, gemm = dry_run_facts["19_ReLU"].work, dry_run_facts["76_Gemm_Add_ReLU"].work
    assert relu is not None and relu.bytes == 2 * 4096 * 393216 * 4
    assert gemm is not None and gemm.bytes == 4 * (1024 * 8192 + 8192 * 8192 + 8192 + 1024 * 8192)


def test_the_brief_says_which_tasks_the_template_library_covers(dry_run_facts: dict[str, TaskFacts]) -> None:
    assert dry_run_facts["19_ReLU"].covered is True
    assert "start_from_template" in _row(render_brief(dry_run_facts["19_ReLU"]), "Library")
    gpt = dry_run_facts["44_MiniGPTBlock"]
    assert gpt.covered is False
    assert "not covered: the template library lacks" in _row(render_brief(gpt), "Library")


def test_on_a_gpu_the_brief_gives_baseline_times_and_floors_in_ms(
    dry_run_facts: dict[str, TaskFacts],
) -> None:
    facts = dry_run_facts["76_Gemm_Add_ReLU"].model_copy(
        update={
            "gpu": "NVIDIA H200 (sm_90)",
            "peaks": gpu_peaks("NVIDIA H200"),
            "baselines": BaselineTimes(
                eager_ms=2.5,
                compile_ms=2.0,
                compile_mode="default",
                bandwidth_gbps=4000.0,
                noise={"eager": 0.01},
            ),
        }
    )
    brief = render_brief(facts)
    assert "eager 2.5 ms, torch.compile[default] 2 ms on this GPU (noise eager ±1.0%)" in _row(
        brief, "Baselines"
    )
    floors = _row(brief, "Floors")
    memory_ms = 4 * (2 * 1024 * 8192 + 8192 * 8192 + 8192) / 4000e9 * 1e3
    assert f"memory {memory_ms:.4g} ms at the measured 4000 GB/s" in floors
    assert "with tensor cores" in floors and "H200 SXM: FP32 67, TF32 494.7" in floors


def test_an_unknown_gpu_has_no_compute_floor(dry_run_facts: dict[str, TaskFacts]) -> None:
    facts = dry_run_facts["19_ReLU"].model_copy(
        update={"gpu": "Some Future GPU", "peaks": gpu_peaks("Some Future GPU")}
    )
    assert "compute: unknown GPU" in _row(render_brief(facts), "Floors")


def test_the_task_prompt_carries_the_brief_and_the_system_prompt_does_not_change(
    tasks: dict[str, Task], dry_run_facts: dict[str, TaskFacts]
) -> None:
    task = tasks["76_Gemm_Add_ReLU"]
    common = {
        "policy": "strict",
        "baseline": "compile",
        "gpu": None,
        "arch": "9.0",
        "budget_line": "turns 0/10",
    }
    plain = build_prompts(task, **common)
    briefed = build_prompts(task, **common, brief=render_brief(dry_run_facts[task.name]))
    assert render_brief(dry_run_facts[task.name]) in briefed.task
    assert "- Tolerance" in plain.task and "float32[1024, 8192]" in plain.task
    assert briefed.system == plain.system


def test_solve_ranks_against_torch_compile_by_default() -> None:
    assert SolveConfig(task=Path("t.py"), out=Path("o")).baseline == "compile"


def test_a_recorded_profile_shows_the_speed_of_light() -> None:
    result = EvalResult.model_validate(json.loads(RECORDED_PROFILE.read_text()))
    work = WorkEstimate(flops=4096 * 393216, matmul_flops=0, bytes=2 * 4096 * 393216 * 4)
    text = feedback(result, work=work)
    assert "speed of light: 12.9 GB, 1.61 GFLOP; floors: memory 3.07 ms, compute" in text
    assert "(memory-bound, floor 3.07 ms)" in text
    # yours 6.195 ms, eager 3.035 ms, torch.compile 3.024 ms against a 3.07 ms floor
    assert "% of floor: yours 50% | eager 101% | torch.compile 102%" in text
    assert "torch.compile is at 102% of the memory floor: little is left to gain here" in text


def test_speed_of_light_without_traced_work_uses_the_judges_bytes() -> None:
    result = EvalResult.model_validate(json.loads(RECORDED_PROFILE.read_text()))
    assert result.performance is not None
    lines = speed_of_light_lines(result.performance, None, "NVIDIA H200")
    assert lines[0].startswith("speed of light: 12.9 GB; floors: memory 3.07 ms, compute unknown")
    slow = result.performance.model_copy(update={"bandwidth_gbps": None})
    assert speed_of_light_lines(slow, None, "NVIDIA H200") == [
        "speed of light: unknown (no bandwidth measured)"
    ]


@pytest.fixture
def library_context(
    tmp_path: Path, make_context: Callable[..., ToolContext]
) -> Callable[[Path], ToolContext]:
    def make(task_path: Path) -> ToolContext:
        task = parse_task(task_path)
        ctx = make_context()
        ws = Workspace.create(tmp_path / task.name, task)
        ctx.task, ctx.workspace = task, ws
        ctx.sandbox = open_sandbox("local", workspace=ws.root)
        return ctx

    return make


@pytest.mark.slow
def test_start_from_template_writes_the_librarys_workspace(
    library_context: Callable[[Path], ToolContext],
) -> None:
    ctx = library_context(RELU)
    reply = start_from_template(ctx, {})
    assert isinstance(reply, ToolReply)
    assert reply.data is not None and reply.data["covered"] is True
    files = reply.data["files"]
    assert "model_new.py" in files and "kernels/tune.json" in files and "kernels/tk_binding.cpp" in files
    assert any(f.endswith(".cu") for f in files)
    assert "class ModelNew" in (ctx.workspace.root / "model_new.py").read_text()
    assert json.loads((ctx.workspace.root / "kernels/tune.json").read_text())
    assert "wrote the template library's start" in reply.text


@pytest.mark.slow
def test_start_from_template_names_what_an_uncovered_task_lacks(
    library_context: Callable[[Path], ToolContext],
) -> None:
    ctx = library_context(GPT)
    before = sorted(p.relative_to(ctx.workspace.root) for p in ctx.workspace.root.rglob("*") if p.is_file())
    with pytest.raises(ToolError, match=r"does not cover this task .*it lacks: .*masked_fill"):
        start_from_template(ctx, {})
    after = sorted(p.relative_to(ctx.workspace.root) for p in ctx.workspace.root.rglob("*") if p.is_file())
    assert after == before


@pytest.mark.slow
def test_baselines_are_timed_by_the_judge_once_then_read_from_the_cache(tmp_path: Path) -> None:
    from agent.referee.baselines import BaselineCache
    from agent.run.brief import measure_baselines
    from tests.referee.conftest import QUICK_TIMING

    task = parse_task(REPO / "tests" / "adversarial" / "tasks" / "relu.py")
    options = EvalOptions(device="cpu", compile_mode=None, timing=QUICK_TIMING)
    cache = BaselineCache(tmp_path / "baselines.json")
    with open_sandbox("local", workspace=tmp_path) as box:
        first = measure_baselines(task, options, box, gpu="cpu", cache=cache)
        again = measure_baselines(task, options, box, gpu="cpu", cache=cache)
    assert first.errors == {} and first.eager_ms is not None and first.eager_ms > 0
    assert not first.cached and len(cache) == 1
    assert again.cached and again.eager_ms == first.eager_ms


def test_a_convolution_counts_two_flops_per_multiply_add() -> None:
    from agent.run.work import estimate_work
    from agent.templates.graph import OpGraph

    const = [{"t": "const", "value": v} for v in ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)]
    graph = OpGraph.model_validate(
        {
            "path": "conv.py",
            "device": "meta",
            "inputs": [{"index": 0, "kind": "tensor", "shape": [2, 3, 8, 8], "dtype": "float32"}],
            "params": [
                {
                    "name": "conv.weight",
                    "kind": "parameter",
                    "shape": [4, 3, 3, 3],
                    "stride": [27, 9, 3, 1],
                    "dtype": "float32",
                }
            ],
            "nodes": [
                {
                    "id": 0,
                    "op": "aten.convolution.default",
                    "args": [
                        {"t": "input", "index": 0},
                        {"t": "param", "name": "conv.weight"},
                        {"t": "const", "value": None},
                        *const,
                    ],
                    "outputs": [{"shape": [2, 4, 6, 6], "stride": [144, 36, 6, 1], "dtype": "float32"}],
                }
            ],
            "outputs": [{"t": "node", "id": 0}],
        }
    )
    work = estimate_work(graph)
    assert work.flops == work.matmul_flops == 2 * (2 * 4 * 6 * 6) * (3 * 3 * 3)
    assert work.bytes == 4 * (2 * 3 * 8 * 8 + 4 * 3 * 3 * 3 + 2 * 4 * 6 * 6)


def _hot_lines(brief: str) -> list[str]:
    """The hot-region row: its sentence, then the table lines indented under it."""
    lines = brief.splitlines()
    start = lines.index(_row(brief, "Hot regions"))
    return [lines[start], *(line for line in lines[start + 1 :] if line.startswith("    "))]


def test_a_whole_models_brief_has_the_hot_region_table_and_an_operators_does_not(
    dry_run_facts: dict[str, TaskFacts],
) -> None:
    gpt = render_brief(dry_run_facts["44_MiniGPTBlock"])
    head, columns, *rows = _hot_lines(gpt)
    assert "fusible regions by share of the forward's time" in head
    assert "estimated from each region's FLOPs and bytes" in head and "not measured on this GPU" in head
    assert columns.split() == ["region", "share", "GFLOP", "MB", "%", "floor", "headroom", "us", "template"]
    shares = [float(re.search(r"([\d.]+)% ", row)[1]) for row in rows]  # type: ignore[index]
    assert shares == sorted(shares, reverse=True) and abs(sum(shares) - 100) < 1
    assert rows[0].split()[1] == "gemm:"  # the MLP's GEMMs hold most of a transformer block's time
    # the region the library lacks (split, eq, masked_fill) is marked as such
    assert any(" attention: " in row and row.endswith(" no") for row in rows)
    for single in ("19_ReLU", "76_Gemm_Add_ReLU"):
        facts = dry_run_facts[single]
        assert facts.hot is None and facts.hot_note == "one region"
        assert "Hot regions" not in render_brief(facts)


def test_the_hot_region_table_names_the_top_regions_and_sums_the_rest(
    dry_run_facts: dict[str, TaskFacts],
) -> None:
    from agent.regions.hot import HotRegion, HotRegionTable

    rows = [
        HotRegion(
            region=i,
            label=f"r{i:02d} elementwise: add",
            kind="elementwise",
            covered=i % 2 == 0,
            share=(20 - i) / 170,
            time_s=(20 - i) * 1e-6,
            flops=1e9,
            bytes=10**6,
            floor_s=1e-6,
            pct_of_floor=100 / (20 - i),
            headroom_s=(19 - i) * 1e-6,
        )
        for i in range(20)
    ]
    gpt = dry_run_facts["44_MiniGPTBlock"].hot
    assert gpt is not None
    table = HotRegionTable(
        task="model.py",
        source="measured (torch.profiler on the GPU)",
        measured=True,
        rates=gpt.rates,
        total_s=170e-6,
        covered_share=0.5,
        regions=rows,
    )
    facts = dry_run_facts["44_MiniGPTBlock"].model_copy(update={"hot": table})
    head, _, *shown = _hot_lines(render_brief(facts))
    assert ", measured (torch.profiler on the GPU);" in head and "estimated" not in head
    assert len(shown) == 9 and [row.split()[0] for row in shown[:8]] == [f"r{i:02d}" for i in range(8)]
    rest = shown[8].split()
    assert rest[:3] == ["12", "more", "regions"]
    assert rest[3] == f"{100 * sum(range(1, 13)) / 170:.1f}%"  # the 12 smallest regions' shares, summed
    assert rest[4:6] == ["12.0", "12.0"]  # GFLOP and MB, summed
    assert shown[8].endswith("6 of 12")  # of them, how many the library has templates for
