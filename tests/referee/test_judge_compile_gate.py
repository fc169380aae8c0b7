"""The judge lets go of the GPU's gate while torch.compile compiles its baseline (CPU work), and
holds it again before the compiled code runs: a judge compiling for minutes must not stall every
other evaluation's timing, and the compiled kernels' first run (where Inductor autotunes) must not
overlap another process's timing."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest
import torch

import sandbox.workers.siblings  # noqa: F401  (the workers import each other by name)

# isort: split
import judge
from gpu_gate import GpuGate, Mode


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


@pytest.mark.slow
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


class RecordingGate(GpuGate):
    def __init__(self, path: str, events: list[str]) -> None:
        super().__init__(path)
        self.events = events

    def hold(self, mode: Mode) -> None:
        if mode != self.mode:
            self.events.append(f"hold {mode}")
        super().hold(mode)


def judge_baselines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, timed: bool, compile_fails: bool = False
) -> tuple[list[str], dict[str, object], float | None]:
    """The judge's baselines for a tiny model on the CPU, with torch.compile's backend, the timing
    loop and the bandwidth probe replaced by recorders: what happened, in order, and the result."""
    events: list[str] = []
    real_compile = torch.compile

    def backend(graph: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):  # type: ignore[no-untyped-def]
        events.append("compiling")
        if compile_fails:
            raise RuntimeError("inductor failed")
        return graph.forward

    def compile_with_recorder(model: torch.nn.Module, mode: str, dynamic: bool):  # type: ignore[no-untyped-def]
        return real_compile(model, backend=backend, dynamic=dynamic)

    def time_calls(call, make_inputs, *, device, config):  # type: ignore[no-untyped-def]
        call(make_inputs(0))
        events.append("timing")
        return {"median_ms": 1.0}

    def bandwidth(device: str) -> float:
        events.append("bandwidth")
        return 4300.0

    monkeypatch.setattr(torch, "compile", compile_with_recorder)
    monkeypatch.setattr(judge, "time_calls", time_calls)
    monkeypatch.setattr(judge, "measure_copy_bandwidth", bandwidth)
    torch._dynamo.reset()
    spec = {"device": "cpu", "baselines": {"eager": True, "compile_mode": "default"}}
    with RecordingGate(str(tmp_path / "gpu-0.lock"), events) as gate:
        gate.hold("shared")
        events.clear()
        out, measured = judge._baselines(
            torch.nn.ReLU(),
            lambda: [torch.randn(8)],
            spec,  # type: ignore[arg-type]
            gate,
            {},
            timed=timed,
            measure_bandwidth=True,
        )
        assert gate.mode == "shared"
    return events, dict(out), measured


def test_both_baselines_and_the_bandwidth_are_timed_in_one_exclusive_hold_after_compiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events, out, measured = judge_baselines(tmp_path, monkeypatch, timed=True)
    assert events == [
        "hold none",  # no hold while torch.compile compiles
        "compiling",
        "hold shared",  # its first run shares the GPU
        "hold exclusive",  # then one wait for the GPU to time everything
        "timing",
        "timing",
        "bandwidth",
        "hold shared",
    ]
    assert out == {"eager": {"median_ms": 1.0}, "compile": {"median_ms": 1.0}}
    assert measured == 4300.0


def test_a_wrong_answer_gets_no_baselines_but_its_bandwidth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events, out, measured = judge_baselines(tmp_path, monkeypatch, timed=False)
    assert events == ["hold exclusive", "bandwidth", "hold shared"]
    assert out == {} and measured == 4300.0


def test_a_baseline_that_does_not_compile_is_reported_and_eager_is_still_timed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events, out, _ = judge_baselines(tmp_path, monkeypatch, timed=True, compile_fails=True)
    assert events.count("hold exclusive") == 1 and events.count("timing") == 1
    assert out["eager"] == {"median_ms": 1.0}
    assert "inductor failed" in str(out["compile"])


def test_the_judges_wait_for_its_shared_hold_is_one_of_its_stages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's report counts it as GPU wait; before, it hid in the judge's unexplained seconds."""
    path = str(tmp_path / "gpu-0.lock")
    held: list[Mode] = []
    monkeypatch.setattr(judge, "_judge", lambda spec, result, gate, received, fds: held.append(gate.mode))
    result: judge.JudgeResult = {"ok": False, "failure": None, "stages": {}}
    judge.judge({"gpu_gate": path}, result, {}, [])  # type: ignore[typeddict-item]
    assert held == ["shared"]
    assert "waiting for the GPU (shared, to compare)" in result["stages"]
