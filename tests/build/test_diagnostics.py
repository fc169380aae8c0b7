from __future__ import annotations

from pathlib import Path

from agent.build.diagnostics import parse_log

NVCC_LOG = """\
[1/3] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -c /ws/kernels/relu.cu -o relu.cuda.o
FAILED: relu.cuda.o
/ws/kernels/relu.cu(13): warning #177-D: variable "unused" was declared but never referenced
      int unused;
          ^
/ws/kernels/relu.cu(21): error: identifier "blockIdx_y" is undefined
      int row = blockIdx_y;
                ^

/ws/kernels/relu.cu(21): error: identifier "blockIdx_y" is undefined
/ws/kernels/relu.cu(30): error: too few arguments in function call
2 errors detected in the compilation of "/ws/kernels/relu.cu".
ninja: build stopped: subcommand failed.
"""

GCC_LOG = """\
In file included from /ws/kernels/relu_binding.cpp:3:
/usr/include/c++/12/bits/stl_vector.h:100:5: warning: something noisy [-Wnoisy]
/ws/kernels/relu_binding.cpp:14:20: error: 'relu_lunch' was not declared in this scope; did you mean 'relu_launch'?
   14 |   cudaError_t e = relu_lunch(x, y, n, s);
      |                    ^~~~~~~~~~
"""


def test_nvcc_errors_come_first_deduplicated_with_context_and_warnings_counted() -> None:
    errors, warnings = parse_log(NVCC_LOG, root=Path("/ws"))
    assert warnings == 1
    assert [(e.file, e.line) for e in errors] == [("kernels/relu.cu", 21), ("kernels/relu.cu", 30)]
    assert errors[0].message == 'identifier "blockIdx_y" is undefined'
    assert "int row = blockIdx_y;" in errors[0].context
    assert errors[0].render().startswith('kernels/relu.cu:21: error: identifier "blockIdx_y"')


def test_gcc_errors_carry_line_and_column() -> None:
    errors, warnings = parse_log(GCC_LOG, root=Path("/ws"))
    assert warnings == 1
    assert len(errors) == 1
    assert (errors[0].file, errors[0].line, errors[0].column) == ("kernels/relu_binding.cpp", 14, 20)
    assert "relu_lunch" in errors[0].message


def test_linker_ptxas_and_import_failures_are_named() -> None:
    errors, _ = parse_log(
        "ptxas error   : Entry function '_Z1kPf' uses too much shared data (0x20000 bytes, 0xc000 max)"
    )
    assert errors[0].message.startswith("ptxas: Entry function")
    errors, _ = parse_log("ImportError: /c/cuda_extension.so: undefined symbol: relu_launch")
    assert "undefined symbol relu_launch" in errors[0].message
    errors, _ = parse_log(
        "Traceback (most recent call last):\n  File x\nRuntimeError: Error building extension 'x'"
    )
    assert errors[0].message == "RuntimeError: Error building extension 'x'"


def test_files_outside_the_workspace_are_named_by_file_name() -> None:
    errors, _ = parse_log(
        '/root/.cache/x/build/elementwise/cuda.cu(5): error: expected a ";"', root=Path("/ws")
    )
    assert errors[0].file == "cuda.cu"
