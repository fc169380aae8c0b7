# pyright: reportMissingImports=false, reportAttributeAccessIssue=false, reportIncompatibleMethodOverride=false
"""A `verifiers` (0.4, `verifiers.v1`) environment over our tools and referee.

    from agent.rl.verifiers_env import load_environment
    env = load_environment(tasks=["benchmarks/tasks/level1"], policy="strict", budget="wall=30m,gpu=10m")

returns a real `vf.Env` (verifiers' SingleAgentEnv) whose taskset is `KernelTaskset`: one
`KernelTask` per KernelBench-style task file, its prompt our system and task prompts. Each
rollout launches its own `KernelToolset` (a verifiers MCP tool server, `python -m
agent.rl.verifiers_env`), which opens a `KernelSession` (agent/rl/session.py): a fresh workspace
and our own tools by their own names (list_files, read_file, write_file, edit_file, compile,
verify, profile, submit, list_skills, read_skill). After every call the session's sample (a
`RolloutOutcome`) is pushed into the rollout's state; the task's `@vf.reward` turns it into the
reward (agent/rl/reward.py: failure and hack flags 0, correct 1/3, faster than eager beyond
the noise 2/3, faster than eager and torch.compile 1). A crash, hang or flood inside a tool
ends the sample as failed with its reason; tools never raise into the trainer.

The agent seat defaults to verifiers' `null` harness (its chat loop with MCP tools, no shell)
in the `subprocess` runtime; any `vf.AgentConfig` can be passed instead. The referee is
injectable by import path, because the tool server is another process:
`referee="agent.rl.fakes:fake_referee", referee_args={"verdict": "correct", ...}`.

verifiers resolves a taskset by a top-level module name, so `load_environment` registers this
module as `kernel_agent_rl` (TASKSET_ID); a process that builds the env from a config alone
(e.g. `vf.load_environment(vf.SingleAgentEnvConfig(taskset={"id": "kernel_agent_rl", ...}))`)
imports `agent.rl.verifiers_env` first.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from agent.budget import BudgetLimits
from agent.referee.options import EvalOptions
from agent.rl.session import KernelSession, RolloutConfig, RolloutOutcome
from agent.tasks import Task, discover_task_files, load_task, parse_task

TASKSET_ID = "kernel_agent_rl"


class KernelState(vf.State):
    """What the tool server tells the host about its rollout: the sample as it stands."""

    outcome: RolloutOutcome | None = None


class KernelToolsetConfig(vf.ToolsetConfig):
    rollout: RolloutConfig = RolloutConfig()
    referee: str | None = None
    """Import path `module:factory` of the referee (None: the real one with rollout.referee)."""
    referee_args: dict[str, Any] = Field(default_factory=dict)


class KernelTaskConfig(vf.TaskConfig):
    tools: KernelToolsetConfig = KernelToolsetConfig()


class KernelTaskData(vf.TaskData):
    task_path: str
    """The KernelBench-style task file (absolute)."""
    task_sha256: str = ""


def _referee(config: KernelToolsetConfig) -> Any:
    if config.referee is None:
        return None
    module, _, attr = config.referee.partition(":")
    return getattr(importlib.import_module(module), attr)(**config.referee_args)


class KernelToolset(vf.Toolset[KernelToolsetConfig, KernelState]):
    """Our tools as one rollout's MCP server. Tool names are ours, unprefixed."""

    TOOL_PREFIX = None

    def __init__(self, config: KernelToolsetConfig) -> None:
        super().__init__(config)
        self.session: KernelSession | None = None

    async def setup_task(self, task: KernelTask) -> None:
        self.open(task.data)

    def open(self, data: KernelTaskData) -> KernelSession:
        """The rollout's session over a fresh workspace (setup_task calls it)."""
        if self.session is not None:
            self.session.close()
        self.session = KernelSession.open(
            parse_task(Path(data.task_path)), referee=_referee(self.config), config=self.config.rollout
        )
        return self.session

    async def _call(self, name: str, arguments: dict[str, Any]) -> str:
        session = self.session
        if session is None:
            return "the rollout has no workspace (its task was never set up)"
        text = await asyncio.to_thread(session.call, name, arguments)
        self.state.outcome = session.outcome()
        return text

    @vf.tool
    async def list_files(self, path: str = ".") -> str:
        """List the files of the workspace (or of one folder in it) with their sizes; harness-owned
        files are marked read-only. `path`: folder relative to the workspace root."""
        return await self._call("list_files", {"path": path})

    @vf.tool
    async def read_file(self, path: str, start_line: int = 1, max_lines: int = 400) -> str:
        """Read a text file of the workspace, e.g. reference.py (the task) or one of your kernels."""
        return await self._call("read_file", {"path": path, "start_line": start_line, "max_lines": max_lines})

    @vf.tool
    async def write_file(self, path: str, content: str) -> str:
        """Create or replace a file you own: model_new.py or kernels/*.cu|.cuh|.cpp|.h|.hpp."""
        return await self._call("write_file", {"path": path, "content": content})

    @vf.tool
    async def edit_file(self, path: str, old_string: str, new_string: str) -> str:
        """Replace one exact occurrence of old_string with new_string in one of your files."""
        return await self._call(
            "edit_file", {"path": path, "old_string": old_string, "new_string": new_string}
        )

    @vf.tool(name="compile")
    async def compile_workspace(self) -> str:
        """Build your CUDA extension in the sandbox (incremental); the first real errors with
        file:line when it fails."""
        return await self._call("compile", {})

    @vf.tool
    async def verify(self) -> str:
        """Check correctness against the reference on fresh random inputs under the policy."""
        return await self._call("verify", {})

    @vf.tool
    async def profile(self) -> str:
        """Verify, then time ModelNew against eager PyTorch and torch.compile (median, noise)."""
        return await self._call("profile", {})

    @vf.tool
    async def submit(self, summary: str = "") -> str:
        """Submit the workspace as your final solution (re-verified and timed first); ends the rollout."""
        return await self._call("submit", {"summary": summary})

    @vf.tool
    async def list_skills(self) -> str:
        """List the skills (guides on CUDA workflow, optimization, debugging) read_skill reads."""
        return await self._call("list_skills", {})

    @vf.tool
    async def read_skill(self, name: str, path: str = "SKILL.md") -> str:
        """Read a skill's SKILL.md, or another file of the skill such as an example kernel."""
        return await self._call("read_skill", {"name": name, "path": path})


