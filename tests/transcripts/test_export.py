"""`agent export`: OpenAI chat fine-tuning lines and per-step RL records, with filters."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from agent.cli.transcripts import export_command
from agent.transcripts.export import reward
from tests.run.conftest import run_solve
from tests.run.fakes import performance
from tests.transcripts.conftest import V1_TRANSCRIPT, short_session


def _export(*args: str) -> typer.testing.Result:
    app = typer.Typer()
    app.command()(export_command)
    return CliRunner().invoke(app, list(args))


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_openai_chat_lines_have_tool_calls_and_their_results(tmp_path: Path) -> None:
    out = tmp_path / "chat.jsonl"
    result = _export(str(V1_TRANSCRIPT), "--format", "openai-chat", "--out", str(out))
    assert result.exit_code == 0, result.output
    (record,) = _lines(out)
    messages = record["messages"]
    assert [m["role"] for m in messages[:3]] == ["system", "user", "assistant"]
    call = messages[2]["tool_calls"][0]
    assert call == {"id": "look_0", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
    assert messages[3]["role"] == "tool" and messages[3]["tool_call_id"] == "look_0"
    assert (
        messages[-1]["role"] == "assistant" and messages[-1]["tool_calls"][0]["function"]["name"] == "submit"
    )
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    asked = {c["id"] for m in messages[:-1] if m["role"] == "assistant" for c in m.get("tool_calls", [])}
    assert asked == answered
    names = {t["function"]["name"] for t in record["tools"]}
    assert {"write_file", "compile", "verify", "profile", "submit"} <= names
    assert all(t["type"] == "function" and "parameters" in t["function"] for t in record["tools"])


def test_rl_steps_carry_rewards_from_the_verdicts(tmp_path: Path) -> None:
    out = tmp_path / "steps.jsonl"
    assert _export(str(V1_TRANSCRIPT), "--format", "rl-steps", "--out", str(out)).exit_code == 0
    steps = _lines(out)
    assert [s["turn"] for s in steps] == list(range(1, 9))
    by_turn = {s["turn"]: s for s in steps}
    assert by_turn[1]["reward"] is None and by_turn[1]["verdict"] is None
    assert by_turn[3]["verdict"] == "correct" and by_turn[3]["reward"] == 1.0  # verify: correct, not timed
    assert by_turn[4]["reward"] == 3.0  # 1.2x vs eager and 1.08x vs compile, both beyond noise
    assert by_turn[8]["done"] and not by_turn[7]["done"]
    assert {s["outcome_reward"] for s in steps} == {3.0}
    assert by_turn[2]["observation"][-1]["role"] == "tool" and by_turn[2]["action"]["role"] == "assistant"
    assert len(by_turn[3]["observation"]) > len(by_turn[2]["observation"])


def test_the_reward_comes_from_the_verdict_only() -> None:
    assert reward("compile_error", {}) == reward("policy_violation", {}) == -1.0
    assert reward("incorrect", {}) == 0.0
    assert reward("correct", {}) == 1.0
    assert reward("correct", {"performance": performance(1.01).model_dump()}) == 1.0  # within noise
    assert reward("correct", {"performance": performance(1.1).model_dump()}) == 2.0  # 0.99x vs compile
    assert reward("correct", {"performance": performance(1.5).model_dump()}) == 3.0
    assert reward("no_gpu", {}) is None


def test_filters_keep_only_the_runs_asked_for(tmp_path: Path, relu_task) -> None:
    slow_run = tmp_path / "slow"
    run_solve(slow_run, short_session("1.0", "1.01"), relu_task)
    wrong_run = tmp_path / "wrong"
    run_solve(
        wrong_run, short_session("1.0 FAKE-VERDICT: incorrect", "1.1 FAKE-VERDICT: incorrect"), relu_task
    )
    transcripts = [
        str(V1_TRANSCRIPT),
        str(slow_run / "transcript.jsonl"),
        str(wrong_run / "transcript.jsonl"),
    ]
    cases = {
        (): 3,
        ("--only-correct",): 2,
        ("--only-faster",): 1,
        ("--min-speedup", "1.5"): 1,
        ("--min-speedup", "1.7"): 0,
    }
    for flags, kept in cases.items():
        out = tmp_path / "out.jsonl"
        result = _export(*transcripts, "--format", "openai-chat", "--out", str(out), *flags)
        assert result.exit_code == 0, result.output
        assert len(_lines(out)) == kept, flags
    bad = _export(str(V1_TRANSCRIPT), "--format", "csv", "--out", str(tmp_path / "x"))
    assert bad.exit_code == 2


def test_a_cut_off_run_is_counted_and_a_bad_out_is_refused(tmp_path: Path) -> None:
    data = V1_TRANSCRIPT.read_text()
    cut = tmp_path / "cut.jsonl"
    cut.write_text(data[: data.index('"turn":7')])
    out = tmp_path / "x.jsonl"
    result = _export(str(V1_TRANSCRIPT), str(cut), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "kept 2 of 2 runs (1 cut off: the run did not finish)" in " ".join(result.output.split())
    whole = _export(str(V1_TRANSCRIPT), "--out", str(out))
    assert whole.exit_code == 0 and "cut off" not in whole.output
    missing = _export(str(V1_TRANSCRIPT), "--out", str(tmp_path / "missing" / "x.jsonl"))
    assert missing.exit_code == 2 and "--out" in missing.output and not (tmp_path / "missing").exists()
    before = cut.read_bytes()
    onto_input = _export(str(cut), "--out", str(cut))
    assert onto_input.exit_code == 2 and cut.read_bytes() == before
