"""The `Model` seam, its error, and the retry policy every provider adapter shares."""

from __future__ import annotations

import contextlib
import email.utils
import json
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from agent.messages import Message, ModelResponse, ToolSpec

log = logging.getLogger(__name__)

T = TypeVar("T")


@runtime_checkable
class Model(Protocol):
    """Anything that turns a conversation and the tools on offer into the next assistant turn."""

    name: str

    def query(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        max_output_tokens: int | None = None,
    ) -> ModelResponse: ...


DEFAULT_REQUEST_TIMEOUT_S = 180.0
"""Seconds one HTTP request to a provider may go without an answer (`--request-timeout`). Long enough
for a slow answer of many output tokens, short enough that a hung server costs minutes, not an hour."""

Provider = Literal["anthropic", "openai"]
PROVIDER_KEY_ENV: dict[Provider, str] = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
"""The environment variable each provider's API key is read from."""


class ModelError(Exception):
    """A model call that failed for good: the message says which provider, which model and what to do."""

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        model: str | None = None,
        status_code: int | None = None,
        attempts: int = 1,
        transient: bool = False,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model
        self.status_code = status_code
        self.attempts = attempts
        self.transient = transient
        """True when retrying later may succeed (rate limit, overload, network), False for auth or bad requests."""

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only fields would be lost by Exception's default pickling (process pools, Ray).
        return _rebuild_model_error, (str(self), self.__dict__)


def _rebuild_model_error(message: str, fields: dict[str, object]) -> ModelError:
    error = ModelError(message, provider=str(fields["provider"]))
    error.__dict__.update(fields)
    return error


class RetryPolicy(BaseModel):
    model_config = ConfigDict(frozen=True)

    max_attempts: int = Field(default=6, ge=1)
    """Attempts per model call, the first one included."""
    backoff_initial_s: float = Field(default=1.0, ge=0)
    backoff_max_s: float = Field(default=60.0, ge=0)
    retry_after_max_s: float = Field(default=300.0, ge=0)
    """Longest server-requested wait we honor; longer requests are capped to this."""


class CallTimeLimitReached(Exception):
    """A model call ran out of the time its caller allowed (`call_time_limit`): the caller's own limit,
    such as the run's wall budget, not a provider failure."""


class MalformedResponse(ValueError):
    """A 200 answer whose body is empty, cut off or not the provider's format (a proxy or server fault)."""


_CALL_DEADLINE: ContextVar[float | None] = ContextVar("model_call_deadline", default=None)


@contextlib.contextmanager
def call_time_limit(seconds: float | None) -> Iterator[None]:
    """Model calls made inside (in this thread) end within `seconds`: each request's timeout and each
    retry wait are cut to the time left, and a call still unanswered then raises CallTimeLimitReached.
    None: no limit beyond the request timeout."""
    if seconds is None:
        yield
        return
    token = _CALL_DEADLINE.set(time.monotonic() + max(0.0, seconds))
    try:
        yield
    finally:
        _CALL_DEADLINE.reset(token)


def _time_left() -> float | None:
    deadline = _CALL_DEADLINE.get()
    return None if deadline is None else deadline - time.monotonic()


MIN_ATTEMPT_S = 0.05
"""An attempt is not started with less time left than this: it could not get an answer anyway."""


@dataclass(frozen=True)
class Endpoint:
    """Who a call goes to, for error messages."""

    provider: str
    model: str
    key_env: str
    base_url: str | None = None
    """A server other than the provider's own (its URL is part of the model's name then)."""
    url: str = ""
    """The URL requests go to, the provider's own included."""

    def describe(self) -> str:
        where = f" at {self.base_url}" if self.base_url else ""
        return f"{self.provider} model {self.model!r}{where}"


def missing_key_message(key_env: str) -> str:
    return f"set {key_env} (or pick --model openai:NAME@URL for a local server)"


