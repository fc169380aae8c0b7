"""`--model` specs -> `Model`s, and the credentials check `agent solve` runs before doing anything."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from agent.models.base import (
    DEFAULT_REQUEST_TIMEOUT_S,
    PROVIDER_KEY_ENV,
    Model,
    ModelError,
    Provider,
    RetryPolicy,
    missing_key_message,
)
from agent.models.prices import PriceTable

DEFAULT_MODEL = "anthropic:claude-sonnet-5-5"
"""The `--model` of `agent solve` when none is given and its API key is set (README.md shows the same)."""

TEMPLATES_MODEL = "templates"
"""The `--model` of the built-in template policy (agent/templates/): no provider, no API key. `agent solve`
uses it when no --model is given and DEFAULT_MODEL's key is not set; `agent batch --model templates` too."""


SPEC_FORMS = "anthropic:NAME, openai:NAME or openai:NAME@http://HOST:PORT/v1"
_SPEC = re.compile(r"^(?P<provider>[a-z]+):(?P<name>[^@\s]\S*?)(?:@(?P<url>https?://\S+))?$")
_KEY_ENV: Mapping[Provider, str] = PROVIDER_KEY_ENV


class ModelSpecError(ValueError):
    pass


REQUEST_TIMEOUT_HELP = (
    "Seconds one request to the model provider may wait for its answer before it is retried "
    f"(90, 90s, 3m). Default: {DEFAULT_REQUEST_TIMEOUT_S:g}s; the wall budget cuts it shorter near its end."
)


def parse_request_timeout(text: str) -> float:
    """`--request-timeout` as seconds (> 0, finite); ValueError names the flag and the accepted forms."""
    from agent.budget import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise ValueError(f"--request-timeout {text!r}: {exc}") from None


@dataclass(frozen=True)
class ModelSpec:
    provider: Provider
    name: str
    base_url: str | None = None


def parse_model_spec(spec: str) -> ModelSpec:
    """Parse `anthropic:NAME`, `openai:NAME` or `openai:NAME@URL`. NAME may hold ':' and '/'
    (`qwen2.5-coder:7b`, `Qwen/Qwen3-Coder-30B`)."""
    provider_part, _, rest = spec.strip().partition(":")
    if provider_part in _KEY_ENV and "@" in rest:
        url = rest.rpartition("@")[2]
        if not re.match(r"^https?://[^\s/]+", url):
            raise ModelSpecError(
                f"--model {spec!r}: {url!r} is not a URL (a server URL starts with http:// or "
                f"https://, as in openai:NAME@http://HOST:PORT/v1)"
            )
    match = _SPEC.match(spec.strip())
    if match is None or match["provider"] not in _KEY_ENV:
        raise ModelSpecError(f"--model {spec!r} is not a model spec; use {SPEC_FORMS}")
    provider: Provider = "anthropic" if match["provider"] == "anthropic" else "openai"
    if provider == "anthropic" and match["url"]:
        raise ModelSpecError(
            f"--model {spec!r}: a server URL is only accepted for OpenAI-compatible servers; use {SPEC_FORMS}"
        )
    return ModelSpec(provider=provider, name=match["name"], base_url=match["url"])


def check_credentials(spec: str, env: Mapping[str, str] | None = None) -> str | None:
    """What to set before `spec` can run, or None when nothing is missing.

    Raises ModelSpecError for a malformed spec.
    """
    parsed = parse_model_spec(spec)
    env = os.environ if env is None else env
    if parsed.base_url is not None:
        return None
    key_env = _KEY_ENV[parsed.provider]
    if env.get(key_env):
        return None
    return missing_key_message(key_env)


def resolve_model(
    spec: str,
    *,
    prices: PriceTable | None = None,
    retry: RetryPolicy | None = None,
    timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> Model:
    """The `Model` for a `--model` spec, with a default client built from the environment.
    `timeout_s`: how long one request may wait for its answer (`--request-timeout`)."""
    parsed = parse_model_spec(spec)
    env = os.environ if env is None else env
    missing = check_credentials(spec, env)
    if missing is not None:
        raise ModelError(missing, provider=parsed.provider, model=parsed.name)
    # The SDKs take seconds to import: only the one a run uses is loaded, and only here.
    match parsed.provider:
        case "anthropic":
            from agent.models import anthropic as anthropic_adapter

            return anthropic_adapter.AnthropicModel(
                parsed.name,
                anthropic_adapter.anthropic_client(timeout_s=timeout_s, env=env),
                prices=prices,
                retry=retry,
            )
        case "openai":
            from agent.models import openai as openai_adapter

            return openai_adapter.OpenAIModel(
                parsed.name,
                openai_adapter.openai_client(base_url=parsed.base_url, timeout_s=timeout_s, env=env),
                prices=prices,
                retry=retry,
            )
