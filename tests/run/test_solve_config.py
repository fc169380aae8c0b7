"""SolveConfig holds the referee's options as one field; transcript headers and run configs written
when they were flat keys still load."""

from __future__ import annotations

import json
from pathlib import Path

from agent.referee import EvalOptions
from agent.run.solve import SolveConfig

REPO = Path(__file__).resolve().parents[2]
OLD_HEADERS = [
    REPO / "tests" / "transcripts" / "data" / "v1_relu.jsonl",
    REPO
    / "benchmarks"
    / "results"
    / "solve-h200"
    / "2_Scale_Bias_Sigmoid_Residual-scripted"
    / "transcript.jsonl",
]


def test_old_headers_fold_their_flat_referee_keys() -> None:
    for path in OLD_HEADERS:
        recorded = json.loads(path.read_text().splitlines()[0])["config"]
        config = SolveConfig.model_validate(recorded)
        assert config.referee == EvalOptions(
            policy=recorded["policy"],
            arch=recorded["arch"],
            trials=recorded["trials"],
            compile_mode=recorded["compile_mode"],
            compile_timeout_s=recorded["compile_timeout_s"],
        )
        dumped = config.model_dump(mode="json")
        assert "policy" not in dumped and dumped["referee"]["arch"] == recorded["arch"]
        assert SolveConfig.model_validate(dumped) == config


def test_flat_keys_go_over_a_nested_referee() -> None:
    config = SolveConfig.model_validate(
        {"task": "t.py", "out": "o", "referee": {"trials": 2, "policy": "kernelbench"}, "trials": 3}
    )
    assert config.referee.trials == 3 and config.referee.policy == "kernelbench"
    given = SolveConfig(task=Path("t.py"), out=Path("o"), referee=EvalOptions(arch="9.0"), arch="sm_90")
    assert given.referee.arch == "sm_90"
