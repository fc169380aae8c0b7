"""The system and task prompts, rendered from prompts/*.md with a strict `string.Template`."""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agent.paths import prompts_dir
from agent.tasks import Task
from agent.tools.skills import catalog_lines, skill_catalog
from agent.transcripts.format import sha256_text

MAIN_SKILL = "cuda-extension"
POLICY_RULES = {
    "strict": (
        "strict (CUDA-Agent's rules): ModelNew.forward and your extension do no computation through torch. "
        "Every arithmetic operation runs in your own kernels; cuBLAS/cuDNN called from your own C++ are "
        "allowed. Allocation (torch.empty, empty_like), views, shape queries and layout copies "
        "(.contiguous()) are allowed. A torch op such as torch.relu, F.linear or x + y in the forward "
        "path is a policy violation."
    ),
    "kernelbench": (
        "kernelbench: torch operations are allowed around your kernels and are reported; the speedup "
        "has to come from your kernels all the same."
    ),
}


class PromptError(ValueError):
    """A template that cannot be rendered; the message names the file and the placeholder."""


def render(path: Path, values: Mapping[str, str]) -> str:
    template = string.Template(path.read_text(encoding="utf-8"))
    if not template.is_valid():
        raise PromptError(f"{path}: a '$' that is not a placeholder; write $$ for a dollar sign")
    missing = sorted(set(template.get_identifiers()) - set(values))
    if missing:
        raise PromptError(f"{path}: no value for {', '.join('$' + name for name in missing)}")
    return template.substitute(values)


def default_brief(task: Task, baseline: str) -> str:
    """The brief from the task alone: no timings, no traced work."""
    from agent.referee.options import EvalOptions
    from agent.run.brief import gather_facts, render_brief

    return render_brief(gather_facts(task, options=EvalOptions(), gpu=None, baseline=baseline, trace=False))


@dataclass(frozen=True)
class Prompts:
    system: str
    task: str
    hashes: dict[str, str]


def build_prompts(
    task: Task,
    *,
    policy: str,
    baseline: str,
    gpu: str | None,
    arch: str,
    budget_line: str,
    root: Path | None = None,
    brief: str | None = None,
) -> Prompts:
    """The system prompt (the same for every task and turn) and the task prompt. `brief` is the
    rendered task brief (agent.run.brief); None renders what the task alone says."""
    root = root or prompts_dir()
    catalog = skill_catalog()
    if MAIN_SKILL not in catalog:
        raise PromptError(f"the main skill {MAIN_SKILL!r} is missing from skills/")
    if policy not in POLICY_RULES:
        raise PromptError(f"no policy rules for {policy!r}; known: {', '.join(POLICY_RULES)}")
    system = render(
        root / "system.md",
        {
            "policy": policy,
            "policy_rules": POLICY_RULES[policy],
            "skills": catalog_lines(catalog, MAIN_SKILL),
            "main_skill": catalog[MAIN_SKILL].body,
        },
    )
    spec = task.spec
    init_inputs = ", ".join(a.describe() for a in spec.init_inputs) if spec else "(not inspected)"
    baseline_name = "torch.compile" if baseline == "compile" else "eager PyTorch"
    user = render(
        root / "task.md",
        {
            "task_name": task.name,
            "task_key": task.key,
            "inputs": spec.describe() if spec else "(not inspected)",
            "init_inputs": init_inputs or "none",
            "gpu": gpu or "none visible (compile-only dry run)",
            "arch": f"sm_{arch.replace('.', '')}",
            "baseline": baseline_name,
            "policy": policy,
            "budget": budget_line,
            "reference_source": task.source.rstrip(),
            "brief": brief if brief is not None else default_brief(task, baseline),
        },
    )
    hashes = {
        "system.md": sha256_text((root / "system.md").read_text(encoding="utf-8")),
        "task.md": sha256_text((root / "task.md").read_text(encoding="utf-8")),
        "system": sha256_text(system),
        "task": sha256_text(user),
    }
    return Prompts(system=system, task=user, hashes=hashes)