def is_transient_status(status: int, headers: Mapping[str, str] | None = None) -> bool:
    should_retry = (headers or {}).get("x-should-retry")
    if should_retry in ("true", "false"):
        return should_retry == "true"
    return status in (408, 409, 429) or status >= 500


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the server asked us to wait, from `retry-after-ms`, `retry-after` seconds or an HTTP date."""
    if not headers:
        return None
    for header, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(header)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / divisor)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _response_headers(exc: BaseException | None) -> Mapping[str, str] | None:
    response = getattr(exc, "response", None)
    return getattr(response, "headers", None)


class wait_retry_after_or_backoff(wait_base):
    """Wait what the provider's `retry-after` says; without one, exponential backoff with full jitter.
    Never longer than the call's time limit leaves."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.backoff = wait_random_exponential(multiplier=policy.backoff_initial_s, max=policy.backoff_max_s)

    def __call__(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        retry_after = parse_retry_after(_response_headers(exc))
        wait = (
            min(retry_after, self.policy.retry_after_max_s)
            if retry_after is not None
            else self.backoff(retry_state)
        )
        left = _time_left()
        return wait if left is None else max(0.0, min(wait, left))


class stop_when_time_is_up(stop_base):
    def __call__(self, retry_state: RetryCallState) -> bool:
        left = _time_left()
        return left is not None and left < MIN_ATTEMPT_S


def _log_retry(retry_state: RetryCallState) -> None:
    exc = retry_state.outcome.exception() if retry_state.outcome else None
    wait = retry_state.next_action.sleep if retry_state.next_action else 0.0
    log.warning("model call attempt %d failed (%s); retrying in %.2fs", retry_state.attempt_number, exc, wait)


@dataclass(frozen=True)
class SdkErrors:
    """An SDK's exception classes. Both official SDKs share this shape: `status` errors carry
    `status_code`, `body` and `response` (with headers); `connection` errors cover timeouts too."""

    base: type[Exception]
    status: type[Exception]
    connection: type[Exception]
    malformed: tuple[type[Exception], ...] = ()
    """The SDK's errors for a 200 whose body does not parse (besides json's and MalformedResponse)."""

    @property
    def bad_body(self) -> tuple[type[Exception], ...]:
        return (json.JSONDecodeError, MalformedResponse, *self.malformed)

    @property
    def handled(self) -> tuple[type[Exception], ...]:
        return (self.base, *self.bad_body)

    def is_transient(self, exc: BaseException) -> bool:
        if isinstance(exc, (self.connection, *self.bad_body)):
            return True
        if isinstance(exc, self.status):
            if _error_code(getattr(exc, "body", None)) == "insufficient_quota":
                return False  # OpenAI's 429 for an account out of credit: waiting will not help
            return is_transient_status(getattr(exc, "status_code", 0), _response_headers(exc))
        return False

    def to_model_error(self, endpoint: Endpoint, exc: Exception, attempts: int) -> ModelError:
        if isinstance(exc, self.bad_body):
            return malformed_body_error(endpoint, exc, attempts=attempts)
        if isinstance(exc, self.connection):
            return connection_error(endpoint, exc, attempts=attempts)
        if isinstance(exc, self.status):
            status: int = getattr(exc, "status_code", 0)
            detail = error_detail(getattr(exc, "body", None), str(exc))
            transient = self.is_transient(exc)
            return status_error(endpoint, status, detail, attempts=attempts, transient=transient)
        return ModelError(
            f"{endpoint.describe()} failed: {type(exc).__name__}: {exc}",
            provider=endpoint.provider,
            model=endpoint.model,
            attempts=attempts,
        )


def call_with_retries(
    send: Callable[[float | None], T],
    *,
    policy: RetryPolicy,
    endpoint: Endpoint,
    errors: SdkErrors,
    request_timeout_s: float | None = None,
) -> tuple[T, int]:
    """Run `send(timeout)` under `policy`; return its result and the number of attempts it took.

    `timeout` is the seconds the attempt may take: `request_timeout_s` cut to what the call's time
    limit (`call_time_limit`) leaves, or None (the client's own timeout) when neither is set.
    Transient failures (status 408/409/429/5xx, network, a 200 whose body does not parse) are retried;
    an SDK error left at the end becomes a ModelError, and running out of the time limit raises
    CallTimeLimitReached.
    """
    retrying = Retrying(
        stop=stop_after_attempt(policy.max_attempts) | stop_when_time_is_up(),
        wait=wait_retry_after_or_backoff(policy),
        retry=retry_if_exception(errors.is_transient),
        before_sleep=_log_retry,
        reraise=True,
    )
    try:
        for attempt in retrying:
            with attempt:
                result = _send_in_time(send, _attempt_timeout(request_timeout_s, endpoint), endpoint)
                return result, retrying.statistics["attempt_number"]
    except errors.handled as exc:
        attempts = retrying.statistics.get("attempt_number", 1)
        left = _time_left()
        if left is not None and left < MIN_ATTEMPT_S and errors.is_transient(exc):
            raise CallTimeLimitReached(
                f"{endpoint.describe()} had not answered when the time allowed ran out "
                f"({attempts} attempt(s); last: {type(exc).__name__})"
            ) from exc
        raise errors.to_model_error(endpoint, exc, attempts) from exc
    raise AssertionError("tenacity ended without a result or an error")


def _attempt_timeout(request_timeout_s: float | None, endpoint: Endpoint) -> float | None:
    left = _time_left()
    if left is None:
        return request_timeout_s
    if left < MIN_ATTEMPT_S:
        raise CallTimeLimitReached(f"{endpoint.describe()}: no time left for another attempt")
    return left if request_timeout_s is None else min(request_timeout_s, left)


CUT_GRACE_S = 0.5
"""How long past the time limit an attempt may go before the caller stops waiting for it: the SDK's
own timeout, set to the time left, normally ends it first."""


def _send_in_time(send: Callable[[float | None], T], timeout: float | None, endpoint: Endpoint) -> T:
    """`send(timeout)`, given up when the call's time limit passes even if the server keeps the answer
    trickling in (the SDK's timeout bounds each wait for bytes, not the whole answer). The attempt
    then runs on in a daemon thread until the SDK ends it, and its result is dropped."""
    left = _time_left()
    if left is None:
        return send(timeout)
    box: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()

    def attempt() -> None:
        try:
            box.put((True, send(timeout)))
        except BaseException as exc:  # handed to the caller, who raises it
            box.put((False, exc))

    threading.Thread(target=attempt, name="model-call", daemon=True).start()
    try:
        ok, value = box.get(timeout=left + CUT_GRACE_S)
    except queue.Empty:
        raise CallTimeLimitReached(
            f"{endpoint.describe()} was still answering when the time ran out"
        ) from None
    if ok:
        return value
    raise value


def client_timeout_s(timeout: object) -> float | None:
    """An SDK client's `timeout` (seconds, an httpx.Timeout or None) as seconds to wait for an answer."""
    if isinstance(timeout, int | float) and math.isfinite(timeout):
        return float(timeout)
    read = getattr(timeout, "read", None)
    return float(read) if isinstance(read, int | float) else None


def _error_code(body: object) -> str | None:
    """`error.code` of an error body; the openai SDK keeps only the inner `error` object as the body."""
    if not isinstance(body, Mapping):
        return None
    error = body.get("error", body)
    code = error.get("code") if isinstance(error, Mapping) else None
    return code if isinstance(code, str) else None


def error_detail(body: object, fallback: str) -> str:
    """The human part of an error body (`error.message`, or `message` of an already unwrapped body)."""
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(body.get("message"), str):
            return body["message"]
    return fallback


def status_error(
    endpoint: Endpoint, status: int, detail: str, *, attempts: int, transient: bool
) -> ModelError:
    where = endpoint.describe()
    http = f"HTTP {status}: {detail}"
    if transient:
        advice = (
            f"{where} still failing after {attempts} attempts ({http}). The provider is rate-limiting or "
            "overloaded: try again later, lower the concurrency, or raise the retry limit."
        )
    elif status == 401:
        advice = f"{where} rejected the API key ({http}). Set {endpoint.key_env} to a valid key."
    elif status == 403:
        advice = (
            f"{where} denied access ({http}). Check that the key in {endpoint.key_env} may use this model."
        )
    elif status == 404:
        url_hint = " and that the URL ends in /v1" if endpoint.base_url else ""
        advice = f"{where} was not found ({http}). Check NAME in --model {endpoint.provider}:NAME{url_hint}."
    elif status in (400, 413, 422):
        advice = (
            f"{where} rejected the request ({http}). The conversation may exceed the model's context window; "
            "the raw request is in the transcript."
        )
    else:
        advice = f"{where} failed ({http})."
    return ModelError(
        advice,
        provider=endpoint.provider,
        model=endpoint.model,
        status_code=status,
        attempts=attempts,
        transient=transient,
    )


def malformed_body_error(endpoint: Endpoint, exc: Exception, *, attempts: int) -> ModelError:
    where = endpoint.url or endpoint.base_url or "its URL"
    return ModelError(
        f"{endpoint.provider} at {where} (model {endpoint.model!r}) answered with a body that is empty, "
        f"cut off or not its format, {attempts} time(s) ({type(exc).__name__}: {exc}). The server or a "
        "proxy before it is failing; try again later or check the server.",
        provider=endpoint.provider,
        model=endpoint.model,
        attempts=attempts,
        transient=True,
    )


def connection_error(endpoint: Endpoint, exc: Exception, *, attempts: int) -> ModelError:
    server_hint = f" and that a server is listening at {endpoint.base_url}" if endpoint.base_url else ""
    cause = f"{type(exc).__name__}: {exc}"
    return ModelError(
        f"{endpoint.describe()} gave no response after {attempts} attempts ({cause}). "
        f"Check the network{server_hint}.",
        provider=endpoint.provider,
        model=endpoint.model,
        attempts=attempts,
        transient=True,
    )
