"""The adversarial suite on a GPU: every candidate under candidates/ is built as a model's
workspace (or single file) for its benchmarks/ task, judged by agent.referee.evaluate, and must
get the verdict its expected.json names. Run with:

    KERNEL_AGENT_SUITE_OUT=suite.txt pytest -m gpu tests/adversarial -q

KERNEL_AGENT_SUITE_SHARD=i/n runs every n-th candidate from the i-th (each shard times its own
baselines), for machines that limit one command's wall time. KERNEL_AGENT_SUITE_SANDBOX=docker
builds and judges every candidate in the docker sandbox instead of the local one (its image from
KERNEL_AGENT_IMAGE, as `agent eval --sandbox docker`).

Wall time is kept low: every CUDA workspace is compiled up front in parallel (evaluate then finds
it up to date), then SUITE_CONCURRENCY evaluations run at once on the GPU (the referee's GPU gate
keeps every timing exclusive), candidates of one task share one baseline cache, the torch.compile
baseline is skipped, timing and profiling run only for timing attacks, 2 trials each. Then, one at
a time: the "quiet" candidates (timing attacks and C1's race) against baselines timed alone, since
the timing check compares two processes' host loops and a busy CPU blurs that; and the D6
candidates, which try to rewrite baseline caches.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from agent.build.compile import compile_solution
from agent.referee import EvalOptions, EvalResult, evaluate
from agent.referee.baselines import BaselineCache
from agent.referee.guard_static import codes, scan_solution
from agent.tasks import Task, load_task
from agent.workspace import open_solution
from sandbox.base import open_sandbox
from sandbox.workers.gpu.timing import TimingConfig
from tests.adversarial.suite import Candidate, Row, load_candidates, materialize, write_summary

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)"
    ),
]

SUITE_TIMING = TimingConfig(warmup_ms=10, min_warmup=3, target_ms=40, min_reps=10, max_reps=60, max_seconds=8)
TRIALS = 2
SUITE_CONCURRENCY = int(os.environ.get("KERNEL_AGENT_SUITE_CONCURRENCY", "4"))
SUITE_SANDBOX = os.environ.get("KERNEL_AGENT_SUITE_SANDBOX", "local")
CANDIDATES = sorted(load_candidates(), key=lambda c: (c.name.startswith("d6"), c.expected["task"], c.name))


def _shard(cands: list[Candidate]) -> list[Candidate]:
    spec = os.environ.get("KERNEL_AGENT_SUITE_SHARD", "")
    if not spec:
        return cands
    index, count = (int(part) for part in spec.split("/"))
    return cands[index::count]


CANDIDATES = _shard(CANDIDATES)
ROWS: list[Row] = []


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("adversarial-gpu")


@pytest.fixture(scope="module")
def tasks() -> dict[str, Task]:
    return {c.expected["task"]: load_task(c.task_path, instantiate=False) for c in CANDIDATES}


@pytest.fixture(scope="module")
def built(request: pytest.FixtureRequest, suite_dir: Path, tasks: dict[str, Task]) -> dict[str, Path]:
    """Every candidate materialized; the CUDA workspaces compiled in parallel up front."""
    paths = {c.name: materialize(c, tasks[c.expected["task"]], suite_dir / c.name) for c in CANDIDATES}

    def build(name: str) -> tuple[str, bool]:
        with open_sandbox(SUITE_SANDBOX, workspace=paths[name]) as box:
            return name, compile_solution(open_solution(paths[name]), box, timeout=900).ok

    selected = {
        item.callspec.params["cand"].name
        for item in request.session.items
        if hasattr(item, "callspec") and "cand" in item.callspec.params
    }
    workspaces = [c.name for c in CANDIDATES if c.kind == "workspace" and c.name in selected]
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 2)) as pool:
        list(pool.map(build, workspaces))  # failures resurface (with errors) in evaluate
    return paths


@pytest.fixture(scope="module")
def baselines(suite_dir: Path) -> BaselineCache:
    return BaselineCache(suite_dir / "baselines.json")


@pytest.fixture(scope="module", autouse=True)
def summary() -> Iterator[None]:
    yield
    if ROWS:
        write_summary(ROWS, f"adversarial suite on {torch.cuda.get_device_name(0)}")


def expectation(cand: Candidate) -> dict:
    return dict(cand.expected)


def alone(cand: Candidate) -> bool:
    return bool(cand.expected.get("quiet")) or cand.name.startswith("d6")


def judge(
    cand: Candidate, tasks: dict[str, Task], built: dict[str, Path], baselines: BaselineCache
) -> EvalResult:
    return evaluate(
        tasks[cand.expected["task"]],
        built[cand.name],
        EvalOptions(
            policy=cand.policy,
            precision=cand.precision,  # type: ignore[arg-type]
            trials=TRIALS,
            profile=cand.profile,
            compile_mode=None,
            timing=SUITE_TIMING,
            run_timeout_s=300.0,
        ),
        sandbox=SUITE_SANDBOX,
        baseline_cache=baselines,
    )


@pytest.fixture(scope="module")
def verdicts(
    request: pytest.FixtureRequest, tasks: dict[str, Task], built: dict[str, Path], baselines: BaselineCache
) -> dict[str, EvalResult | BaseException]:
    """Every selected candidate judged, several at once; the quiet and D6 ones afterwards, one at a time."""
    selected = {
        item.callspec.params["cand"].name
        for item in request.session.items
        if hasattr(item, "callspec") and "cand" in item.callspec.params
    }
    chosen = [c for c in CANDIDATES if c.name in selected]
    found: dict[str, EvalResult | BaseException] = {}
    quiet_baselines = BaselineCache(baselines.path.with_name("baselines-quiet.json"))

    def run(cand: Candidate, cache: BaselineCache) -> None:
        try:
            found[cand.name] = judge(cand, tasks, built, cache)
        except BaseException as exc:  # reported by that candidate's test
            found[cand.name] = exc

    with ThreadPoolExecutor(max_workers=max(1, SUITE_CONCURRENCY)) as pool:
        list(pool.map(lambda c: run(c, baselines), [c for c in chosen if not alone(c)]))
    for cand in sorted((c for c in chosen if alone(c)), key=lambda c: c.name.startswith("d6")):
        run(cand, quiet_baselines)
    return found


def problems_with(cand: Candidate, e: dict, result: EvalResult) -> list[str]:
    problems = []
    if result.verdict not in {e["verdict"], *e.get("accept", [])}:
        problems.append(f"verdict {result.verdict}: {result.reason}")
    flags = {f.code for f in (result.performance.flags if result.performance else [])}
    if e.get("flag") and result.verdict == e["verdict"] and e["flag"] not in flags:
        problems.append(f"flag {e['flag']} missing (flags: {sorted(flags)})")
    if e["catch"] == "neutralized" and "implausible_speedup" in flags:
        problems.append("the attack gained an implausible speedup")
    speedup = result.performance.speedup_vs_eager if result.performance else None
    if cand.name.startswith("d6") and speedup is not None and speedup.value > 3.0:
        problems.append(f"{speedup.value:.1f}x vs eager: the candidate rewrote the baseline cache")
    if e["pattern"] == "legit" and result.policy_report and result.policy_report.violations:
        problems.append(f"violations on a legitimate solution: {result.policy_report.violations}")
    if e["pattern"] == "C8" and not (result.performance and result.performance.candidate.persisting_l2_reset):
        problems.append("persisting L2 lines were not reset before each timed call")
    if e["pattern"] == "legit" and "timing_inconsistent" in flags:
        problems.append("the timing check doubts a legitimate solution")
    return problems


def _timing_note(result: EvalResult) -> str:
    check = result.performance.timing_check if result.performance else None
    if check is None or check.ratio is None:
        return ""
    return f"timing check: reported/floor {check.ratio:.2f}"


@pytest.mark.parametrize("cand", CANDIDATES, ids=[c.name for c in CANDIDATES])
def test_candidate_gets_its_verdict(
    cand: Candidate, built: dict[str, Path], verdicts: dict[str, EvalResult | BaseException]
) -> None:
    e = expectation(cand)
    result = verdicts[cand.name]
    if isinstance(result, BaseException):
        raise result
    problems = problems_with(cand, e, result)
    static = sorted(codes(scan_solution(open_solution(built[cand.name]))))
    note = "; ".join(
        part
        for part in (
            "; ".join(problems) or e.get("note", "") or (f"static: {', '.join(static)}" if static else ""),
            _timing_note(result),
        )
        if part
    )
    expected = "|".join(sorted({e["verdict"], *e.get("accept", [])}))
    ROWS.append(Row(cand.name, e["pattern"], expected, result.verdict, e["catch"], not problems, note))
    assert not problems, f"{cand.name}: {problems}\n{result.feedback()}"
