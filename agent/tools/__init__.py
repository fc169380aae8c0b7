"""The tools the model works with. `default_tools` is the set `agent solve` offers; a new tool is
one more module here plus one line in `default_tools` (in `WORKSPACE_TOOLS` when the RL rollouts
offer it too)."""

from __future__ import annotations

from .base import Tool, Toolbox, ToolError, ToolOutput, ToolReply, tool
from .context import ToolContext, ToolSettings
from .files import edit_file, list_files, read_file, write_file
from .library import start_from_template
from .ncu import find_cuda_tool, ncu
from .pipeline import compile_workspace, profile, submit, verify
from .region_desk import RegionDesk
from .regions import compose_regions, open_region, open_whole_model
from .sanitize import sanitize
from .shell import shell
from .skills import list_skills, read_skill
from .tune import tune

WORKSPACE_TOOLS: tuple[Tool, ...] = (
    list_files,
    read_file,
    write_file,
    edit_file,
    compile_workspace,
    verify,
    profile,
    submit,
)
"""What every run offers, the RL rollouts' too: read and write the workspace, build it, judge it."""


def default_tools(*, shell_enabled: bool = False, regions: bool = False) -> list[Tool]:
    """`regions`: the task is a whole model of several regions (agent/tools/regions.py's tools)."""
    tools = [*WORKSPACE_TOOLS, tune, list_skills, read_skill, start_from_template]
    if regions:
        tools += [open_region, open_whole_model, compose_regions]
    # Offered only where the machine has them (a call without one still says so in one line).
    if find_cuda_tool("ncu") is not None:
        tools.append(ncu)
    if find_cuda_tool("compute-sanitizer") is not None:
        tools.append(sanitize)
    if shell_enabled:
        tools.append(shell)
    return tools


__all__ = [
    "WORKSPACE_TOOLS",
    "RegionDesk",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "ToolReply",
    "ToolSettings",
    "Toolbox",
    "default_tools",
    "tool",
]
