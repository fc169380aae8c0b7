"""Where a tier copy's host compile is cut into a precompiled prefix and the rest
(sandbox/workers/build/host_pch.py), and the mark the slim Functions.h leaves for it (no compiler)."""

from __future__ import annotations

import sandbox.workers.siblings  # noqa: F401  (the workers import each other by name)
from sandbox.workers.build import host_pch, slim_aten

BEGIN = [line + "\n" for line in slim_aten.OPERATORS_BEGIN]


def lines(*text: str) -> list[str]:
    return [line + "\n" for line in text]


def test_the_cut_is_where_the_operators_begin_outside_any_braces() -> None:
    before = lines('# 1 "/b/cuda.min.cu"', "namespace at {", 'const char* s = "}}";', "char c = '{';", "}")
    file = before + BEGIN + lines('# 3 "/t/ATen/ops/relu.h" 3', "int relu();")
    assert host_pch.cut(file) == len(before)


def test_no_cut_inside_braces_an_open_pragma_stack_or_without_the_mark() -> None:
    inside = lines('# 1 "/b/cuda.min.cu"', "namespace at {") + BEGIN + lines("}")
    assert host_pch.cut(inside) is None
    pushed = lines('# 1 "/b/cuda.min.cu"', "#pragma GCC visibility push ( default )") + BEGIN
    assert host_pch.cut(pushed) is None
    assert host_pch.cut(lines('# 1 "/b/cuda.min.cu"', "int x;")) is None


def test_the_rest_starts_in_the_file_the_prefix_ended_in() -> None:
    prefix = lines('# 1 "/b/cuda.min.cu"', '# 70 "/b/kernel_agent_aten/ATen/Functions.h" 3', "# 71")
    assert host_pch._last_marker(prefix) == '# 70 "/b/kernel_agent_aten/ATen/Functions.h" 3\n'


def test_the_slim_functions_h_marks_where_its_operator_includes_begin_once() -> None:
    torch_text = (
        "#pragma once\n#include <ATen/Context.h>\n#include <ATen/ops/abs.h>\n#include <ATen/ops/relu.h>\n"
    )
    slim = slim_aten.slim_text(torch_text, {"relu"}).splitlines()
    mark = list(slim_aten.OPERATORS_BEGIN)
    assert slim == ["#pragma once", "#include <ATen/Context.h>", *mark, "#include <ATen/ops/relu.h>"]


def test_one_module_id_per_file_name_in_nvccs_shape() -> None:
    first, again = host_pch.module_id("/a/cuda.min.cu"), host_pch.module_id("/b/cuda.min.cu")
    assert first == again and first.split("_")[2:-1] == ["11", "cuda", "min", "cu"]
    assert host_pch.module_id("/a/cuda.lean.cu") != first