class KernelTask(vf.Task[KernelTaskData, KernelState, KernelTaskConfig]):
    """One KernelBench-style task; the reward is the referee's verdict on the rollout's solution."""

    @classmethod
    def toolsets(cls, config: KernelTaskConfig) -> list[vf.Toolset]:
        return [KernelToolset(config.tools)]

    @property
    def key(self) -> str:
        return f"{self.data.name}@{self.data.task_sha256[:12]}"

    @vf.reward(weight=1.0)
    async def kernel_reward(self, trace: vf.Trace) -> float:
        """agent/rl/reward.py's ladder over the session's sample; no sample (the tools were never
        called, or the server died) is a failure."""
        outcome = _outcome(trace)
        if outcome is None:
            return self.config.tools.rollout.rewards.failure
        return outcome.reward.reward

    @vf.metric
    async def kernel(self, trace: vf.Trace) -> dict[str, float]:
        """tier (0-3), failed (0/1) and the scored candidate's speedups when it was timed."""
        outcome = _outcome(trace)
        if outcome is None:
            return {"tier": 0.0, "failed": 1.0}
        metrics = {"tier": float(outcome.reward.tier), "failed": float(outcome.failed)}
        for name in ("speedup_vs_eager", "speedup_vs_compile"):
            value = getattr(outcome.reward, name)
            if value is not None:
                metrics[name] = float(value)
        return metrics


def _outcome(trace: Any) -> RolloutOutcome | None:
    state = getattr(trace, "state", None)
    outcome = getattr(state, "outcome", None)
    if isinstance(outcome, dict):
        return RolloutOutcome.model_validate(outcome)
    return outcome


class KernelTasksetConfig(vf.TasksetConfig):
    tasks: list[str] = Field(default_factory=list)
    """Task files or folders of them (KernelBench's levelN layout)."""
    policy: str = "strict"
    baseline: str = "eager"
    arch: str = "9.0"
    instantiate: bool = True
    """Run each task once (in a worker) so the prompt states its input shapes."""
    task: KernelTaskConfig = KernelTaskConfig()


class KernelTaskset(vf.Taskset[KernelTask, KernelTasksetConfig]):
    def load(self) -> Iterable[KernelTask]:
        from agent.run.prompts import build_prompts

        for path in _task_files(self.config.tasks):
            task: Task = load_task(path, instantiate=self.config.instantiate)
            prompts = build_prompts(
                task,
                policy=self.config.policy,
                baseline=self.config.baseline,
                gpu=None,
                arch=self.config.arch,
                budget_line="",
            )
            yield KernelTask(
                KernelTaskData(
                    id=task.key,
                    name=task.name,
                    prompt=prompts.task,
                    system_prompt=prompts.system,
                    task_path=str(task.path),
                    task_sha256=task.sha256,
                ),
                self.config.task,
            )


def _task_files(entries: Sequence[str]) -> list[Path]:
    files: list[Path] = []
    for entry in entries:
        files.extend(discover_task_files(Path(entry)))
    return files


def register() -> str:
    """Make this module importable under TASKSET_ID (verifiers imports tasksets by id)."""
    sys.modules.setdefault(TASKSET_ID, sys.modules[__name__])
    return TASKSET_ID


def load_environment(
    tasks: Sequence[str | Path],
    *,
    policy: str = "strict",
    budget: str | BudgetLimits | None = None,
    referee: str | None = None,
    referee_args: dict[str, Any] | None = None,
    agent: vf.AgentConfig | None = None,
    rollout: RolloutConfig | None = None,
    instantiate: bool = True,
) -> vf.Env:
    """The environment over `tasks` (files or folders). `policy`: the referee's (strict |
    kernelbench); `budget`: a `--budget` spec or BudgetLimits for each rollout (wall, gpu);
    `referee`: `module:factory` of an injected referee (tests: agent.rl.fakes:fake_referee)."""
    register()
    base = rollout or RolloutConfig()
    limits = budget if isinstance(budget, BudgetLimits) else base.budget.with_spec(budget)
    referee_options = base.referee.model_copy(update={"policy": policy})
    rollout_config = base.model_copy(
        update={"referee": EvalOptions.model_validate(referee_options.model_dump()), "budget": limits}
    )
    tools = KernelToolsetConfig(rollout=rollout_config, referee=referee, referee_args=referee_args or {})
    config = vf.SingleAgentEnvConfig(
        taskset=KernelTasksetConfig(
            id=TASKSET_ID,
            tasks=[str(Path(t).resolve()) for t in tasks],
            policy=policy,
            instantiate=instantiate,
            task=KernelTaskConfig(tools=tools),
        ),
        agent=agent or vf.AgentConfig(harness={"id": "null"}, runtime=vf.SubprocessConfig()),
    )
    return vf.load_environment(config)


__all__ = ["KernelTaskset"]


if __name__ == "__main__":  # the tool server's process (verifiers starts `python -m` this module)
    register()
    KernelToolset.run()
