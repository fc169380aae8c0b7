"""What the region tools keep for a whole model: its regions, each opened region's sub-workspace,
and which one the other tools act on.

A region's sub-workspace is a workspace of its own (`<out>/regions/rNN/workspace`) over the
region's extracted task (`<out>/regions/tasks/`), with its own sandbox and candidate book. While a
region is open, the `ToolContext`'s task, workspace, sandbox and candidate book are the region's,
so the file tools, compile, verify, profile, tune and start_from_template work on it unchanged;
`focus_whole` puts the whole model's back. The budget and the transcript stay the run's.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agent.tasks import Task
from agent.tools.candidates import CandidateBook
from agent.workspace import Workspace
from sandbox.base import Sandbox

if TYPE_CHECKING:
    from agent.regions.partition import Region
    from agent.templates.graph import OpGraph

    from .context import ToolContext


@dataclass
class Focus:
    """What the workspace tools act on: the whole model's or one region's."""

    task: Task
    workspace: Workspace
    sandbox: Sandbox
    candidates: CandidateBook


@dataclass
class RegionDesk:
    """A whole model's regions as sub-workspaces (agent/tools/regions.py's tools use it)."""

    folder: Path
    """Where region tasks and sub-workspaces are written (`<out>/regions`), outside the whole model's
    workspace: a region's files are never part of the whole model's snapshot."""
    open_sandbox: Callable[[Path], Sandbox]
    """A sandbox of the run's kind over a region's workspace (entered and closed by the desk)."""
    load_task: Callable[[Path], Task]
    """A region's task file loaded the way the run's task was (run once in a sandbox)."""
    trace: Callable[[], OpGraph]
    """The whole model traced in a sandbox of the run's kind (agent.templates.graph.trace_task)."""
    graph: OpGraph | None = None
    regions: list[Region] = field(default_factory=list)
    opened: dict[int, Focus] = field(default_factory=dict)
    current: int | None = None
    """The region the workspace tools act on; None: the whole model."""
    whole: Focus | None = None
    _stack: ExitStack = field(default_factory=ExitStack)

    def focus_region(self, ctx: ToolContext, index: int) -> None:
        """Region `index`'s (opened) task, workspace, sandbox and candidates in `ctx`."""
        self.focus_whole(ctx)
        self.whole = _focus_of(ctx)
        _apply(ctx, self.opened[index])
        self.current = index

    def focus_whole(self, ctx: ToolContext) -> None:
        """The whole model's task, workspace, sandbox and candidates back in `ctx` (the run's end
        calls it too: what the run returns is the whole model's)."""
        if self.current is None:
            return
        assert self.whole is not None, "focus_region keeps the whole model's"
        self.opened[self.current] = _focus_of(ctx)
        _apply(ctx, self.whole)
        self.current = None

    def enter_sandbox(self, workspace: Path) -> Sandbox:
        return self._stack.enter_context(self.open_sandbox(workspace))

    def close(self) -> None:
        self._stack.close()


def _focus_of(ctx: ToolContext) -> Focus:
    return Focus(ctx.task, ctx.workspace, ctx.sandbox, ctx.candidates)


def _apply(ctx: ToolContext, focus: Focus) -> None:
    ctx.task, ctx.workspace, ctx.sandbox, ctx.candidates = (
        focus.task,
        focus.workspace,
        focus.sandbox,
        focus.candidates,
    )
