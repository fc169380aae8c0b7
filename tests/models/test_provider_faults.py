"""A faulty provider never hangs a run: a server that does not answer, `--request-timeout`, and 200
answers whose body is empty or cut off, through both real SDKs against a local server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest

from agent.budget import BudgetLimits
from agent.messages import UserMessage
from agent.models.anthropic import AnthropicModel
from agent.models.base import CallTimeLimitReached, Model, ModelError, RetryPolicy, call_time_limit
from agent.models.openai import OpenAIModel
from agent.referee import EvalOptions
from agent.run.solve import SolveConfig, solve
from agent.tasks import parse_task
from tests.models.conftest import FAST_RETRY, TEST_KEY
from tests.models.wire_server import Reply, WireServer, anthropic_message, openai_completion
from tests.run.fakes import FakeReferee

REPO = Path(__file__).resolve().parents[2]
RELU_TASK = REPO / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"
HI = [UserMessage(text="hi")]
HANG = Reply(delay_s=600)
WALL_S = 5.0
SLACK_S = 3.0
"""What a run may take past its wall budget: writing the output folder, closing the sandbox."""

PROVIDERS = ["anthropic", "openai"]


def make_model(provider: str, url: str, retry: RetryPolicy = FAST_RETRY, timeout_s: float = 180.0) -> Model:
    if provider == "anthropic":
        client = anthropic.Anthropic(api_key=TEST_KEY, base_url=url, timeout=timeout_s)
        return AnthropicModel("claude-sonnet-5-5", client, retry=retry)
    client = openai.OpenAI(api_key=TEST_KEY, base_url=f"{url}/v1", timeout=timeout_s)
    return OpenAIModel("gpt-4o", client, retry=retry)


def ok_body(provider: str) -> dict[str, object]:
    if provider == "anthropic":
        return anthropic_message([{"type": "text", "text": "ok"}])
    return openai_completion(content="ok")


@pytest.fixture
def server() -> Iterator[WireServer]:
    """A server whose hanging replies may be left unanswered (the client gave up)."""
    wire = WireServer().start()
    yield wire
    wire.stop()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_hanging_server_ends_the_run_as_a_wall_budget_stop(
    server: WireServer, provider: str, tmp_path: Path
) -> None:
    server.script(*[HANG] * 3)
    model = make_model(provider, server.url)
    limits = BudgetLimits(turns=None, usd=None, wall=WALL_S, gpu=None)
    config = SolveConfig(
        task=RELU_TASK,
        out=tmp_path / "out",
        model=model.name,
        budget=limits,
        referee=EvalOptions(arch="sm_90"),
    )
    result = solve(config, model=model, referee=FakeReferee(), task=parse_task(RELU_TASK))

    # The wall clock starts with the run (after the workspace and sandbox are set up).
    assert result.usage.wall < WALL_S + SLACK_S
    assert time.monotonic() - server.requests[0].received_at < WALL_S + SLACK_S
    assert result.status == "budget_exhausted:wall"
    assert "waiting for the model" in result.message
    assert len(server.requests) == 1
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["status"] == "budget_exhausted:wall"
    assert (tmp_path / "out" / "report.md").is_file()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_retry_waits_are_cut_to_the_time_left(server: WireServer, provider: str) -> None:
    body = {"error": {"message": "slow down", "type": "rate_limit_error"}}
    server.script(Reply(status=429, body=body, headers={"retry-after": "60"}))
    model = make_model(provider, server.url)
    started = time.monotonic()

    with pytest.raises(CallTimeLimitReached), call_time_limit(1.0):
        model.query(HI, [])

    assert time.monotonic() - started < 2.0
    assert len(server.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_answer_that_trickles_in_is_cut_at_the_time_limit(server: WireServer, provider: str) -> None:
    server.script(Reply(body=ok_body(provider), trickle_s=0.2))
    model = make_model(provider, server.url)
    started = time.monotonic()

    with pytest.raises(CallTimeLimitReached), call_time_limit(1.0):
        model.query(HI, [])

    # The SDK's timeout (the time left, 1 s) never fires: a byte arrives every 0.2 s.
    assert time.monotonic() - started < 2.0


def test_without_a_time_limit_a_hanging_server_is_cut_by_the_request_timeout(server: WireServer) -> None:
    server.script(HANG, Reply(body=ok_body("openai")))
    started = time.monotonic()

    response = make_model("openai", server.url, timeout_s=0.5).query(HI, [])

    assert response.attempts == 2
    assert time.monotonic() - started < 2.0


@pytest.mark.slow
def test_the_request_timeout_flag_applies_to_agent_solve(server: WireServer, tmp_path: Path) -> None:
    server.script(HANG, HANG, Reply(body=openai_completion(content="thinking")))
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["CUDA_VISIBLE_DEVICES"] = ""
    args = ["solve", str(RELU_TASK), "--model", f"openai:coder@{server.url}/v1", "--allow-no-gpu"]
    args += ["--budget", "turns=1,wall=5m", "--request-timeout", "1", "--out", str(out), "--quiet"]

    proc = subprocess.run(
        [sys.executable, "-m", "agent.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )

    assert proc.returncode == 1, proc.stderr
    # Two requests hang and are given up after 1 s each; the third answers. With the default (180 s)
    # the first one would still be waiting.
    assert json.loads((out / "run.json").read_text())["status"] == "budget_exhausted:turns"
    first, second, third = server.requests
    assert 1.0 <= second.received_at - first.received_at < 2.5  # 1 s, then at most 1 s of backoff
    assert third.received_at - first.received_at < 6.0
    assert "output:" in proc.stdout and "report.md" in proc.stdout


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("raw_body", [b"", b'{"id": "msg_01", "type": "mess'], ids=["empty", "cut-off"])
def test_a_malformed_body_is_retried_then_named(server: WireServer, provider: str, raw_body: bytes) -> None:
    server.script(*[Reply(raw_body=raw_body)] * FAST_RETRY.max_attempts)

    with pytest.raises(ModelError) as raised:
        make_model(provider, server.url).query(HI, [])

    error = raised.value
    assert len(server.requests) == FAST_RETRY.max_attempts
    assert (error.provider, error.attempts, error.transient) == (provider, 3, True)
    assert provider in str(error) and server.url in str(error)
    assert "JSONDecodeError" in str(error)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_malformed_body_then_a_good_one_succeeds(server: WireServer, provider: str) -> None:
    server.script(Reply(raw_body=b'{"choices": ['), Reply(body={}), Reply(body=ok_body(provider)))

    response = make_model(provider, server.url).query(HI, [])

    assert response.message.text == "ok"
    assert response.attempts == 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_run_whose_provider_keeps_answering_garbage_ends_as_model_error(
    server: WireServer, provider: str, tmp_path: Path
) -> None:
    server.script(*[Reply(raw_body=b"")] * FAST_RETRY.max_attempts)
    model = make_model(provider, server.url)
    limits = BudgetLimits(turns=None, usd=None, wall=60, gpu=None)
    config = SolveConfig(
        task=RELU_TASK,
        out=tmp_path / "out",
        model=model.name,
        budget=limits,
        referee=EvalOptions(arch="sm_90"),
    )

    result = solve(config, model=model, referee=FakeReferee(), task=parse_task(RELU_TASK))

    assert result.status == "model_error"
    assert provider in result.message and server.url in result.message
    assert result.traceback is None
