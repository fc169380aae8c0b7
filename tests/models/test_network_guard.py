"""The guard that keeps every test off the network: only loopback may be reached."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import anthropic
import openai
import pytest

from agent.messages import UserMessage
from agent.models.openai import OpenAIModel
from tests.models.wire_server import Reply, WireServer, openai_completion
from tests.network_guard import PROVIDER_ENV_VARS, BlockedNetworkAccess, NetworkGuard, guarded

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_connecting_to_a_public_address_is_blocked(network_guard: NetworkGuard) -> None:
    with pytest.raises(BlockedNetworkAccess):
        socket.create_connection(("192.0.2.10", 443), timeout=1)
    with pytest.raises(BlockedNetworkAccess):
        socket.socket(socket.AF_INET6).connect(("2001:db8::1", 443))

    assert len(network_guard.attempts) == 2
    network_guard.attempts.clear()


def test_looking_up_a_provider_name_is_blocked(network_guard: NetworkGuard) -> None:
    with pytest.raises(BlockedNetworkAccess, match=r"api\.openai\.com"):
        socket.getaddrinfo("api.openai.com", 443)
    with pytest.raises(BlockedNetworkAccess, match=r"api\.anthropic\.com"):
        socket.gethostbyname("api.anthropic.com")
    network_guard.attempts.clear()


def test_real_sdks_with_their_default_urls_cannot_reach_the_providers(network_guard: NetworkGuard) -> None:
    with pytest.raises(BlockedNetworkAccess):
        openai.OpenAI(api_key="sk-test", max_retries=0).chat.completions.create(
            model="gpt-6-sol", messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(BlockedNetworkAccess):
        anthropic.Anthropic(api_key="sk-ant-test", max_retries=0).messages.create(
            model="claude-opus-5-5", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(BlockedNetworkAccess):
        OpenAIModel("gpt-6-sol", openai.OpenAI(api_key="sk-test")).query([UserMessage(text="hi")], [])

    assert network_guard.attempts == [
        "name lookup of 'api.openai.com'",
        "name lookup of 'api.anthropic.com'",
        "name lookup of 'api.openai.com'",
    ]
    network_guard.attempts.clear()


def test_loopback_stays_reachable(wire_server: WireServer) -> None:
    wire_server.script(Reply(body=openai_completion(content="ok")))
    host_port = wire_server.url.removeprefix("http://").split(":")

    socket.create_connection((host_port[0], int(host_port[1])), timeout=1).close()
    socket.getaddrinfo("localhost", 80)
    model = OpenAIModel("m", openai.OpenAI(api_key="k", base_url=f"{wire_server.url}/v1"))
    assert model.query([UserMessage(text="hi")], []).message.text == "ok"


def test_provider_keys_are_gone_from_the_environment() -> None:
    assert not [name for name in PROVIDER_ENV_VARS if name in os.environ]


def test_a_blocked_attempt_fails_the_test_even_when_swallowed() -> None:
    with (
        pytest.raises(pytest.fail.Exception, match="tried to reach the network"),
        guarded(),
        contextlib.suppress(BlockedNetworkAccess),
    ):
        socket.create_connection(("192.0.2.10", 443), timeout=1)


def test_plugin_line_for_tests_conftest_guards_collection_tests_and_subprocesses(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.network_guard"]\n')
    (tmp_path / "test_inner.py").write_text(
        textwrap.dedent(
            """
            import os, socket, subprocess, sys

            from tests.network_guard import BlockedNetworkAccess

            try:
                socket.getaddrinfo("api.anthropic.com", 443)
                BLOCKED_AT_COLLECTION = False
            except BlockedNetworkAccess:
                BLOCKED_AT_COLLECTION = True

            def test_collection_was_guarded(network_guard):
                assert BLOCKED_AT_COLLECTION
                network_guard.attempts.clear()

            def test_key_is_hidden_from_tests_and_their_subprocesses():
                child = subprocess.run(
                    [sys.executable, "-c", "import os; print(os.environ.get('OPENAI_API_KEY'))"],
                    capture_output=True, text=True, check=True,
                )
                assert "OPENAI_API_KEY" not in os.environ
                assert child.stdout.strip() == "None"

            def test_swallowed_attempt_fails():
                try:
                    socket.create_connection(("192.0.2.10", 443), timeout=1)
                except BlockedNetworkAccess:
                    pass
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OPENAI_API_KEY": "sk-must-not-leak"}

    inner = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )

    # The swallowed attempt fails its test at teardown, which pytest reports as an error.
    assert "3 passed, 1 error" in inner.stdout, inner.stdout + inner.stderr
    assert "ERROR test_inner.py::test_swallowed_attempt_fails" in inner.stdout
    assert "tried to reach the network" in inner.stdout
