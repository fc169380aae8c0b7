"""The region tools: a whole model's region opened as a sub-workspace of its own (its task, its files,
its verdicts), the whole model back, and the regions' verified work composed into the whole model's
model_new.py and judged there."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.budget import Budget
from agent.messages import ToolCall
from agent.referee import EvalOptions
from agent.regions.compose import check_composition
from agent.run.region_records import RegionRun
from agent.tasks import Task, load_task, parse_task
from agent.templates.graph import trace_task
from agent.tools import RegionDesk, Toolbox, ToolContext, ToolSettings, default_tools
from agent.tools.candidates import CandidateBook
from agent.workspace import MODEL_ENTRY, Workspace
from sandbox.base import open_sandbox
from tests.run.conftest import UNLIMITED, RecordedEvents
from tests.run.fakes import FakeReferee

TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int = 64, hidden: int = 32):
        super().__init__()
        self.linear = nn.Linear(features, hidden)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x):
        return torch.softmax(self.norm(torch.relu(self.linear(x))), dim=-1)


batch_size = 8


def get_inputs():
    return [torch.rand(batch_size, 64)]


def get_init_inputs():
    return [64, 32]
"""

# A region solution in torch: the CPU can run it (the composition check), and the fake referee
# judges it correct. It ignores the region's own kernels on purpose; the standalone wrapper still
# builds the region workspace's extension from binding.cpp.
SOFTMAX_SOLUTION = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a0):
        return torch.softmax(a0, dim=-1)
