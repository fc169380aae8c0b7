"""What a run's transcript header says of the task and the software: shared by solve runs, region
runs and RL rollouts."""

from __future__ import annotations

import platform
from importlib import metadata

from agent.tasks import Task
from agent.transcripts.format import TaskIdentity


def task_identity(task: Task) -> TaskIdentity:
    return TaskIdentity(
        name=task.name,
        key=task.key,
        sha256=task.sha256,
        path=str(task.path),
        level=task.level,
        problem_id=task.problem_id,
        inputs=task.spec.describe() if task.spec else "",
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
