"""Prints the adversarial suite's summary tables after the test results."""

from __future__ import annotations

import pytest

from tests.adversarial.suite import SUMMARIES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for text in SUMMARIES:
        terminalreporter.write_line("")
        terminalreporter.write_line(text)
