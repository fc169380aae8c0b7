"""`--model templates` on a model the library covers only region by region: each covered region is
solved as its own task through the normal solve path, the verified regions are composed into one
ModelNew judged on the whole task, a region that slows the whole is dropped, and the composition is
submitted. The referee is a fake that decides each region's speed, and the composition's from the
regions it calls."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

import agent.tools.pipeline
from agent.batch.config import EvalJob, JudgingOptions, WorkItem
from agent.batch.fakes import fake_compile, fake_result
from agent.batch.records import AttemptRecord
from agent.batch.report import build_reports, render_markdown
from agent.batch.runner import BatchRunner
from agent.batch.store import Store
from agent.budget import BudgetLimits
from agent.build.compile import CompileResult
from agent.referee.options import EvalOptions
from agent.regions.compose import composed_source
from agent.run import by_region
from agent.run.by_region import RegionwisePolicy, templates_model
from agent.run.region_compose import RegionAttempt, with_policy
from agent.run.region_records import CompositionTrial, RegionResult, RegionRun
from agent.run.solve import SolveConfig, solve
from agent.tasks import Task, load_folder, load_task
from agent.tools.candidates import RefereeAdapter
from agent.workspace import Workspace
from sandbox.base import Sandbox
from tests.batch.helpers import fake_config, fake_evaluator, make_tasks
from tests.regions.conftest import LEVEL3
from tests.run.fakes import FakeReferee, performance

# A GEMM with its epilogue, a sort the library has no kernel for, a LayerNorm, a GEMM + tanh.
MODEL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 128)
        self.norm = nn.LayerNorm(128)
        self.out = nn.Linear(128, 64)

    def forward(self, x):
        y = torch.relu(self.fc(x)) * 2.0
        y = torch.sort(y, dim=-1).values
        y = self.norm(y)
        return torch.tanh(self.out(y))


batch_size = 32


def get_inputs():
    return [torch.randn(batch_size, 64)]


def get_init_inputs():
    return []
"""
_REGION = re.compile(r"^region_(\d\d)_")
_SOLUTION = re.compile(r"^_SOLUTION_(\d\d) = ", re.MULTILINE)


@dataclass
class RegionReferee(FakeReferee):
    """Each region task at `alone[index]` x eager; the whole model at `whole(regions it calls)`."""

    alone: dict[int, float] = field(default_factory=dict)
    whole: Callable[[set[int]], float] = lambda regions: 1.0
    judged: list[set[int]] = field(default_factory=list)

    def evaluate(self, task: Task, workspace: Workspace, *, sandbox: Sandbox, profile: bool):
        result = super().evaluate(task, workspace, sandbox=sandbox, profile=profile)
        if result.verdict != "correct" or not profile:
            return result
        region = _REGION.match(task.name)
        if region:
            result.performance = performance(self.alone.get(int(region[1]), 1.0))
        else:
            called = {int(i) for i in _SOLUTION.findall("\n".join(workspace.model_files().values()))}
            self.judged.append(called)
            result.performance = performance(self.whole(called))
        return result


def fake_build(workspace: Workspace, sandbox: Sandbox, **_: object) -> CompileResult:
    return CompileResult(
        ok=True,
        status="built",
        solution_kind="workspace",
        content_hash=workspace.content_hash(),
        arch="9.0",
        arch_source="fake",
        build_dir="/nonexistent/fake-build",
        duration_s=0.0,
    )


