"""The compile tool never shows the model a file from outside the workspace.

Compilers quote what they include; a `.cu` including a file outside the workspace (by absolute
path, or climbing out with ../) must get one line naming the include, never its text: not in
the tool's result, its data, nor the log the model can read. Lines of the workspace's own files
are quoted from the files themselves (not macro-expanded), without following links.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent.budget import Budget, BudgetLimits
from agent.build.diagnostics import parse_log
from agent.build.source_scope import SourceScope, confine_log
from agent.referee import EvalOptions
from agent.tasks import parse_task
from agent.tools import ToolContext, ToolError, ToolSettings
from agent.tools.candidates import CandidateBook
from agent.tools.files import read_file
from agent.tools.pipeline import compile_workspace
from agent.workspace import Workspace
from sandbox.base import open_sandbox
from tests.run.fakes import FakeReferee

REPO = Path(__file__).resolve().parents[2]
RELU_TASK = REPO / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"
ABSOLUTE_CANARY = "CANARY_ABSOLUTE_c41f9e"
RELATIVE_CANARY = "CANARY_RELATIVE_7b02d1"
MODEL_NEW = (
    "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
)


class Events(list):
    def write(self, event: object) -> object:
        self.append(event)
        return event


def tool_context(ws: Workspace, cache: Path) -> ToolContext:
    return ToolContext(
        task=parse_task(RELU_TASK),
        workspace=ws,
        sandbox=open_sandbox("local", workspace=ws.root, cache_dir=cache),
        referee=FakeReferee(),
        budget=Budget(BudgetLimits(turns=None, usd=None, wall=None, gpu=None)),
        candidates=CandidateBook(),
        events=Events(),
        settings=ToolSettings(referee=EvalOptions(arch="sm_90")),
    )


def compile_text(ctx: ToolContext) -> tuple[str, dict]:
    with pytest.raises(ToolError) as failed:
        compile_workspace(ctx, {})
    return str(failed.value), failed.value.data or {}


@pytest.fixture(scope="module")
def leaking(tmp_path_factory: pytest.TempPathFactory) -> tuple[ToolContext, Path, Path]:
    """A workspace whose two kernels include canary files of the build cache (the sandbox can read
    it; it is not the workspace): one by absolute path, one by a relative path climbing out."""
    cache = tmp_path_factory.mktemp("cache")
    secrets = cache / "secrets"
    secrets.mkdir()
    absolute = secrets / "absolute.h"
    absolute.write_text(f"{ABSOLUTE_CANARY}:x:0:0:root:/root:/bin/bash\n")
    relative = secrets / "relative.h"
    relative.write_text(f"{RELATIVE_CANARY} = {RELATIVE_CANARY}_hash;\n")
    ws = Workspace.create(tmp_path_factory.mktemp("ws") / "ws", parse_task(RELU_TASK))
    (ws.root / "model_new.py").write_text(MODEL_NEW)
    climb = os.path.relpath(relative, ws.root / "kernels")
    assert climb.startswith("../")
    (ws.root / "kernels" / "by_path.cu").write_text(f'#include "{absolute}"\n__global__ void a() {{}}\n')
    (ws.root / "kernels" / "by_climb.cu").write_text(f'#include "{climb}"\n__global__ void b() {{}}\n')
    return tool_context(ws, cache), absolute, relative


@pytest.mark.slow
def test_an_outside_include_is_named_never_quoted(leaking: tuple[ToolContext, Path, Path]) -> None:
    ctx, absolute, relative = leaking
    text, data = compile_text(ctx)
    shown = text + json.dumps(data)
    assert ABSOLUTE_CANARY not in shown and RELATIVE_CANARY not in shown
    assert f"{absolute}: error: outside the workspace" in text
    assert f"{relative}: error: outside the workspace" in text
    assert "read_file compile.log" in text and data["log"] == "compile.log"


@pytest.mark.slow
def test_the_log_the_model_reads_is_filtered_too(leaking: tuple[ToolContext, Path, Path]) -> None:
    ctx, absolute, _ = leaking
    compile_text(ctx)
    log = read_file(ctx, {"path": "compile.log", "max_lines": 2000})
    assert "by_path.cu" in log  # the real build log, not a summary
    assert f"{absolute} is outside the workspace" in log
    assert ABSOLUTE_CANARY not in log and RELATIVE_CANARY not in log
    harness_log = (ctx.workspace.root / ".harness" / "logs" / "compile.log").read_text()
    assert ABSOLUTE_CANARY not in harness_log and RELATIVE_CANARY not in harness_log


@pytest.mark.slow
def test_the_quoted_line_is_the_files_own_not_the_macro_expansion(
    leaking: tuple[ToolContext, Path, Path],
) -> None:
    ctx, _, _ = leaking
    kernels = ctx.workspace.root / "kernels"
    for name in ("by_path.cu", "by_climb.cu"):
        (kernels / name).unlink()
    own = "  for (int j = 0; j < TN; ++j) y[j] = undefined_q * TN;"
    (kernels / "tiled.cu").write_text(f"#define TN 4\n__global__ void k(float* y) {{\n{own}\n}}\n")
    text, _ = compile_text(ctx)
    assert 'kernels/tiled.cu:3: error: identifier "undefined_q" is undefined\n' + own in text
    assert "j < 4" not in text


def gcc_log(root: Path, outside: Path) -> str:
    return (
        f"In file included from {root}/kernels/k_binding.cpp:2:\n"
        f"{outside}:1:5: error: found ':' in nested-name-specifier, expected '::'\n"
        f"    1 | {ABSOLUTE_CANARY}:x:0:0:root:/root:/bin/bash\n"
        "      |     ^\n"
        f"{root}/kernels/k_binding.cpp:7:3: error: 'launch' was not declared in this scope\n"
        "    7 |   launch(x);\n"
        "ninja: build stopped: subcommand failed.\n"
        "Traceback (most recent call last):\n"
        f'  File "{outside}", line 1, in <module>\n'
        f"    {RELATIVE_CANARY} = 1\n"
        "RuntimeError: Error building extension 'cuda_extension'\n"
    )


def test_host_compiler_lines_and_tracebacks_of_outside_files_are_dropped(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "k_binding.cpp").write_text("\n" * 6 + "  launch(x);\n")
    outside = tmp_path / "secret.h"
    scope = SourceScope(host_root=root)
    log = gcc_log(root, outside)
    confined = confine_log(log, scope)
    assert ABSOLUTE_CANARY not in confined and RELATIVE_CANARY not in confined
    assert f"{outside} is outside the workspace" in confined
    assert "launch(x);" in confined and "Error building extension" in confined
    errors, _ = parse_log(log, scope=scope)
    assert [(e.file, e.line) for e in errors] == [(str(outside), None), ("kernels/k_binding.cpp", 7)]
    assert ABSOLUTE_CANARY not in "".join(e.render() for e in errors)


def test_a_link_in_the_workspace_to_an_outside_file_is_outside(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "kernels").mkdir(parents=True)
    secret = tmp_path / "secret.h"
    secret.write_text(f"{ABSOLUTE_CANARY}\n")
    (root / "kernels" / "evil.h").symlink_to(secret)
    (root / "kernels" / "inside.h").symlink_to(root / "kernels" / "real.h")
    (root / "kernels" / "real.h").write_text("int x = q;\n")
    scope = SourceScope(host_root=root)
    log = (
        f'{root}/kernels/evil.h(1): error: identifier "{ABSOLUTE_CANARY}" is undefined\n'
        f"  {ABSOLUTE_CANARY}\n  ^\n\n"
        f'{root}/kernels/inside.h(1): error: identifier "q" is undefined\n  int x = q;\n          ^\n'
    )
    errors, _ = parse_log(log, scope=scope)
    assert ABSOLUTE_CANARY not in "".join(e.render() for e in errors) + confine_log(log, scope)
    assert "outside the workspace" in errors[0].message
    # A link that stays inside is a workspace file, but its text is not read through the link.
    assert (errors[1].file, errors[1].context) == ("kernels/inside.h", "")


def test_a_single_files_error_quotes_the_solutions_own_line(tmp_path: Path) -> None:
    from agent.build.diagnostics import Diagnostic
    from agent.build.inline_lines import locate

    own = "    for (int j = 0; j < TN; ++j) y[j] = q;"
    source = (
        "from torch.utils.cpp_extension import load_inline\n"
        f'cuda_src = """\n#define TN 4\n__global__ void k(float* y) {{\n{own}\n}}\n"""\n'
        'ext = load_inline("ext", "void k();", cuda_sources=[cuda_src])\n'
    )
    solution = tmp_path / "solution.py"
    solution.write_text(source)
    # cuda.cu: torch's 3 header lines, then cuda_src ("" first): the loop is line 7.
    expanded = Diagnostic(
        file="cuda.cu",
        line=7,
        message='identifier "q" is undefined',
        context="    for (int j = 0; j < 4; ++j)",
    )
    (moved,) = locate([expanded], solution)
    assert (moved.file, moved.line) == ("solution.py", source.splitlines().index(own) + 1)
    assert moved.context.splitlines()[1] == own
