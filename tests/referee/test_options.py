"""EvalOptions: the referee's options as one frozen value, checked when it is made."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from agent.referee import EvalOptions
from agent.referee.options import validation_message
from sandbox.workers.gpu.timing import TimingConfig


def test_the_defaults_are_agent_evals() -> None:
    options = EvalOptions()
    assert (options.policy, options.tolerance, options.trials, options.profile) == (
        "strict",
        "default",
        5,
        True,
    )
    assert (options.compile_mode, options.arch, options.refresh_baselines) == ("default", None, False)
    assert (options.compile_timeout_s, options.run_timeout_s, options.judge_timeout_s) == (
        600.0,
        300.0,
        900.0,
    )
    assert (options.bandwidth_gbps, options.device, options.timing, options.gpu_gate) == (
        None,
        "cuda",
        None,
        "auto",
    )
    assert all(field.description for field in EvalOptions.model_fields.values())


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"policy": "lenient"}, "unknown policy 'lenient'"),
        ({"tolerance": "loose"}, "unknown tolerance 'loose'"),
        ({"trials": 0}, "trials must be at least 1"),
        ({"device": "gpu"}, "device: "),
        ({"compile_timeout": 5.0}, "compile_timeout: "),
    ],
)
def test_bad_values_are_refused_with_the_referees_own_message(fields: dict, message: str) -> None:
    with pytest.raises(ValidationError) as refused:
        EvalOptions(**fields)
    assert isinstance(refused.value, ValueError)
    assert message in validation_message(refused.value) and "\n" not in validation_message(refused.value)


def test_frozen_and_round_trips_through_json() -> None:
    options = EvalOptions(trials=2, compile_mode=None, timing=TimingConfig(min_reps=3), gpu_gate=Path("/g"))
    with pytest.raises(ValidationError):
        options.trials = 3  # type: ignore[misc]
    again = EvalOptions.model_validate_json(options.model_dump_json())
    assert again.timing == TimingConfig(min_reps=3) and str(again.gpu_gate) == "/g"
    assert again.model_copy(update={"gpu_gate": Path("/g")}) == options
    assert EvalOptions(compile_mode="none").baseline_compile_mode() is None
    assert EvalOptions(tolerance="tight").tolerances().name == "tight"
