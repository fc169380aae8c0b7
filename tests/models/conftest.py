from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest

from agent.models.anthropic import AnthropicModel
from agent.models.base import RetryPolicy
from agent.models.openai import OpenAIModel
from tests.models.wire_server import WireServer
from tests.network_guard import network_guard  # noqa: F401 (until tests/conftest.py loads the plugin)

TEST_KEY = "test-key-not-real"
FAST_RETRY = RetryPolicy(max_attempts=3, backoff_initial_s=0.001, backoff_max_s=0.005)
"""Backoff so short that any wait a test measures must come from the server's retry-after."""


@pytest.fixture
def wire_server() -> Iterator[WireServer]:
    server = WireServer().start()
    yield server
    server.stop()
    assert not server.unexpected, f"requests beyond the script: {[r.path for r in server.unexpected]}"
    assert server.unused_replies == 0, f"{server.unused_replies} scripted replies never requested"


@pytest.fixture
def anthropic_model(wire_server: WireServer) -> AnthropicModel:
    client = anthropic.Anthropic(api_key=TEST_KEY, base_url=wire_server.url)
    return AnthropicModel("claude-sonnet-5-5", client, retry=FAST_RETRY)


@pytest.fixture
def openai_model(wire_server: WireServer) -> OpenAIModel:
    client = openai.OpenAI(api_key=TEST_KEY, base_url=f"{wire_server.url}/v1")
    return OpenAIModel("gpt-4o", client, retry=FAST_RETRY)
