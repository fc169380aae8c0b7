"""What the model is sent each turn: the history, with old turns shortened so a long run stays within
the model's context window.

The loop keeps the whole history (the transcript records all of it); `ContextWindow.next_request`
turns it into the request of one turn. Old file contents and old tool results become one-line stubs
that say what was elided and which tool call brings it back, e.g.
`[elided: read_file kernels/relu.cu result, 3.2 kB; ...; call read_file again to see it]`; the
`content` of an old write_file call keeps its `path` and loses its text. Never elided: the system
prompt, the first user message (the task brief), the last `keep_last_turns` turns, and the context
note added with the latest elision (the best-so-far summary; earlier notes become stubs).

The chunk rule, which keeps provider prompt caching effective: a request is the previous request
plus new messages, byte for byte, except on a turn that elides. Such a turn elides every turn older
than the last `keep_last_turns` at once (whole turns, oldest first), and only when `chunk_turns` of
them have gathered or the request would pass `ceiling_tokens`. A stub never changes and is never
expanded again, so everything before the first newly elided message (system prompt, brief, older
stubs) stays a cached prefix, and the `chunk_turns - 1` requests after an elision extend it unchanged.
When the last `keep_last_turns` turns alone pass the ceiling, the request goes over it (they are
never elided); the event records its size. The best-so-far note is appended after the newest
messages when an elision happens (never rewritten in place, which would break the cached prefix),
so the model keeps its bearings.

Each elision is recorded as a `ContextElidedEvent` (turn, message indices); `requests_sent` rebuilds
every request from a transcript, and a replay applies the recorded elisions instead of choosing its
own, so it sends the same requests.

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
DEFAULT_KEEP_TURNS = 6
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
    keep_last_turns: int = Field(default=DEFAULT_KEEP_TURNS, ge=1, description="turns never elided")
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


def apply_elisions(history: Sequence[Message], elided: Collection[int]) -> list[Message]:
    """The request for `history` with the messages at `elided` shown as stubs."""
    return [elided_message(history, i) if i in elided else m for i, m in enumerate(history)]


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
        f"{NOTE_PREFIX} Turns 1-{last_elided_turn} show one-line stubs (each request stays under "
        f"{ceiling_tokens:,} tokens); read_file shows any file as it is now. {best_so_far(book)}"
    )


class TurnState(Protocol):
    turn: int
    candidates: CandidateBook


class EventSink(Protocol):
    def write(self, event: ContextElidedEvent) -> object: ...


@dataclass
class ContextWindow:
    """Chooses, per turn, which old messages the request shows as stubs (see the module docstring)."""

    limits: ContextLimits = field(default_factory=ContextLimits)
    recorded: Mapping[int, Sequence[int]] | None = None
    """A replay's recorded elisions by turn: applied as they are, nothing chosen."""
    elided: set[int] = field(default_factory=set, init=False)
    _stubs: dict[int, Message] = field(default_factory=dict, init=False, repr=False)
    _tokens: list[int] = field(default_factory=list, init=False, repr=False)
    """Estimated tokens of each message as the request shows it."""
    _tools_tokens: int | None = field(default=None, init=False)
    _turns_done: int = field(default=0, init=False)
    """Turns, from the first, whose messages are elided (or were too short to shorten)."""

    def next_request(
        self, history: list[Message], state: TurnState, tools: Sequence[ToolSpec], events: EventSink
    ) -> list[Message]:
        """The messages to send this turn. When it elides, it records the event and appends the
        best-so-far note to `history` (the note is part of the conversation from then on)."""
        self._count(history, tools)
        chosen = (
            self._recorded_at(state.turn, history) if self.recorded is not None else self._choose(history)
        )
        if chosen:
            before = self.tokens()
            for index in chosen:
                self._stubs[index] = elided_message(history, index)
                self._tokens[index] = message_tokens(self._stubs[index])
            self.elided.update(chosen)
            last_turn = sum(1 for start in turn_starts(history) if start <= max(self.elided))
            history.append(
                UserMessage(text=context_note(last_turn, self.limits.ceiling_tokens, state.candidates))
            )
            self._count(history, tools)
            events.write(
                ContextElidedEvent(
                    turn=state.turn,
                    elided=sorted(chosen),
                    tokens_before=before,
                    tokens_after=self.tokens(),
                    ceiling_tokens=self.limits.ceiling_tokens,
                )
            )
        return [self._stubs.get(i, message) for i, message in enumerate(history)]

    def tokens(self) -> int:
        """The estimated tokens of the request as it stands."""
        return (self._tools_tokens or 0) + sum(self._tokens)

    def _count(self, history: Sequence[Message], tools: Sequence[ToolSpec]) -> None:
        if self._tools_tokens is None:
            self._tools_tokens = tools_tokens(tools)
        for message in history[len(self._tokens) :]:
            self._tokens.append(message_tokens(message))

    def _choose(self, history: Sequence[Message]) -> list[int]:
        """Every message of the turns older than the last `keep_last_turns`, once `chunk_turns` of
        them are waiting or the request is over the ceiling."""
        if not self.limits.enabled:
            return []
        starts = turn_starts(history)
        old = len(starts) - self.limits.keep_last_turns
        waiting = old - self._turns_done
        if waiting <= 0 or (
            waiting < self.limits.chunk_turns and self.tokens() <= self.limits.ceiling_tokens
        ):
            return []
        first, end = starts[self._turns_done], starts[old]
        self._turns_done = old
        return [
            i for i in range(first, end) if i not in self.elided and elided_message(history, i) != history[i]
        ]

    def _recorded_at(self, turn: int, history: Sequence[Message]) -> list[int]:
        assert self.recorded is not None
        return [i for i in self.recorded.get(turn, ()) if i < len(history) and i not in self.elided]


def recorded_elisions(transcript: Transcript) -> dict[int, list[int]]:
    """The elisions of a recorded run, by turn (what a replay applies)."""
    return {event.turn: list(event.elided) for event in transcript.of_type(ContextElidedEvent)}


def requests_sent(transcript: Transcript) -> list[list[Message]]:
    """Every request of a recorded run, as it was sent (elisions applied)."""
    history: list[Message] = []
    elided: set[int] = set()
    requests: list[list[Message]] = []
    for event in transcript.events:
        if isinstance(event, ContextElidedEvent):
            elided.update(event.elided)
        elif isinstance(event, ModelRequestEvent):
            history.extend(event.messages)
            requests.append(apply_elisions(history, elided))
        elif isinstance(event, ModelResponseEvent):
            history.append(event.response.message)
    return requests


RequestOutline = list[tuple[str, tuple[str, ...], bool]]


def request_outline(messages: Sequence[Message], elided: Collection[int] = ()) -> RequestOutline:
    """What must match between a request and its replay whatever the tools measured: each message's
    role, its tool-call ids, and whether it was elided."""
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
    history: list[Message] = []
    elided: set[int] = set()
    outlines: list[RequestOutline] = []
    for event in transcript.events:
        if isinstance(event, ContextElidedEvent):
            elided.update(event.elided)
        elif isinstance(event, ModelRequestEvent):
            history.extend(event.messages)
            outlines.append(request_outline(history, elided))
        elif isinstance(event, ModelResponseEvent):
            history.append(event.response.message)
    return outlines


def first_request_difference(recorded: Transcript, replayed: Transcript) -> int | None:
    """The 1-based number of the first request whose outline differs between the two runs (over the
    requests both made), or None."""
    pairs = zip(request_outlines(recorded), request_outlines(replayed), strict=False)
    return next((n for n, (a, b) in enumerate(pairs, start=1) if a != b), None)
