"""`agent solve` on the command line: refusals before any token is spent, and a whole run against a
local OpenAI-compatible server speaking the real wire format (the referee is the fake one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import agent.cli.solve
from agent.cli.solve import solve_command
from agent.transcripts.format import ModelResponseEvent
from agent.transcripts.reader import read_transcript
from tests.models.wire_server import Reply, WireServer, openai_completion, openai_tool_call
from tests.run.conftest import RELU_TASK, REPO, relu_files
from tests.run.fakes import FakeReferee


def cli() -> typer.Typer:
    app = typer.Typer()
    app.command("solve")(solve_command)

    @app.command("other")
    def other() -> None:  # a second command keeps `solve` a named subcommand, as in agent/cli/app.py
        pass

    return app


@pytest.fixture
def wire_server() -> Iterator[WireServer]:
    server = WireServer().start()
    yield server
    server.stop()


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli(), ["solve", *args])
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("model", "key"),
    [("anthropic:claude-sonnet-5-5", "ANTHROPIC_API_KEY"), ("openai:gpt-4o", "OPENAI_API_KEY")],
)
def test_without_an_api_key_it_says_what_to_set_before_any_gpu_probe(
    tmp_path: Path, model: str, key: str
) -> None:
    out = tmp_path / "out"
    code, output = invoke(str(RELU_TASK), "--model", model, "--out", str(out))
    assert code == 2
    assert f"--model {model} needs an API key: set {key}" in " ".join(output.split())
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--budget", "turns=many"], "--budget 'turns=many': turns='many' is not a count"),
        (["--budget", "money=5"], "unknown budget 'money'"),
        (["--policy", "lenient"], "--policy 'lenient': choose one of strict, kernelbench"),
        (["--model", "gemini:pro"], "--model 'gemini:pro' is not a model spec"),
    ],
)
def test_bad_flags_are_named(tmp_path: Path, args: list[str], complaint: str) -> None:
    code, output = invoke(str(RELU_TASK), *args, "--out", str(tmp_path / "out"))
    assert code == 2
    assert complaint in " ".join(output.split())


@pytest.mark.slow
def test_without_a_gpu_it_says_so_before_spending_tokens(tmp_path: Path, wire_server: WireServer) -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent.cli",
            "solve",
            str(RELU_TASK),
            "--model",
            f"openai:coder@{wire_server.url}/v1",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    message = " ".join(proc.stderr.split())
    assert proc.returncode == 2, proc.stderr
    assert "no CUDA GPU is visible here" in message and "--allow-no-gpu for a compile-only dry run" in message
    assert wire_server.requests == []
    assert not (tmp_path / "out").exists()


def tool_calls_reply(*calls: tuple[str, dict]) -> Reply:
    wire_calls = [
        openai_tool_call(f"call_{i}_{name}", name, json.dumps(args)) for i, (name, args) in enumerate(calls)
    ]
    return Reply(
        body=openai_completion(
            tool_calls=wire_calls,
            finish_reason="tool_calls",
            usage={"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200},
            model="local-coder",
        )
    )


@pytest.mark.slow
def test_a_run_against_a_local_openai_compatible_server_produces_the_output_folder(
    tmp_path: Path, wire_server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = relu_files()
    files["model_new.py"] += "# FAKE-SPEEDUP: 1.4\n"
    wire_server.script(
        tool_calls_reply(("list_files", {})),
        tool_calls_reply(*[("write_file", {"path": p, "content": t}) for p, t in files.items()]),
        tool_calls_reply(("verify", {})),
        tool_calls_reply(("profile", {})),
        tool_calls_reply(("submit", {"summary": "vectorized ReLU"})),
    )
    monkeypatch.setattr(agent.cli.solve, "make_referee", lambda **options: FakeReferee())
    out = tmp_path / "out"
    code, output = invoke(
        str(RELU_TASK),
        "--model",
        f"openai:local-coder@{wire_server.url}/v1",
        "--out",
        str(out),
        "--budget",
        "turns=10,gpu=5m",
        "--quiet",
    )
    assert code == 0, output
    assert "submitted: submission accepted" in output
    assert "1.40x vs eager" in output
    assert wire_server.unused_replies == 0

    for name in ("transcript.jsonl", "model_new.py", "result.json", "run.json", "report.md"):
        assert (out / name).is_file(), name
    assert (out / "solution" / "kernels" / "relu.cu").is_file()
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "submitted" and run["usage"]["in_tokens"] == 5000 and run["limits"]["turns"] == 10
    assert run["usage"]["usd_unknown"] is True  # a local model has no price

    # The wire saw our tool schemas and got the tool results back in OpenAI's format.
    first, last = wire_server.requests[0].body, wire_server.requests[-1].body
    assert first["model"] == "local-coder"
    assert {t["function"]["name"] for t in first["tools"]} >= {"write_file", "edit_file", "compile", "submit"}
    tool_messages = [m for m in last["messages"] if m["role"] == "tool"]
    assert tool_messages[-1]["content"].startswith("VERDICT: correct")

    transcript = read_transcript(out / "transcript.jsonl")
    assert transcript.header.model == f"openai:local-coder@{wire_server.url}/v1"
    responses = transcript.of_type(ModelResponseEvent)
    assert len(responses) == 5
    assert responses[0].response.raw_request["messages"][0]["role"] == "system"
    assert responses[0].response.raw_response["model"] == "local-coder"


@pytest.mark.slow
def test_replaying_a_recorded_transcript_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relu_task
) -> None:
    from agent.models.scripted import tool_call_turn
    from tests.run.conftest import run_solve
    from tests.run.test_loop import write_turn

    recorded = tmp_path / "recorded"
    run_solve(
        recorded,
        [write_turn("FAKE-SPEEDUP: 1.7"), tool_call_turn("profile"), tool_call_turn("submit")],
        relu_task,
    )
    monkeypatch.setattr(agent.cli.solve, "make_referee", lambda **options: FakeReferee(gpu=None))
    out = tmp_path / "replayed"
    model = f"replay:{recorded / 'transcript.jsonl'}"

    code, output = invoke(str(RELU_TASK), "--model", model, "--out", str(out), "--quiet")
    assert code == 2 and "no CUDA GPU is visible here" in output and not out.exists()

    code, output = invoke(str(RELU_TASK), "--model", model, "--out", str(out), "--quiet", "--allow-no-gpu")
    assert code == 0, output
    assert "submitted_unverified" in output
    assert read_transcript(out / "transcript.jsonl").header.model == "replay:scripted"

    code, output = invoke(str(RELU_TASK), "--model", "replay:nowhere.jsonl", "--out", str(tmp_path / "x"))
    assert code == 2 and "--model replay:nowhere.jsonl: no such transcript file" in output
