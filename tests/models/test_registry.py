"""`--model` specs, the credentials check, and a resolved model answering through the local server."""

from __future__ import annotations

import pytest

from agent.messages import UserMessage
from agent.models.anthropic import AnthropicModel
from agent.models.base import ModelError
from agent.models.openai import OpenAIModel
from agent.models.registry import (
    ModelSpec,
    ModelSpecError,
    check_credentials,
    parse_model_spec,
    resolve_model,
)
from tests.models.wire_server import Reply, WireServer, openai_completion


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("anthropic:claude-opus-5-5", ModelSpec("anthropic", "claude-opus-5-5")),
        ("openai:gpt-6-sol", ModelSpec("openai", "gpt-6-sol")),
        (
            "openai:Qwen/Qwen3-Coder-30B@http://127.0.0.1:8000/v1",
            ModelSpec("openai", "Qwen/Qwen3-Coder-30B", "http://127.0.0.1:8000/v1"),
        ),
        (
            "openai:qwen2.5-coder:7b@http://localhost:11434/v1",
            ModelSpec("openai", "qwen2.5-coder:7b", "http://localhost:11434/v1"),
        ),
    ],
)
def test_parse_model_spec(spec: str, parsed: ModelSpec) -> None:
    assert parse_model_spec(spec) == parsed


@pytest.mark.parametrize(
    "spec",
    [
        "gpt-4o",
        "google:gemini-3",
        "openai:",
        "openai:@http://127.0.0.1:8000/v1",
        "anthropic:claude@http://x:1/v1",
    ],
)
def test_bad_spec_names_the_flag_and_the_accepted_forms(spec: str) -> None:
    with pytest.raises(ModelSpecError) as raised:
        parse_model_spec(spec)

    message = str(raised.value)
    assert "--model" in message
    assert "anthropic:NAME, openai:NAME or openai:NAME@http://HOST:PORT/v1" in message


@pytest.mark.parametrize(
    ("spec", "env", "missing"),
    [
        (
            "anthropic:claude-opus-5-5",
            {},
            "set ANTHROPIC_API_KEY (or pick --model openai:NAME@URL for a local server)",
        ),
        (
            "openai:gpt-6-sol",
            {"ANTHROPIC_API_KEY": "k"},
            "set OPENAI_API_KEY (or pick --model openai:NAME@URL for a local server)",
        ),
        (
            "anthropic:claude-opus-5-5",
            {"ANTHROPIC_API_KEY": ""},
            "set ANTHROPIC_API_KEY (or pick --model openai:NAME@URL for a local server)",
        ),
        ("anthropic:claude-opus-5-5", {"ANTHROPIC_API_KEY": "k"}, None),
        ("openai:gpt-6-sol", {"OPENAI_API_KEY": "k"}, None),
        ("openai:local@http://127.0.0.1:8000/v1", {}, None),
    ],
)
def test_check_credentials(spec: str, env: dict[str, str], missing: str | None) -> None:
    assert check_credentials(spec, env) == missing


def test_resolve_without_a_key_raises_the_same_message() -> None:
    with pytest.raises(ModelError, match=r"^set ANTHROPIC_API_KEY \(or pick --model openai:NAME@URL"):
        resolve_model("anthropic:claude-opus-5-5", env={})


def test_resolve_builds_adapters_with_sdk_retries_off() -> None:
    anthropic_model = resolve_model("anthropic:claude-opus-5-5", env={"ANTHROPIC_API_KEY": "k"})
    openai_model = resolve_model("openai:gpt-6-sol", env={"OPENAI_API_KEY": "k"})

    assert isinstance(anthropic_model, AnthropicModel)
    assert isinstance(openai_model, OpenAIModel)
    assert (anthropic_model.name, openai_model.name) == ("anthropic:claude-opus-5-5", "openai:gpt-6-sol")
    assert anthropic_model._client.max_retries == 0
    assert openai_model._client.max_retries == 0


def test_resolved_local_server_model_answers_without_a_key(wire_server: WireServer) -> None:
    wire_server.script(Reply(body=openai_completion(content="served locally", model="local-coder")))
    spec = f"openai:local-coder@{wire_server.url}/v1"

    model = resolve_model(spec, env={})
    response = model.query([UserMessage(text="hi")], [])

    assert model.name == spec
    assert response.message.text == "served locally"
    assert response.cost_usd is None
    assert wire_server.requests[0].headers["authorization"] == "Bearer not-needed"
