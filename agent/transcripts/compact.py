"""How a transcript stays about as large as what happened: each long text is stored once, a request's
earlier messages are not stored again, and no event holds more than a bounded amount of text.

The writer turns each event's JSON into its compact form (`Compactor`), the reader turns it back
(`Expander`); both keep state over the file, so a file is read from its start. A header with
`"compaction": "v1"` says the file uses these forms (agent/transcripts/README.md describes them):

- `{"$text": SHA256}`: a text of at least LONG_TEXT characters that appeared earlier in the file;
  `{"$text": SHA256, "tail": TEXT}`: that text followed by TEXT (a tool result and the budget line).
- `{"$truncated": HEAD, "chars": N, "sha256": SHA256}`: a text of N characters cut to HEAD; it reads
  back as HEAD and a line saying how much was cut.
- `{"$previous": K, "then": [...]}` for a list in a model_response's `raw_request`: the first K items
  of the previous raw_request's list under the same key, then these.
- `"arguments": "$from raw_arguments"` in a tool call: the arguments are `raw_arguments` parsed.
- `{"$literal": VALUE}`: VALUE as it is (a dict of the conversation that looks like one of these).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from agent.messages import ToolCall

COMPACTION = "v1"
LONG_TEXT = 1024
"""Texts this long or longer are stored once; a later copy is a `$text` reference."""
EVENT_TEXT_CAP = 4 * 1024 * 1024
"""Characters of long text one event keeps in full; texts past it are truncated (size and hash kept)."""
RAW_TEXT_CAP = 64 * 1024
"""Longest text kept in a raw provider request or response that the neutral events do not already
hold: the raw bodies are for diagnosis; the neutral message is what replay and export read."""
MIN_HEAD = 1024
"""A truncated text keeps at least this much of its start."""
ARGUMENTS_FROM_RAW = "$from raw_arguments"
MARKERS = frozenset({"$text", "$truncated", "$previous", "$literal"})

Json = Any


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def truncation_note(head: str, chars: int, sha256: str) -> str:
    return f"{head}\n[... cut in the transcript: {chars} characters in all, sha256 {sha256}]"


class Compactor:
    """Turns events (their JSON, as `model_dump(mode="json")` gives it) into their compact form."""

    def __init__(self) -> None:
        self._stored: set[str] = set()
        self._previous_request: dict[str, Json] = {}
        self._allowance = EVENT_TEXT_CAP

    def event(self, line: dict[str, Json]) -> dict[str, Json]:
        self._allowance = EVENT_TEXT_CAP
        line = _derive_arguments(line)
        if line.get("type") != "model_response" or not isinstance(line.get("response"), dict):
            return self._walk(line, EVENT_TEXT_CAP)
        response = line["response"]
        raw_request = response.get("raw_request") or {}
        neutral = {k: v for k, v in response.items() if k not in ("raw_request", "raw_response")}
        compacted = self._walk({k: v for k, v in line.items() if k != "response"}, EVENT_TEXT_CAP)
        compacted["response"] = {
            **self._walk(neutral, EVENT_TEXT_CAP),
            "raw_request": self._request(raw_request),
            "raw_response": self._walk(response.get("raw_response") or {}, RAW_TEXT_CAP),
        }
        self._previous_request = raw_request
        return compacted

    def _request(self, request: dict[str, Json]) -> dict[str, Json]:
        compacted: dict[str, Json] = {}
        for key, value in request.items():
            before = self._previous_request.get(key)
            shared = _shared_prefix(before, value) if isinstance(value, list) else 0
            if shared:
                then = [self._walk(item, RAW_TEXT_CAP) for item in value[shared:]]
                compacted[key] = {"$previous": shared, "then": then}
            else:
                compacted[key] = self._walk(value, RAW_TEXT_CAP)
        return compacted

    def _walk(self, value: Json, cap: int) -> Json:
        if isinstance(value, str):
            return self._text(value, cap)
        if isinstance(value, list):
            return [self._walk(item, cap) for item in value]
        if isinstance(value, dict):
            if MARKERS.intersection(value):
                return {"$literal": value}
            return {key: self._walk(item, cap) for key, item in value.items()}
        return value

    def _text(self, text: str, cap: int) -> Json:
        if len(text) < LONG_TEXT:
            return text
        digest = text_hash(text)
        if digest in self._stored:
            return {"$text": digest}
        cut = text.rfind("\n\n")
        if cut >= LONG_TEXT:
            head = text_hash(text[:cut])
            if head in self._stored:
                return {"$text": head, "tail": text[cut:]}
        self._stored.add(digest)
        limit = max(MIN_HEAD, min(cap, self._allowance))
        if len(text) > limit:
            self._allowance -= limit
            return {"$truncated": text[:limit], "chars": len(text), "sha256": digest}
        self._allowance -= len(text)
        return text


class CompactionError(ValueError):
    """A compact form that does not resolve (a reference to a text never stored)."""


class Expander:
    """Turns compact events back into their full JSON, in file order."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._previous_request: dict[str, Json] = {}

    def event(self, line: dict[str, Json]) -> dict[str, Json]:
        response = line.get("response")
        if line.get("type") == "model_response" and isinstance(response, dict):
            raw_request = response.get("raw_request")
            expanded = self._walk({k: v for k, v in line.items() if k != "response"})
            neutral = {k: v for k, v in response.items() if k not in ("raw_request", "raw_response")}
            request = self._request(raw_request if isinstance(raw_request, dict) else {})
            expanded["response"] = {
                **self._walk(neutral),
                "raw_request": request,
                "raw_response": self._walk(response.get("raw_response", {})),
            }
            self._previous_request = request
        else:
            expanded = self._walk(line)
        return _restore_arguments(expanded)

    def _request(self, request: dict[str, Json]) -> dict[str, Json]:
        expanded: dict[str, Json] = {}
        for key, value in request.items():
            if isinstance(value, dict) and set(value) == {"$previous", "then"}:
                before = self._previous_request.get(key)
                shared = value["$previous"]
                if not isinstance(before, list) or not isinstance(shared, int) or shared > len(before):
                    raise CompactionError(
                        f"raw_request.{key} refers to more of the previous request than it had"
                    )
                expanded[key] = before[:shared] + self._walk(value["then"])
            else:
                expanded[key] = self._walk(value)
        return expanded

    def _walk(self, value: Json) -> Json:
        if isinstance(value, str):
            if len(value) >= LONG_TEXT:
                self._texts.setdefault(text_hash(value), value)
            return value
        if isinstance(value, list):
            return [self._walk(item) for item in value]
        if not isinstance(value, dict):
            return value
        if set(value) == {"$literal"}:
            return value["$literal"]
        if "$text" in value and set(value) <= {"$text", "tail"}:
            text = self._texts.get(value["$text"])
            if text is None:
                raise CompactionError(f"a reference to a text not stored earlier ({value['$text'][:16]})")
            return text + str(value.get("tail", ""))
        if set(value) == {"$truncated", "chars", "sha256"}:
            text = truncation_note(str(value["$truncated"]), int(value["chars"]), str(value["sha256"]))
            self._texts.setdefault(str(value["sha256"]), text)
            return text
        return {key: self._walk(item) for key, item in value.items()}


