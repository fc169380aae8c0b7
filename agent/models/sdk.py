"""What the two SDK adapters (Anthropic, OpenAI) share around their clients: the API key from the
environment, where and how a model's calls go, and one timed call with retries that reads the answer
both parsed and as the body the provider sent. Each adapter describes its SDK once (`ProviderSdk`)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from agent.models.base import (
    PROVIDER_KEY_ENV,
    Endpoint,
    MalformedResponse,
    ModelError,
    Provider,
    RetryPolicy,
    SdkErrors,
    call_with_retries,
    client_timeout_s,
    missing_key_message,
)

ParsedT = TypeVar("ParsedT")
ParsedT_co = TypeVar("ParsedT_co", covariant=True)


class HttpBody(Protocol):
    """The part of an SDK's HTTP response the adapters read."""

    @property
    def text(self) -> str: ...

    def json(self, **kwargs: Any) -> Any: ...


class RawResponse(Protocol[ParsedT_co]):
    """What an SDK's `with_raw_response` methods return: the parsed answer and the HTTP response."""

    @property
    def http_response(self) -> HttpBody: ...

    def parse(self) -> ParsedT_co: ...


class SdkClient(Protocol):
    """The settings of an SDK client the adapters read (both official SDKs' clients have them)."""

    @property
    def base_url(self) -> object: ...

    @property
    def timeout(self) -> object: ...


def api_key(provider: Provider, env: Mapping[str, str] | None = None, *, fallback: str | None = None) -> str:
    """The provider's API key from `env` (default: the process's environment), else `fallback`; with
    neither, a ModelError that says which variable to set."""
    key_env = PROVIDER_KEY_ENV[provider]
    key = (os.environ if env is None else env).get(key_env)
    if key:
        return key
    if fallback is not None:
        return fallback
    raise ModelError(missing_key_message(key_env), provider=provider)


@dataclass(frozen=True)
class ProviderSdk:
    """One provider's official SDK as an adapter uses it: whose it is, the URL of the provider's own
    API (any other is a compatible server) and the SDK's exceptions."""

    provider: Provider
    default_base_url: str
    errors: SdkErrors

    def calls(
        self,
        client: SdkClient,
        model: str,
        *,
        retry: RetryPolicy | None = None,
        request_timeout_s: float | None = None,
    ) -> SdkCalls:
        """How `client` calls `model`; `request_timeout_s` None: the client's own timeout."""
        url = str(client.base_url).rstrip("/")
        return SdkCalls(
            endpoint=Endpoint(
                provider=self.provider,
                model=model,
                key_env=PROVIDER_KEY_ENV[self.provider],
                base_url=None if url == self.default_base_url else url,
                url=url,
            ),
            errors=self.errors,
            retry=retry or RetryPolicy(),
            request_timeout_s=request_timeout_s or client_timeout_s(client.timeout),
        )


@dataclass(frozen=True)
class Answer(Generic[ParsedT]):
    """One model call's answer: parsed by the SDK, the body as the provider sent it, and what it took."""

    parsed: ParsedT
    body: dict[str, Any]
    attempts: int
    latency_s: float


@dataclass(frozen=True)
class SdkCalls:
    """How an adapter calls its provider: the endpoint its errors name, the SDK's exceptions, the retry
    policy and the seconds one request may wait (None: the client's own timeout)."""

    endpoint: Endpoint
    errors: SdkErrors
    retry: RetryPolicy
    request_timeout_s: float | None

    @property
    def is_provider_url(self) -> bool:
        """Whether the calls go to the provider's own API, not to a compatible server."""
        return self.endpoint.base_url is None

    def send(
        self,
        create: Callable[..., RawResponse[ParsedT]],
        request: Mapping[str, Any],
        *,
        is_answer: Callable[[ParsedT, dict[str, Any]], bool],
        not_an_answer: str,
    ) -> Answer[ParsedT]:
        """`create(**request)` with retries. A 200 whose body does not parse, or is not a JSON object of
        which `is_answer` holds, raises MalformedResponse (`not_an_answer` and the body's start) and is
        retried like a dropped connection."""

        def attempt(timeout: float | None) -> tuple[ParsedT, dict[str, Any]]:
            options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
            raw = create(**request, **options)
            parsed = raw.parse()
            body = raw.http_response.json()
            if not isinstance(body, dict) or not is_answer(parsed, body):
                raise MalformedResponse(f"{not_an_answer}: {raw.http_response.text[:200]!r}")
            return parsed, body

        started = time.monotonic()
        (parsed, body), attempts = call_with_retries(
            attempt,
            policy=self.retry,
            endpoint=self.endpoint,
            errors=self.errors,
            request_timeout_s=self.request_timeout_s,
        )
        return Answer(parsed=parsed, body=body, attempts=attempts, latency_s=time.monotonic() - started)
