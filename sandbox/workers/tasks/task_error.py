"""One line for an exception a task's own code raised (torch + stdlib only), shared by the workers
that run task files: its type, its message (cut at `limit`) and the task's line that raised it, the
innermost frame outside the installed packages."""

from __future__ import annotations

import traceback


def short_error(exc: BaseException, limit: int = 300) -> str:
    where = ""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename.endswith(".py") and "site-packages" not in frame.filename:
            where = f" (line {frame.lineno}, in {frame.name})"
            break
    return f"{type(exc).__name__}: {str(exc)[:limit]}{where}"
