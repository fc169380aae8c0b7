"""The skills say only what is true of the tools: every tool a SKILL.md names exists, with the
arguments it is given (the convention is in skills/README.md)."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import agent.tools
from agent.paths import skills_dir
from agent.tools import Tool

_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_SPAN = re.compile(r"`([^`\n]+)`")
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")
_KEYWORD = re.compile(r"^(\w+)=")
_CALLED = re.compile(r"\b(?:call|calls|calling)\s+`([^`\n]+)`")
_TOOL_LIST = re.compile(r"((?:`[^`\n]+`(?:,\s*|\s+and\s+|\s+or\s+)?)+)\s+tools?\b")
_BARE_TOOL = re.compile(r"\bthe ([a-z_]+) tool\b")


def all_tools() -> dict[str, set[str]]:
    """Every tool agent.tools defines (also those offered only on some machines or with --shell),
    by name, with its argument names."""
    found: dict[str, set[str]] = {}
    for info in pkgutil.iter_modules(agent.tools.__path__):
        module = importlib.import_module(f"agent.tools.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Tool):
                found[value.name] = set(value.spec.parameters.get("properties", {}))
    return found


def tool_problems(text: str, tools: dict[str, set[str]]) -> list[str]:
    """What a skill's text claims of the tools that is not so: a tool that does not exist, an
    argument the tool does not take, more positional values than it has arguments."""
    prose = _FENCE.sub("", text)
    problems: list[str] = []
    for span in _SPAN.findall(prose):
        words = span.split()
        if not words:
            continue
        name, rest = words[0], words[1:]
        keywords = [m.group(1) for word in rest if (m := _KEYWORD.match(word))]
        if name in tools:
            problems += [
                f"`{span}`: {name} has no argument {key!r}" for key in keywords if key not in tools[name]
            ]
            positional = [word for word in rest if not _KEYWORD.match(word)]
            if len(positional) > len(tools[name]):
                problems.append(f"`{span}`: {name} takes {len(tools[name])} argument(s)")
        elif keywords and _IDENTIFIER.match(name):
            problems.append(f"`{span}`: called with arguments, but there is no tool {name!r}")
    mentioned = [*_CALLED.findall(prose), *_BARE_TOOL.findall(prose)]
    for names in _TOOL_LIST.findall(prose):
        mentioned += _SPAN.findall(names)
    for span in mentioned:
        if span.split()[0] not in tools:
            problems.append(f"{span!r} is named as a tool, but there is no such tool")
    return problems


SKILL_FILES = sorted([*skills_dir().glob("*/SKILL.md"), skills_dir() / "README.md"])


@pytest.mark.parametrize("path", SKILL_FILES, ids=lambda p: p.relative_to(skills_dir()).as_posix())
def test_a_skill_names_only_tools_that_exist_with_their_real_arguments(path: Path) -> None:
    assert tool_problems(path.read_text(encoding="utf-8"), all_tools()) == []


def test_the_check_finds_an_invented_tool_and_an_invented_argument() -> None:
    text = (
        "After a crash call `memcheck`, or run `sanitize check=racecheck verbose=1`.\n"
        "The `nsys` tool traces the run; `nsight_trace kernel=relu` names one kernel.\n"
        "`read_file a.py 1 10 extra` reads a file; the profiler tool helps.\n"
        "```python\nreal_code(not_a_tool=1)\n```\n"
        "`float4` loads and `in0_1 % VEC == 0` are not tools.\n"
    )
    assert tool_problems(text, all_tools()) == [
        "`sanitize check=racecheck verbose=1`: sanitize has no argument 'verbose'",
        "`nsight_trace kernel=relu`: called with arguments, but there is no tool 'nsight_trace'",
        "`read_file a.py 1 10 extra`: read_file takes 3 argument(s)",
        "'memcheck' is named as a tool, but there is no such tool",
        "'profiler' is named as a tool, but there is no such tool",
        "'nsys' is named as a tool, but there is no such tool",
    ]


def test_the_tools_the_skills_rely_on_are_all_known() -> None:
    tools = all_tools()
    assert {"compile", "verify", "profile", "submit", "tune", "start_from_template"} <= set(tools)
    assert tools["ncu"] == {"launches"} and tools["sanitize"] == {"check"}  # offered where installed
