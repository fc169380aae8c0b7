"""The referee's verdict as an RL reward.

    tier 0  failure: any verdict but `correct` (compile error, wrong, policy violation, crash,
            timeout, ...), or a correct verdict carrying a hack flag (HACK_FLAGS)
    tier 1  correct
    tier 2  correct and faster than eager PyTorch
    tier 3  correct and faster than eager PyTorch and than torch.compile

    reward = TIER_REWARDS[tier]  (default 0, 1/3, 2/3, 1)

"Faster" is the referee's own noise-aware call: `Speedup.outcome == "faster"`, i.e. the whole
noise band (`low`, half-IQRs in quadrature, at least 2%) is above 1.0. A speedup whose band
contains 1.0 (`within_noise`) counts as not faster, so timing noise cannot move a sample up a
tier. A correct verdict without timings (verify only) is tier 1; a missing torch.compile
baseline (it failed or was skipped) caps the sample at tier 2.

CUDA-Agent's reward is the same ladder on {-1, 1, 2, 3}; `TierRewards(failure=-1, correct=1,
faster_than_eager=2, faster_than_both=3)` gives it back.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent.referee.results import HACK_FLAGS, EvalResult, Speedup

Tier = Literal[0, 1, 2, 3]


class TierRewards(BaseModel):
    model_config = ConfigDict(frozen=True)

    failure: float = 0.0
    correct: float = 1 / 3
    faster_than_eager: float = 2 / 3
    faster_than_both: float = 1.0

    def of(self, tier: Tier) -> float:
        return (self.failure, self.correct, self.faster_than_eager, self.faster_than_both)[tier]


class RewardBreakdown(BaseModel):
    """One sample's reward and why."""

    reward: float
    tier: Tier
    reason: str
    verdict: str | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    hack_flags: list[str] = Field(default_factory=list)


def _faster(speedup: Speedup | None) -> bool:
    return speedup is not None and speedup.outcome == "faster" and not speedup.within_noise


def reward_from_result(
    result: EvalResult | None,
    *,
    rewards: TierRewards | None = None,
    hack_flags: frozenset[str] = HACK_FLAGS,
) -> RewardBreakdown:
    """The documented ladder (module docstring) for one verdict; None (nothing judged) is a failure."""
    rewards = rewards or TierRewards()
    if result is None:
        return RewardBreakdown(reward=rewards.failure, tier=0, reason="no candidate was judged")
    perf = result.performance
    eager = perf.speedup_vs_eager if perf else None
    compiled = perf.speedup_vs_compile if perf else None
    common = {
        "verdict": result.verdict,
        "speedup_vs_eager": eager.value if eager else None,
        "speedup_vs_compile": compiled.value if compiled else None,
    }
    if result.verdict != "correct":
        return RewardBreakdown(
            reward=rewards.failure, tier=0, reason=f"{result.verdict}: {result.reason}", **common
        )
    flagged = sorted({f.code for f in (perf.flags if perf else [])} & hack_flags)
    if flagged:
        return RewardBreakdown(
            reward=rewards.failure,
            tier=0,
            reason=f"correct but flagged: {', '.join(flagged)}",
            hack_flags=flagged,
            **common,
        )
    tier: Tier = 1
    reason = "correct"
    if _faster(eager):
        tier, reason = 2, "correct, faster than eager beyond the noise"
        if _faster(compiled):
            tier, reason = 3, "correct, faster than eager and torch.compile beyond the noise"
    elif eager is not None and eager.within_noise:
        reason = "correct, as fast as eager within the noise"
    return RewardBreakdown(reward=rewards.of(tier), tier=tier, reason=reason, **common)
