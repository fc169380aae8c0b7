import pytest

from agent.budget import parse_duration
from agent.tune.cache import ReplayEvaluator
from agent.tune.limits import BudgetSpec, TuneBudget
from agent.tune.search import Search, SearchOptions
from agent.tune.space import Space, SpaceFile


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_fraction_is_the_largest_ratio_clamped():
    clock = FakeClock()
    budget = TuneBudget(BudgetSpec(max_evals=10, gpu_seconds=5.0, wall_seconds=60.0), clock=clock)
    assert budget.fraction_consumed() == 0.0
    budget.charge(evaluations=2, gpu_seconds=0.5)
    assert budget.fraction_consumed() == pytest.approx(0.2)
    budget.charge(gpu_seconds=2.0)
    assert budget.fraction_consumed() == pytest.approx(0.5)
    clock.now += 45.0
    assert budget.fraction_consumed() == pytest.approx(0.75)
    assert not budget.done()
    clock.now += 100.0
    assert budget.fraction_consumed() == 1.0 and budget.done()
    usage = budget.usage()
    assert (usage.evaluations, usage.gpu_seconds, usage.wall_seconds) == (2, 2.5, 145.0)


def test_evaluations_left_from_counts_and_observed_cost():
    clock = FakeClock()
    budget = TuneBudget(BudgetSpec(max_evals=50, wall_seconds=10.0), clock=clock)
    budget.charge(evaluations=5)
    clock.now += 2.0
    assert budget.evaluations_left() == 45
    assert budget.evaluations_left(seconds_per_eval=0.5) == 16
    assert TuneBudget(BudgetSpec(gpu_seconds=1.0)).evaluations_left() > 10**6


def test_compile_seconds_are_recorded_and_wall_counts_them():
    clock = FakeClock()
    budget = TuneBudget(BudgetSpec(wall_seconds=100.0), clock=clock)
    budget.charge(compile_seconds=30.0)
    clock.now += 30.0
    assert budget.usage().compile_seconds == 30.0
    assert budget.fraction_consumed() == pytest.approx(0.3)


def test_a_budget_needs_a_limit():
    with pytest.raises(ValueError, match="at least one limit"):
        BudgetSpec()


@pytest.mark.parametrize(
    ("text", "seconds"), [("120s", 120), ("2m", 120), ("90", 90), ("1.5h", 5400), ("500ms", 0.5)]
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "abc", "-5s", "0", "12 parsecs"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        parse_duration(text)


class Counting(ReplayEvaluator):
    def measure(self, points, phase):
        for p in points:
            assert self.space.is_valid(p), f"invalid point {p} reached the evaluator"
        return super().measure(points, phase)


def test_invalid_and_repeated_points_are_never_charged():
    space = Space(SpaceFile(params={"A": [1, 2, 3, 4], "B": [1, 2, 3, 4]}, constraints=["A * B <= 8"]))
    times = {space.key(p): float(sum(p)) for p in space.points}
    evaluator = Counting(space, times)
    budget = TuneBudget(BudgetSpec(max_evals=6))
    search = Search(space, budget, evaluator, SearchOptions(seed=1), warm=[(4, 4), (1, 1), (1, 1), (2, 1)])
    outcome = search.run()
    assert (4, 4) not in space.index  # an invalid warm point: dropped, never measured
    assert budget.evaluations == len(evaluator.measured) == len(set(evaluator.measured)) == 6
    assert outcome.usage.evaluations == 6


def test_a_budget_spent_before_the_first_point_is_reported_as_such():
    from agent.tune.render import render
    from agent.tune.results import TuneResult
    from agent.tune.runner import _summary

    space = Space(SpaceFile(params={"A": [1, 2]}))
    clock = FakeClock()
    budget = TuneBudget(BudgetSpec(wall_seconds=30), clock=clock)
    clock.now += 31  # the build of a fresh machine's first workspace took it all
    evaluator = Counting(space, {"1": 1.0, "2": 2.0})
    outcome = Search(space, budget, evaluator, SearchOptions()).run()
    assert evaluator.measured == [] and outcome.best_key is None
    message = _summary(outcome, compile_s=31.0)
    assert message.startswith("nothing was measured: budget consumed") and "the build took 31.0 s" in message
    result = TuneResult(ok=False, message=message, task="t", solution="s", outcome=outcome)
    assert "best     none: nothing was measured" in render(result)
    assert "not measured" in render(result)
