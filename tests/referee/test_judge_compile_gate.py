"""The judge lets go of the GPU's gate while torch.compile compiles its baseline (CPU work), and
holds it again before the compiled code runs: a judge compiling for minutes must not stall every
other evaluation's timing, and the compiled kernels' first run (where Inductor autotunes) must not
overlap another process's timing."""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path

import torch

from sandbox.base import WORKERS_DIR

sys.path.insert(0, str(WORKERS_DIR))  # the workers import each other by module name
import judge
from gpu_gate import GpuGate


def exclusive_now(path: str) -> bool:
    """Whether another process could take the gate exclusively right now."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def test_the_gate_is_free_while_compiling_and_held_when_the_compiled_code_runs(tmp_path: Path) -> None:
    path = str(tmp_path / "gpu-0.lock")
    seen: dict[str, object] = {}

    def backend(graph: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):  # type: ignore[no-untyped-def]
        seen["mode while compiling"] = gate.mode
        seen["others could time while compiling"] = exclusive_now(path)

        def run(*args: torch.Tensor):  # type: ignore[no-untyped-def]
            seen["mode when it runs"] = gate.mode
            seen["others could time while it runs"] = exclusive_now(path)
            return graph.forward(*args)

        return run

    torch._dynamo.reset()
    compiled = torch.compile(lambda x: torch.relu(x) + 1, backend=backend)
    stages: dict[str, float] = {}
    with GpuGate(path) as gate:
        gate.hold("shared")
        with judge._gate_free_while_compiling(gate, stages):
            judge._compile_aside(compiled, [torch.randn(8)])
        assert gate.mode == "shared"
    assert seen == {
        "mode while compiling": "none",
        "others could time while compiling": True,
        "mode when it runs": "shared",
        "others could time while it runs": False,
    }
    assert judge.WAIT_AFTER_COMPILING in stages


def test_cuda_graph_recording_keeps_the_hold(tmp_path: Path) -> None:
    """Recording a CUDA graph runs kernels, and Dynamo runs the same callbacks around it."""
    from torch._dynamo.callback import CallbackTrigger, callback_handler

    path = str(tmp_path / "gpu-0.lock")
    with GpuGate(path) as gate:
        gate.hold("shared")
        with (
            judge._gate_free_while_compiling(gate, {}),
            callback_handler.install_callbacks(CallbackTrigger.CUDAGRAPH_RECORDING, "0/0"),
        ):
            assert gate.mode == "shared" and not exclusive_now(path)


def test_the_callbacks_are_gone_afterwards_even_when_the_compile_fails(tmp_path: Path) -> None:
    from torch._dynamo.callback import callback_handler

    before = (list(callback_handler.start_callbacks), list(callback_handler.end_callbacks))

    def failing(graph: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):  # type: ignore[no-untyped-def]
        raise RuntimeError("the backend failed")

    torch._dynamo.reset()
    compiled = torch.compile(lambda x: x * 2, backend=failing)
    with GpuGate(str(tmp_path / "gpu-0.lock")) as gate:
        gate.hold("shared")
        try:
            with judge._gate_free_while_compiling(gate, {}):
                judge._compile_aside(compiled, [torch.randn(4)])
        except Exception as exc:
            assert "the backend failed" in str(exc)
        else:
            raise AssertionError("the compile should have failed")
        assert gate.mode == "shared"
    assert (callback_handler.start_callbacks, callback_handler.end_callbacks) == before
