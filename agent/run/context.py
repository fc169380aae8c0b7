"""What the model is sent each turn: the history, with old turns folded so a long run stays within
the model's context window.

The loop keeps the whole history (the transcript records all of it); `ContextWindow.next_request`
turns it into the request of one turn. Turns older than the last `keep_last_turns` are folded into
one digest message, one line a turn: the tools it called with their paths and sizes, and the first
line of each result that is not a file's text, e.g.
`12. write_file kernels/relu.cu (3.2 kB); compile -> 'compile ok: 2 kernels, 0 spills'`. Notes,
file contents and the rest of tool output are dropped: read_file shows any file as it is now. Never
folded: the system prompt, the first user message (the task brief), the last `keep_last_turns`
turns, and the context note added with the latest fold (the best-so-far summary).

The chunk rule, which keeps provider prompt caching effective: a request is the previous request
plus new messages, byte for byte, except on a turn that folds. Such a turn folds every turn older
than the last `keep_last_turns` at once, and only when `chunk_turns` of them have gathered or the
request would pass `ceiling_tokens`. The system prompt and the brief stay a cached prefix, and the
`chunk_turns - 1` requests after a fold extend the new request unchanged. A digest line costs about
20 tokens where the turn's messages as stubs cost about 100, so a 100-turn history stays a few
thousand tokens. When the last `keep_last_turns` turns alone pass the ceiling, the request goes over
it (they are never folded); the event records its size. The best-so-far note is appended after the
newest messages when a fold happens (never rewritten in place), so the model keeps its bearings.

Each fold is recorded as a `ContextElidedEvent` (turn, message indices, `folded`); `requests_sent`
rebuilds every request from a transcript, and a replay applies the recorded folds instead of
choosing its own, so it sends the same requests. Transcripts written before folding recorded
one-line stubs per message (`elided_message`); they are rebuilt and replayed with stubs.

Token counts are estimates: characters / 3, plus a few tokens per message and tool call. Code, JSON
and English run at about 3.3 to 4 characters per token in the Claude and GPT tokenizers, so dividing
by 3 over-counts and a request estimated under the ceiling is under it for the provider too (text with
fewer characters per token, e.g. CJK, can run over). No tokenizer is downloaded.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from agent.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from agent.tools.candidates import Candidate, CandidateBook
from agent.transcripts.format import (
    ContextElidedEvent,
    ModelRequestEvent,
    ModelResponseEvent,
    Transcript,
)

CHARS_PER_TOKEN = 3.0
MESSAGE_OVERHEAD_TOKENS = 4
TOOL_CALL_OVERHEAD_TOKENS = 8
DEFAULT_CONTEXT_TOKENS = 100_000
"""Well inside the 200k-token windows of current Claude and GPT models."""
MIN_CONTEXT_TOKENS = 8_000
"""Below this the system prompt, task brief and tool schemas leave no room for the turns themselves."""
DEFAULT_KEEP_TURNS = 4
"""A write -> compile -> verify or profile -> fix cycle; older turns are digest lines, files re-readable."""
DEFAULT_CHUNK_TURNS = 4
STUB_MIN_CHARS = 300
"""Text shorter than this stays: its stub would save little."""
NOTE_PREFIX = "[context]"
FILE_TOOLS = frozenset({"read_file", "list_files", "read_skill", "list_skills"})
"""Tools whose result's first line only repeats what the call asked for."""


