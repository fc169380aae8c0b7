"""An optional shell inside the sandbox (off by default; `agent solve --shell`)."""

from __future__ import annotations

from .base import ToolError, clip, tool
from .context import ToolContext

MAX_STREAM_CHARS = 6_000


@tool
def shell(ctx: ToolContext, command: str, timeout_s: int = 120) -> str:
    """Run a bash command in the sandbox, in the workspace folder (e.g. nvcc --version, or a quick
    script). No network. Use compile, verify and profile for building and judging.

    Args:
        command: The bash command line.
        timeout_s: Seconds before the command is killed (capped by the run's settings).
    """
    timeout = max(1.0, min(float(timeout_s), ctx.settings.shell_timeout_s))
    result = ctx.sandbox.exec(["bash", "-c", command], timeout=timeout, cwd=ctx.sandbox.workspace_path)
    parts = [f"exit status {result.returncode} after {result.duration_s:.1f}s"]
    if result.timed_out:
        parts[0] = f"killed after {timeout:.0f}s (timeout)"
    for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        if text.strip():
            parts.append(f"--- {name} ---\n{clip(text, MAX_STREAM_CHARS)}")
    output = "\n".join(parts)
    if not result.ok:
        raise ToolError(output)
    return output
