"""What a region-by-region run did, as typed records: each region's share, coverage, budget and
result, each composition the referee judged, and the end-to-end speedups. Written as regions.json
beside run.json, shown in report.md, and stored per attempt by `agent batch`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

RegionStatus = Literal[
    "kept", "dropped", "slower alone", "unmeasured", "failed", "not run", "not covered", "unverified"
]
"""kept: in the submitted composition; dropped: verified but left out so the whole is faster;
slower alone: verified but no faster than eager on its own; unmeasured: verified, its speed not
measured (no baseline); failed: no verified candidate; not run:
covered but given no budget; not covered: the template library has no kernel for it; unverified:
in a compile-only dry run's composition."""


class RegionResult(BaseModel):
    region: int
    label: str
    kind: str
    share: float = Field(description="the region's share of the model's eager time")
    covered: bool
    reason: str = Field(default="", description="why the library does not cover it")
    units: int = Field(default=0, description="candidates the allocation gave it")
    spent: int = Field(default=0, description="candidates the referee judged")
    speedup_eager: float | None = Field(default=None, description="its own best, vs eager, as a task")
    speedup_compile: float | None = None
    status: RegionStatus = "not run"
    allocation_status: str = Field(default="", description="active, at floor, diminishing returns, ...")
    out: str | None = Field(default=None, description="the region's own run folder")


class CompositionTrial(BaseModel):
    """One composition the referee judged on the whole task."""

    regions: list[int] = Field(description="regions whose solution it calls (the rest run in torch)")
    policy: str = Field(description="the referee policy it was judged under")
    verdict: str
    reason: str = ""
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    faster: bool = Field(default=False, description="faster than the run's baseline beyond noise")


class RegionRun(BaseModel):
    task: str
    allocation: Literal["gain", "uniform", "model"] = Field(
        description="how the budget was split: by expected gain, evenly, or by the model (region tools)"
    )
    times: str = Field(description="where the regions' times came from: measured or estimated")
    total_units: int = Field(description="candidates to share out; for the model, its tool calls")
    covered_share: float = Field(description="share of the model's eager time in covered regions")
    regions: list[RegionResult]
    compositions: list[CompositionTrial] = Field(default_factory=list)
    submitted: list[int] | None = Field(default=None, description="the submitted composition's regions")
    speedup_eager: float | None = None
    speedup_compile: float | None = None

    @property
    def kept_share(self) -> float:
        kept = set(self.submitted or [])
        return sum(r.share for r in self.regions if r.region in kept)

    def table(self) -> str:
        lines = [
            "| region | share | covered | budget | judged | alone vs eager | status |",
            "|---|---:|---|---:|---:|---:|---|",
        ]
        for r in sorted(self.regions, key=lambda r: -r.share):
            alone = f"{r.speedup_eager:.2f}x" if r.speedup_eager is not None else "-"
            shown = r.allocation_status not in ("", "active", r.status)
            state = r.status + (f" ({r.allocation_status})" if shown else "")
            lines.append(
                f"| {r.label} | {100 * r.share:.1f}% | {'yes' if r.covered else 'no'} | {r.units} | "
                f"{r.spent} | {alone} | {state} |"
            )
        return "\n".join(lines)

    def compositions_table(self) -> str:
        lines = ["| regions | policy | verdict | vs eager | vs torch.compile |", "|---|---|---|---:|---:|"]
        for c in self.compositions:
            lines.append(
                f"| {', '.join(f'r{i:02d}' for i in c.regions)} | {c.policy} | {c.verdict} | "
                f"{_x(c.speedup_eager)} | {_x(c.speedup_compile)} |"
            )
        return "\n".join(lines)

    def markdown(self) -> str:
        how = (
            f"the model's own choice, {self.total_units} tool calls in all; budget = tool calls made in the region"
            if self.allocation == "model"
            else f"{self.allocation} allocation of {self.total_units} candidates"
        )
        head = (
            f"Region by region ({how}; region times "
            f"{self.times}): covered regions hold {100 * self.covered_share:.0f}% of the model's time, "
            f"the submitted composition {100 * self.kept_share:.0f}%."
        )
        parts = ["## Regions", "", head, "", self.table()]
        if self.compositions:
            parts += ["", "Compositions judged on the whole task:", "", self.compositions_table()]
        return "\n".join(parts) + "\n"

    def summary_line(self) -> str:
        kept = len(self.submitted or [])
        covered = sum(r.covered for r in self.regions)
        return (
            f"{kept} of {covered} covered regions ({len(self.regions)} in all) in the submitted composition, "
            f"{100 * self.kept_share:.0f}% of the time; end to end {_x(self.speedup_eager)} vs eager, "
            f"{_x(self.speedup_compile)} vs torch.compile"
        )


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"