class ContextLimits(BaseModel):
    """How much of the history each request carries."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ceiling_tokens: int = Field(
        default=DEFAULT_CONTEXT_TOKENS, ge=0, description="estimated tokens per request; 0: send everything"
    )
    keep_last_turns: int = Field(default=DEFAULT_KEEP_TURNS, ge=1, description="turns never folded")
    chunk_turns: int = Field(
        default=DEFAULT_CHUNK_TURNS, ge=1, description="older turns gathered before they are elided at once"
    )

    @property
    def enabled(self) -> bool:
        return self.ceiling_tokens > 0


class ContextSpecError(ValueError):
    pass


def parse_context_tokens(text: str) -> int:
    """`--context-tokens`: a token count (`100000`, `100k`), or `off` (0: the whole history every turn)."""
    value = text.strip().lower()
    if value in ("off", "0"):
        return 0
    match = re.fullmatch(r"(\d+)(k?)", value.replace("_", ""))
    if match is None:
        raise ContextSpecError(
            f"--context-tokens {text!r}: not a token count; give e.g. 100000 or 100k, or off to send the whole history"
        )
    tokens = int(match[1]) * (1000 if match[2] else 1)
    if tokens < MIN_CONTEXT_TOKENS:
        raise ContextSpecError(
            f"--context-tokens {text!r}: too small to hold the prompts and tools; give at least "
            f"{MIN_CONTEXT_TOKENS}, or off"
        )
    return tokens


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def message_tokens(message: Message) -> int:
    match message:
        case SystemMessage() | UserMessage():
            return MESSAGE_OVERHEAD_TOKENS + estimate_tokens(message.text)
        case ToolResultMessage():
            return MESSAGE_OVERHEAD_TOKENS + estimate_tokens(message.content)
        case AssistantMessage():
            calls = sum(
                TOOL_CALL_OVERHEAD_TOKENS + estimate_tokens(call.name + call.id + call.raw_arguments)
                for call in message.tool_calls
            )
            details = estimate_tokens(json.dumps(message.provider_details)) if message.provider_details else 0
            return MESSAGE_OVERHEAD_TOKENS + estimate_tokens(message.text) + calls + details


def tools_tokens(tools: Sequence[ToolSpec]) -> int:
    return sum(estimate_tokens(json.dumps(spec.model_dump(mode="json"))) for spec in tools)


def request_tokens(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> int:
    """The estimated input tokens of one request: its messages and the tool schemas."""
    return tools_tokens(tools) + sum(message_tokens(m) for m in messages)


def _size(text: str) -> str:
    size = len(text.encode())
    return f"{size} B" if size < 1000 else f"{size / 1000:.1f} kB"


def _find_call(history: Sequence[Message], index: int, call_id: str) -> ToolCall | None:
    for message in reversed(history[:index]):
        if isinstance(message, AssistantMessage):
            return next((call for call in message.tool_calls if call.id == call_id), None)
    return None


def _stub_result(result: ToolResultMessage, call: ToolCall | None) -> ToolResultMessage:
    path = (call.arguments or {}).get("path") if call is not None else None
    what = f"{result.tool_name} {path}" if isinstance(path, str) else result.tool_name
    first = result.content.strip().splitlines()[0][:60] if result.content.strip() else ""
    began = f", began {first!r}" if result.tool_name not in FILE_TOOLS else ""
    stub = f"[elided: {what} result, {_size(result.content)}{began}; call {result.tool_name} again to see it]"
    return result.model_copy(update={"content": stub})


def _stub_arguments(call: ToolCall) -> ToolCall:
    if call.arguments is None:
        if len(call.raw_arguments) < STUB_MIN_CHARS:
            return call
        return call.model_copy(
            update={"raw_arguments": f"[elided: {_size(call.raw_arguments)} of arguments]"}
        )
    path = call.arguments.get("path")
    again = f"; read_file {path} shows the file now" if isinstance(path, str) else ""
    arguments = {
        name: f"[elided: {_size(value)}{again}]"
        if isinstance(value, str) and len(value) >= STUB_MIN_CHARS
        else value
        for name, value in call.arguments.items()
    }
    if arguments == call.arguments:
        return call
    return call.model_copy(update={"arguments": arguments, "raw_arguments": json.dumps(arguments)})


def elided_message(history: Sequence[Message], index: int) -> Message:
    """`history[index]` as an elided request shows it (unchanged when it is too short to shorten)."""
    message = history[index]
    match message:
        case ToolResultMessage() if len(message.content) >= STUB_MIN_CHARS:
            return _stub_result(message, _find_call(history, index, message.tool_call_id))
        case AssistantMessage():
            text = message.text
            if len(text) >= STUB_MIN_CHARS:
                text = f"[elided: {_size(text)} of your notes from this turn]"
            calls = [_stub_arguments(call) for call in message.tool_calls]
            return message.model_copy(update={"text": text, "tool_calls": calls})
        case UserMessage() if message.text.startswith(NOTE_PREFIX):
            return message.model_copy(
                update={"text": "[elided: an earlier context note; the latest is below]"}
            )
        case UserMessage() if len(message.text) >= STUB_MIN_CHARS:
            return message.model_copy(update={"text": f"[elided: a {_size(message.text)} harness message]"})
        case _:
            return message


RESULT_LINE_CHARS = 80
QUIET_RESULTS = FILE_TOOLS | {"write_file"}
"""Tools whose successful result only confirms the call: the digest shows the call alone."""


def _call_line(call: ToolCall, result: ToolResultMessage | None) -> str:
    arguments = call.arguments or {}
    path = arguments.get("path")
    if isinstance(path, str):
        sizes = [
            _size(v) for k, v in arguments.items() if k != "path" and isinstance(v, str) and len(v) >= 60
        ]
        line = f"{call.name} {path}" + (f" ({', '.join(sizes)})" if sizes else "")
    else:
        shown = json.dumps(arguments) if arguments else ""
        line = call.name + (f" {shown}" if shown and len(shown) <= RESULT_LINE_CHARS else "")
    if result is None:
        return line
    first = result.content.strip().splitlines()[0][:RESULT_LINE_CHARS] if result.content.strip() else ""
    if result.is_error:
        return f"{line} -> error: {first!r}"
    return line if result.tool_name in QUIET_RESULTS or not first else f"{line} -> {first!r}"


def turns_digest(history: Sequence[Message], start: int, end: int) -> str:
    """`history[start:end]` (whole turns) as the digest shows them: one line a turn."""
    results = {m.tool_call_id: m for m in history[start:end] if isinstance(m, ToolResultMessage)}
    number = sum(1 for m in history[:start] if isinstance(m, AssistantMessage))
    lines: list[str] = []
    for message in history[start:end]:
        if isinstance(message, AssistantMessage):
            number += 1
            calls = [_call_line(call, results.get(call.id)) for call in message.tool_calls]
            lines.append(f"{number}. " + ("; ".join(calls) if calls else "(notes only)"))
    first = number - len(lines) + 1
    span = f"Turn {first}" if len(lines) == 1 else f"Turns {first}-{number}"
    return (
        f"{NOTE_PREFIX} {span}, one line a turn (your notes, file contents and tool output past its "
        "first line are not shown; read_file shows any file as it is now):\n" + "\n".join(lines)
    )


def apply_elisions(
    history: Sequence[Message], elided: Collection[int], folded: Collection[int] = ()
) -> list[Message]:
    """The request for `history`: each run of `folded` messages as one digest message, the messages at
    `elided` as stubs."""
    request: list[Message] = []
    index = 0
    while index < len(history):
        if index in folded:
            end = index
            while end < len(history) and end in folded:
                end += 1
            request.append(UserMessage(text=turns_digest(history, index, end)))
            index = end
            continue
        request.append(elided_message(history, index) if index in elided else history[index])
        index += 1
    return request


def turn_starts(history: Sequence[Message]) -> list[int]:
    """The index of each turn's assistant message; a turn runs to the next one."""
    return [i for i, message in enumerate(history) if isinstance(message, AssistantMessage)]


