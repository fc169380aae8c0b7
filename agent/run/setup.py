"""What every run sets up the same way: its prompts, its tools' context and its transcript header.
Shared by solve runs, region runs and RL rollouts, so their transcripts read alike."""

from __future__ import annotations

import datetime
import platform
import uuid
from collections.abc import Sequence
from importlib import metadata
from typing import Any

from agent.budget import Budget
from agent.build.toolkit import resolve_arch
from agent.messages import ToolSpec
from agent.referee.options import EvalOptions
from agent.run.prompts import Prompts, build_prompts
from agent.tasks import Task
from agent.tools import ToolContext, ToolSettings
from agent.tools.candidates import Baseline, CandidateBook, Referee
from agent.tools.context import EventSink
from agent.transcripts.format import Header, TaskIdentity, tool_hash
from agent.workspace import Workspace
from sandbox.base import Sandbox


def run_prompts(
    task: Task,
    options: EvalOptions,
    *,
    baseline: str,
    gpu: str | None,
    budget_line: str,
    brief: str | None = None,
) -> Prompts:
    """The system and task prompts for a run judged with `options` on `gpu`."""
    arch, _ = resolve_arch(options.arch)
    return build_prompts(
        task,
        policy=options.policy,
        baseline=baseline,
        gpu=gpu,
        arch=arch,
        budget_line=budget_line,
        brief=brief,
    )


def tool_context(
    task: Task,
    workspace: Workspace,
    sandbox: Sandbox,
    *,
    referee: Referee,
    budget: Budget,
    baseline: Baseline,
    events: EventSink,
    settings: ToolSettings,
) -> ToolContext:
    """What the tools of one run share: its workspace, sandbox, referee, budget and candidate book."""
    return ToolContext(
        task=task,
        workspace=workspace,
        sandbox=sandbox,
        referee=referee,
        budget=budget,
        candidates=CandidateBook(baseline=baseline),
        events=events,
        settings=settings,
    )


def transcript_header(
    task: Task,
    *,
    model: str,
    config: dict[str, Any],
    tools: Sequence[ToolSpec] = (),
    prompt_hashes: dict[str, str] | None = None,
    gpu: str | None,
    sandbox: str,
) -> Header:
    """A new run's header: its id and start, the task, the model, the configuration, the tools and
    prompts offered (with their hashes), the software's versions, the GPU and the sandbox."""
    return Header(
        run_id=uuid.uuid4().hex,
        started_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        task=TaskIdentity.of(task),
        model=model,
        config=config,
        tools=list(tools),
        tool_hashes={spec.name: tool_hash(spec) for spec in tools},
        prompt_hashes=prompt_hashes or {},
        versions=versions(),
        gpu=gpu,
        sandbox=sandbox,
    )


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in ("kernel-agent", "torch", "pydantic", "openai", "anthropic"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    try:
        import torch

        found["torch_cuda"] = torch.version.cuda or "none"
    except ImportError:
        pass
    return found
