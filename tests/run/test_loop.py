"""The loop through `solve`, with a scripted model, the local sandbox and a fake referee (no compiles)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.budget import BudgetLimits
from agent.messages import (
    AssistantMessage,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from agent.models.base import ModelError
from agent.models.replay import ReplayModel
from agent.models.scripted import ScriptedModel, text_turn, tool_call_turn
from agent.referee import EvalOptions
from agent.run.solve import SolveConfig, SolveError, solve
from agent.tasks import Task
from agent.transcripts.format import (
    EvaluationEvent,
    ModelRequestEvent,
    RunEndEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from agent.transcripts.reader import read_transcript
from tests.run.conftest import UNLIMITED, relu_files, run_solve
from tests.run.fakes import FakeReferee


def write_turn(marker: str = "") -> AssistantMessage:
    """One turn writing the ReLU example (three write_file calls), with a fake-referee marker."""
    files = relu_files()
    files["model_new.py"] += f"# {marker}\n" if marker else ""
    calls = [
        ToolCall.from_raw(
            id=f"w{i}-{marker}", name="write_file", raw_arguments=json.dumps({"path": p, "content": t})
        )
        for i, (p, t) in enumerate(files.items())
    ]
    return AssistantMessage(text="writing the kernel", tool_calls=calls)


def results_sent(model_call_messages: list) -> list[ToolResultMessage]:
    return [m for m in model_call_messages if isinstance(m, ToolResultMessage)]


def test_session_records_everything_and_writes_the_output_folder(tmp_path: Path, relu_task: Task) -> None:
    steps = [
        tool_call_turn("list_files"),
        write_turn("FAKE-SPEEDUP: 1.5"),
        tool_call_turn("verify"),
        tool_call_turn("profile"),
        tool_call_turn("submit", {"summary": "float4 grid-stride ReLU"}),
    ]
    out = tmp_path / "out"
    result, model = run_solve(out, steps, relu_task)
    model.assert_complete()

    assert result.status == "submitted" and result.verified
    # ranked against torch.compile by default (the fake referee's is 0.9 of its eager speedup)
    assert result.best is not None and result.best.speedup == pytest.approx(1.5 * 0.9)
    assert result.submitted_is_best is True
    assert result.summary == "float4 grid-stride ReLU"
    assert {
        "transcript.jsonl",
        "workspace",
        "solution",
        "model_new.py",
        "result.json",
        "run.json",
        "report.md",
    } <= set(result.files)
    assert (out / "solution" / "kernels" / "relu.cu").read_text() == relu_files()["kernels/relu.cu"]
    assert json.loads((out / "result.json").read_text())["verdict"] == "correct"
    assert json.loads((out / "run.json").read_text())["status"] == "submitted"
    assert "1.50x vs eager" in (out / "report.md").read_text()
    standalone = (out / "model_new.py").read_text()
    compile(standalone, "model_new.py", "exec")
    assert "'kernels/relu.cu': r'''" in standalone and "relu_forward" in standalone

    # The model saw the system prompt with the main skill, the task, and a budget line each turn.
    system, task_prompt = model.calls[0].messages[:2]
    assert isinstance(system, SystemMessage) and isinstance(task_prompt, UserMessage)
    assert "# Writing the CUDA extension" in system.text and "19_ReLU" in task_prompt.text
    assert "torch.relu(x)" in task_prompt.text
    for sent in model.calls[1:]:
        latest = sent.messages[-1]  # the last tool result of the previous turn carries the budget line
        assert isinstance(latest, ToolResultMessage) and latest.content.endswith("\n\n[budget: unlimited]")

    transcript = read_transcript(out / "transcript.jsonl")
    assert transcript.ended and not transcript.truncated
    assert transcript.header.task.name == "19_ReLU" and transcript.header.gpu == "FakeGPU (sm_90)"
    assert [t.name for t in transcript.header.tools][:4] == [
        "list_files",
        "read_file",
        "write_file",
        "edit_file",
    ]
    assert set(transcript.header.prompt_hashes) == {"system.md", "task.md", "system", "task"}
    assert transcript.conversation()[: len(model.calls[-1].messages)] == model.calls[-1].messages
    calls = transcript.of_type(ToolCallEvent)
    results = transcript.of_type(ToolResultEvent)
    assert [c.call.id for c in calls] == [r.tool_call_id for r in results]
    assert [e.source for e in transcript.of_type(EvaluationEvent)] == ["verify", "profile", "submit"]
    end = transcript.run_end
    assert end is not None and end.status == "submitted" and end.best is not None


@pytest.mark.parametrize(
    ("kind", "limits", "model_options", "per_turn_seconds"),
    [
        ("turns", BudgetLimits(turns=2, usd=None, wall=None, gpu=None), {}, 0),
        (
            "in_tokens",
            UNLIMITED.model_copy(update={"in_tokens": 1500}),
            {"usage": Usage(input_tokens=1000)},
            0,
        ),
        (
            "out_tokens",
            UNLIMITED.model_copy(update={"out_tokens": 150}),
            {"usage": Usage(output_tokens=100)},
            0,
        ),
        ("usd", UNLIMITED.model_copy(update={"usd": 1.5}), {"cost_usd": 1.0}, 0),
        ("wall", UNLIMITED.model_copy(update={"wall": 15}), {}, 10),
        ("gpu", UNLIMITED.model_copy(update={"gpu": 4}), {}, 0),
    ],
)
def test_each_budget_ends_the_run_cleanly_and_keeps_the_best(
    tmp_path: Path,
    relu_task: Task,
    kind: str,
    limits: BudgetLimits,
    model_options: dict,
    per_turn_seconds: float,
) -> None:
    now = [0.0]

    def tick(turn: AssistantMessage):
        def step(messages: list, tools: list) -> AssistantMessage:
            now[0] += per_turn_seconds
            return turn

        return step

    steps = [tick(write_turn()), tick(tool_call_turn("verify"))]
    out = tmp_path / "out"
    result, model = run_solve(
        out,
        steps,
        relu_task,
        limits=limits,
        clock=lambda: now[0],
        referee=FakeReferee(gpu_s=4.0),
        **model_options,
    )
    model.assert_complete()
    assert result.status == f"budget_exhausted:{kind}"
    assert result.best is not None and result.best.source == "verify"
    assert (out / "solution" / "model_new.py").is_file()
    end = read_transcript(out / "transcript.jsonl").run_end
    assert end is not None and end.status == f"budget_exhausted:{kind}"
    assert f"the {kind} budget is used up" in end.message
    if kind == "out_tokens":
        assert [c.max_output_tokens for c in model.calls] == [150, 50]


def test_gpu_work_is_refused_mid_turn_once_the_gpu_budget_is_gone(tmp_path: Path, relu_task: Task) -> None:
    both = AssistantMessage(
        tool_calls=[
            ToolCall.from_raw(id="v1", name="verify", raw_arguments="{}"),
            ToolCall.from_raw(id="v2", name="verify", raw_arguments="{}"),
        ]
    )
    referee = FakeReferee(gpu_s=4.0)
    result, _ = run_solve(
        tmp_path / "out",
        [write_turn(), both],
        relu_task,
        referee=referee,
        limits=UNLIMITED.model_copy(update={"gpu": 3}),
    )
    assert result.status == "budget_exhausted:gpu"
    assert len(referee.calls) == 1
    results = read_transcript(tmp_path / "out" / "transcript.jsonl").of_type(ToolResultEvent)
    assert (results[-1].tool_call_id, results[-1].is_error) == ("v2", True)
    assert "gpu budget is used up" in results[-1].content


def test_a_model_that_stops_calling_tools_is_nudged_then_stopped(tmp_path: Path, relu_task: Task) -> None:
    steps = [
        write_turn(),
        tool_call_turn("verify"),
        text_turn("I think"),
        text_turn("we are"),
        text_turn("done"),
    ]
    result, model = run_solve(tmp_path / "out", steps, relu_task)
    model.assert_complete()
    assert result.status == "model_stopped"
    assert result.best is not None and (tmp_path / "out" / "solution").is_dir()
    nudges = [m for m in model.calls[-1].messages if isinstance(m, UserMessage)][1:]
    assert len(nudges) == 2 and nudges[0].text.startswith("You replied without calling a tool")


def test_submitting_a_broken_workspace_after_a_good_one_returns_the_good_one(
    tmp_path: Path, relu_task: Task
) -> None:
    broken = relu_files()["model_new.py"] + "# FAKE-VERDICT: incorrect\n"
    steps = [
        write_turn("FAKE-SPEEDUP: 1.8"),
        tool_call_turn("profile"),
        tool_call_turn("write_file", {"path": "model_new.py", "content": broken}),
        tool_call_turn("submit"),
    ]
    out = tmp_path / "out"
    result, model = run_solve(
        out, steps, relu_task, limits=BudgetLimits(turns=4, usd=None, wall=None, gpu=None)
    )
    model.assert_complete()
    assert result.status == "budget_exhausted:turns"
    assert result.best is not None and (result.best.turn, result.best.speedup) == (
        2,
        pytest.approx(1.8 * 0.9),
    )
    assert result.submitted is None and result.verified
    assert (out / "solution" / "model_new.py").read_text().endswith("# FAKE-SPEEDUP: 1.8\n")
    assert (out / "workspace" / "model_new.py").read_text() == broken
    assert json.loads((out / "result.json").read_text())["verdict"] == "correct"
    refusal = read_transcript(out / "transcript.jsonl").of_type(ToolResultEvent)[-1]
    assert refusal.is_error and refusal.content.startswith("submission refused")
    assert "best verified so far: profile at turn 2, 1.62x vs compile" in refusal.content


def test_submitting_a_slower_correct_workspace_is_accepted_but_the_best_is_returned(
    tmp_path: Path, relu_task: Task
) -> None:
    slower = relu_files()["model_new.py"] + "# FAKE-SPEEDUP: 1.1\n"
    steps = [
        write_turn("FAKE-SPEEDUP: 1.8"),
        tool_call_turn("profile"),
        tool_call_turn("write_file", {"path": "model_new.py", "content": slower}),
        tool_call_turn("submit"),
    ]
    out = tmp_path / "out"
    result, _ = run_solve(out, steps, relu_task)
    assert result.status == "submitted"
    assert result.submitted_is_best is False
    assert result.best is not None and result.best.speedup == pytest.approx(1.8 * 0.9)
    assert "it is not the best verified candidate (profile at turn 2" in result.message
    assert (out / "model_new.py").read_text().count("FAKE-SPEEDUP: 1.8") == 1
    assert "It is NOT the best verified candidate; the best is returned." in (out / "report.md").read_text()


def test_malformed_tool_calls_go_back_to_the_model_as_errors(tmp_path: Path, relu_task: Task) -> None:
    mistakes = AssistantMessage(
        tool_calls=[
            ToolCall.from_raw(
                id="m1", name="write_file", raw_arguments='{"path": "model_new.py", "content": '
            ),
            ToolCall.from_raw(id="m2", name="rm_rf", raw_arguments="{}"),
            ToolCall.from_raw(id="m3", name="edit_file", raw_arguments='{"path": "model_new.py"}'),
            ToolCall.from_raw(
                id="m4", name="write_file", raw_arguments='{"path": "reference.py", "content": "x"}'
            ),
        ]
    )
    steps = [mistakes, write_turn(), tool_call_turn("submit")]
    result, model = run_solve(tmp_path / "out", steps, relu_task)
    assert result.status == "submitted"
    errors = results_sent(model.calls[1].messages)
    assert [r.is_error for r in errors] == [True] * 4
    assert "write_file: arguments are not valid JSON" in errors[0].content
    assert "unknown tool 'rm_rf'" in errors[1].content
    assert "old_string: Field required" in errors[2].content
    assert "reference.py is harness-owned and read-only" in errors[3].content


@pytest.mark.parametrize(
    ("step", "status", "message"),
    [
        (
            ModelError("rate limited for good", provider="openai", transient=True),
            "model_error",
            "rate limited",
        ),
        (RuntimeError("a bug"), "error", "RuntimeError: a bug"),
    ],
)
def test_failures_outside_the_models_control_end_the_run_with_a_status(
    tmp_path: Path, relu_task: Task, step: Exception, status: str, message: str
) -> None:
    result, _ = run_solve(tmp_path / "out", [write_turn(), step], relu_task)
    assert (result.status, result.message.startswith(message)) == (status, True)
    end = read_transcript(tmp_path / "out" / "transcript.jsonl").run_end
    assert end is not None and end.status == status
    assert (end.traceback is not None) == (status == "error")


def test_a_referee_failure_ends_the_run(tmp_path: Path, relu_task: Task) -> None:
    steps = [write_turn("FAKE-VERDICT: referee_error"), tool_call_turn("verify")]
    result, _ = run_solve(tmp_path / "out", steps, relu_task)
    assert result.status == "referee_error"
    assert result.message.startswith("the referee failed (not your code's fault)")


def test_without_a_gpu_solve_refuses_before_any_model_call(tmp_path: Path, relu_task: Task) -> None:
    with pytest.raises(SolveError, match=r"no CUDA GPU is visible here.*--allow-no-gpu"):
        run_solve(tmp_path / "out", [write_turn()], relu_task, referee=FakeReferee(gpu=None))
    assert not (tmp_path / "out").exists()


def test_compile_only_dry_run_returns_the_submission_unverified(tmp_path: Path, relu_task: Task) -> None:
    steps = [write_turn(), tool_call_turn("verify"), tool_call_turn("submit")]
    out = tmp_path / "out"
    result, model = run_solve(out, steps, relu_task, referee=FakeReferee(gpu=None), allow_no_gpu=True)
    model.assert_complete()
    assert (result.status, result.verified) == ("submitted_unverified", False)
    verify_result = results_sent(model.calls[2].messages)[-1]
    assert verify_result.is_error and "compile-only dry run (--allow-no-gpu)" in verify_result.content
    assert (out / "solution" / "model_new.py").is_file() and (out / "model_new.py").is_file()
    assert json.loads((out / "result.json").read_text())["verdict"] == "no_gpu"
    task_prompt = model.calls[0].messages[1]
    assert isinstance(task_prompt, UserMessage) and "none visible (compile-only dry run)" in task_prompt.text


def test_out_folder_must_be_new_or_empty(tmp_path: Path, relu_task: Task) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.txt").write_text("x")
    with pytest.raises(SolveError, match="exists and is not empty"):
        run_solve(tmp_path / "out", [], relu_task)


def test_replaying_a_transcript_reproduces_the_run(tmp_path: Path, relu_task: Task) -> None:
    steps = [write_turn("FAKE-SPEEDUP: 1.3"), tool_call_turn("profile"), tool_call_turn("submit")]
    first, _ = run_solve(tmp_path / "first", steps, relu_task, usage=Usage(input_tokens=7, output_tokens=3))
    replay = ReplayModel.from_transcript(tmp_path / "first" / "transcript.jsonl")
    assert replay.name == "replay:scripted" and replay.turns == steps

    second = solve(
        SolveConfig(
            task=relu_task.path, out=tmp_path / "second", budget=UNLIMITED, referee=EvalOptions(arch="sm_90")
        ),
        model=replay,
        referee=FakeReferee(),
        task=relu_task,
    )
    assert (second.status, second.best, second.usage.in_tokens) == (first.status, first.best, 21)
    recorded = [
        e.call for e in read_transcript(tmp_path / "first" / "transcript.jsonl").of_type(ToolCallEvent)
    ]
    replayed = [
        e.call for e in read_transcript(tmp_path / "second" / "transcript.jsonl").of_type(ToolCallEvent)
    ]
    assert replayed == recorded

    short = ReplayModel(replay.responses[:1])
    third = solve(
        SolveConfig(
            task=relu_task.path, out=tmp_path / "third", budget=UNLIMITED, referee=EvalOptions(arch="sm_90")
        ),
        model=short,
        referee=FakeReferee(),
        task=relu_task,
    )
    assert third.status == "model_error" and "asked for turn 2 but the recording has 1" in third.message


def test_request_events_hold_only_new_messages(tmp_path: Path, relu_task: Task) -> None:
    steps = [tool_call_turn("list_files"), tool_call_turn("submit")]
    run_solve(tmp_path / "out", steps, relu_task)
    requests = read_transcript(tmp_path / "out" / "transcript.jsonl").of_type(ModelRequestEvent)
    assert [[m.role for m in r.messages] for r in requests] == [["system", "user"], ["tool"]]
    assert [r.message_count for r in requests] == [2, 4]
    assert isinstance(requests[0], ModelRequestEvent) and not isinstance(requests[0], RunEndEvent)


def test_scripted_usage_reaches_the_transcript(tmp_path: Path, relu_task: Task) -> None:
    response = ModelResponse(
        message=tool_call_turn("submit"), usage=Usage(input_tokens=5), cost_usd=0.25, model="m"
    )
    result, _ = run_solve(tmp_path / "out", [write_turn(), response], relu_task)
    assert result.usage.usd == pytest.approx(0.25) and result.usage.in_tokens == 5


def test_progress_reports_turn_best_and_budget(tmp_path: Path, relu_task: Task) -> None:
    from agent.run.progress import status_line

    lines: list[str] = []
    steps = [write_turn("FAKE-SPEEDUP: 1.5"), tool_call_turn("profile"), tool_call_turn("submit")]
    solve(
        SolveConfig(
            task=relu_task.path,
            out=tmp_path / "out",
            budget=BudgetLimits(turns=10),
            referee=EvalOptions(arch="sm_90"),
        ),
        model=ScriptedModel(steps, cost_usd=0.5),
        referee=FakeReferee(gpu_s=3.0),
        task=relu_task,
        progress=lambda ctx, note: lines.append(status_line(ctx, note)),
    )
    assert lines[0].startswith("turn 1/10 · best: none yet · tokens 0 in / 0 out · $0.00 · gpu 0s · wall ")
    assert lines[0].endswith("waiting for the model")
    after_profile = next(line for line in lines if line.endswith("profile: ok"))
    assert after_profile.startswith(
        "turn 2/10 · best: 1.35x vs compile · tokens 0 in / 0 out · $1.00 · gpu 3s"
    )
