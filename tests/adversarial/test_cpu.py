"""The adversarial suite's CPU subset (runs in CI): the labels themselves, the static guard on
every candidate, the identity guard, and the python-only candidates judged end to end on the
CPU (real candidate worker and judge processes) against small copies of our tasks. CUDA
candidates get a real compile check under `-m slow`."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.referee import EvalOptions, judge_compiled
from agent.referee.baselines import BaselineCache
from agent.referee.guard_static import codes, scan_python, scan_solution, scan_sources
from agent.tasks import load_task
from agent.workspace import open_solution
from sandbox.base import open_sandbox
from tests.adversarial.suite import (
    CATCHES,
    CPU_TASKS,
    VERDICTS,
    Candidate,
    Row,
    load_candidates,
    materialize,
    write_summary,
)
from tests.referee.conftest import QUICK_TIMING, python_only_compile

CANDIDATES = load_candidates()
ADVISORY = {"streams", "low_precision"}  # static findings a legitimate kernel may well have


def _ids(cands: list[Candidate]) -> list[str]:
    return [c.name for c in cands]


# -- the labels ---------------------------------------------------------------------------------
@pytest.mark.parametrize("cand", CANDIDATES, ids=_ids(CANDIDATES))
def test_expected_json_is_complete(cand: Candidate) -> None:
    e = cand.expected
    assert {"task", "verdict", "why", "pattern", "catch"} <= e.keys(), e
    assert e["verdict"] in VERDICTS and set(e.get("accept", [])) <= VERDICTS
    assert e["catch"] in CATCHES
    assert cand.task_path.is_file(), cand.task_path
    assert e.get("policy", "strict") in ("strict", "kernelbench")
    assert e.get("precision", "fp32") in ("fp32", "tf32", "fp16", "bf16", "match")
    if e["pattern"] == "legit":
        assert e["verdict"] == "correct"
    if "cpu_task" in e:
        assert (CPU_TASKS / f"{e['cpu_task']}.py").is_file()
    if cand.kind == "workspace":
        assert (cand.source_dir / "model_new.py").is_file() and any(
            (cand.source_dir / "kernels").glob("*.cu")
        )


def test_the_suite_covers_the_issue_list() -> None:
    patterns = {c.expected["pattern"].split("/")[0] for c in CANDIDATES}
    wanted = {
        "A1",
        "A2",
        "A4",
        "A5",
        "A6",
        "A7",
        "A9",
        "B2",
        "B3",
        "B4",
        "B5",
        "B6",
        "B7",
        "B9",
        "B10",
        "B11",
        "B12",
        "B13",
        "B14",
        "C1",
        "C2",
        "C3",
        "C4",
        "C5",
        "C6",
        "C7",
        "C8",
        "C9",
        "C12",
        "D1",
        "D2",
        "D3",
        "D5",
        "D6",
        "E1",
    }
    assert wanted <= patterns, wanted - patterns
    assert sum(c.expected["pattern"] == "legit" for c in CANDIDATES) >= 8


# -- static guard -------------------------------------------------------------------------------
@pytest.mark.parametrize("cand", CANDIDATES, ids=_ids(CANDIDATES))
def test_static_guard_reports_what_the_label_says(cand: Candidate) -> None:
    found = codes(scan_sources(cand.sources()))
    assert set(cand.expected.get("static", [])) <= found, found
    if cand.expected["pattern"] == "legit":
        assert found <= ADVISORY, f"a legitimate solution gets non-advisory findings: {found - ADVISORY}"


def test_static_guard_on_a_materialized_workspace_ignores_harness_files(tmp_path: Path) -> None:
    cand = next(c for c in CANDIDATES if c.name == "c8_persisting_l2")
    path = materialize(cand, load_task(cand.task_path, instantiate=False), tmp_path / cand.name)
    findings = scan_solution(open_solution(path))
    assert "persisting_l2" in codes(findings)
    assert not any(f.file.endswith(("binding.cpp", "reference.py")) for f in findings)


@pytest.mark.parametrize(
    ("source", "code"),
    [
        (
            "import torch\nmm = torch.matmul\ntorch.cuda.Event.elapsed_time = lambda s, e: 0.0\n",
            "monkeypatch",
        ),
        ("import time\nsetattr(time, 'perf_counter', lambda: 0.0)\n", "monkeypatch"),
        ("import sys\nf = sys._getframe(2).f_locals\n", "introspection"),
        ("import torch\nx = torch.autograd.profiler._is_profiler_enabled\n", "harness_detection"),
        ("import torch\ntorch.backends.cudnn.benchmark = True\n", "global_flags"),
        (
            "def f(x):\n    try:\n        return ext(x)\n    except Exception:\n        return torch.relu(x)\n",
            "except_fallback",
        ),
    ],
)
def test_static_guard_rules(source: str, code: str) -> None:
    assert code in codes(scan_python(source, "model_new.py"))


def test_static_guard_is_quiet_on_an_honest_model_file() -> None:
    honest = (
        "import torch\nimport torch.nn as nn\nimport cuda_extension\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return cuda_extension.relu_forward(x)\n"
    )
    assert scan_python(honest, "model_new.py") == []


# -- identity guard -----------------------------------------------------------------------------
def _identity_guard() -> Any:
    from sandbox.workers.referee import guard_identity

    return guard_identity


def test_identity_guard_sees_timer_comparator_reference_and_global_patches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch
    import torch.nn.functional as F

    guard = _identity_guard()
    namespace = {
        "batch_size": 4096,
        "Model": type("Model", (), {"forward": lambda self, x: x}),
        "get_inputs": list,
    }
    before = guard.snapshot(namespace)
    assert guard.changed(before, namespace) == []
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 0.0)
    monkeypatch.setattr(torch, "allclose", lambda *a, **k: True)
    monkeypatch.setattr(F, "gelu", lambda x, *a, **k: x)
    namespace["batch_size"] = 1
    namespace["Model"].forward = lambda self, x: x * 0  # type: ignore[attr-defined]
    moved = guard.changed(before, namespace)
    for name in (
        "time.perf_counter",
        "torch.cuda.Event.elapsed_time",
        "torch.allclose",
        "torch.nn.functional.gelu",
        "task.batch_size",
        "task.Model.forward",
    ):
        assert name in moved, moved


# -- end to end on the CPU ------------------------------------------------------------------------
CPU_CANDIDATES = [c for c in CANDIDATES if "cpu_task" in c.expected]
CPU_ROWS: list[Row] = []


@pytest.fixture(scope="module", autouse=True)
def cpu_summary() -> Iterator[None]:
    yield
    if CPU_ROWS:
        write_summary(CPU_ROWS, "adversarial suite, CPU subset (small tasks)")


def _expectation(cand: Candidate) -> tuple[set[str], str | None, str]:
    e = dict(cand.expected)
    verdicts = {e.get("cpu_verdict", e["verdict"]), *e.get("accept", [])}
    return verdicts, e["cpu_flag"] if "cpu_flag" in e else e.get("flag"), e["catch"]


@pytest.mark.slow
@pytest.mark.parametrize("cand", CPU_CANDIDATES, ids=_ids(CPU_CANDIDATES))
def test_cpu_candidate_gets_its_verdict(cand: Candidate, tmp_path: Path) -> None:
    verdicts, flag, catch = _expectation(cand)
    path = materialize(cand, load_task(cand.task_path, instantiate=False), tmp_path / cand.name)
    task = load_task(CPU_TASKS / f"{cand.expected['cpu_task']}.py", instantiate=False)
    solution = open_solution(path)  # a single file is judged from its staged copy
    with open_sandbox("local", workspace=solution.root) as box:
        result = judge_compiled(
            task,
            solution,
            python_only_compile(path),
            EvalOptions(
                policy=cand.policy,
                precision=cand.precision,  # type: ignore[arg-type]
                device="cpu",
                trials=2,
                profile=cand.profile or flag is not None,
                compile_mode=None,
                timing=QUICK_TIMING,
                run_timeout_s=120.0,
            ),
            sandbox=box,
            baseline_cache=BaselineCache(tmp_path / "baselines.json"),
        )
    flags = {f.code for f in (result.performance.flags if result.performance else [])}
    ok = result.verdict in verdicts and (flag is None or flag in flags)
    CPU_ROWS.append(
        Row(
            cand.name,
            cand.expected["pattern"],
            "|".join(sorted(verdicts)),
            result.verdict,
            catch,
            ok,
            "" if ok else result.reason,
        )
    )
    assert result.verdict in verdicts, result.feedback()
    if flag is not None:
        assert flag in flags, flags


# -- real compiles of the CUDA candidates (slow; sm_90, one shared cache) ------------------------
WORKSPACE_CANDIDATES = [c for c in CANDIDATES if c.kind == "workspace" and "solution" not in c.expected]


@pytest.fixture(scope="session")
def compile_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("adversarial-builds")


@pytest.mark.slow
@pytest.mark.parametrize("cand", WORKSPACE_CANDIDATES, ids=_ids(WORKSPACE_CANDIDATES))
def test_cuda_candidate_compiles(cand: Candidate, compile_root: Path) -> None:
    from agent.build.compile import compile_solution

    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists():
        pytest.skip("no CUDA toolkit (nvcc) here")
    path = materialize(cand, load_task(cand.task_path, instantiate=False), compile_root / cand.name)
    started = time.monotonic()
    with open_sandbox("local", workspace=path) as box:
        result = compile_solution(open_solution(path), box, arch="sm_90", timeout=900)
    assert result.ok, (result.message, [e.message for e in result.errors], time.monotonic() - started)


def test_labels_are_valid_json_files() -> None:
    for cand in CANDIDATES:
        json.loads((cand.folder / "expected.json").read_text())
