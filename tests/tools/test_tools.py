"""Tools: schemas from hints and docstrings, model mistakes as error results, workspace file rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import pytest

from agent.messages import ToolCall
from agent.tools import Toolbox, ToolContext, ToolError, default_tools, tool
from agent.tools.files import edit_file, list_files, read_file, write_file
from agent.tools.skills import list_skills, read_skill
from agent.workspace import HARNESS_FILES

MakeContext = Callable[..., ToolContext]


def call(name: str, arguments: dict | str) -> ToolCall:
    raw = arguments if isinstance(arguments, str) else __import__("json").dumps(arguments)
    return ToolCall.from_raw(id="call_1", name=name, raw_arguments=raw)


@tool
def resize(ctx: object, width: int, mode: Literal["fit", "fill"] = "fit", label: str | None = None) -> str:
    """Resize the picture.

    Long explanation that wraps
    onto a second line.

    Args:
        width: New width in pixels,
            continued on an indented line.
        mode: How to fit.
        label: Optional caption.

    Returns:
        Nothing useful.
    """
    return f"{width} {mode} {label}"


def test_schema_comes_from_hints_and_docstring() -> None:
    assert resize.name == "resize"
    assert resize.spec.description == "Resize the picture.\n\nLong explanation that wraps onto a second line."
    params = resize.spec.parameters
    assert params["required"] == ["width"]
    assert params["additionalProperties"] is False
    assert params["properties"]["width"] == {
        "type": "integer",
        "description": "New width in pixels, continued on an indented line.",
    }
    assert params["properties"]["mode"]["enum"] == ["fit", "fill"]
    assert params["properties"]["mode"]["default"] == "fit"
    assert "title" not in str(params)


def test_a_tool_needs_a_docstring_and_documented_typed_arguments() -> None:
    def undocumented(ctx: object, x: int) -> str:
        return ""

    def missing_arg_doc(ctx: object, x: int) -> str:
        """Does things."""
        return ""

    with pytest.raises(TypeError, match="needs a docstring"):
        tool(undocumented)
    with pytest.raises(TypeError, match="'x' needs a line under Args"):
        tool(missing_arg_doc)


@pytest.mark.parametrize(
    ("tool_call", "complaint"),
    [
        (call("resize", '{"width": 3'), "resize: arguments are not valid JSON"),
        (call("resize", "[1, 2]"), "arguments must be a JSON object, got an array"),
        (call("rotate", {"angle": 90}), "unknown tool 'rotate'; the tools are: resize"),
        (call("resize", {}), "width: Field required"),
        (call("resize", {"width": "wide"}), "width: Input should be a valid integer"),
        (call("resize", {"width": 3, "mode": "stretch"}), "mode: Input should be 'fit' or 'fill'"),
        (call("resize", {"width": 3, "height": 4}), "height: unknown argument"),
    ],
)
def test_model_mistakes_come_back_as_error_results(tool_call: ToolCall, complaint: str) -> None:
    output = Toolbox([resize]).call(None, tool_call)
    assert output.is_error
    assert complaint in output.content
    if "unknown tool" not in complaint:
        assert "width (integer, required)" in output.content  # the expected arguments are spelled out


def test_valid_call_runs_and_other_exceptions_are_not_swallowed() -> None:
    @tool
    def explode(ctx: object) -> str:
        """Fail like a bug would."""
        raise RuntimeError("bug")

    toolbox = Toolbox([resize, explode])
    output = toolbox.call(None, call("resize", {"width": 3, "label": "x"}))
    assert (output.is_error, output.content) == (False, "3 fit x")
    with pytest.raises(RuntimeError, match="bug"):
        toolbox.call(None, call("explode", {}))


def test_default_tools_have_unique_names_and_shell_only_on_request() -> None:
    # ncu and sanitize are offered only where installed (tests/tools/test_ncu_sanitizer.py)
    names = [t.name for t in default_tools() if t.name not in ("ncu", "sanitize")]
    assert names == [
        "list_files",
        "read_file",
        "write_file",
        "edit_file",
        "compile",
        "verify",
        "profile",
        "submit",
        "tune",
        "list_skills",
        "read_skill",
        "start_from_template",
    ]
    assert [t.name for t in default_tools(shell_enabled=True)][-1] == "shell"


# -- workspace files ------------------------------------------------------------------------------


def test_write_read_and_list(make_context: MakeContext) -> None:
    ctx = make_context()
    assert write_file(ctx, {"path": "kernels/a.cu", "content": "line 1\nline 2\nline 3\n"}) == (
        "created kernels/a.cu (3 lines, 21 bytes)"
    )
    assert (
        read_file(ctx, {"path": "kernels/a.cu"})
        == "kernels/a.cu (3 lines, 21 bytes)\nline 1\nline 2\nline 3\n"
    )
    assert read_file(ctx, {"path": "./kernels/a.cu", "start_line": 2, "max_lines": 1}) == (
        "kernels/a.cu: lines 2-2 of 3\nline 2\n"
    )
    listing = list_files(ctx, {}).splitlines()
    assert "kernels/a.cu  21 B" in listing
    assert any(line.startswith("reference.py") and line.endswith("(read-only)") for line in listing)
    assert not any(".harness" in line for line in listing)


@pytest.mark.parametrize("harness_file", HARNESS_FILES)
def test_harness_owned_files_are_read_only(make_context: MakeContext, harness_file: str) -> None:
    ctx = make_context()
    before = (ctx.workspace.root / harness_file).read_text()
    with pytest.raises(ToolError, match=f"{harness_file} is harness-owned and read-only"):
        write_file(ctx, {"path": harness_file, "content": "hacked"})
    with pytest.raises(ToolError, match="harness-owned"):
        edit_file(ctx, {"path": harness_file, "old_string": before[:20], "new_string": "hacked"})
    assert (ctx.workspace.root / harness_file).read_text() == before
    assert read_file(ctx, {"path": harness_file}).endswith(before)


@pytest.mark.parametrize(
    ("path", "complaint"),
    [
        ("../escape.cu", "'..' is not allowed"),
        ("/etc/passwd", "outside the workspace"),
        (".harness/workspace.json", ".harness/ is the harness's own state"),
        ("notes.txt", "not a file you may write"),
        ("kernels/run.py", "not a file you may write"),
    ],
)
def test_paths_outside_the_model_files_are_refused(
    make_context: MakeContext, path: str, complaint: str
) -> None:
    ctx = make_context()
    with pytest.raises(ToolError, match=complaint):
        write_file(ctx, {"path": path, "content": "x"})


def test_edit_file_replaces_exactly_one_occurrence(make_context: MakeContext) -> None:
    ctx = make_context()
    source = "int a = 1;\nint b = 2;\nint c = 1;\n"
    write_file(ctx, {"path": "kernels/k.cu", "content": source})
    target = ctx.workspace.root / "kernels" / "k.cu"

    with pytest.raises(ToolError, match=r"old_string occurs 2 times in kernels/k.cu \(at lines 1, 3\)"):
        edit_file(ctx, {"path": "kernels/k.cu", "old_string": " = 1;", "new_string": " = 7;"})
    with pytest.raises(ToolError, match=r"old_string not found in kernels/k\.cu"):
        edit_file(ctx, {"path": "kernels/k.cu", "old_string": "int  b", "new_string": "int d"})
    with pytest.raises(ToolError, match="old_string is empty"):
        edit_file(ctx, {"path": "kernels/k.cu", "old_string": "", "new_string": "x"})
    with pytest.raises(ToolError, match="the same"):
        edit_file(ctx, {"path": "kernels/k.cu", "old_string": "int b", "new_string": "int b"})
    with pytest.raises(ToolError, match="no such file"):
        edit_file(ctx, {"path": "kernels/none.cu", "old_string": "a", "new_string": "b"})
    assert target.read_text() == source

    message = edit_file(
        ctx, {"path": "kernels/k.cu", "old_string": "int c = 1;", "new_string": "int c = 3;\n// x"}
    )
    assert message == "edited kernels/k.cu at line 3: 1 lines replaced by 2"
    assert target.read_text() == "int a = 1;\nint b = 2;\nint c = 3;\n// x\n"


def test_skills_are_listed_and_readable_with_their_assets(make_context: MakeContext) -> None:
    ctx = make_context()
    listing = list_skills(ctx, {})
    for name in ("cuda-extension", "optimization", "debugging", "tuning", "templates"):
        assert f"\n{name}: " in f"\n{listing}"
    assert "examples/relu/kernels/relu.cu" in listing
    assert "kernels/ewise.cu" in listing  # the template library, offered to an LLM too
    assert read_skill(ctx, {"name": "templates"}).startswith("---\nname: templates")
    assert "{{SLOTS}}" in read_skill(ctx, {"name": "templates", "path": "kernels/ewise.cu"})
    assert read_skill(ctx, {"name": "optimization"}).startswith("---\nname: optimization")
    assert "relu_kernel" in read_skill(
        ctx, {"name": "cuda-extension", "path": "examples/relu/kernels/relu.cu"}
    )
    with pytest.raises(ToolError, match="no skill named 'cooking'"):
        read_skill(ctx, {"name": "cooking"})
    with pytest.raises(ToolError, match="inside the skill's folder"):
        read_skill(ctx, {"name": "debugging", "path": "../optimization/SKILL.md"})


@pytest.mark.slow
def test_shell_runs_in_the_workspace_with_a_timeout(make_context: MakeContext) -> None:
    from agent.tools.shell import shell

    ctx = make_context(shell_timeout_s=2)
    assert "reference.py" in shell(ctx, {"command": "ls"})
    with pytest.raises(ToolError, match="exit status 3"):
        shell(ctx, {"command": "echo oops >&2; exit 3"})
    with pytest.raises(ToolError, match=r"killed after 2s \(timeout\)"):
        shell(ctx, {"command": "sleep 30", "timeout_s": 60})
