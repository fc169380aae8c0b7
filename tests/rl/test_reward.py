"""The reward ladder: failure and hack flags 0, correct, faster than eager, faster than both,
with the referee's noise band deciding "faster"."""

from __future__ import annotations

from agent.build.compile import CompileResult
from agent.referee.results import EvalResult, Flag, PerformanceReport, SolutionRef, TaskRef
from agent.rl.fakes import fake_speedup, fake_stats
from agent.rl.reward import TierRewards, reward_from_result


def result(verdict: str = "correct", eager=None, compiled=None, flags=(), noise=0.02) -> EvalResult:
    perf = None
    if eager is not None or compiled is not None or flags:
        perf = PerformanceReport(
            candidate=fake_stats(1.0),
            speedup_vs_eager=fake_speedup("eager", eager, noise),
            speedup_vs_compile=fake_speedup("compile", compiled, noise),
            flags=[Flag(code=f, message=f) for f in flags],
        )
    return EvalResult(
        task=TaskRef(name="t", key="t@0", sha256="0", path="t.py"),
        solution=SolutionRef(kind="workspace", content_hash="h", path="ws"),
        policy="strict",
        verdict=verdict,  # type: ignore[arg-type]
        reason="why",
        compile=CompileResult(
            ok=verdict != "compile_error",
            status="built",
            solution_kind="workspace",
            content_hash="h",
            arch="9.0",
            arch_source="test",
            build_dir="/x",
            duration_s=0.0,
        ),
        performance=perf,
    )


def test_failures_score_zero() -> None:
    for verdict in ("incorrect", "policy_violation", "compile_error", "runtime_error", "timeout"):
        r = reward_from_result(result(verdict, eager=3.0, compiled=3.0))
        assert (r.reward, r.tier) == (0.0, 0), verdict
        assert r.reason.startswith(verdict)
    assert reward_from_result(None).reward == 0.0


def test_hack_flags_score_as_failure() -> None:
    r = reward_from_result(result(eager=30.0, compiled=20.0, flags=["implausible_speedup"]))
    assert (r.reward, r.tier, r.hack_flags) == (0.0, 0, ["implausible_speedup"])
    # other_streams_time is not a hack: the time is already added to the candidate
    assert reward_from_result(result(eager=2.0, compiled=2.0, flags=["other_streams_time"])).tier == 3


def test_the_ladder() -> None:
    assert reward_from_result(result()).tier == 1  # verified, never timed
    assert reward_from_result(result(eager=0.5, compiled=0.4)).tier == 1  # correct but slower
    assert reward_from_result(result(eager=1.5, compiled=0.9)).tier == 2
    r = reward_from_result(result(eager=1.5, compiled=1.2))
    assert (r.tier, r.reward) == (3, 1.0)
    assert reward_from_result(result(eager=1.5, compiled=None)).tier == 2  # no compile baseline
    assert [reward_from_result(result(eager=e, compiled=e)).reward for e in (0.5, 1.5)] == [1 / 3, 1.0]


def test_a_speedup_inside_the_noise_band_is_not_faster() -> None:
    # 1.015x with a 2% band: the band holds 1.0, so it is not faster
    r = reward_from_result(result(eager=1.015, compiled=1.015))
    assert r.tier == 1 and "within the noise" in r.reason
    # the same 1.015x measured with a 1% band is faster
    assert reward_from_result(result(eager=1.015, compiled=1.015, noise=0.01)).tier == 3
    # faster than eager, compile within noise: tier 2
    assert reward_from_result(result(eager=1.5, compiled=1.01)).tier == 2


def test_cuda_agent_rewards() -> None:
    cuda_agent = TierRewards(failure=-1, correct=1, faster_than_eager=2, faster_than_both=3)
    assert reward_from_result(result("incorrect"), rewards=cuda_agent).reward == -1
    assert reward_from_result(result(eager=2.0, compiled=2.0), rewards=cuda_agent).reward == 3
