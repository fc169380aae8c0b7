"""The divergence rules on crafted observations (no sandbox, no GPU)."""

from __future__ import annotations

from agent.divergence import Observation, SpeedupBand, compare, compare_runs, speedups_agree


def band(value: float, half: float) -> SpeedupBand:
    return SpeedupBand(value=value, low=value - half, high=value + half)


def obs(tool: str = "compile", **fields) -> Observation:
    base = {"turn": 3, "call_id": "c1", "tool": tool, "is_error": False, "content": "compiled in 12.3s"}
    return Observation(**{**base, **fields})


def test_same_compile_outcome_with_other_timings_matches() -> None:
    recorded = obs(compile_ok=True, content_hash="abc", content="built in 40.1s for sm_90")
    replayed = obs(compile_ok=True, content_hash="abc", content="up to date in 0.0s for sm_80")
    assert compare(recorded, replayed) == []


def test_compile_ok_then_failed_is_a_divergence_naming_the_error() -> None:
    replayed = obs(
        compile_ok=False, is_error=True, compile_error="kernels/relu.cu:12: error: identifier zero"
    )
    (difference,) = compare(obs(compile_ok=True), replayed)
    assert difference.kind == "compile"
    assert (difference.recorded, difference.replayed) == (
        "compiled",
        "failed: kernels/relu.cu:12: error: identifier zero",
    )


def test_speedups_within_the_combined_noise_agree() -> None:
    assert speedups_agree(band(1.50, 0.02), band(1.52, 0.02))
    recorded = obs("profile", verdict="correct", speedups={"eager": band(1.50, 0.02)})
    replayed = obs("profile", verdict="correct", speedups={"eager": band(1.52, 0.02)})
    assert compare(recorded, replayed) == []


def test_speedups_beyond_the_noise_diverge() -> None:
    assert not speedups_agree(band(1.5, 0.03), band(1.2, 0.024))
    recorded = obs("profile", verdict="correct", speedups={"eager": band(1.5, 0.03)})
    replayed = obs("profile", verdict="correct", speedups={"eager": band(1.2, 0.024)})
    (difference,) = compare(recorded, replayed)
    assert difference.kind == "speedup" and "1.50x" in difference.recorded and "1.20x" in difference.replayed


def test_a_speedup_that_was_not_measured_again_diverges() -> None:
    recorded = obs("profile", verdict="correct", speedups={"eager": band(1.5, 0.03)})
    (difference,) = compare(recorded, obs("profile", verdict="correct"))
    assert difference.replayed == "not timed vs eager"


def test_verdict_files_and_deterministic_text_are_compared() -> None:
    kinds = {
        d.kind
        for d in compare(
            obs("verify", verdict="correct", content_hash="a"),
            obs("verify", verdict="incorrect", content_hash="b"),
        )
    }
    assert kinds == {"verdict", "files"}
    (difference,) = compare(obs("read_file", content="x = 1"), obs("read_file", content="x = 2"))
    assert difference.kind == "result"
    # Tool text of non-deterministic tools (timings) is not compared, only the outcome.
    assert compare(obs("shell", content="1.2 s"), obs("shell", content="1.3 s")) == []
    (difference,) = compare(obs("shell"), obs("shell", is_error=True))
    assert difference.kind == "outcome"


def test_runs_of_different_lengths_and_other_calls() -> None:
    recorded = [obs(call_id="a"), obs(call_id="b"), obs(call_id="c")]
    replayed = [obs(call_id="a"), obs("verify", call_id="x")]
    steps = compare_runs(recorded, replayed)
    assert [s.status for s in steps] == ["match", "diverge", "missing"]
    assert steps[1].differences[0].kind == "step"
    assert [s.status for s in compare_runs(recorded[:1], replayed)] == ["match", "extra"]
