"""KernelBench-style tasks as Harbor tasks (harbor 0.25's task format, `harbor.models.task`).

    OUT/<level>-<name>/
      task.toml            [task] kernel-agent/<level>-<name>; [environment] 1 GPU; timeouts; metadata
      instruction.md       our system prompt and task prompt (the agent works in /workspace)
      environment/
        Dockerfile         sandbox/Dockerfile (CUDA devel, torch) + kernel-agent installed + the
                           task at /task/task.py + a fresh workspace at /workspace
        kernel-agent/      the harness's source (agent/, sandbox/, skills/, prompts/, pyproject.toml)
        workers/           sandbox/workers (the Dockerfile copies them, as `agent sandbox build` does)
        task.py            the task file
      tests/
        test.sh            the referee: `agent eval /task/task.py /workspace --json`, then reward.py
        reward.py          EvalResult -> /logs/verifier/reward.json (agent/rl/reward.py's ladder)

Harbor reads `/logs/verifier/reward.json` ({"reward": float, ...}, every value a finite number):
reward, tier (0-3), correct (0/1) and the speedups when timed.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from agent.rl.reward import TierRewards
from agent.tasks import Task

ORG = "kernel-agent"
HARNESS_PARTS = ("agent", "sandbox", "skills", "prompts", "pyproject.toml", "README.md")

TEST_SH = """#!/bin/bash
# The referee judges /workspace; reward.py turns its verdict into /logs/verifier/reward.json.
mkdir -p /logs/verifier
agent eval /task/task.py /workspace --policy {policy} --json > /logs/verifier/result.json \\
  2> /logs/verifier/referee.stderr
