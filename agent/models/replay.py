"""A `Model` that plays back the assistant turns of a recorded transcript, in order.

Each call returns the next recorded turn: its neutral message, with the usage and cost as recorded
so budgets play out as they did (no provider is called). A call beyond the recording raises `ReplayExhausted`, a ModelError, so the loop ends with
status model_error and says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agent.messages import AssistantMessage, Message, ModelResponse, ToolSpec
from agent.models.base import ModelError


class ReplayExhausted(ModelError):
    pass


class ReplayModel:
    def __init__(self, responses: Sequence[ModelResponse], *, name: str = "replay") -> None:
        self.name = name
        self.responses = list(responses)
        self.calls = 0

    @classmethod
    def from_transcript(cls, path: Path) -> ReplayModel:
        from agent.transcripts.format import ModelResponseEvent
        from agent.transcripts.reader import read_transcript

        transcript = read_transcript(path)
        responses = [event.response for event in transcript.of_type(ModelResponseEvent)]
        return cls(responses, name=f"replay:{transcript.header.model}")

    @property
    def turns(self) -> list[AssistantMessage]:
        return [response.message for response in self.responses]

    def query(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        max_output_tokens: int | None = None,
    ) -> ModelResponse:
        if self.calls >= len(self.responses):
            raise ReplayExhausted(
                f"{self.name}: asked for turn {self.calls + 1} but the recording has {len(self.responses)}",
                provider="replay",
                model=self.name,
            )
        recorded = self.responses[self.calls]
        self.calls += 1
        return recorded.model_copy(
            update={"latency_s": 0.0, "attempts": 1, "raw_request": {}, "raw_response": {}}
        )
