"""Shared pieces of the template-library tests: every KernelBench level 1 and 2 task traced once
(for real, on meta tensors, in the local sandbox) and the plans recognized from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.templates import NotCovered, OpGraph, Plan, TraceError, recognize, trace_tasks

REPO = Path(__file__).resolve().parents[2]
KERNELBENCH = REPO.parent / "shared" / "kernelbench"
if not KERNELBENCH.is_dir():
    KERNELBENCH = Path("/work/shared/kernelbench")
TASKS = Path(__file__).resolve().parent / "tasks"
RELU_TASK = REPO / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"


def kernelbench_files(level: int) -> list[Path]:
    folder = KERNELBENCH / f"level{level}"
    return sorted(folder.glob("*.py"), key=lambda p: int(p.name.split("_")[0])) if folder.is_dir() else []


@pytest.fixture(scope="session")
def kernelbench_graphs() -> dict[str, OpGraph | TraceError]:
    """level/file name -> its traced graph (or the trace error), levels 1 and 2."""
    files = kernelbench_files(1) + kernelbench_files(2)
    if not files:
        pytest.skip(f"KernelBench tasks not found under {KERNELBENCH}")
    graphs = trace_tasks(files)
    return {f"{p.parent.name}/{p.name}": g for p, g in zip(files, graphs, strict=True)}


@pytest.fixture(scope="session")
def kernelbench_plans(kernelbench_graphs: dict[str, OpGraph | TraceError]) -> dict[str, Plan | NotCovered]:
    return {k: recognize(g) for k, g in kernelbench_graphs.items() if isinstance(g, OpGraph)}


@pytest.fixture(scope="session")
def mixed_plan() -> Plan:
    """The test task with one stage of every family."""
    graph = trace_tasks([TASKS / "mixed.py"])[0]
    assert isinstance(graph, OpGraph), graph
    plan = recognize(graph)
    assert isinstance(plan, Plan), plan
    return plan
