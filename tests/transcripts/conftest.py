"""A short recorded run (scripted model, fake referee, no compiles) that the transcript tests read,
replay, show and export."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.messages import AssistantMessage, ToolCall
from agent.models.scripted import ScriptedStep, tool_call_turn
from tests.run.conftest import build_cache, relu_files, relu_task, run_solve  # noqa: F401

DATA = Path(__file__).parent / "data"
V1_TRANSCRIPT = DATA / "v1_relu.jsonl"


def short_session(speedup: str = "1.2", revised: str = "1.6") -> list[ScriptedStep]:
    files = relu_files()
    files["model_new.py"] += f"# FAKE-SPEEDUP: {speedup}\n"
    writes = [
        ToolCall.from_raw(id=f"write_{i}", name="write_file", raw_arguments=_json({"path": p, "content": t}))
        for i, (p, t) in enumerate(files.items())
    ]
    return [
        AssistantMessage(
            text="Reading the task first.",
            tool_calls=[
                ToolCall.from_raw(id="look_0", name="list_files", raw_arguments="{}"),
                ToolCall.from_raw(id="look_1", name="read_file", raw_arguments='{"path": "reference.py"}'),
            ],
        ),
        AssistantMessage(text="Writing a vectorized ReLU.", tool_calls=writes),
        tool_call_turn("verify", call_id="verify_1"),
        tool_call_turn("profile", call_id="profile_1"),
        tool_call_turn(
            "edit_file",
            {
                "path": "model_new.py",
                "old_string": f"FAKE-SPEEDUP: {speedup}",
                "new_string": f"FAKE-SPEEDUP: {revised}",
            },
            call_id="revise",
        ),
        tool_call_turn(
            "edit_file",
            {"path": "model_new.py", "old_string": "not in the file", "new_string": "x"},
            call_id="bad_edit",
        ),
        tool_call_turn("profile", call_id="profile_2"),
        tool_call_turn("submit", {"summary": "vectorized ReLU"}, call_id="submit"),
    ]


def _json(value: object) -> str:
    import json

    return json.dumps(value)


@pytest.fixture
def recorded(tmp_path: Path, relu_task) -> Path:  # noqa: F811
    """The output folder of a finished short session; its transcript is `recorded / "transcript.jsonl"`."""
    out = tmp_path / "recorded"
    result, model = run_solve(out, short_session(), relu_task)
    model.assert_complete()
    assert result.status == "submitted", result.message
    return out
