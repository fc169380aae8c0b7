"""Tools: typed functions whose JSON schema comes from their type hints and Google-style docstring.

    @tool
    def read_file(ctx: ToolContext, path: str, start_line: int = 1) -> str:
        '''Read a text file of the workspace.

        Args:
            path: File path relative to the workspace root.
            start_line: First line to show (1-based).
        '''

The first parameter is the run's context and is not shown to the model. A tool returns the text
the model reads, or raises `ToolError` with text the model reads as an error result. Anything else
it raises ends the run with a recorded status.
"""

from __future__ import annotations

import inspect
import re
import time
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from agent.messages import ToolCall, ToolSpec

MAX_RESULT_CHARS = 12_000


class ToolError(Exception):
    """A failure the model should see and can act on (the message is the tool result); `data` is kept
    in the transcript beside it."""

    def __init__(self, message: str, *, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.data = data


@dataclass(frozen=True)
class ToolOutput:
    content: str
    is_error: bool = False
    data: dict[str, Any] | None = None
    duration_s: float = 0.0

    def as_text(self) -> str:
        """The result as one text, for a channel that carries no error flag (an MCP tool result):
        an error's text starts with "ERROR: "."""
        return f"ERROR: {self.content}" if self.is_error else self.content


@dataclass(frozen=True)
class ToolReply:
    """What a tool returns when the transcript should keep structured data beside the text."""

    text: str
    data: dict[str, Any] | None = None


class Tool:
    def __init__(self, fn: Callable[..., str | ToolReply], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        summary, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
        if not summary:
            raise TypeError(f"tool {self.name}: needs a docstring (the model reads it)")
        self.description = summary
        self.arguments = _arguments_model(fn, self.name, arg_docs)
        self.spec = ToolSpec(
            name=self.name,
            description=summary,
            parameters=strip_titles(self.arguments.model_json_schema()),
        )

    def __call__(self, ctx: Any, arguments: dict[str, Any]) -> str | ToolReply:
        """Validate `arguments` (ValidationError when they do not fit) and run the tool."""
        parsed = self.arguments.model_validate(arguments)
        return self.fn(ctx, **{name: getattr(parsed, name) for name in type(parsed).model_fields})

    def __repr__(self) -> str:
        return f"Tool({self.name})"


def tool(fn: Callable[..., str | ToolReply] | None = None, *, name: str | None = None) -> Any:
    """Make a Tool of a function (`@tool` or `@tool(name="...")`)."""
    if fn is None:
        return lambda f: Tool(f, name)
    return Tool(fn, name)


class Toolbox:
    """The tools offered to the model, by name; `call` turns every model mistake into an error result."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self.tools: dict[str, Tool] = {}
        for t in tools:
            if t.name in self.tools:
                raise ValueError(f"two tools are named {t.name!r}")
            self.tools[t.name] = t

    @property
    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self.tools.values()]

    def call(self, ctx: Any, call: ToolCall) -> ToolOutput:
        started = time.monotonic()
        try:
            reply = self._run(ctx, call)
        except ToolError as exc:
            return ToolOutput(
                clip(str(exc)), is_error=True, data=exc.data, duration_s=time.monotonic() - started
            )
        if isinstance(reply, str):
            reply = ToolReply(reply)
        return ToolOutput(clip(reply.text), data=reply.data, duration_s=time.monotonic() - started)

    def _run(self, ctx: Any, call: ToolCall) -> str | ToolReply:
        tool_ = self.tools.get(call.name)
        if tool_ is None:
            raise ToolError(f"unknown tool {call.name!r}; the tools are: {', '.join(self.tools)}")
        if call.parse_error is not None or call.arguments is None:
            raise ToolError(
                f"{call.name}: {call.parse_error or 'no arguments'}. Send the arguments as one JSON object: "
                f"{describe_arguments(tool_)}"
            )
        try:
            return tool_(ctx, call.arguments)
        except ValidationError as exc:
            raise ToolError(
                f"{call.name}: invalid arguments: {describe_validation(exc)}. Expected: {describe_arguments(tool_)}"
            ) from None


def clip(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    """Keep the head and the tail of a long result (errors tend to be at either end)."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[-limit // 3 :]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters cut ...]\n{tail}"


def describe_arguments(tool_: Tool) -> str:
    parts = []
    for name, info in tool_.arguments.model_fields.items():
        kind = _type_name(info.annotation)
        parts.append(f"{name} ({kind}{', required' if info.is_required() else ''})")
    return "{" + ", ".join(parts) + "}" if parts else "{} (no arguments)"


def describe_validation(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        message = "unknown argument" if error["type"] == "extra_forbidden" else error["msg"]
        problems.append(f"{where}: {message}")
    return "; ".join(problems)


def _type_name(annotation: Any) -> str:
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


_ARGS_HEADER = re.compile(r"^(Args|Arguments|Parameters):\s*$")
_OTHER_SECTION = re.compile(r"^(Returns|Raises|Yields|Examples?|Notes?):\s*$")
_ARG_LINE = re.compile(r"^(\w+)(?:\s*\([^)]*\))?:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {argument: description}) of a Google-style docstring."""
    description: list[str] = []
    args: dict[str, str] = {}
    section = "description"
    current: str | None = None
    arg_indent: int | None = None
    for line in doc.splitlines():
        if _ARGS_HEADER.match(line) or _OTHER_SECTION.match(line):
            section = "args" if _ARGS_HEADER.match(line) else "other"
            continue
        if section == "description":
            description.append(line)
            continue
        stripped = line.strip()
        if section != "args" or not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        match = _ARG_LINE.match(stripped)
        if match and (arg_indent is None or indent <= arg_indent):
            arg_indent, current = indent, str(match[1])
            args[current] = match[2].strip()
        elif current is not None:
            args[current] = f"{args[current]} {stripped}"
    # Wrapped lines become one line; blank lines stay paragraph breaks.
    text = re.sub(r"(?<=\S)\n(?=\S)", " ", "\n".join(line.strip() for line in description).strip())
    return text, args


def _arguments_model(fn: Callable[..., Any], name: str, docs: dict[str, str]) -> type[BaseModel]:
    hints = typing.get_type_hints(fn, include_extras=True)
    params = list(inspect.signature(fn).parameters.values())[1:]  # the first one is the context
    fields: dict[str, Any] = {}
    for param in params:
        if param.name not in hints:
            raise TypeError(f"tool {name}: argument {param.name!r} needs a type hint")
        if param.name not in docs:
            raise TypeError(f"tool {name}: argument {param.name!r} needs a line under Args: in the docstring")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hints[param.name], Field(default, description=docs[param.name]))
    model_name = "".join(part.title() for part in name.split("_")) + "Arguments"
    return create_model(model_name, __config__=ConfigDict(extra="forbid"), **fields)


def strip_titles(schema: Any) -> Any:
    """Drop pydantic's generated `title`s (noise for the model), keeping properties named title."""
    if isinstance(schema, dict):
        return {
            key: (
                {k: strip_titles(v) for k, v in value.items()} if key == "properties" else strip_titles(value)
            )
            for key, value in schema.items()
            if key != "title"
        }
    if isinstance(schema, list):
        return [strip_titles(item) for item in schema]
    return schema
