"""Retries and errors, through both real SDKs: rate limits, 5xx, dropped connections, timeouts, auth."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
import pytest

from agent.messages import UserMessage
from agent.models.anthropic import AnthropicModel
from agent.models.base import Model, ModelError, RetryPolicy
from agent.models.openai import OpenAIModel
from tests.models.conftest import FAST_RETRY, TEST_KEY
from tests.models.wire_server import (
    Reply,
    WireServer,
    anthropic_error,
    anthropic_message,
    openai_completion,
    openai_error,
)

HI = [UserMessage(text="hi")]


@dataclass
class Provider:
    name: str
    key_env: str
    ok_body: dict[str, Any]

    def model(self, server_url: str, retry: RetryPolicy = FAST_RETRY, timeout_s: float = 30.0) -> Model:
        # The injected clients keep the SDK's default retries on purpose: the adapter must turn them off.
        if self.name == "anthropic":
            client = anthropic.Anthropic(api_key=TEST_KEY, base_url=server_url, timeout=timeout_s)
            return AnthropicModel("claude-sonnet-5-5", client, retry=retry)
        client = openai.OpenAI(api_key=TEST_KEY, base_url=f"{server_url}/v1", timeout=timeout_s)
        return OpenAIModel("gpt-4o", client, retry=retry)

    def error_body(self, kind: str, message: str) -> dict[str, Any]:
        return anthropic_error(kind, message) if self.name == "anthropic" else openai_error(message, kind)


PROVIDERS = [
    Provider("anthropic", "ANTHROPIC_API_KEY", anthropic_message([{"type": "text", "text": "ok"}])),
    Provider("openai", "OPENAI_API_KEY", openai_completion(content="ok")),
]


@pytest.fixture(params=PROVIDERS, ids=lambda provider: provider.name)
def provider(request: pytest.FixtureRequest) -> Provider:
    return request.param


@pytest.mark.parametrize(
    "retry_headers", [{"retry-after": "0.3"}, {"retry-after-ms": "300"}], ids=["seconds", "milliseconds"]
)
def test_rate_limit_waits_as_long_as_retry_after_says(
    wire_server: WireServer, provider: Provider, retry_headers: dict[str, str]
) -> None:
    wire_server.script(
        Reply(status=429, body=provider.error_body("rate_limit_error", "slow down"), headers=retry_headers),
        Reply(body=provider.ok_body),
    )

    response = provider.model(wire_server.url).query(HI, [])

    assert response.message.text == "ok"
    assert response.attempts == 2
    first, second = wire_server.requests
    # FAST_RETRY's own backoff is at most 5 ms: only the header explains a 0.3 s gap.
    assert second.received_at - first.received_at >= 0.3
    assert response.latency_s >= 0.3


def test_server_error_then_success(wire_server: WireServer, provider: Provider) -> None:
    wire_server.script(
        Reply(status=500, body=provider.error_body("api_error", "internal")),
        Reply(status=503, body=provider.error_body("overloaded_error", "overloaded")),
        Reply(body=provider.ok_body),
    )

    response = provider.model(wire_server.url).query(HI, [])

    assert response.message.text == "ok"
    assert response.attempts == 3
    assert len(wire_server.requests) == 3


def test_dropped_connection_then_success(wire_server: WireServer, provider: Provider) -> None:
    wire_server.script(Reply(drop_connection=True), Reply(body=provider.ok_body))

    response = provider.model(wire_server.url).query(HI, [])

    assert response.message.text == "ok"
    assert response.attempts == 2


def test_timeout_then_success(wire_server: WireServer, provider: Provider) -> None:
    wire_server.script(Reply(body=provider.ok_body, delay_s=1.0), Reply(body=provider.ok_body))
    started = time.monotonic()

    response = provider.model(wire_server.url, timeout_s=0.3).query(HI, [])

    assert response.attempts == 2
    assert time.monotonic() - started < 1.0


def test_attempts_are_bounded_and_the_sdk_does_not_retry_on_its_own(
    wire_server: WireServer, provider: Provider
) -> None:
    wire_server.script(*[Reply(status=500, body=provider.error_body("api_error", "boom"))] * 3)

    with pytest.raises(ModelError) as raised:
        provider.model(wire_server.url, retry=FAST_RETRY).query(HI, [])

    error = raised.value
    assert len(wire_server.requests) == FAST_RETRY.max_attempts == 3
    assert (error.provider, error.status_code, error.attempts, error.transient) == (
        provider.name,
        500,
        3,
        True,
    )
    assert "after 3 attempts" in str(error)
    assert "boom" in str(error)


def test_connection_refused_names_the_server(provider: Provider) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    url = f"http://127.0.0.1:{port}"

    with pytest.raises(ModelError) as raised:
        provider.model(url).query(HI, [])

    assert raised.value.attempts == FAST_RETRY.max_attempts
    assert "gave no response after 3 attempts" in str(raised.value)
    assert f"a server is listening at {url}" in str(raised.value)


def test_bad_key_is_not_retried_and_says_which_variable_to_set(
    wire_server: WireServer, provider: Provider
) -> None:
    wire_server.script(
        Reply(status=401, body=provider.error_body("authentication_error", "invalid x-api-key"))
    )

    with pytest.raises(ModelError) as raised:
        provider.model(wire_server.url).query(HI, [])

    error = raised.value
    assert len(wire_server.requests) == 1
    assert (error.status_code, error.attempts, error.transient) == (401, 1, False)
    assert f"Set {provider.key_env} to a valid key" in str(error)
    assert "invalid x-api-key" in str(error)
    assert provider.name in str(error)


@pytest.mark.parametrize(
    ("status", "advice"),
    [(400, "context window"), (403, "may use this model"), (404, "--model")],
)
def test_other_client_errors_fail_at_once_with_advice(
    wire_server: WireServer, provider: Provider, status: int, advice: str
) -> None:
    wire_server.script(Reply(status=status, body=provider.error_body("invalid_request_error", "nope")))

    with pytest.raises(ModelError) as raised:
        provider.model(wire_server.url).query(HI, [])

    assert len(wire_server.requests) == 1
    assert raised.value.status_code == status
    assert advice in str(raised.value)


def test_server_may_forbid_a_retry(wire_server: WireServer, provider: Provider) -> None:
    wire_server.script(
        Reply(
            status=500,
            body=provider.error_body("api_error", "do not retry"),
            headers={"x-should-retry": "false"},
        )
    )

    with pytest.raises(ModelError):
        provider.model(wire_server.url).query(HI, [])

    assert len(wire_server.requests) == 1


def test_openai_out_of_credit_is_not_retried(wire_server: WireServer) -> None:
    body = openai_error("You exceeded your current quota.", "insufficient_quota")
    body["error"]["code"] = "insufficient_quota"
    wire_server.script(Reply(status=429, body=body))

    with pytest.raises(ModelError, match="exceeded your current quota") as raised:
        PROVIDERS[1].model(wire_server.url).query(HI, [])

    assert len(wire_server.requests) == 1
    assert (raised.value.status_code, raised.value.transient) == (429, False)
