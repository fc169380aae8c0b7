"""The result line every worker prints last (`RESULT_MARKER + json`), and the timed calls' seeds."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

RESULT_MARKER = "@@KERNEL_AGENT_RESULT@@ "


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send fd 1 to fd 2 (Python prints and C printf alike) for the duration."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def emit(result: Mapping[str, object], fd: int | None = None) -> None:
    line = RESULT_MARKER + json.dumps(result, default=str) + "\n"
    if fd is None:
        sys.stdout.write(line)
        sys.stdout.flush()
    else:
        os.write(fd, line.encode())


def parse(stdout: str) -> dict[str, Any] | None:
    """The last result record in `stdout`, or None when the worker never wrote one."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            try:
                value = json.loads(line[len(RESULT_MARKER) :])
            except json.JSONDecodeError:
                return None
            return value if isinstance(value, dict) else None
    return None


SEED_MASK = (1 << 62) - 1


def derive_seed(base: int, index: int) -> int:
    """The seed of timed call `index` from the window's base seed (candidate, host and judge alike)."""
    return ((base ^ (index * 0x9E3779B97F4A7C15)) * 0xBF58476D1CE4E5B9 + index) & SEED_MASK
