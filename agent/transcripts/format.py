"""Transcripts: one JSONL file per solve run, written as it happens (agent/transcripts/README.md).

Line 1 is the header (format, version, resolved config, tool schemas, prompt hashes, versions,
GPU, task); every further line is one typed event. The writer appends and flushes each line, so a
killed run keeps everything up to the kill; the reader validates every line with pydantic and
reads a file cut off mid-line up to the cut. The writer stores each long text once and caps what
one event holds (agent/transcripts/compact.py); the reader expands that back.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import IO, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agent.budget import BudgetLimits, BudgetUsage
from agent.messages import Message, ModelResponse, ToolCall, ToolSpec
from agent.stops import RunStatus
from agent.tasks import Task, TaskRef
from agent.transcripts.compact import COMPACTION, Compactor
from agent.verdicts import Verdict

FORMAT: Literal["kernel-agent-transcript"] = "kernel-agent-transcript"
VERSION = 1


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskIdentity(TaskRef):
    """The header's task: its TaskRef and its input spec."""

    model_config = ConfigDict(extra="forbid")

    inputs: str = Field(default="", description="the input spec, e.g. 'float32[4096, 16384]'")

    @classmethod
    def of(cls, task: Task) -> TaskIdentity:
        return cls(**TaskRef.of(task).model_dump(), inputs=task.spec.describe() if task.spec else "")


class Header(_Record):
    type: Literal["header"] = "header"
    format: Literal["kernel-agent-transcript"] = FORMAT
    version: int = VERSION
    run_id: str
    started_at: str = Field(description="ISO 8601, UTC")
    task: TaskIdentity
    model: str = Field(description="the --model spec, or the injected model's name")
    config: dict[str, Any] = Field(description="the resolved solve configuration")
    tools: list[ToolSpec]
    tool_hashes: dict[str, str] = Field(description="tool name -> sha256 of its schema")
    prompt_hashes: dict[str, str] = Field(description="template files and rendered prompts -> sha256")
    versions: dict[str, str] = Field(description="kernel-agent, python, torch, CUDA, SDKs")
    gpu: str | None = Field(description="the GPU the referee judges on; None when there is none")
    sandbox: str = Field(description="the sandbox's isolation line")
    compaction: str | None = Field(
        default=COMPACTION,
        description="'v1': long texts stored once and events capped (compact.py); None (a file written "
        "before compaction, read without the key): every event whole",
    )


class _Event(_Record):
    seq: int = 0
    elapsed_s: float = Field(default=0.0, description="seconds since the run started")
    turn: int = 0


class ModelRequestEvent(_Event):
    """Written before each model call. `messages` are the ones added since the previous call (tool
    results, user messages; the assistant turns are in the model_response events)."""

    type: Literal["model_request"] = "model_request"
    messages: list[Message] = Field(description="messages appended since the previous request")
    message_count: int = Field(description="length of the whole conversation sent")
    max_output_tokens: int | None = None


class ModelResponseEvent(_Event):
    """The call's neutral assistant turn, usage, cost and the raw provider request and response."""

    type: Literal["model_response"] = "model_response"
    response: ModelResponse


class ToolCallEvent(_Event):
    type: Literal["tool_call"] = "tool_call"
    call: ToolCall


class ToolResultEvent(_Event):
    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    tool_name: str
    content: str = Field(description="what the tool returned, before the budget line is added")
    is_error: bool = False
    duration_s: float = 0.0
    data: dict[str, Any] | None = Field(default=None, description="structured outcome, e.g. the compile")


class EvaluationEvent(_Event):
    """A referee verdict on the workspace (verify, profile or submit)."""

    type: Literal["evaluation"] = "evaluation"
    source: str = Field(description="verify | profile | submit")
    content_hash: str
    verdict: Verdict
    reason: str
    speedup: float | None = Field(default=None, description="vs the primary baseline")
    baseline: str
    gpu_s: float
    became_best: bool
    result: dict[str, Any] = Field(description="the referee's EvalResult")
    region: int | None = Field(
        default=None, description="the region sub-workspace judged (open_region); None: the whole model"
    )