def _speedup_text(candidate: Candidate) -> str:
    perf = candidate.result.performance
    parts = []
    for label, measured in (
        ("eager", perf.speedup_vs_eager if perf else None),
        ("torch.compile", perf.speedup_vs_compile if perf else None),
    ):
        parts.append(f"{measured.value:.2f}x vs {label}" if measured is not None else f"not timed vs {label}")
    return ", ".join(parts)


def best_so_far(book: CandidateBook) -> str:
    best = book.best
    if best is None:
        return "No verified candidate yet."
    return (
        f"Best verified so far: {best.source} at turn {best.turn}, {_speedup_text(best)} "
        f"(ranked vs {book.baseline}), snapshot {best.content_hash[:12]}."
    )


def context_note(last_elided_turn: int, ceiling_tokens: int, book: CandidateBook) -> str:
    return (
        f"{NOTE_PREFIX} Turns 1-{last_elided_turn} are folded to one line each above (each request stays "
        f"under {ceiling_tokens:,} tokens); read_file shows any file as it is now. {best_so_far(book)}"
    )


class TurnState(Protocol):
    turn: int
    candidates: CandidateBook


class EventSink(Protocol):
    def write(self, event: ContextElidedEvent) -> object: ...


@dataclass(frozen=True)
class Elision:
    """What one turn shortened: message indices, folded into the digest or (older runs) as stubs."""

    indices: tuple[int, ...]
    folded: bool = True


