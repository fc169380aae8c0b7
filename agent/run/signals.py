"""SIGTERM and SIGHUP end a run the way Ctrl-C does, so it still writes its run_end, run.json and report.

A service manager, `timeout`, `docker stop` or a closed terminal sends SIGTERM or SIGHUP; without a
handler Python dies at once and the output folder has no summary. The handler raises
KeyboardInterrupt in the main thread, where `agent solve` and `agent batch` already finish cleanly on
Ctrl-C. A second signal while that cleanup runs ends the process at once (the signal's default).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

INTERRUPTING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class TerminatedBySignal(KeyboardInterrupt):
    """A stop asked for by SIGTERM or SIGHUP; handled everywhere Ctrl-C is."""


@contextlib.contextmanager
def interrupt_on_signals() -> Iterator[None]:
    """Inside: SIGTERM and SIGHUP raise TerminatedBySignal in the main thread, once. A no-op outside
    the main thread (Python delivers signals there only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        for each in INTERRUPTING_SIGNALS:
            signal.signal(each, signal.SIG_DFL)
        raise TerminatedBySignal(f"stopped by {signal.Signals(signum).name}")

    previous = {each: signal.signal(each, handle) for each in INTERRUPTING_SIGNALS}
    try:
        yield
    finally:
        for each, handler in previous.items():
            signal.signal(each, handler)
