"""Budget specs, accounting and the line the model reads."""

from __future__ import annotations

import pytest

from agent.budget import Budget, BudgetExhausted, BudgetLimits, BudgetSpecError, parse_budget_spec
from agent.messages import AssistantMessage, ModelResponse, Usage


def response(
    input_tokens: int = 0, output_tokens: int = 0, cost: float | None = 0.0, cached: int = 0
) -> ModelResponse:
    usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens, cache_read_tokens=cached)
    return ModelResponse(message=AssistantMessage(text="x"), usage=usage, cost_usd=cost, model="m")


def test_the_documented_example_parses() -> None:
    assert parse_budget_spec("turns=40,usd=5,wall=30m,gpu=10m,in_tokens=2M,out_tokens=200k") == {
        "turns": 40,
        "usd": 5.0,
        "wall": 1800.0,
        "gpu": 600.0,
        "in_tokens": 2_000_000,
        "out_tokens": 200_000,
    }


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("wall=1h30m", {"wall": 5400.0}),
        ("gpu=90s, wall=45", {"gpu": 90.0, "wall": 45.0}),
        ("usd=$2.50", {"usd": 2.5}),
        ("in_tokens=1.5M,out_tokens=64_000", {"in_tokens": 1_500_000, "out_tokens": 64_000}),
        ("usd=none,turns=inf", {"usd": None, "turns": None}),
        ("", {}),
    ],
)
def test_budget_spec_forms(spec: str, parsed: dict) -> None:
    assert parse_budget_spec(spec) == parsed


@pytest.mark.parametrize(
    ("spec", "complaint"),
    [
        ("turns", "'turns' is not KIND=VALUE"),
        ("dollars=5", "unknown budget 'dollars'; choose from turns, in_tokens, out_tokens, usd, wall, gpu"),
        ("wall=soon", "wall='soon' is not a duration like 90s, 30m or 1h30m"),
        ("usd=five", "usd='five' is not dollars"),
        ("turns=0", "turns='0' is not a count"),
        ("in_tokens=2T", "in_tokens='2t' is not a count"),
    ],
)
def test_bad_budget_specs_name_the_flag(spec: str, complaint: str) -> None:
    with pytest.raises(BudgetSpecError) as caught:
        parse_budget_spec(spec)
    assert str(caught.value).startswith(f"--budget {spec!r}: ")
    assert complaint in str(caught.value)


def test_spec_overrides_only_the_kinds_it_names() -> None:
    limits = BudgetLimits().with_spec("usd=2,gpu=none")
    assert (limits.turns, limits.usd, limits.gpu, limits.wall) == (40, 2.0, None, 3600.0)


def test_each_kind_is_counted_and_exhausts() -> None:
    now = [0.0]
    budget = Budget(
        BudgetLimits(turns=3, in_tokens=250, out_tokens=100, usd=1.0, wall=60, gpu=10), clock=lambda: now[0]
    )
    budget.charge_model_call(response(input_tokens=50, cached=50, output_tokens=40, cost=0.3))
    assert budget.exhausted() is None
    budget.charge_model_call(response(input_tokens=100, output_tokens=40, cost=0.3))
    assert budget.exhausted() is None
    assert budget.max_output_tokens(None) == 20
    assert budget.max_output_tokens(8) == 8
    budget.charge_model_call(response(input_tokens=10, output_tokens=10, cost=0.3))
    assert budget.exhausted() == "turns"
    usage = budget.usage()
    assert (usage.turns, usage.in_tokens, usage.out_tokens) == (3, 210, 90)
    assert usage.usd == pytest.approx(0.9)

    with pytest.raises(BudgetExhausted) as caught:
        budget.check()
    assert caught.value.status == "budget_exhausted:turns"


@pytest.mark.parametrize(
    ("limits", "spend", "kind"),
    [
        (
            BudgetLimits(turns=None, in_tokens=100),
            lambda b, now: b.charge_model_call(response(input_tokens=100)),
            "in_tokens",
        ),
        (
            BudgetLimits(turns=None, out_tokens=5),
            lambda b, now: b.charge_model_call(response(output_tokens=9)),
            "out_tokens",
        ),
        (BudgetLimits(turns=None, usd=0.5), lambda b, now: b.charge_model_call(response(cost=0.5)), "usd"),
        (BudgetLimits(turns=None, wall=30), lambda b, now: now.__setitem__(0, 30.0), "wall"),
        (BudgetLimits(turns=None, gpu=4), lambda b, now: b.charge_gpu(4.5), "gpu"),
    ],
)
def test_exhaustion_of_each_kind(limits: BudgetLimits, spend, kind: str) -> None:
    now = [0.0]
    budget = Budget(limits, clock=lambda: now[0])
    budget.check()
    spend(budget, now)
    assert budget.exhausted() == kind
    with pytest.raises(BudgetExhausted, match=f"the {kind} budget is used up"):
        budget.check()


def test_gpu_work_is_refused_once_the_gpu_budget_is_gone() -> None:
    budget = Budget(BudgetLimits(gpu=2))
    budget.check_gpu()
    budget.charge_gpu(2.0)
    with pytest.raises(BudgetExhausted) as caught:
        budget.check_gpu()
    assert caught.value.kind == "gpu"


def test_remaining_line_shows_what_is_left_of_each_limit() -> None:
    now = [0.0]
    budget = Budget(
        BudgetLimits(turns=40, usd=5, wall=1800, gpu=600, in_tokens=2_000_000), clock=lambda: now[0]
    )
    budget.charge_model_call(response(input_tokens=120_000, cost=1.25))
    budget.charge_gpu(75)
    now[0] = 130
    assert budget.remaining_line() == (
        "[budget left: turns 39/40 · in_tokens 1.88M/2M · usd $3.75/$5.00 · wall 27m50s/30m00s · gpu 8m45s/10m00s]"
    )
    budget.charge_model_call(response(cost=None))
    assert "usd $3.75/$5.00 (+unpriced calls)" in budget.remaining_line()
    assert (
        Budget(BudgetLimits(turns=None, usd=None, wall=None, gpu=None)).remaining_line()
        == "[budget: unlimited]"
    )
