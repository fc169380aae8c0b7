"""TemplatePolicy against a simulated tool environment (sim.Env): the turns it sends, how it
reads the verdicts, how its slot agents explore, and what it submits."""

from __future__ import annotations

from agent.messages import Usage
from agent.models.base import Model
from agent.templates import NotCovered, Plan, TemplatePolicy
from agent.templates.search import Outcome, Proposal, Search
from agent.templates.slots import Observation, SlotSpace, default_makers
from agent.tune.space import DeviceLimits
from tests.templates.sim import TOOLS, Env

RELU = "level1/19_ReLU.py"


def _relu(kernelbench_plans) -> Plan:
    plan = kernelbench_plans[RELU]
    assert isinstance(plan, Plan)
    return plan


def _cost(config: dict[str, int]) -> float:
    """Fastest at BLOCK 512, UNROLL 4, VEC 4."""
    return (
        1.0
        + abs(config["S0_BLOCK"] - 512) / 1024
        + abs(4 - config["S0_UNROLL"]) * 0.05
        + (4 - config["S0_VEC"]) * 0.2
    )


def test_first_candidate_is_written_compiled_then_profiled(kernelbench_plans) -> None:
    """Profile verifies before it times: the first candidate is judged once, not verified and
    then verified again by profile."""
    env = Env(time_ms=_cost)
    env.run(TemplatePolicy.for_task(RELU, _relu(kernelbench_plans)))
    first, second = env.turn_log[:2]
    assert first[-1] == "compile" and set(first[:-1]) == {"write_file"} and len(first) >= 5
    assert second == ["profile"]
    for turn in env.turn_log[2:-1]:
        assert turn[-2:] == ["compile", "profile"] and set(turn[:-2]) <= {"write_file"}
    assert env.turn_log[-1][-1] == "submit"


def test_agents_explore_one_dimension_at_a_time_and_the_fastest_is_submitted(kernelbench_plans) -> None:
    env = Env(time_ms=_cost)
    policy = TemplatePolicy.for_task(RELU, _relu(kernelbench_plans), max_candidates=14)
    env.run(policy)
    assert policy.search is not None and env.submitted is not None
    times = {h: _cost(c) for h, c in env.judged}
    assert _cost(env.submitted) == min(times.values())
    assert env.submitted["S0_BLOCK"] == 512 and env.submitted["S0_UNROLL"] == 4
    space = policy.search.space
    explored = [
        p for p, _ in policy.search.history if p.maker in ("config", "memory", "compute", "reduction")
    ]
    assert {p.maker for p in explored} >= {"config", "memory", "compute"}
    for proposal in explored:
        assert proposal.changes and {space.slots[n].dimension for n, _ in proposal.changes} == {
            proposal.maker
        }


def test_identical_sources_are_judged_once(kernelbench_plans) -> None:
    env = Env(time_ms=_cost)
    env.run(TemplatePolicy.for_task(RELU, _relu(kernelbench_plans), max_candidates=14))
    profiled = [h for h, _ in env.judged]
    # the submission re-judges the best: all else unique
    assert len(profiled) - len(set(profiled)) <= 1


def test_a_failing_candidate_is_recorded_and_skipped(kernelbench_plans) -> None:
    env = Env(time_ms=_cost, fails=lambda c: "fast math does not build" if c.get("S0_FAST") == 1 else None)
    policy = TemplatePolicy.for_task(RELU, _relu(kernelbench_plans), max_candidates=14)
    env.run(policy)
    assert policy.search is not None
    failed = [o for o in policy.search.judged.values() if not o.ok]
    assert failed and all("compile error" in o.reason for o in failed)
    assert env.submitted is not None and env.submitted["S0_FAST"] == 0


def test_without_a_gpu_the_first_compiled_candidate_is_submitted(kernelbench_plans) -> None:
    env = Env(time_ms=_cost, gpu=False)
    env.run(TemplatePolicy.for_task(RELU, _relu(kernelbench_plans)))
    assert env.turn_log[1] == ["profile"] and env.turn_log[2] == ["submit"]


def test_a_short_turn_budget_ends_in_a_submission(kernelbench_plans) -> None:
    env = Env(time_ms=_cost, turns=8)
    env.run(TemplatePolicy.for_task(RELU, _relu(kernelbench_plans), max_candidates=30))
    assert env.submitted is not None and len(env.turn_log) <= 8


def test_it_is_a_model_that_costs_nothing(kernelbench_plans) -> None:
    policy = TemplatePolicy.for_task(RELU, _relu(kernelbench_plans))
    assert isinstance(policy, Model) and policy.name == "templates"
    response = policy.query([], TOOLS)
    assert response.usage == Usage() and response.cost_usd == 0.0 and response.stop_reason == "tool_use"


def test_not_covered_answers_with_text_only() -> None:
    policy = TemplatePolicy.for_task(
        "conv.py", NotCovered(task="conv", reason="operators not covered: convolution")
    )
    response = policy.query([], [])
    assert not response.message.tool_calls and "convolution" in response.message.text
    assert response.stop_reason == "end_turn" and response.cost_usd == 0.0


def test_batches_are_ranked_and_noise_is_not_a_win(kernelbench_plans) -> None:
    plan = _relu(kernelbench_plans)
    space = SlotSpace(plan)
    search = Search(space, default_makers(), Observation(plan=plan, gpu=DeviceLimits()), max_candidates=20)
    first = search.next()
    assert first is not None and first.maker == "initial"
    search.record(first, Outcome(True, ms=1.0, iqr_ms=0.01))
    batch: list[Proposal] = []
    while (p := search.next()) is not None and p.maker != "initial" and p not in batch:
        batch.append(p)
        # Every proposal is within 0.5% of the incumbent except the memory agent's, 10% faster.
        search.record(p, Outcome(True, ms=0.9 if p.maker == "memory" else 0.995, iqr_ms=0.004))
        if len(batch) == sum(1 for e in search._explorers if not e.done):
            break
    assert {p.maker for p in batch} >= {"config", "memory", "compute"}
    assert all(space.valid(p.config) for p in batch)
    search.next()  # closes the batch
    memory = next(p for p in batch if p.maker == "memory")
    assert search.incumbent == memory.config and search.best is not None and search.best.ms == 0.9


def test_the_best_of_the_last_batch_is_submitted(kernelbench_plans) -> None:
    """The budget of candidates ends inside a batch: that batch is still ranked first."""
    env = Env(time_ms=_cost)
    policy = TemplatePolicy.for_task(RELU, _relu(kernelbench_plans), max_candidates=4)
    env.run(policy)
    assert policy.search is not None and env.submitted is not None
    assert _cost(env.submitted) == min(_cost(c) for _, c in env.judged)


def test_when_every_candidate_fails_it_stops_with_text(kernelbench_plans) -> None:
    env = Env(time_ms=_cost, fails=lambda c: "no kernel image")
    policy = TemplatePolicy.for_task(RELU, _relu(kernelbench_plans))
    env.run(policy)
    assert env.submitted is None and policy.search is not None
    assert len(policy.search.history) == 2  # the first guess and the conservative fallback, once each
    assert env.turn_log[-1] == [] and env.turn_log[-2] == []


def test_with_use_tune_the_best_is_tuned_then_submitted(kernelbench_plans) -> None:
    env = Env(time_ms=_cost)
    env.run(TemplatePolicy.for_task(RELU, _relu(kernelbench_plans), max_candidates=5, use_tune=True))
    assert env.turn_log[-2][-1] == "tune" and env.turn_log[-1] == ["submit"]
