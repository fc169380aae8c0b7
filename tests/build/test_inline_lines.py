"""Errors in torch's generated main.cpp / cuda.cu are named at the solution's own lines."""

from __future__ import annotations

from pathlib import Path

from agent.build.diagnostics import Diagnostic
from agent.build.inline_lines import generated_spans, locate

SOLUTION = '''import torch
from torch.utils.cpp_extension import load_inline

cuda_src = """
__global__ void k(float* y) {
    y[0] = q;
}
"""
cpp_src = "void launch();"

ext = load_inline("ext", cpp_src, cuda_sources=[cuda_src, "int tail;"], functions=["launch"])
'''


def test_a_cuda_error_moves_to_the_line_the_model_wrote(tmp_path: Path) -> None:
    path = tmp_path / "sol.py"
    path.write_text(SOLUTION)
    # cuda.cu = 3 implicit header lines, then cuda_src ("" then the kernel): `y[0] = q;` is line 6.
    errors = [Diagnostic(file="cuda.lean.cu", line=6, message='identifier "q" is undefined')]
    (moved,) = locate(errors, path)
    assert (moved.file, moved.line) == ("sol.py", SOLUTION.splitlines().index("    y[0] = q;") + 1)
    assert moved.context.startswith("(in cuda.cu:6")


def test_main_cpp_after_its_one_header_line_and_later_sources_follow_on(tmp_path: Path) -> None:
    spans = generated_spans(SOLUTION)
    assert [(s.first, s.last) for s in spans["main.cpp"]] == [(2, 2)]
    cuda = spans["cuda.cu"]
    assert [(s.first, s.last) for s in cuda] == [(4, 8), (9, 9)]
    call_line = next(i for i, line in enumerate(SOLUTION.splitlines(), 1) if "int tail" in line)
    assert cuda[1].py_line == call_line


def test_lines_that_cannot_be_counted_keep_the_generated_name(tmp_path: Path) -> None:
    escaped = SOLUTION.replace('cpp_src = "void launch();"', 'cpp_src = "int a;\\nvoid launch();"')
    assert "main.cpp" not in generated_spans(escaped)
    no_headers = SOLUTION.replace('functions=["launch"])', 'functions=["launch"], no_implicit_headers=True)')
    assert generated_spans(no_headers) == {}
    twice = SOLUTION + 'other = load_inline("b", cpp_src)\n'
    assert generated_spans(twice) == {}
    path = tmp_path / "broken.py"
    path.write_text("def (:\n")
    errors = [Diagnostic(file="cuda.cu", line=6, message="x")]
    assert locate(errors, path) == errors
