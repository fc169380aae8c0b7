"""Hidden inputs wired into the trials, end to end on the CPU (real worker processes): trial 1 uses
the centred inputs (where the precision check reads the candidate), later trials draw a secret
transform of the task's inputs from their seed, the candidate and the judge apply the same one, and
the reference's domain decides which transforms may be drawn."""

from __future__ import annotations

import pytest

from agent.referee.processes import Seeds
from sandbox.workers.referee.hidden_inputs import TRIAL_TRANSFORMS, draw
from tests.referee.conftest import JudgeCpu

pytestmark = pytest.mark.slow


def seed_drawing(transform: str, allowed: tuple[str, ...] = TRIAL_TRANSFORMS) -> int:
    """A trial seed whose hidden draw is `transform`."""
    return next(seed for seed in range(1, 100_000) if draw(seed, allowed).transform == transform)


def force_trial_seeds(monkeypatch: pytest.MonkeyPatch, transforms: list[str]) -> None:
    """Trials 2, 3, ... draw `transforms` in order (trial 0 uses the task's inputs, trial 1 the
    centred ones)."""
    seeds = [seed_drawing("task"), seed_drawing("task"), *(seed_drawing(t) for t in transforms)]
    monkeypatch.setattr(Seeds, "fresh", classmethod(lambda cls, trials: Seeds(11, 12, seeds[:trials], 13)))


def test_each_transform_is_drawn_by_both_sides_alike(
    judge_cpu: JudgeCpu, monkeypatch: pytest.MonkeyPatch
) -> None:
    hidden = [t for t in TRIAL_TRANSFORMS[1:] if t != "centre"]
    force_trial_seeds(monkeypatch, hidden)
    result = judge_cpu("relu_small", "relu_numpy", trials=len(hidden) + 2, profile=False)
    assert result.verdict == "correct", result.feedback()  # no trial's inputs differ between the processes
    correctness = result.correctness
    assert correctness is not None and correctness.hidden_transforms == list(TRIAL_TRANSFORMS)
    assert [t.inputs for t in correctness.trials] == ["task", "centre", *hidden]


def test_a_kernel_right_only_on_the_tasks_distribution_is_caught(
    judge_cpu: JudgeCpu, monkeypatch: pytest.MonkeyPatch
) -> None:
    force_trial_seeds(monkeypatch, ["negate"])
    without = judge_cpu("identity_nonneg", "relu_as_identity", trials=3, profile=False, hidden_inputs=False)
    assert without.verdict == "correct", without.feedback()  # the task's own inputs are all >= 0
    caught = judge_cpu("identity_nonneg", "relu_as_identity", trials=3, profile=False)
    assert caught.verdict == "incorrect", caught.feedback()
    assert "trial 1 (hidden inputs: centre)" in caught.feedback()
    assert "trial 2 (hidden inputs: negate)" in caught.feedback()


def test_transforms_outside_the_references_domain_are_never_drawn(judge_cpu: JudgeCpu) -> None:
    result = judge_cpu("log_small", "log_numpy", trials=3, profile=False)
    assert result.verdict == "correct", result.feedback()
    allowed = result.correctness.hidden_transforms if result.correctness else []
    assert {"negate", "zeros", "shift_down", "centre"}.isdisjoint(allowed)
    assert {"task", "scale_x3", "shift_up", "ones"} <= set(allowed)


def test_an_honest_kernel_summing_in_another_order_passes_large_and_edge_trials(
    judge_cpu: JudgeCpu, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Edge values mix signs and magnitudes up to 1e4: K = 4096 products cancel to near zero where
    numpy's BLAS and torch's round differently, which a fixed atol would call wrong."""
    force_trial_seeds(monkeypatch, ["large", "edge"])
    result = judge_cpu("matmul_long_k", "matmul_numpy", trials=4, profile=False)
    assert result.verdict == "correct", result.feedback()
    assert result.correctness is not None
    assert [t.inputs for t in result.correctness.trials][2:] == ["large", "edge"]


def test_a_kernel_wrong_on_edge_values_is_still_caught(
    judge_cpu: JudgeCpu, monkeypatch: pytest.MonkeyPatch
) -> None:
    force_trial_seeds(monkeypatch, ["edge"])
    caught = judge_cpu("identity_nonneg", "relu_as_identity", trials=3, profile=False)
    assert caught.verdict == "incorrect", caught.feedback()
