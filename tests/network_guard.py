"""Make real provider calls impossible in tests: any socket connection or name lookup that would leave
this machine fails, and provider keys are removed from the environment (also for subprocesses).

Loaded as a pytest plugin from tests/conftest.py (`pytest_plugins = ["tests.network_guard"]`), the guard is
on from configure to unconfigure, so collection and fixtures are covered too. A blocked attempt raises
`BlockedNetworkAccess` and, in case some code swallows it anyway, it is also recorded and fails the test
that made it. Tests of the guard itself use the `network_guard` fixture and clear `attempts`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

PROVIDER_ENV_VARS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL")
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


class BlockedNetworkAccess(BaseException):
    """A BaseException so that SDKs, which wrap every Exception into a retryable connection error, let it
    through and the test fails at once."""


def is_loopback(host: object) -> bool:
    if not isinstance(host, str):
        return False
    if host.lower() in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


class NetworkGuard:
    def __init__(self) -> None:
        self.attempts: list[str] = []
        self._saved: dict[str, Any] = {}
        self._saved_env: dict[str, str] = {}

    @property
    def installed(self) -> bool:
        return bool(self._saved)

    def _block(self, what: str) -> None:
        self.attempts.append(what)
        raise BlockedNetworkAccess(f"tests may only reach loopback addresses; blocked {what}")

    def _check_address(self, family: int, address: object) -> None:
        if family in (socket.AF_INET, socket.AF_INET6):
            host = address[0] if isinstance(address, tuple) and address else address
            if not is_loopback(host):
                self._block(f"connection to {address!r}")

    def install(self) -> None:
        if self.installed:
            return
        guard = self
        real_connect = socket.socket.connect
        real_connect_ex = socket.socket.connect_ex
        real_sendto = socket.socket.sendto
        real_getaddrinfo = socket.getaddrinfo
        real_gethostbyname = socket.gethostbyname
        real_gethostbyname_ex = socket.gethostbyname_ex

        def connect(sock: socket.socket, address: Any) -> None:
            guard._check_address(sock.family, address)
            return real_connect(sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> int:
            guard._check_address(sock.family, address)
            return real_connect_ex(sock, address)

        def sendto(sock: socket.socket, data: Any, *args: Any) -> int:
            guard._check_address(sock.family, args[-1])
            return real_sendto(sock, data, *args)

        def check_lookup(host: Any) -> None:
            host_text = host.decode() if isinstance(host, bytes) else host
            # Resolving a public name already sends a DNS query off the machine.
            if host_text is not None and not is_loopback(host_text):
                guard._block(f"name lookup of {host_text!r}")

        def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
            check_lookup(host)
            return real_getaddrinfo(host, *args, **kwargs)

        def gethostbyname(host: str) -> str:
            check_lookup(host)
            return real_gethostbyname(host)

        def gethostbyname_ex(host: str) -> Any:
            check_lookup(host)
            return real_gethostbyname_ex(host)

        self._saved = {
            "connect": real_connect,
            "connect_ex": real_connect_ex,
            "sendto": real_sendto,
            "getaddrinfo": real_getaddrinfo,
            "gethostbyname": real_gethostbyname,
            "gethostbyname_ex": real_gethostbyname_ex,
        }
        socket.socket.connect = connect  # type: ignore[method-assign]
        socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
        socket.socket.sendto = sendto  # type: ignore[method-assign,assignment]
        socket.getaddrinfo = getaddrinfo
        socket.gethostbyname = gethostbyname
        socket.gethostbyname_ex = gethostbyname_ex
        self._saved_env = {name: os.environ.pop(name) for name in PROVIDER_ENV_VARS if name in os.environ}

    def uninstall(self) -> None:
        if not self.installed:
            return
        socket.socket.connect = self._saved["connect"]  # type: ignore[method-assign]
        socket.socket.connect_ex = self._saved["connect_ex"]  # type: ignore[method-assign]
        socket.socket.sendto = self._saved["sendto"]  # type: ignore[method-assign]
        socket.getaddrinfo = self._saved["getaddrinfo"]
        socket.gethostbyname = self._saved["gethostbyname"]
        socket.gethostbyname_ex = self._saved["gethostbyname_ex"]
        os.environ.update(self._saved_env)
        self._saved, self._saved_env = {}, {}


GUARD = NetworkGuard()


def pytest_configure(config: pytest.Config) -> None:
    GUARD.install()


def pytest_unconfigure(config: pytest.Config) -> None:
    GUARD.uninstall()


@contextlib.contextmanager
def guarded() -> Iterator[NetworkGuard]:
    """Guard a block; fail if it tried to reach the network, even if the error was caught inside."""
    GUARD.install()
    GUARD.attempts.clear()
    yield GUARD
    attempts, GUARD.attempts[:] = list(GUARD.attempts), []
    if attempts:
        pytest.fail(f"test tried to reach the network: {attempts}", pytrace=False)


@pytest.fixture(autouse=True)
def network_guard() -> Iterator[NetworkGuard]:
    with guarded() as guard:
        yield guard
