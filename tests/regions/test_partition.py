"""Partitioning every KernelBench level 3 model: every operator in exactly one region, regions in
an order where each reads only what earlier regions made, and every region's task source valid."""

from __future__ import annotations

import ast

import pytest

from agent.regions.extract import region_task_source
from agent.regions.partition import Region, partition
from agent.regions.whole import coverage, region_summary
from agent.templates import OpGraph, TraceError, trace_task
from tests.templates.test_cli import UNCOVERED_TASK

# Tracing all 50 level-3 models takes minutes on two cores: the full lane's, not the fast one's.
pytestmark = pytest.mark.slow


def _check_order(graph: OpGraph, regions: list[Region]) -> None:
    made: set[tuple] = set()
    for region in regions:
        for value in region.inputs:
            if value.ref.t == "node":
                assert value.key in made, (
                    f"region {region.index} reads {value.ref.describe()} before it is made"
                )
        made.update(v.key for v in region.outputs)
    for ref in graph.outputs:
        if ref.t == "node":
            assert ("node", ref.id, ref.out) in made, (
                f"the model's output {ref.describe()} is made by no region"
            )


def test_every_level3_model_partitions_with_every_operator_accounted_for(level3_graphs):
    traced = {name: g for name, g in level3_graphs.items() if isinstance(g, OpGraph)}
    failed = {name: str(g) for name, g in level3_graphs.items() if isinstance(g, TraceError)}
    # An LSTM or GRU unrolled over its sequence is tens of thousands of operators: its graph passes
    # the sandbox's 4 MiB output cap and cannot be traced; every other task must be.
    assert all("LSTM" in name or "GRU" in name for name in failed), failed
    assert len(traced) >= 42, failed
    for name, graph in traced.items():
        regions = partition(graph)
        ids = [node_id for region in regions for node_id in region.nodes]
        assert sorted(ids) == [n.id for n in graph.nodes], name
        assert ids == sorted(ids), f"{name}: regions are not contiguous runs of the trace"
        _check_order(graph, regions)
        cov = coverage(graph, regions)
        assert len(cov) == len(regions)
        for region in regions:
            assert region.floor_s > 0 or not region.outputs, (name, region.label)
            assert region.eager_s >= region.floor_s, (name, region.label)
            ast.parse(region_task_source(graph, region, model_path=name))


def test_minigpt_is_no_longer_refused_its_uncovered_ops_stay_in_one_region(level3_graphs):
    graph = level3_graphs["44_MiniGPTBlock.py"]
    assert isinstance(graph, OpGraph), graph
    regions = partition(graph)
    cov = {c.region: c for c in coverage(graph, regions)}
    kinds = [r.kind for r in regions]
    assert kinds.count("attention") == 1 and kinds.count("norm") == 2
    attention = next(r for r in regions if r.kind == "attention")
    assert not cov[attention.index].covered and "masked_fill" in cov[attention.index].reason
    # the four GEMMs (QKV, projection, MLP up and down) are covered regions of their own
    assert sum(1 for r in regions if r.kind == "gemm" and cov[r.index].covered) == 4
    assert max(r.flops for r in regions if r.kind == "gemm") > 2e11


def test_an_uncovered_model_is_told_how_much_of_it_regions_cover(level3_graphs, tmp_path):
    graph = level3_graphs["44_MiniGPTBlock.py"]
    assert isinstance(graph, OpGraph), graph
    summary = region_summary(graph)
    assert summary.startswith("by region, 6 of 7 regions are covered (")
    assert "agent profile 44_MiniGPTBlock.py" in summary
    task = tmp_path / "sort.py"
    task.write_text(UNCOVERED_TASK, encoding="utf-8")
    assert region_summary(trace_task(task)) == ""  # nothing covered: the reason alone says it
