"""The hot-region table: the profiler's operators joined to the trace, the floor estimates
without a GPU, the worker run on the CPU in a sandbox, and `agent profile --json`."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from agent.cli.app import app
from agent.regions.hot import build_table, join_times
from agent.regions.partition import partition
from agent.regions.whole import coverage
from agent.templates import trace_task
from sandbox.base import open_sandbox
from sandbox.workers.protocol import parse
from tests.regions.test_extract_compose import TASK


def _graph(tmp_path):
    task = tmp_path / "task.py"
    task.write_text(TASK, encoding="utf-8")
    return task, trace_task(task)


@pytest.mark.slow
def test_profiled_operators_join_the_trace_even_where_the_gpu_dispatches_others(tmp_path):
    _, graph = _graph(tmp_path)
    ops = [{"op": n.op, "ms": 1.0} for n in graph.nodes]
    assert join_times(graph, ops) == [0.001] * len(graph.nodes)
    # the GPU ran an extra operator after the first one: its time goes to the node before it
    extra = [ops[0], {"op": "aten.cudnn_thing.default", "ms": 5.0}, *ops[1:]]
    seconds = join_times(graph, extra)
    assert abs(sum(seconds) - (len(graph.nodes) + 5) / 1000) < 1e-12
    assert abs(seconds[0] - 0.006) < 1e-12 or abs(seconds[1] - 0.006) < 1e-12


@pytest.mark.slow
def test_without_a_gpu_the_table_is_estimated_from_the_floors_and_says_so(tmp_path):
    _, graph = _graph(tmp_path)
    regions = partition(graph)
    table = build_table(graph, regions, coverage(graph, regions))
    assert not table.measured and "estimated" in table.title
    assert abs(sum(r.share for r in table.regions) - 1.0) < 1e-9
    assert [r.time_s for r in table.regions] == sorted((r.time_s for r in table.regions), reverse=True)
    for row in table.regions:
        assert 0 < row.pct_of_floor <= 100 and row.headroom_s == max(0.0, row.time_s - row.floor_s)
    measured = build_table(
        graph, regions, coverage(graph, regions), node_seconds=[1e-3] * len(graph.nodes), source="measured"
    )
    assert measured.measured and abs(measured.total_s - 1e-3 * len(graph.nodes)) < 1e-12


@pytest.mark.slow
def test_the_profile_worker_times_every_operator_on_the_cpu_in_a_sandbox(tmp_path):
    _, graph = _graph(tmp_path)
    with open_sandbox("local", workspace=tmp_path, gpus=None) as box:
        cmd = box.python_command(
            box.worker("tasks/profile_regions.py"), "task.py", "--device", "cpu", "--iters", "2"
        )
        result = box.exec(cmd, timeout=300, cwd=box.workspace_path)
    report = parse(result.stdout)
    assert report and report["ok"], result.stderr[-2000:]
    assert [o["op"] for o in report["ops"]] == [n.op for n in graph.nodes]
    assert report["total_ms"] > 0 and sum(o["ms"] for o in report["ops"]) > 0


@pytest.mark.slow
def test_agent_profile_json_lists_the_regions_with_their_floors(tmp_path):
    task, _ = _graph(tmp_path)
    result = CliRunner().invoke(app, ["profile", str(task), "--json", "--estimate"])
    assert result.exit_code == 0, result.output
    table = json.loads(result.output)
    assert table["measured"] is False and table["regions"]
    assert {"share", "flops", "bytes", "pct_of_floor", "headroom_s", "covered"} <= set(table["regions"][0])


@pytest.mark.slow
def test_agent_profile_prints_every_column_whole(tmp_path):
    """Piped (a file, `| less`) and in an 80-column terminal alike, no number or column is cut:
    only a long region label folds onto more lines (2026-12-07: piped, every number was cut to
    "3…" and the covered column lost)."""
    task, _ = _graph(tmp_path)
    for columns in ("80", "200"):
        result = CliRunner().invoke(app, ["profile", str(task), "--estimate"], env={"COLUMNS": columns})
        assert result.exit_code == 0, result.output
        assert "…" not in result.output
        assert all(word in result.output for word in ("share", "GFLOP", "floor", "headroom", "covered"))
        assert "covered by the template library" in result.output


def test_agent_profile_names_a_missing_file(tmp_path):
    result = CliRunner().invoke(app, ["profile", str(tmp_path / "nope.py")])
    assert result.exit_code != 0 and "nope.py" in result.output