@pytest.fixture(autouse=True)
def no_nvcc(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compile tool builds nothing: the fake referee judges the files."""
    monkeypatch.setattr(agent.tools.pipeline, "compile_solution", fake_build)


@pytest.fixture(scope="module")
def model_task(tmp_path_factory) -> tuple[Path, RegionwisePolicy, Task]:
    path = tmp_path_factory.mktemp("model") / "sorted_mlp.py"
    path.write_text(MODEL, encoding="utf-8")
    policy = templates_model(path)
    assert isinstance(policy, RegionwisePolicy), policy
    return path, policy, load_task(path)


def _solve(model_task, out: Path, referee: RegionReferee, allocation: str = "gain", turns: int = 6):
    path, policy, task = model_task
    config = SolveConfig(
        task=path,
        out=out,
        model="templates",
        budget=BudgetLimits(turns=turns),
        region_allocation=allocation,  # type: ignore[arg-type]
    )
    return solve(config, model=policy, referee=referee, task=task)


def _regions(out: Path) -> dict[int, dict]:
    run = RegionRun.model_validate_json((out / "regions.json").read_text())
    return {r.region: r.model_dump() for r in run.regions}


@pytest.mark.slow
def test_a_model_with_an_uncovered_operator_is_solved_region_by_region_and_the_composition_submitted(
    model_task, tmp_path
):
    _, policy, _ = model_task
    assert "sort" in policy.reason and [c.covered for c in policy.coverage] == [True, False, True, True]
    referee = RegionReferee(alone={0: 1.5, 2: 1.3, 3: 1.4}, whole=lambda regions: 1.0 + 0.2 * len(regions))
    result = _solve(model_task, tmp_path / "run", referee)

    assert result.status == "submitted" and result.verified
    assert referee.judged == [{0, 2, 3}]  # one composition, faster than torch.compile: judged once
    regions = _regions(tmp_path / "run")
    assert {i: r["status"] for i, r in regions.items()} == {0: "kept", 1: "not covered", 2: "kept", 3: "kept"}
    assert regions[1]["units"] == 0 and all(regions[i]["spent"] >= 1 for i in (0, 2, 3))
    assert sum(r["units"] for r in regions.values()) <= 6
    submitted = (tmp_path / "run" / "model_new.py").read_text()
    assert "class ModelNew" in submitted and set(_SOLUTION.findall(submitted)) == {"00", "02", "03"}
    for index in (0, 2, 3):  # each region ran as its own task through the normal solve path
        assert (tmp_path / "run" / "regions" / f"r{index:02d}" / "transcript.jsonl").is_file()
    report = (tmp_path / "run" / "report.md").read_text()
    assert "r01 sort: sort" in report and "1.60x vs eager" in report
    lines = (tmp_path / "run" / "transcript.jsonl").read_text().splitlines()
    header, events = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    assert len(header["config"]["regions"]["regions"]) == 4
    assert [e["type"] for e in events] == ["evaluation", "run_end"]


@pytest.mark.slow
def test_a_region_that_slows_the_whole_is_dropped_and_one_slower_alone_is_never_composed(
    model_task, tmp_path
):
    # r02 is faster alone but makes the whole slower (say, a layout copy); r03 is slower alone.
    referee = RegionReferee(
        alone={0: 1.5, 2: 1.1, 3: 0.9}, whole=lambda regions: 0.8 if 2 in regions else 1.5
    )
    result = _solve(model_task, tmp_path / "run", referee)

    assert referee.judged == [{0, 2}, {0}]
    assert result.status == "submitted" and result.verified
    regions = _regions(tmp_path / "run")
    assert {i: regions[i]["status"] for i in (0, 2, 3)} == {0: "kept", 2: "dropped", 3: "slower alone"}
    run = RegionRun.model_validate_json((tmp_path / "run" / "regions.json").read_text())
    assert run.submitted == [0] and run.speedup_eager == pytest.approx(1.5)


@pytest.mark.slow
def test_gain_allocation_splits_by_expected_gain_and_passes_on_what_a_region_left_unspent(
    model_task, tmp_path, monkeypatch: pytest.MonkeyPatch
):
    given: dict[str, list[tuple[int, int]]] = {}

    def run_region(state, index: int, units: int):
        """Each region's search ends after one candidate, whatever it was given."""
        given.setdefault(state.config.region_allocation, []).append((index, units))
        state.results[index].units, state.results[index].spent = units, 1
        return RegionAttempt(result=None, spent=1, best_after_each_unit=[], solution=None, faster_alone=False)

    monkeypatch.setattr(by_region, "_run_region", run_region)
    referee = RegionReferee()
    _solve(model_task, tmp_path / "gain", referee, "gain", turns=9)
    _solve(model_task, tmp_path / "uniform", referee, "uniform", turns=9)

    assert given["uniform"] == [(0, 3), (2, 3), (3, 3)]  # the model's order, the same to each
    gain = given["gain"]
    shares = _regions(tmp_path / "gain")
    assert [i for i, _ in gain] == sorted((0, 2, 3), key=lambda i: -shares[i]["share"])[: len(gain)]
    assert gain[0][1] > 3  # the heaviest region gets more than a uniform share
    assert all(later[1] >= 1 for later in gain[1:])  # what the first left unspent went to the rest
    assert sum(units for _, units in gain) > 9  # re-split: units given again once returned unspent


def test_a_composition_that_leaves_compute_in_torch_is_judged_under_the_kernelbench_policy():
    strict = RefereeAdapter(EvalOptions(policy="strict"))
    assert with_policy(strict, "kernelbench").options.policy == "kernelbench"
    assert strict.options.policy == "strict"


@pytest.mark.slow
def test_minigpt_used_to_be_refused_and_is_now_planned_region_by_region(tmp_path):
    task = LEVEL3 / "44_MiniGPTBlock.py"
    if not task.is_file():
        pytest.skip(f"{task} not found")
    policy = templates_model(task)
    assert isinstance(policy, RegionwisePolicy)
    assert any(c.covered for c in policy.coverage) and not all(c.covered for c in policy.coverage)


def test_the_batch_store_keeps_a_models_regions_and_the_report_shows_them(tmp_path):
    root = make_tasks(tmp_path / "tasks", {3: ["44_MiniGPTBlock"]})
    (task,) = load_folder(root, instantiate=False)[0]
    config = fake_config(tmp_path, root, None, model="templates")
    regions = RegionRun(
        task=task.name,
        allocation="gain",
        times="measured (torch.profiler on the GPU)",
        total_units=8,
        covered_share=0.85,
        regions=[
            RegionResult(
                region=0,
                label="r00 gemm: addmm",
                kind="gemm",
                share=0.6,
                covered=True,
                units=6,
                spent=5,
                speedup_eager=1.4,
                status="kept",
            ),
            RegionResult(
                region=1, label="r01 eq: eq", kind="eq", share=0.15, covered=False, status="not covered"
            ),
            RegionResult(
                region=2,
                label="r02 norm: native_layer_norm",
                kind="norm",
                share=0.25,
                covered=True,
                units=2,
                spent=2,
                speedup_eager=1.1,
                status="dropped",
            ),
        ],
        compositions=[
            CompositionTrial(regions=[0, 2], policy="kernelbench", verdict="correct", speedup_eager=0.9),
            CompositionTrial(regions=[0], policy="kernelbench", verdict="correct", speedup_eager=1.2),
        ],
        submitted=[0],
        speedup_eager=1.2,
        speedup_compile=1.05,
    )
    with Store(config.store) as store:
        run = store.start_run(config, versions={}, gpus=[])
        store.add_tasks([task])
        claim = store.claim(run, config.batch_key(), WorkItem(task=task, candidate="sample_0"))
        job = EvalJob(task=task, solution=task.path, options=JudgingOptions())
        result = fake_result(job, fake_compile(job), {"speedup_eager": 1.2, "speedup_compile": 1.05})
        store.finish_attempt(claim.attempt_id, AttemptRecord(status="done", result=result, regions=regions))
        store.finish_run(run, "finished")
        assert store.region_runs([claim.attempt_id]) == {claim.attempt_id: regions}

    (report,) = build_reports(config.store)
    text = render_markdown([report])
    assert "### Whole models, region by region" in text
    assert "| 44_MiniGPTBlock/sample_0 | gain | 85% | 60% | 1/2/3 | 1.20x | 1.05x |" in text
    assert "| r02 norm: native_layer_norm | 25.0% | yes | 2 | 2 | 1.10x | dropped |" in text


def test_the_composed_model_takes_the_references_state_dict_as_the_referee_loads_it(model_task):
    path, policy, _ = model_task
    source = composed_source(policy.graph, policy.regions, path.read_text())
    namespace: dict = {"__name__": "composed"}
    exec(compile(source, str(path), "exec"), namespace)
    torch.manual_seed(0)
    reference = namespace["Model"]()
    torch.manual_seed(1)  # other weights: only the state loaded below makes the outputs agree
    composed = namespace["ModelNew"]()
    assert sorted(composed.state_dict()) == sorted(reference.state_dict())
    composed.load_state_dict(reference.state_dict())
    x = torch.randn(32, 64)
    torch.testing.assert_close(composed(x), reference(x))


@pytest.mark.slow
def test_agent_batch_runs_such_a_model_region_by_region_and_stores_its_regions(tmp_path):
    root = tmp_path / "tasks" / "level3"
    root.mkdir(parents=True)
    (root / "1_SortedMLP.py").write_text(MODEL, encoding="utf-8")
    config = fake_config(
        tmp_path, tmp_path / "tasks", None, model="templates", gpus=["0"], evals_per_gpu=1, concurrency=1,
        solve_options={"budget": "turns=3", "region_allocation": "uniform"},
    )  # fmt: skip
    evaluator = fake_evaluator(config)
    try:
        summary = BatchRunner(config, evaluator=evaluator).run()
    finally:
        evaluator.close()
    assert summary.total == 1 and "error" not in summary.counts, summary
    with Store(config.store) as store:
        (record,) = store.results()
        (regions,) = store.region_runs([record.attempt_id]).values()
    assert regions.allocation == "uniform" and [r.units for r in regions.regions] == [1, 0, 1, 1]
    assert all(regions.regions[i].spent == 1 for i in (0, 2, 3))  # each region judged as its own task
    (report,) = build_reports(config.store)
    assert "1_SortedMLP/sample_0" in report.regions
