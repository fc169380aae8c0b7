"""A scripted HTTP server on 127.0.0.1 that answers the real SDKs in Anthropic Messages and OpenAI Chat
Completions wire format, and records every request it gets."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    drop_connection: bool = False
    """Close the socket without sending any response."""
    raw_body: bytes | None = None
    """Sent as the body instead of `body`'s JSON (an empty or cut-off answer)."""
    trickle_s: float = 0.0
    """Send the body one byte at a time, this many seconds apart (an answer that never quite ends)."""


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    received_at: float


ScriptedReply = Reply | Callable[[RecordedRequest], Reply]


class WireServer:
    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.unexpected: list[RecordedRequest] = []
        self._replies: list[ScriptedReply] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.01,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def unused_replies(self) -> int:
        return len(self._replies)

    def script(self, *replies: ScriptedReply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def start(self) -> WireServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next_reply(self, request: RecordedRequest) -> Reply | None:
        with self._lock:
            self.requests.append(request)
            if not self._replies:
                self.unexpected.append(request)
                return None
            reply = self._replies.pop(0)
        return reply(request) if callable(reply) else reply


def _handler_for(server: WireServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            raw = self.rfile.read(length) if length else b""
            request = RecordedRequest(
                method="POST",
                path=self.path,
                headers={key.lower(): value for key, value in self.headers.items()},
                body=json.loads(raw) if raw else {},
                received_at=time.monotonic(),
            )
            reply = server._next_reply(request)
            if reply is None:
                reply = Reply(status=418, body={"error": {"message": "wire server: no scripted reply left"}})
            if reply.delay_s:
                time.sleep(reply.delay_s)
            if reply.drop_connection:
                self.close_connection = True
                return
            payload = (
                reply.raw_body
                if reply.raw_body is not None
                else json.dumps(reply.body if reply.body is not None else {}).encode()
            )
            try:
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                if reply.trickle_s:
                    for byte in payload:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(reply.trickle_s)
                else:
                    self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


# Anthropic Messages wire format


def anthropic_message(
    content: list[dict[str, Any]],
    *,
    stop_reason: str = "end_turn",
    usage: dict[str, Any] | None = None,
    model: str = "claude-sonnet-5-5",
) -> dict[str, Any]:
    return {
        "id": "msg_test_01",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 10, "output_tokens": 5},
    }


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


# OpenAI Chat Completions wire format


def openai_completion(
    *,
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str = "stop",
    usage: dict[str, Any] | None = None,
    model: str = "gpt-4o-2024-08-06",
    extra_message_fields: dict[str, Any] | None = None,
    omit_usage: bool = False,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content, **(extra_message_fields or {})}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
    }
    if not omit_usage:
        body["usage"] = usage or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    return body


def openai_tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def openai_error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}
