"""The batch's judging options are the referee's EvalOptions plus the sandbox: stores written before
that still load, and the same command still has the same batch key."""

from __future__ import annotations

from pathlib import Path

from agent.batch.config import BatchConfig, JudgingOptions
from agent.referee import EvalOptions

# A store's runs.config_json as `agent batch` wrote it before JudgingOptions (flat eval options).
STORED = (
    '{"tasks":["tasks"],"mode":"agent","model":"scripted","solutions":null,"samples":1,"out":"out",'
    '"store":"out/store.sqlite","gpus":[],"concurrency":8,"compile_workers":2,"executor":"local",'
    '"address":null,"eval":{"sandbox":"local","policy":"kernelbench","trials":2,"profile":true,'
    '"compile_mode":null,"arch":"9.0","refresh_baselines":true,"device":"cuda","compile_timeout_s":600.0,'
    '"run_timeout_s":300.0,"judge_timeout_s":900.0,"extra":{"log":"x"}},"redo":[],"retry_errors":true,'
    '"instantiate_tasks":true,"max_outage_retries":3,"eval_timeout_s":3600.0,'
    '"solve_options":{"budget":"turns=3"},"evals_per_gpu":4,"gpu_lock_dir":null}'
)
STORED_KEY = "8a973c451277fbfb"  # what that batch's key was
DEFAULT_KEY = "806f809fbc8376d4"  # the same with every eval option at its default


def test_a_stored_config_loads_and_keeps_its_batch_key() -> None:
    config = BatchConfig.model_validate_json(STORED)
    assert config.eval.policy == "kernelbench" and config.eval.extra == {"log": "x"}
    assert config.batch_key() == STORED_KEY
    plain = {"tasks": [Path("tasks")], "mode": "agent", "model": "scripted", "out": Path("out")}
    assert BatchConfig(**plain, store=Path("out/store.sqlite")).batch_key() == DEFAULT_KEY


def test_options_the_batch_did_not_have_change_the_key_only_when_set() -> None:
    config = BatchConfig.model_validate_json(STORED)
    tight = config.model_copy(update={"eval": config.eval.model_copy(update={"tolerance": "tight"})})
    gated = config.model_copy(update={"eval": config.eval.model_copy(update={"gpu_gate": None})})
    assert tight.batch_key() != STORED_KEY and gated.batch_key() == STORED_KEY


def test_the_referee_gets_its_options_without_the_batchs() -> None:
    judging = JudgingOptions(sandbox="docker", trials=2, extra={"log": "x"})
    referee = judging.referee(gpu_gate=None)
    assert type(referee) is EvalOptions and referee.trials == 2 and referee.gpu_gate is None
    assert isinstance(judging, EvalOptions) and judging.gpu_gate == "auto"
