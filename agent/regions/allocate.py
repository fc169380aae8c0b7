"""Budget allocation across a model's regions (KernelBrain's system-level scheduling).

A pure function over recorded results. Each region's expected gain, in seconds of model time, is

    gain = time_now * headroom * prior

where `time_now` is the region's best time so far (its eager time before any result: time_now over
the model's time is its share), `headroom = 1 - floor / time_now` (the part of that time above the
speed-of-light floor) and `prior` the chance the policy turns headroom into speed: its coverage
prior (a region the policy covers, or not), blended with the experience library's past results on
similar work (a Beta-style average: `(2 * coverage_prior + successes) / (2 + past runs)`).

The remaining budget is split in proportion to gain (largest remainders for whole units). A region
stops getting budget once it is within `floor_margin` of its floor, or when its last `patience`
units improved it by less than `min_gain` (diminishing returns). `allocate_uniform` is the
baseline: the same units to every region the policy covers.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from agent.tune.experience import StoredRun


class RegionEstimate(BaseModel):
    region: int
    label: str
    time_s: float = Field(description="the region's eager time: measured, or estimated from its operators")
    floor_s: float
    covered: bool = Field(description="the policy can work on the region at all")
    past_speedups: list[float] = Field(
        default_factory=list, description="similar past runs' best/default speedups"
    )


class RegionProgress(BaseModel):
    """What a region's spending returned so far: its best time after each unit spent."""

    region: int
    best_after_each_unit: list[float] = Field(default_factory=list)

    @property
    def spent(self) -> int:
        return len(self.best_after_each_unit)


class AllocationRule(BaseModel):
    coverage_prior: float = 0.7
    uncovered_prior: float = 0.0
    past_success_speedup: float = 1.05
    floor_margin: float = 0.1
    patience: int = 3
    min_gain: float = 0.01


class RegionShare(BaseModel):
    region: int
    label: str
    expected_gain_s: float
    spent: int
    next_units: int
    status: str = Field(description="active, at floor, diminishing returns, not covered, no gain")
    time_before_s: float
    time_now_s: float

    @property
    def returned_s(self) -> float:
        return self.time_before_s - self.time_now_s


class Allocation(BaseModel):
    total_units: int
    spent_units: int
    shares: list[RegionShare]

    def table(self) -> str:
        lines = [
            "| region | expected gain (us) | spent | next | status | before (us) | now (us) | returned (us) |",
            "|---|---:|---:|---:|---|---:|---:|---:|",
        ]
        for s in self.shares:
            lines.append(
                f"| {s.label} | {s.expected_gain_s * 1e6:.1f} | {s.spent} | {s.next_units} | {s.status} | "
                f"{s.time_before_s * 1e6:.1f} | {s.time_now_s * 1e6:.1f} | {s.returned_s * 1e6:.1f} |"
            )
        return "\n".join(lines)


def prior(estimate: RegionEstimate, rule: AllocationRule) -> float:
    base = rule.coverage_prior if estimate.covered else rule.uncovered_prior
    if not estimate.covered:
        return base
    wins = sum(1 for s in estimate.past_speedups if s >= rule.past_success_speedup)
    return (2 * base + wins) / (2 + len(estimate.past_speedups))


def expected_gain(estimate: RegionEstimate, time_now: float, rule: AllocationRule) -> float:
    headroom = max(0.0, 1.0 - estimate.floor_s / time_now) if time_now > 0 else 0.0
    return time_now * headroom * prior(estimate, rule)


def _status(estimate: RegionEstimate, progress: RegionProgress, time_now: float, rule: AllocationRule) -> str:
    if not estimate.covered:
        return "not covered"
    if time_now <= estimate.floor_s * (1 + rule.floor_margin):
        return "at floor"
    history = [estimate.time_s, *progress.best_after_each_unit]
    if progress.spent >= rule.patience:
        before, after = history[-1 - rule.patience], history[-1]
        if before - after < rule.min_gain * before:
            return "diminishing returns"
    return "active"


def allocate(
    total_units: int,
    estimates: list[RegionEstimate],
    progress: list[RegionProgress] | None = None,
    rule: AllocationRule | None = None,
) -> Allocation:
    """How many of the budget's remaining units each region gets next, by expected gain."""
    rule = rule or AllocationRule()
    by_region = {p.region: p for p in progress or []}
    rows = []
    for est in estimates:
        prog = by_region.get(est.region, RegionProgress(region=est.region))
        now = min([est.time_s, *prog.best_after_each_unit])
        status = _status(est, prog, now, rule)
        gain = expected_gain(est, now, rule) if status == "active" else 0.0
        if status == "active" and gain <= 0:
            status = "no gain"
        rows.append((est, prog, now, status, gain))
    spent = sum(p.spent for _, p, _, _, _ in rows)
    units = _split(max(0, total_units - spent), [g for *_, g in rows])
    shares = [
        RegionShare(
            region=e.region,
            label=e.label,
            expected_gain_s=g,
            spent=p.spent,
            next_units=u,
            status=s,
            time_before_s=e.time_s,
            time_now_s=now,
        )
        for (e, p, now, s, g), u in zip(rows, units, strict=True)
    ]
    return Allocation(total_units=total_units, spent_units=spent, shares=shares)


def allocate_uniform(total_units: int, estimates: list[RegionEstimate]) -> Allocation:
    """The baseline: every covered region the same units, whatever its time or headroom."""
    units = _split(total_units, [1.0 if e.covered else 0.0 for e in estimates])
    return Allocation(
        total_units=total_units,
        spent_units=0,
        shares=[
            RegionShare(
                region=e.region,
                label=e.label,
                expected_gain_s=0.0,
                spent=0,
                next_units=u,
                status="active" if e.covered else "not covered",
                time_before_s=e.time_s,
                time_now_s=e.time_s,
            )
            for e, u in zip(estimates, units, strict=True)
        ],
    )


def _split(units: int, weights: list[float]) -> list[int]:
    """Whole units in proportion to weights (largest remainder; ties to the earlier region)."""
    total = sum(weights)
    if units <= 0 or total <= 0:
        return [0 for _ in weights]
    exact = [units * w / total for w in weights]
    whole = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - whole[i]), i))
    for i in order[: units - sum(whole)]:
        whole[i] += 1
    return whole


def past_speedups(
    runs: list[StoredRun], ops: list[str], *, min_overlap: float = 0.5, limit: int = 5
) -> list[float]:
    """Speedups (default time / best time) of the experience library's runs whose operators
    overlap the region's (Jaccard over operator names) by at least `min_overlap`, closest first."""
    wanted = set(ops)
    scored = []
    for run in runs:
        have = set(run.features.ops)
        if not wanted or not have or not run.best_ms or not run.default_ms:
            continue
        overlap = len(wanted & have) / len(wanted | have)
        if overlap >= min_overlap:
            scored.append((overlap, run.id, run.default_ms / run.best_ms))
    scored.sort(key=lambda item: (-item[0], -item[1]))
    return [speedup for *_, speedup in scored[:limit]]
