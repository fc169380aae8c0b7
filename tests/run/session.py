"""A scripted session through the whole pipeline: read, write (with a typo), compile (fails), fix,
compile, verify, profile, revise, compile, profile, submit. Used with real compiles on the CPU machine
(fake referee) and end to end on the GPU (real referee)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from agent.messages import AssistantMessage, ToolCall
from agent.models.scripted import tool_call_turn

Edit = tuple[str, str, str]
"""(path, old text, new text)"""


@dataclass(frozen=True)
class SessionPlan:
    files: dict[str, str]
    """The first correct version, by workspace path."""
    typo: Edit
    """Applied to the first write; the session fixes it after the failed compile."""
    revision: list[Edit] = field(default_factory=list)


def solution_files(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): p.read_text()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.suffix in (".py", ".cu", ".cpp", ".cuh", ".h") and "__pycache__" not in p.parts
    }


def _calls(name: str, argument_sets: list[dict], tag: str) -> AssistantMessage:
    return AssistantMessage(
        tool_calls=[
            ToolCall.from_raw(id=f"{tag}_{i}", name=name, raw_arguments=json.dumps(arguments))
            for i, arguments in enumerate(argument_sets)
        ]
    )


def pipeline_steps(plan: SessionPlan) -> list[AssistantMessage]:
    path, good, broken = plan.typo
    assert good in plan.files[path]
    first_write = {**plan.files, path: plan.files[path].replace(good, broken, 1)}
    return [
        AssistantMessage(
            text="Reading the task first.",
            tool_calls=[
                ToolCall.from_raw(id="look_0", name="list_files", raw_arguments="{}"),
                ToolCall.from_raw(id="look_1", name="read_file", raw_arguments='{"path": "reference.py"}'),
            ],
        ),
        _calls("write_file", [{"path": p, "content": t} for p, t in first_write.items()], "write"),
        tool_call_turn("compile", call_id="compile_1"),
        tool_call_turn("edit_file", {"path": path, "old_string": broken, "new_string": good}, call_id="fix"),
        tool_call_turn("compile", call_id="compile_2"),
        tool_call_turn("verify", call_id="verify_1"),
        tool_call_turn("profile", call_id="profile_1"),
        _calls(
            "edit_file",
            [{"path": p, "old_string": o, "new_string": n} for p, o, n in plan.revision],
            "revise",
        ),
        tool_call_turn("compile", call_id="compile_3"),
        tool_call_turn("profile", call_id="profile_2"),
        tool_call_turn("submit", {"summary": "scripted pipeline session"}, call_id="submit"),
    ]