@dataclass
class ContextWindow:
    """Chooses, per turn, which old turns the request folds (see the module docstring)."""

    limits: ContextLimits = field(default_factory=ContextLimits)
    recorded: Mapping[int, Elision] | None = None
    """A replay's recorded elisions by turn: applied as they are, nothing chosen."""
    folded: set[int] = field(default_factory=set, init=False)
    elided: set[int] = field(default_factory=set, init=False)
    """Stubs: only a replay of a run recorded before folding has these."""
    _turns_done: int = field(default=0, init=False)
    """Turns, from the first, that are folded."""

    def next_request(
        self, history: list[Message], state: TurnState, tools: Sequence[ToolSpec], events: EventSink
    ) -> list[Message]:
        """The messages to send this turn. When it folds, it records the event and appends the
        best-so-far note to `history` (the note is part of the conversation from then on)."""
        chosen = (
            self._recorded_at(state.turn, history)
            if self.recorded is not None
            else self._choose(history, tools)
        )
        if chosen is None:
            return self.request(history)
        before = request_tokens(self.request(history), tools)
        (self.folded if chosen.folded else self.elided).update(chosen.indices)
        last_turn = sum(1 for start in turn_starts(history) if start <= max(chosen.indices))
        history.append(
            UserMessage(text=context_note(last_turn, self.limits.ceiling_tokens, state.candidates))
        )
        request = self.request(history)
        events.write(
            ContextElidedEvent(
                turn=state.turn,
                elided=list(chosen.indices),
                folded=chosen.folded,
                tokens_before=before,
                tokens_after=request_tokens(request, tools),
                ceiling_tokens=self.limits.ceiling_tokens,
            )
        )
        return request

    def request(self, history: Sequence[Message]) -> list[Message]:
        return apply_elisions(history, self.elided, self.folded)

    def _choose(self, history: Sequence[Message], tools: Sequence[ToolSpec]) -> Elision | None:
        """Every message of the turns older than the last `keep_last_turns`, once `chunk_turns` of
        them are waiting or the request is over the ceiling."""
        if not self.limits.enabled:
            return None
        starts = turn_starts(history)
        old = len(starts) - self.limits.keep_last_turns
        waiting = old - self._turns_done
        if waiting <= 0 or (
            waiting < self.limits.chunk_turns
            and request_tokens(self.request(history), tools) <= self.limits.ceiling_tokens
        ):
            return None
        first, end = starts[self._turns_done], starts[old]
        self._turns_done = old
        return Elision(tuple(range(first, end)))

    def _recorded_at(self, turn: int, history: Sequence[Message]) -> Elision | None:
        assert self.recorded is not None
        recorded = self.recorded.get(turn)
        if recorded is None:
            return None
        done = self.folded | self.elided
        indices = tuple(i for i in recorded.indices if i < len(history) and i not in done)
        return Elision(indices, recorded.folded) if indices else None


def recorded_elisions(transcript: Transcript) -> dict[int, Elision]:
    """The elisions of a recorded run, by turn (what a replay applies)."""
    return {
        event.turn: Elision(tuple(event.elided), event.folded)
        for event in transcript.of_type(ContextElidedEvent)
    }


def _rebuild(transcript: Transcript) -> list[tuple[list[Message], set[int], set[int]]]:
    """Each request of a recorded run as (history so far, stubbed, folded)."""
    history: list[Message] = []
    elided: set[int] = set()
    folded: set[int] = set()
    requests: list[tuple[list[Message], set[int], set[int]]] = []
    for event in transcript.events:
        if isinstance(event, ContextElidedEvent):
            (folded if event.folded else elided).update(event.elided)
        elif isinstance(event, ModelRequestEvent):
            history.extend(event.messages)
            requests.append((list(history), set(elided), set(folded)))
        elif isinstance(event, ModelResponseEvent):
            history.append(event.response.message)
    return requests


def requests_sent(transcript: Transcript) -> list[list[Message]]:
    """Every request of a recorded run, as it was sent (elisions applied)."""
    return [apply_elisions(history, elided, folded) for history, elided, folded in _rebuild(transcript)]


RequestOutline = list[tuple[str, tuple[str, ...], bool]]


def request_outline(messages: Sequence[Message], elided: Collection[int] = ()) -> RequestOutline:
    """What must match between a request and its replay whatever the tools measured: each message's
    role, its tool-call ids, and whether it was shortened (a digest counts as shortened)."""
    outline: RequestOutline = []
    for i, message in enumerate(messages):
        match message:
            case AssistantMessage():
                ids: tuple[str, ...] = tuple(call.id for call in message.tool_calls)
            case ToolResultMessage():
                ids = (message.tool_call_id,)
            case _:
                ids = ()
        outline.append((message.role, ids, i in elided))
    return outline


def request_outlines(transcript: Transcript) -> list[RequestOutline]:
    """`request_outline` of every request of a recorded run."""
    outlines: list[RequestOutline] = []
    for history, elided, folded in _rebuild(transcript):
        request = apply_elisions(history, elided, folded)
        # A shortened message (a stub or a digest) is a new object; the others are the history's own.
        originals = {id(message) for message in history}
        shortened = {i for i, message in enumerate(request) if id(message) not in originals}
        outlines.append(request_outline(request, shortened))
    return outlines


def first_request_difference(recorded: Transcript, replayed: Transcript) -> int | None:
    """The 1-based number of the first request whose outline differs between the two runs (over the
    requests both made), or None."""
    pairs = zip(request_outlines(recorded), request_outlines(replayed), strict=False)
    return next((n for n, (a, b) in enumerate(pairs, start=1) if a != b), None)