def _shared_prefix(before: Json, after: list[Json]) -> int:
    if not isinstance(before, list):
        return 0
    shared = 0
    for old, new in zip(before, after, strict=False):
        if old != new:
            break
        shared += 1
    return shared


def _tool_call_paths(line: dict[str, Json]) -> list[dict[str, Json]]:
    """The tool calls of an event (JSON dicts): a tool_call's `call`, a model_response's message's."""
    if line.get("type") == "tool_call" and isinstance(line.get("call"), dict):
        return [line["call"]]
    if line.get("type") == "model_response":
        message = (line.get("response") or {}).get("message") or {}
        return [call for call in message.get("tool_calls") or [] if isinstance(call, dict)]
    return []


def _derive_arguments(line: dict[str, Json]) -> dict[str, Json]:
    """The event with each tool call's `arguments` replaced by ARGUMENTS_FROM_RAW where parsing
    `raw_arguments` gives them back exactly (they are then stored once, as the model wrote them)."""
    calls = _tool_call_paths(line)
    if not any(_derivable(call) for call in calls):
        return line
    line = json.loads(json.dumps(line))  # a copy: the caller's dicts stay as they are
    for call in _tool_call_paths(line):
        if _derivable(call):
            call["arguments"] = ARGUMENTS_FROM_RAW
    return line


def _derivable(call: dict[str, Json]) -> bool:
    raw, arguments = call.get("raw_arguments"), call.get("arguments")
    if not isinstance(raw, str) or not isinstance(arguments, dict) or call.get("parse_error") is not None:
        return False
    parsed = ToolCall.from_raw(id="", name="", raw_arguments=raw)
    return parsed.parse_error is None and parsed.arguments == arguments


def _restore_arguments(line: dict[str, Json]) -> dict[str, Json]:
    for call in _tool_call_paths(line):
        if call.get("arguments") == ARGUMENTS_FROM_RAW:
            parsed = ToolCall.from_raw(id="", name="", raw_arguments=str(call.get("raw_arguments", "")))
            call["arguments"] = parsed.arguments
            if parsed.parse_error is not None:  # raw_arguments was cut in the transcript
                call["parse_error"] = parsed.parse_error
    return line