"""


def call(name: str, arguments: dict | None = None) -> ToolCall:
    return ToolCall.from_raw(id="c", name=name, raw_arguments=json.dumps(arguments or {}))


@pytest.fixture
def whole_task(tmp_path: Path) -> Task:
    path = tmp_path / "three_regions.py"
    path.write_text(TASK)
    return parse_task(path)


@pytest.fixture
def ctx(tmp_path: Path, whole_task: Task, build_cache: Path) -> Iterator[ToolContext]:
    ws = Workspace.create(tmp_path / "ws", whole_task)
    desk = RegionDesk(
        folder=tmp_path / "out" / "regions",
        open_sandbox=lambda root: open_sandbox("local", workspace=root, cache_dir=build_cache),
        load_task=lambda path: load_task(path),
        trace=lambda: trace_task(Path(whole_task.path)),
    )
    context = ToolContext(
        task=whole_task,
        workspace=ws,
        sandbox=open_sandbox("local", workspace=ws.root, cache_dir=build_cache),
        referee=FakeReferee(),
        budget=Budget(UNLIMITED),
        candidates=CandidateBook(),
        events=RecordedEvents(),
        settings=ToolSettings(referee=EvalOptions(arch="sm_90")),
        regions=desk,
    )
    yield context
    desk.close()


def test_region_tools_are_offered_for_whole_models_only() -> None:
    assert "open_region" not in {s.name for s in Toolbox(default_tools()).specs}
    names = {s.name for s in Toolbox(default_tools(regions=True)).specs}
    assert {"open_region", "open_whole_model", "compose_regions"} <= names


def test_a_region_opens_as_its_own_task_and_workspace(ctx: ToolContext, whole_task: Task) -> None:
    toolbox = Toolbox(default_tools(regions=True))
    whole_ws = ctx.workspace
    opened = toolbox.call(ctx, call("open_region", {"region": 2}))
    assert not opened.is_error, opened.content
    assert "r02 softmax" in opened.content and "float32[8, 32]" in opened.content
    assert ctx.region == 2 and ctx.task is not whole_task and ctx.workspace is not whole_ws
    assert "_softmax" in (ctx.workspace.root / "reference.py").read_text()
    assert whole_ws.root not in ctx.workspace.root.parents  # a region is never part of the whole's files

    # The file tools and the referee act on the region; its verdicts are its own.
    wrote = toolbox.call(ctx, call("write_file", {"path": MODEL_ENTRY, "content": SOFTMAX_SOLUTION}))
    assert not wrote.is_error, wrote.content
    assert "softmax" in (ctx.workspace.root / MODEL_ENTRY).read_text()
    assert not (whole_ws.root / MODEL_ENTRY).exists()
    verified = toolbox.call(ctx, call("verify"))
    assert not verified.is_error, verified.content
    event = ctx.events[-1]  # type: ignore[index]
    assert event.region == 2 and event.result["task"]["name"] == ctx.task.name

    refused = toolbox.call(ctx, call("submit"))
    assert refused.is_error and "compose_regions" in refused.content

    back = toolbox.call(ctx, call("open_whole_model"))
    assert "region r02 keeps its files" in back.content
    assert ctx.region is None and ctx.task is whole_task and ctx.workspace is whole_ws
    assert ctx.candidates.best is None  # the region's verified candidate is the region's

    again = toolbox.call(ctx, call("open_region", {"region": 2}))
    assert "reopened" in again.content and "best verified candidate" in again.content
    assert "softmax" in (ctx.workspace.root / MODEL_ENTRY).read_text()


def test_bad_region_numbers_are_the_models_to_fix(ctx: ToolContext) -> None:
    toolbox = Toolbox(default_tools(regions=True))
    missing = toolbox.call(ctx, call("open_region", {"region": 9}))
    assert missing.is_error and "r00 to r02" in missing.content
    nothing = toolbox.call(ctx, call("compose_regions"))
    assert nothing.is_error and "no region has a verified candidate" in nothing.content
    unverified = toolbox.call(ctx, call("compose_regions", {"regions": [1]}))
    assert unverified.is_error and "r01" in unverified.content


def test_compose_writes_the_whole_model_and_verifies_it_there(ctx: ToolContext, whole_task: Task) -> None:
    toolbox = Toolbox(default_tools(regions=True))
    toolbox.call(ctx, call("open_region", {"region": 2}))
    toolbox.call(ctx, call("write_file", {"path": MODEL_ENTRY, "content": SOFTMAX_SOLUTION}))
    toolbox.call(ctx, call("verify"))

    composed = toolbox.call(ctx, call("compose_regions"))
    assert not composed.is_error, composed.content
    assert ctx.region is None and ctx.task is whole_task
    assert "composing r02; in torch: r00 gemm: addmm+relu, r01 norm: native_layer_norm" in composed.content
    assert composed.data is not None and composed.data["composed"] == [2]
    text = (ctx.workspace.root / MODEL_ENTRY).read_text()
    assert "class ModelNew" in text and "torch.softmax(a0, dim=-1)" in text
    # The whole model's verdict is the run's: recorded in its own book, with no region.
    assert ctx.candidates.best is not None and ctx.events[-1].region is None  # type: ignore[index]


@pytest.mark.slow
def test_the_composition_matches_the_model_on_the_cpu(ctx: ToolContext, whole_task: Task) -> None:
    """The composed model_new.py (the region's standalone module, its extension built from the region
    workspace's binding with torch alone) against the task's Model, in a sandbox on the CPU."""
    toolbox = Toolbox(default_tools(regions=True))
    toolbox.call(ctx, call("open_region", {"region": 2}))
    toolbox.call(ctx, call("write_file", {"path": MODEL_ENTRY, "content": SOFTMAX_SOLUTION}))
    toolbox.call(ctx, call("verify"))
    ctx.referee = FakeReferee(compile_for_real=True)  # the whole workspace's build and load check
    composed = toolbox.call(ctx, call("compose_regions"))
    assert not composed.is_error, composed.content
    assert ctx.candidates.best is not None and ctx.candidates.best.result.compile.ok
    text = (ctx.workspace.root / MODEL_ENTRY).read_text()
    check = check_composition(Path(whole_task.path), text)
    assert check.ok, check.error
    assert check.max_abs_diff is not None and check.max_abs_diff < 1e-5
    assert sys.modules.get("cuda_extension") is None  # it ran in the sandbox, not here


def test_a_run_solves_a_region_composes_and_submits_the_whole_model(tmp_path: Path) -> None:
    """`agent solve` on a whole model: the brief offers the regions, the model works in region r02's
    sub-workspace, composes, submits; the run returns the whole model and its transcript shows the
    region's verdict apart from the whole model's."""
    from agent.models.scripted import tool_call_turn
    from agent.transcripts.reader import read_transcript
    from agent.transcripts.show import summarize
    from tests.run.conftest import run_solve

    path = tmp_path / "three_regions.py"
    path.write_text(TASK)
    task = load_task(path)
    steps = [
        tool_call_turn("open_region", {"region": 2}),
        tool_call_turn("write_file", {"path": MODEL_ENTRY, "content": SOFTMAX_SOLUTION}),
        tool_call_turn("verify"),
        tool_call_turn("submit"),  # refused: a region is not the task
        tool_call_turn("compose_regions"),
        tool_call_turn("submit", {"summary": "softmax in its own region"}),
    ]
    out = tmp_path / "out"
    result, model = run_solve(out, steps, task, cache_dir=tmp_path / "cache")
    model.assert_complete()

    assert "open_region" in {t.name for t in model.calls[0].tools}
    assert "open_region N" in model.calls[0].messages[1].text  # the brief's hot-region table says how
    assert result.status == "submitted" and result.verified
    assert "torch.softmax(a0, dim=-1)" in (out / "solution" / MODEL_ENTRY).read_text()
    assert (out / "regions" / "r02" / "workspace" / MODEL_ENTRY).is_file()
    transcript = read_transcript(out / "transcript.jsonl")
    judged = [(e.source, e.region) for e in transcript.events if type(e).__name__ == "EvaluationEvent"]
    assert judged == [("verify", 2), ("verify", None), ("submit", None)]
    summary = summarize(transcript)
    # the submitted composition, not region r02's own verify (turn 3)
    assert summary.best_verdict == "correct" and summary.best_turn == 6

    # what each region got and returned, as the template policy records it (agent batch reads it)
    regions = RegionRun.model_validate_json((out / "regions.json").read_text())
    assert regions.allocation == "model" and regions.submitted == [2]
    by_index = {r.region: r for r in regions.regions}
    assert (by_index[2].status, by_index[2].units, by_index[2].spent) == (
        "kept",
        4,
        1,
    )  # open, write, verify, submit
    assert {r.status for i, r in by_index.items() if i != 2} == {"not run"}
    assert [(c.regions, c.verdict) for c in regions.compositions] == [([2], "correct")]
    assert regions.total_units == len(steps)
    assert "## Regions" in (out / "report.md").read_text()


def test_a_run_that_opens_no_region_writes_no_regions_record(tmp_path: Path) -> None:
    from agent.models.scripted import tool_call_turn
    from tests.run.conftest import run_solve

    path = tmp_path / "three_regions.py"
    path.write_text(TASK)
    steps = [
        tool_call_turn(
            "write_file", {"path": MODEL_ENTRY, "content": TASK.replace("class Model", "class ModelNew")}
        ),
        tool_call_turn("verify"),
        tool_call_turn("submit", {"summary": "the model as it is"}),
    ]
    out = tmp_path / "out"
    result, model = run_solve(out, steps, load_task(path), cache_dir=tmp_path / "cache")
    model.assert_complete()
    assert result.status == "submitted"
    assert not (out / "regions.json").exists() and "## Regions" not in (out / "report.md").read_text()


@pytest.mark.slow
def test_a_dry_run_takes_a_kernelbench_model_region_by_region(tmp_path: Path) -> None:
    """KernelBench level 3's MiniGPT block, which the template library refuses whole (split, eq,
    masked_fill), in a compile-only dry run with the real referee: its MLP GEMM region opened, given
    the library's start, built; composed into the whole model, which builds and loads with the
    region's kernels embedded; submitted unverified."""
    from agent.models.scripted import ScriptedModel, tool_call_turn
    from agent.run.solve import SolveConfig, solve
    from agent.tools.candidates import RefereeAdapter
    from tests.regions.conftest import LEVEL3

    path = LEVEL3 / "44_MiniGPTBlock.py"
    if not path.is_file():
        pytest.skip(f"KernelBench level 3 not found under {LEVEL3}")
    model = ScriptedModel(
        [
            tool_call_turn("open_region", {"region": 5}),
            tool_call_turn("start_from_template"),
            tool_call_turn("compile"),
            tool_call_turn("verify"),  # a dry run's verify records what built
            tool_call_turn("compose_regions"),
            tool_call_turn("submit"),
        ],
        name="scripted",
    )
    options = EvalOptions(arch="sm_90", policy="kernelbench")
    out = tmp_path / "out"
    result = solve(
        SolveConfig(
            task=path, out=out, model="scripted", budget=UNLIMITED, referee=options, allow_no_gpu=True
        ),
        model=model,
        referee=RefereeAdapter(options),
        sandbox_options={"cache_dir": tmp_path / "cache"},
    )
    model.assert_complete()
    replies = [m.messages[-1].content for m in model.calls[1:]]  # type: ignore[attr-defined]
    assert "opened region r05 gemm: addmm+mul+pow+add" in replies[0]
    assert "gemm family" in replies[1] and replies[2].startswith("compiled in")
    assert "compile-only dry run" in replies[3]
    assert "composing r05; in torch: r00 norm" in replies[4] and "compiled in" in replies[4]
    assert result.status == "submitted_unverified"
    whole = (out / "model_new.py").read_text()
    compile(whole, "model_new.py", "exec")
    assert "kernels/s0_gemm.cu" in whole  # the region's kernels travel inside the whole model
