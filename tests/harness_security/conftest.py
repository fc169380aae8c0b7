"""Shared pieces of the harness's own adversarial suite: a loopback port that hostile code
tries to reach, and how many connections it got."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    yield server
    server.close()


def connections(server: socket.socket) -> int:
    """Connections waiting on `server` (each accepted and closed)."""
    count = 0
    while True:
        try:
            conn, _ = server.accept()
        except (TimeoutError, OSError):
            return count
        conn.close()
        count += 1
