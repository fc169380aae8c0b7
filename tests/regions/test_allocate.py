"""The budget allocation rule on hand-written recorded results."""

from __future__ import annotations

from agent.regions.allocate import (
    AllocationRule,
    RegionEstimate,
    RegionProgress,
    allocate,
    allocate_uniform,
    past_speedups,
)
from agent.tune.experience import Features, StoredRun

# A GEMM far above its floor, a norm near it, an elementwise tail, an uncovered mask.
ESTIMATES = [
    RegionEstimate(region=0, label="gemm", time_s=1000e-6, floor_s=400e-6, covered=True),
    RegionEstimate(region=1, label="norm", time_s=100e-6, floor_s=80e-6, covered=True),
    RegionEstimate(region=2, label="elementwise", time_s=300e-6, floor_s=60e-6, covered=True),
    RegionEstimate(region=3, label="masked_fill", time_s=200e-6, floor_s=20e-6, covered=False),
]


def _units(allocation):
    return {s.region: s.next_units for s in allocation.shares}


def test_the_gain_weighted_split_gives_the_most_to_the_most_time_above_the_floor():
    units = _units(allocate(24, ESTIMATES))
    assert sum(units.values()) == 24
    assert units[0] > units[2] > units[1]  # 600 us, 240 us and 20 us above their floors
    assert units[3] == 0  # not covered: left to torch
    uniform = _units(allocate_uniform(24, ESTIMATES))
    assert uniform == {0: 8, 1: 8, 2: 8, 3: 0}


def test_a_region_that_reached_its_floor_gets_nothing_more_and_its_share_goes_elsewhere():
    progress = [
        RegionProgress(region=0, best_after_each_unit=[800e-6, 600e-6, 430e-6]),  # floor 400: within 10%
        RegionProgress(region=2, best_after_each_unit=[250e-6]),
    ]
    allocation = allocate(24, ESTIMATES, progress)
    shares = {s.region: s for s in allocation.shares}
    assert shares[0].status == "at floor" and shares[0].next_units == 0
    assert shares[0].returned_s == 1000e-6 - 430e-6
    assert allocation.spent_units == 4
    assert shares[2].next_units + shares[1].next_units == 20
    assert shares[2].next_units > shares[1].next_units
    assert "at floor" in allocation.table()


def test_diminishing_returns_stop_a_region_that_stopped_improving():
    progress = [RegionProgress(region=2, best_after_each_unit=[200e-6, 199.9e-6, 199.8e-6, 199.7e-6])]
    shares = {s.region: s for s in allocate(20, ESTIMATES, progress).shares}
    assert shares[2].status == "diminishing returns" and shares[2].next_units == 0
    looser = AllocationRule(patience=5)
    assert {s.region: s for s in allocate(20, ESTIMATES, progress, looser).shares}[2].status == "active"


def test_past_results_raise_or_lower_a_regions_prior():
    hopeful = RegionEstimate(
        region=0, label="a", time_s=100e-6, floor_s=50e-6, covered=True, past_speedups=[1.5, 1.3]
    )
    hopeless = RegionEstimate(
        region=1, label="b", time_s=100e-6, floor_s=50e-6, covered=True, past_speedups=[1.0, 0.9]
    )
    units = _units(allocate(10, [hopeful, hopeless]))
    assert units[0] > units[1] > 0


def test_past_speedups_come_from_runs_with_the_same_operators():
    def run(i: int, ops: list[str], default: float, best: float) -> StoredRun:
        return StoredRun(
            id=i,
            task_name=f"t{i}",
            features=Features(ops=ops),
            best_key="k",
            best_ms=best,
            default_ms=default,
            points=[],
        )

    runs = [
        run(1, ["addmm", "relu"], 2.0, 1.0),
        run(2, ["conv"], 3.0, 1.0),
        run(3, ["addmm", "gelu"], 1.0, 1.0),
    ]
    assert past_speedups(runs, ["addmm", "relu"]) == [2.0]
    assert past_speedups(runs, ["addmm", "relu"], min_overlap=0.3) == [2.0, 1.0]