class ContextElidedEvent(_Event):
    """Older messages the requests shorten from this turn on (agent/run/context.py): folded into the
    digest of old turns, one line a turn, or (transcripts written before folding) one-line stubs each.
    The indices count the whole conversation (`Transcript.conversation()`)."""

    type: Literal["context_elided"] = "context_elided"
    elided: list[int] = Field(description="indices of the messages elided at this turn")
    folded: bool = Field(
        default=False, description="folded into the digest of old turns; false: each shown as a stub"
    )
    tokens_before: int = Field(description="estimated input tokens of the request before eliding")
    tokens_after: int = Field(description="estimated input tokens after eliding, the added note included")
    ceiling_tokens: int


class BudgetEvent(_Event):
    type: Literal["budget"] = "budget"
    usage: BudgetUsage
    limits: BudgetLimits


class CandidateRef(_Record):
    content_hash: str
    turn: int
    source: str
    verdict: Verdict
    speedup: float | None = None


class RunEndEvent(_Event):
    type: Literal["run_end"] = "run_end"
    status: RunStatus
    message: str = ""
    best: CandidateRef | None = None
    submitted: CandidateRef | None = None
    usage: BudgetUsage
    traceback: str | None = None


Event = Annotated[
    ModelRequestEvent
    | ModelResponseEvent
    | ToolCallEvent
    | ToolResultEvent
    | EvaluationEvent
    | BudgetEvent
    | ContextElidedEvent
    | RunEndEvent,
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def tool_hash(spec: ToolSpec) -> str:
    return sha256_text(json.dumps(spec.model_dump(mode="json"), sort_keys=True))


class TranscriptWriter:
    """Appends the header, then one line per event; every line is flushed as it is written."""

    def __init__(self, path: Path, header: Header, *, clock: Any = time.monotonic) -> None:
        self.path = Path(path)
        self._clock = clock
        self._started = clock()
        self._seq = 0
        self._compactor = Compactor()
        self._file: IO[str] | None = self.path.open("a", encoding="utf-8")
        self._write_line(header.model_copy(update={"compaction": COMPACTION}).model_dump_json())

    def write(self, event: _Event) -> _Event:
        """Stamp `event` with its sequence number and time, append it in its compact form, return the
        stamped copy (whole)."""
        self._seq += 1
        stamped = event.model_copy(
            update={"seq": self._seq, "elapsed_s": round(self._clock() - self._started, 3)}
        )
        compact = self._compactor.event(stamped.model_dump(mode="json"))
        self._write_line(json.dumps(compact, ensure_ascii=False, separators=(",", ":")))
        return stamped

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _write_line(self, line: str) -> None:
        if self._file is None:
            raise ValueError(f"{self.path}: transcript already closed")
        self._file.write(line + "\n")
        self._file.flush()

    def __enter__(self) -> TranscriptWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TranscriptError(ValueError):
    """A transcript that cannot be read; the message names the file and line."""


class Transcript(BaseModel):
    path: Path
    header: Header
    events: list[Event]
    truncated: bool = Field(description="the last line was cut off mid-write (a killed run)")

    @property
    def run_end(self) -> RunEndEvent | None:
        return next((e for e in reversed(self.events) if isinstance(e, RunEndEvent)), None)

    @property
    def ended(self) -> bool:
        """Whether the run finished (a killed run has no run_end event)."""
        return self.run_end is not None

    def of_type(self, kind: type[_Event]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def conversation(self) -> list[Message]:
        """The whole conversation: each request's new messages, then the assistant turn it got back."""
        messages: list[Message] = []
        for event in self.events:
            if isinstance(event, ModelRequestEvent):
                messages.extend(event.messages)
            elif isinstance(event, ModelResponseEvent):
                messages.append(event.response.message)
        return messages
