"""Retry timing rules without a server: header parsing, backoff bounds and the cap on server waits."""

from __future__ import annotations

import email.utils
import pickle
import time

import pytest
from tenacity import RetryCallState, Retrying

from agent.models.base import (
    ModelError,
    RetryPolicy,
    is_transient_status,
    parse_retry_after,
    wait_retry_after_or_backoff,
)


class _Response:
    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers


class _StatusError(Exception):
    def __init__(self, headers: dict[str, str]) -> None:
        self.response = _Response(headers)


def _state_after_failure(attempt: int, exc: BaseException) -> RetryCallState:
    state = RetryCallState(retry_object=Retrying(), fn=None, args=(), kwargs={})
    state.attempt_number = attempt
    state.set_exception((type(exc), exc, None))
    return state


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], seconds: float | None) -> None:
    assert parse_retry_after(headers) == seconds


def test_parse_retry_after_http_date() -> None:
    in_ten_seconds = email.utils.formatdate(time.time() + 10, usegmt=True)

    assert parse_retry_after({"retry-after": in_ten_seconds}) == pytest.approx(10, abs=1.5)


def test_backoff_without_retry_after_grows_exponentially_with_full_jitter() -> None:
    wait = wait_retry_after_or_backoff(RetryPolicy(backoff_initial_s=1.0, backoff_max_s=6.0))
    error = _StatusError({})

    for attempt, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 6.0), (9, 6.0)]:
        waits = [wait(_state_after_failure(attempt, error)) for _ in range(200)]
        assert all(0 <= seconds <= ceiling for seconds in waits)
        assert max(waits) > ceiling / 2  # jittered over the window, not stuck at its floor
        assert len(set(waits)) > 100


def test_server_requested_wait_is_honored_up_to_the_cap() -> None:
    wait = wait_retry_after_or_backoff(RetryPolicy(backoff_max_s=0.01, retry_after_max_s=30.0))

    assert wait(_state_after_failure(1, _StatusError({"retry-after": "7"}))) == 7.0
    assert wait(_state_after_failure(1, _StatusError({"retry-after": "3600"}))) == 30.0


@pytest.mark.parametrize(
    ("status", "headers", "transient"),
    [
        (429, {}, True),
        (500, {}, True),
        (529, {}, True),
        (408, {}, True),
        (400, {}, False),
        (401, {}, False),
        (404, {}, False),
        (500, {"x-should-retry": "false"}, False),
        (400, {"x-should-retry": "true"}, True),
    ],
)
def test_which_statuses_are_retried(status: int, headers: dict[str, str], transient: bool) -> None:
    assert is_transient_status(status, headers) is transient


def test_model_error_survives_pickling_for_worker_processes() -> None:
    error = ModelError(
        "boom", provider="openai", model="gpt-6-sol", status_code=429, attempts=6, transient=True
    )

    copy = pickle.loads(pickle.dumps(error))

    assert str(copy) == "boom"
    assert (copy.provider, copy.model, copy.status_code, copy.attempts, copy.transient) == (
        "openai",
        "gpt-6-sol",
        429,
        6,
        True,
    )