python /tests/reward.py /logs/verifier/result.json /logs/verifier/reward.json
"""

REWARD_PY = '''"""EvalResult JSON -> Harbor's reward.json (agent/rl/reward.py's ladder; a missing or
unreadable verdict is a failure)."""

import json
import sys
from pathlib import Path

from agent.referee.results import EvalResult
from agent.rl.reward import TierRewards, reward_from_result

source, dest = Path(sys.argv[1]), Path(sys.argv[2])
rewards = TierRewards.model_validate_json({rewards!r})
try:
    result = EvalResult.model_validate_json(source.read_text())
except Exception as exc:  # no verdict (the referee crashed or printed nothing)
    print(f"no verdict: {{exc}}", file=sys.stderr)
    result = None
breakdown = reward_from_result(result, rewards=rewards)
out = {{"reward": breakdown.reward, "tier": breakdown.tier, "correct": int(breakdown.tier > 0)}}
for name in ("speedup_vs_eager", "speedup_vs_compile"):
    value = getattr(breakdown, name)
    if value is not None:
        out[name] = value
dest.write_text(json.dumps(out))
print(breakdown.reason)
'''

DOCKERFILE_TAIL = """
# --- kernel-agent: the harness and the referee, the task, a fresh workspace ---
COPY kernel-agent/ /opt/kernel-agent/src/
RUN pip install /opt/kernel-agent/src
COPY task.py /task/task.py
RUN python -c "from pathlib import Path; from agent.tasks import parse_task; \\
from agent.workspace import Workspace; Workspace.create(Path('/workspace'), parse_task(Path('/task/task.py')))"
WORKDIR /workspace
"""


def default_repo() -> Path:
    """The checkout this harness runs from (an editable install: the documented one)."""
    import agent

    root = Path(agent.__file__).resolve().parent.parent
    if not (root / "sandbox" / "Dockerfile").is_file():
        raise FileNotFoundError(f"{root}: no sandbox/Dockerfile (export from a kernel-agent checkout)")
    return root


def harbor_name(task: Task) -> str:
    level = f"level{task.level}" if task.level is not None else "task"
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", task.name).strip("-.").lower()
    return f"{level}-{slug}"


def _toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def task_toml(task: Task, *, policy: str, gpu_types: list[str] | None) -> str:
    lines = [
        "[task]",
        f"name = {_toml_str(f'{ORG}/{harbor_name(task)}')}",
        f"description = {_toml_str(f'Make the PyTorch module {task.name} faster with CUDA kernels')}",
        'keywords = ["cuda", "kernelbench", "kernel-agent"]',
        "",
        "[metadata]",
        f"kernel_agent_task = {_toml_str(task.name)}",
        f"sha256 = {_toml_str(task.sha256)}",
        f"policy = {_toml_str(policy)}",
        *([f"level = {task.level}"] if task.level is not None else []),
        *([f"problem_id = {task.problem_id}"] if task.problem_id is not None else []),
        "",
        "[verifier]",
        "timeout_sec = 1800.0",
        "",
        "[agent]",
        "timeout_sec = 3600.0",
        "",
        "[environment]",
        "build_timeout_sec = 3600.0",
        "gpus = 1",
        *([f"gpu_types = [{', '.join(_toml_str(g) for g in gpu_types)}]"] if gpu_types else []),
        "cpus = 4",
        "memory_mb = 32768",
        'workdir = "/workspace"',
        "",
    ]
    return "\n".join(lines)


def instruction(task: Task, *, policy: str) -> str:
    from agent.run.prompts import build_prompts

    prompts = build_prompts(task, policy=policy, baseline="eager", gpu=None, arch="9.0", budget_line="")
    return (
        f"{prompts.system}\n\n---\n\n{prompts.task}\n\n---\n\n"
        "Your workspace is /workspace (kernels/, model_new.py; reference.py, binding.cpp and "
        "binding_registry.h are the harness's). Build and judge it yourself with "
        "`agent compile /workspace` and `agent eval /task/task.py /workspace`; when you stop, the "
        "referee judges /workspace as you left it.\n"
    )


def export_task(
    task: Task,
    out: Path,
    *,
    repo: Path,
    policy: str = "strict",
    gpu_types: list[str] | None = None,
    rewards: TierRewards | None = None,
) -> Path:
    """Write one Harbor task folder under `out`; returns it. `repo`: the kernel-agent checkout
    whose source and sandbox/Dockerfile go into the environment."""
    root = Path(out) / harbor_name(task)
    if root.exists():
        shutil.rmtree(root)
    env = root / "environment"
    tests = root / "tests"
    env.mkdir(parents=True)
    tests.mkdir()
    (root / "task.toml").write_text(task_toml(task, policy=policy, gpu_types=gpu_types))
    (root / "instruction.md").write_text(instruction(task, policy=policy))
    dockerfile = (repo / "sandbox" / "Dockerfile").read_text()
    (env / "Dockerfile").write_text(dockerfile.rstrip() + "\n" + DOCKERFILE_TAIL)
    shutil.copytree(repo / "sandbox" / "workers", env / "workers", ignore=_ignore)
    for part in HARNESS_PARTS:
        source = repo / part
        if source.is_dir():
            shutil.copytree(source, env / "kernel-agent" / part, ignore=_ignore)
        elif source.is_file():
            (env / "kernel-agent").mkdir(exist_ok=True)
            shutil.copy(source, env / "kernel-agent" / part)
    shutil.copy(task.path, env / "task.py")
    test_sh = tests / "test.sh"
    test_sh.write_text(TEST_SH.format(policy=policy))
    test_sh.chmod(0o755)
    (tests / "reward.py").write_text(REWARD_PY.format(rewards=(rewards or TierRewards()).model_dump_json()))
    return root


def _ignore(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n in ("__pycache__", ".pytest_cache") or n.endswith(".pyc")}


def export_tasks(
    tasks: list[Task], out: Path, *, repo: Path, policy: str = "strict", gpu_types: list[str] | None = None
) -> list[Path]:
    Path(out).mkdir(parents=True, exist_ok=True)
    return [export_task(t, out, repo=repo, policy=policy, gpu_types=gpu_types) for t in tasks]
