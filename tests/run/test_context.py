"""The context window: long scripted runs stay under the token ceiling, elide only old turns, keep
the request prefix stable, record what they elided so a replay sends the same requests, and keep
tool-call pairing valid in both providers' wire formats."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.budget import BudgetLimits
from agent.messages import AssistantMessage, Message, SystemMessage, ToolCall, ToolResultMessage, UserMessage
from agent.models import anthropic as anthropic_adapter
from agent.models import openai as openai_adapter
from agent.models.scripted import ScriptedModel
from agent.run.context import (
    NOTE_PREFIX,
    ContextLimits,
    ContextSpecError,
    ContextWindow,
    Elision,
    apply_elisions,
    elided_message,
    parse_context_tokens,
    request_tokens,
    requests_sent,
    turns_digest,
)
from agent.run.replay import replay_run
from agent.run.solve import SolveConfig
from agent.tasks import Task, load_task
from agent.tools.candidates import CandidateBook
from agent.transcripts.format import ContextElidedEvent, EvaluationEvent
from agent.transcripts.reader import load_transcript
from tests.run.conftest import RELU_TASK, run_solve
from tests.run.fakes import FakeReferee

CEILING = 32_000


def kernel_source(turn: int, lines: int = 150) -> str:
    """A CUDA file of realistic size (~9 kB), different every turn."""
    body = "\n".join(
        f"    acc{i % 8} = fmaf(x[idx + {i}], w[{(i * 7 + turn) % 256}], acc{i % 8});  // step {i}"
        for i in range(lines)
    )
    return (
        f"// revision {turn}\n#include <cuda_runtime.h>\n\n__global__ void fused_kernel_{turn}("
        "const float* x, const float* w, float* out, int n) {\n"
        f"    int idx = blockIdx.x * blockDim.x + threadIdx.x;\n{body}\n}}\n"
    )


def model_new(turn: int, speedup: float) -> str:
    return (
        "import torch\nfrom cuda_extension import load\n\n"
        f"# FAKE-SPEEDUP: {speedup}\n\nclass ModelNew(torch.nn.Module):\n    pass  # revision {turn}\n"
    )


def long_run(turns: int) -> list[AssistantMessage]:
    """Write a kernel, read it back, verify or profile it, read the reference: a realistic mix."""

    def call(turn: int, i: int, name: str, arguments: dict) -> ToolCall:
        return ToolCall.from_raw(id=f"t{turn}_{i}", name=name, raw_arguments=json.dumps(arguments))

    steps: list[AssistantMessage] = []
    for turn in range(1, turns + 1):
        match turn % 4:
            case 1:
                calls = [
                    call(turn, 0, "write_file", {"path": "kernels/fused.cu", "content": kernel_source(turn)}),
                    call(
                        turn,
                        1,
                        "write_file",
                        {"path": "model_new.py", "content": model_new(turn, 1 + turn / 100)},
                    ),
                ]
            case 2:
                calls = [call(turn, 0, "read_file", {"path": "kernels/fused.cu"})]
            case 3:
                calls = [call(turn, 0, "profile", {})]
            case _:
                calls = [call(turn, 0, "read_file", {"path": "reference.py"})]
        steps.append(
            AssistantMessage(text=f"Turn {turn}: " + "planning the next change. " * 12, tool_calls=calls)
        )
    return steps


@pytest.fixture(scope="module")
def hundred_turns(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ScriptedModel]:
    """The recorded run; its task is loaded as a replay loads it, so the two briefs are the same."""
    out = tmp_path_factory.mktemp("context") / "run"
    relu_task = load_task(RELU_TASK)
    limits = BudgetLimits(turns=100, usd=None, wall=None, gpu=None)
    result, model = run_solve(
        out, long_run(100), relu_task, referee=FakeReferee(), limits=limits, context_tokens=CEILING
    )
    model.assert_complete()
    assert result.status == "budget_exhausted:turns", result.message
    return out, model


def _tools(out: Path) -> list:
    return load_transcript(out / "transcript.jsonl").header.tools


@pytest.mark.slow
def test_every_request_of_a_100_turn_run_stays_under_the_ceiling(hundred_turns, tmp_path, relu_task) -> None:
    out, model = hundred_turns
    tools = _tools(out)
    sizes = [request_tokens(call.messages, tools) for call in model.calls]
    assert len(sizes) == 100 and max(sizes) <= CEILING
    # the same run without a ceiling would not fit: the test measures the elision, not a small run
    _, unlimited = run_solve(
        tmp_path / "off", long_run(40), relu_task, referee=FakeReferee(), context_tokens=0
    )
    assert max(request_tokens(call.messages, tools) for call in unlimited.calls) > CEILING
    events = load_transcript(out / "transcript.jsonl").of_type(ContextElidedEvent)
    assert events and all(e.tokens_after < e.tokens_before for e in events)


def test_elision_keeps_system_prompt_brief_last_turns_and_best_so_far(hundred_turns) -> None:
    out, model = hundred_turns
    history = load_transcript(out / "transcript.jsonl").conversation()
    last = model.calls[-1].messages
    assert isinstance(last[0], SystemMessage) and last[0] == history[0]
    assert isinstance(last[1], UserMessage) and last[1] == history[1]
    starts = [i for i, m in enumerate(last) if isinstance(m, AssistantMessage)]
    assert len(starts) >= 6  # the last turns are never folded
    kept = history.index(last[starts[0]])
    assert last[starts[0] :] == history[kept : kept + len(last) - starts[0]]
    # every older turn is one numbered line of the digest, right after the brief
    digest = last[2]
    assert isinstance(digest, UserMessage) and "one line a turn" in digest.text
    folded_turns = len([m for m in history[:kept] if isinstance(m, AssistantMessage)])
    lines = digest.text.splitlines()[1:]
    assert [line.split(".")[0] for line in lines] == [str(n) for n in range(1, folded_turns + 1)]
    assert "1. write_file kernels/fused.cu (" in digest.text and "profile -> 'VERDICT" in digest.text
    assert not any(isinstance(m, AssistantMessage) for m in last[2 : starts[0]])
    notes = [m for m in last[3:] if isinstance(m, UserMessage) and m.text.startswith(NOTE_PREFIX)]
    assert notes and all(note in history for note in notes)
    transcript = load_transcript(out / "transcript.jsonl")
    noted_at = transcript.of_type(ContextElidedEvent)[-1].turn
    best = max(
        (e for e in transcript.of_type(EvaluationEvent) if e.turn < noted_at and e.speedup),
        key=lambda e: e.speedup,
    )
    eager, compiled = (best.result["performance"][f"speedup_vs_{b}"]["value"] for b in ("eager", "compile"))
    assert (
        f"Best verified so far: profile at turn {best.turn}, {eager:.2f}x vs eager, "
        f"{compiled:.2f}x vs torch.compile (ranked vs {best.baseline}), snapshot {best.content_hash[:12]}"
    ) in notes[-1].text


def test_requests_keep_their_prefix_except_at_an_elision(hundred_turns) -> None:
    out, model = hundred_turns
    elided_at = {e.turn for e in load_transcript(out / "transcript.jsonl").of_type(ContextElidedEvent)}
    for turn in range(2, len(model.calls) + 1):
        before, now = model.calls[turn - 2].messages, model.calls[turn - 1].messages
        if turn not in elided_at:
            assert now[: len(before)] == before, f"request {turn} rewrote its prefix"
    assert len(elided_at) <= 100 // 4 + 1


@pytest.mark.slow
def test_the_transcript_rebuilds_the_requests_and_a_replay_sends_the_same(hundred_turns, tmp_path) -> None:
    out, model = hundred_turns
    recorded = load_transcript(out / "transcript.jsonl")
    assert requests_sent(recorded) == [call.messages for call in model.calls]
    report = replay_run(
        out / "transcript.jsonl", out=tmp_path / "replay", referee=FakeReferee(), arch="sm_90"
    )
    replayed = load_transcript(tmp_path / "replay" / "transcript.jsonl")
    assert report.request_difference is None and not report.diverged
    # The prompts (messages 0 and 1) come from prompts/*.md and this machine's measurements, not from
    # the recording; everything after them is the run's own.
    assert [r[2:] for r in requests_sent(replayed)] == [r[2:] for r in requests_sent(recorded)]
    assert replayed.of_type(ContextElidedEvent) and [
        e.elided for e in replayed.of_type(ContextElidedEvent)
    ] == [e.elided for e in recorded.of_type(ContextElidedEvent)]


def _conversation() -> list[Message]:
    content = kernel_source(1)
    return [
        SystemMessage(text="system"),
        UserMessage(text="the task"),
        AssistantMessage(
            text="x" * 500,
            tool_calls=[
                ToolCall.from_raw(
                    id="w",
                    name="write_file",
                    raw_arguments=json.dumps({"path": "kernels/a.cu", "content": content}),
                ),
                ToolCall.from_raw(id="r", name="read_file", raw_arguments='{"path": "kernels/a.cu"}'),
            ],
        ),
        ToolResultMessage(
            tool_call_id="w", tool_name="write_file", content="created kernels/a.cu (150 lines)"
        ),
        ToolResultMessage(
            tool_call_id="r", tool_name="read_file", content="kernels/a.cu (150 lines)\n" + content
        ),
        AssistantMessage(tool_calls=[ToolCall.from_raw(id="v", name="verify", raw_arguments="{}")]),
        ToolResultMessage(
            tool_call_id="v", tool_name="verify", content="correct on 5/5 trials\n" + "detail\n" * 80
        ),
    ]


def test_stubs_say_what_was_elided_and_which_tool_brings_it_back() -> None:
    history = _conversation()
    read = elided_message(history, 4)
    assert isinstance(read, ToolResultMessage) and read.tool_call_id == "r"
    size = f"{len(kernel_source(1).encode()) / 1000:.1f} kB"
    assert read.content.startswith(f"[elided: read_file kernels/a.cu result, {size}")
    assert "call read_file again to see it" in read.content
    verify = elided_message(history, 6)
    assert "verify result" in verify.content and "'correct on 5/5 trials'" in verify.content
    write = elided_message(history, 2)
    assert isinstance(write, AssistantMessage)
    arguments = write.tool_calls[0].arguments or {}
    assert arguments["path"] == "kernels/a.cu"
    assert (
        arguments["content"].startswith(f"[elided: {size}")
        and "read_file kernels/a.cu shows the file" in arguments["content"]
    )
    assert json.loads(write.tool_calls[0].raw_arguments) == arguments
    assert write.text.startswith("[elided:")
    assert elided_message(history, 3) == history[3]  # short: left as it is


def test_elided_requests_keep_tool_pairing_in_both_wire_formats() -> None:
    history = _conversation()
    request = apply_elisions(history, {2, 3, 4, 5, 6})
    anthropic_body = anthropic_adapter.build_request("claude", request, [], max_tokens=100)
    turns = anthropic_body["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant", "user"]
    for asked, answered in zip(turns[1::2], turns[2::2], strict=True):
        uses = [b["id"] for b in asked["content"] if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in answered["content"] if b["type"] == "tool_result"]
        assert uses == results
    openai_body = openai_adapter.build_request("gpt", request, [])
    wire = openai_body["messages"]
    pending: list[str] = []
    for message in wire:
        if message["role"] == "assistant":
            assert not pending
            pending = [c["id"] for c in message.get("tool_calls", [])]
            for c in message.get("tool_calls", []):
                json.loads(c["function"]["arguments"])
        elif message["role"] == "tool":
            assert message["tool_call_id"] == pending.pop(0)
    assert not pending


@pytest.mark.parametrize(
    ("text", "tokens"), [("100000", 100_000), ("64k", 64_000), ("off", 0), ("0", 0), ("120_000", 120_000)]
)
def test_context_tokens_values(text: str, tokens: int) -> None:
    assert parse_context_tokens(text) == tokens


@pytest.mark.parametrize(
    ("text", "says"), [("lots", "not a token count"), ("-5", "not a token count"), ("500", "too small")]
)
def test_bad_context_tokens_values_say_what_to_give(text: str, says: str) -> None:
    with pytest.raises(ContextSpecError, match=says):
        parse_context_tokens(text)


def test_the_default_run_has_a_ceiling() -> None:
    config = SolveConfig(task=Path("t.py"), out=Path("o"))
    assert 0 < config.context_tokens <= 100_000 and config.context_keep_turns == 4


@pytest.mark.slow
def test_the_context_tokens_flag_sets_the_runs_ceiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relu_task: Task
) -> None:
    import agent.cli.solve
    from tests.cli.test_solve import invoke

    recorded = tmp_path / "recorded"
    run_solve(recorded, long_run(3), relu_task, referee=FakeReferee(), context_tokens=0)
    monkeypatch.setattr(agent.cli.solve, "make_referee", lambda **options: FakeReferee())
    out = tmp_path / "replayed"
    model = f"replay:{recorded / 'transcript.jsonl'}"
    code, output = invoke(
        str(relu_task.path), "--model", model, "--out", str(out), "-q", "--context-tokens", "9k"
    )
    assert code in (0, 1), output
    assert load_transcript(out / "transcript.jsonl").header.config["context_tokens"] == 9000


@dataclass
class _State:
    turn: int
    candidates: CandidateBook


class _Sink:
    def __init__(self) -> None:
        self.events: list[ContextElidedEvent] = []

    def write(self, event: ContextElidedEvent) -> None:
        self.events.append(event)


def test_a_replay_window_applies_recorded_stubs_of_a_run_recorded_before_folding() -> None:
    history = _conversation()
    sink = _Sink()
    window = ContextWindow(
        ContextLimits(ceiling_tokens=8_000, keep_last_turns=1, chunk_turns=1),
        recorded={3: Elision((4,), folded=False)},
    )
    assert window.next_request(history, _State(2, CandidateBook()), [], sink) == _conversation()
    sent = window.next_request(history, _State(3, CandidateBook()), [], sink)
    assert [(e.elided, e.folded) for e in sink.events] == [([4], False)] and sink.events[0].turn == 3
    assert sent[:4] == _conversation()[:4] and sent[5:7] == _conversation()[5:7]
    assert sent[4].content.startswith("[elided: read_file kernels/a.cu")
    assert isinstance(sent[-1], UserMessage) and sent[-1].text.startswith(NOTE_PREFIX) and len(history) == 8
    assert "No verified candidate yet." in sent[-1].text


def test_a_fold_turns_old_turns_into_one_digest_line_each_and_keeps_tool_pairing() -> None:
    history = _conversation()
    sink = _Sink()
    window = ContextWindow(ContextLimits(ceiling_tokens=8_000, keep_last_turns=1, chunk_turns=1))
    sent = window.next_request(history, _State(3, CandidateBook()), [], sink)
    assert [(e.elided, e.folded) for e in sink.events] == [([2, 3, 4], True)]
    digest = sent[2]
    assert isinstance(digest, UserMessage)
    size = f"{len(kernel_source(1).encode()) / 1000:.1f} kB"
    # the call, its path and size; a file's text and a write's confirmation are not repeated
    assert digest.text.splitlines()[1] == f"1. write_file kernels/a.cu ({size}); read_file kernels/a.cu"
    assert sent[3:5] == history[5:7] and sent[5] == history[-1]  # the last turn, then the note
    body = anthropic_adapter.build_request("claude", sent, [], max_tokens=100)
    assert [t["role"] for t in body["messages"]] == ["user", "assistant", "user"]
    # a replay of the recording folds the same messages
    replay = ContextWindow(window.limits, recorded={3: Elision((2, 3, 4))})
    assert replay.next_request(_conversation(), _State(3, CandidateBook()), [], _Sink()) == sent


def test_a_digest_line_shows_a_result_s_first_line_and_every_error() -> None:
    history = [
        SystemMessage(text="s"),
        UserMessage(text="t"),
        AssistantMessage(
            tool_calls=[
                ToolCall.from_raw(id="c", name="compile", raw_arguments="{}"),
                ToolCall.from_raw(id="e", name="read_file", raw_arguments='{"path": "x.cu"}'),
            ]
        ),
        ToolResultMessage(tool_call_id="c", tool_name="compile", content="compile failed: 2 errors\nmore"),
        ToolResultMessage(
            tool_call_id="e", tool_name="read_file", content="no such file: x.cu", is_error=True
        ),
    ]
    assert turns_digest(history, 2, 5).splitlines()[1] == (
        "1. compile -> 'compile failed: 2 errors'; read_file x.cu -> error: 'no such file: x.cu'"
    )
