"""The GPU gate: evaluations share a GPU to check and take it alone to time (real processes)."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

import pytest

from sandbox.workers.gpu.gpu_gate import GpuGate, gate_path, open_gate, physical_gpu


def _hold(path: str, mode: str, seconds: float, log: str, name: str, start_after: float = 0.0) -> None:
    time.sleep(start_after)
    with GpuGate(path) as gate:
        gate.hold(mode)  # type: ignore[arg-type]
        began = time.monotonic()
        time.sleep(seconds)
        with open(log, "a") as handle:
            handle.write(f"{name} {mode} {began:.6f} {time.monotonic():.6f}\n")


def _intervals(log: Path) -> dict[str, tuple[str, float, float]]:
    found = {}
    for line in log.read_text().splitlines():
        name, mode, began, ended = line.split()
        found[name] = (mode, float(began), float(ended))
    return found


def _run(*jobs: tuple) -> None:
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_hold, args=job) for job in jobs]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0


def _overlap(a: tuple[str, float, float], b: tuple[str, float, float]) -> bool:
    return a[1] < b[2] and b[1] < a[2]


def test_shared_holders_run_together_and_exclusive_runs_alone(tmp_path: Path) -> None:
    path, log = str(tmp_path / "gpu-0.lock"), str(tmp_path / "log")
    _run(
        (path, "shared", 0.6, log, "r1"),
        (path, "shared", 0.6, log, "r2", 0.05),
        (path, "exclusive", 0.3, log, "w", 0.2),
    )
    got = _intervals(Path(log))
    assert _overlap(got["r1"], got["r2"]), got  # checking may share the GPU
    assert not _overlap(got["w"], got["r1"]) and not _overlap(got["w"], got["r2"]), got


def test_a_waiting_writer_is_not_starved_by_later_readers(tmp_path: Path) -> None:
    path, log = str(tmp_path / "gpu-0.lock"), str(tmp_path / "log")
    _run(
        (path, "shared", 0.5, log, "r1"),
        (path, "exclusive", 0.2, log, "w", 0.1),
        (path, "shared", 0.2, log, "late", 0.3),  # arrives while the writer waits
    )
    got = _intervals(Path(log))
    assert got["w"][2] <= got["late"][1] + 1e-3, got  # the late reader queued behind the writer


@pytest.mark.slow
def test_writers_queued_behind_a_timing_go_before_readers_that_came_first(tmp_path: Path) -> None:
    """A reader that comes while one writer times waits for every writer queued meanwhile: the
    writers run back to back, so the readers' holds are drained once for all of them."""
    path, log = str(tmp_path / "gpu-0.lock"), str(tmp_path / "log")
    for _ in range(3):  # without the rule, the reader, first in line at the turnstile, usually wins
        Path(log).unlink(missing_ok=True)
        _run(
            (path, "exclusive", 1.2, log, "w1"),
            (path, "shared", 0.1, log, "r", 0.4),  # comes while w1 times
            (path, "exclusive", 0.1, log, "w2", 0.8),  # comes after the reader
        )
        got = _intervals(Path(log))
        assert got["w1"][2] <= got["w2"][1] + 1e-3 and got["w2"][2] <= got["r"][1] + 1e-3, got


def _upgrade(path: str, log: str, name: str) -> None:
    with GpuGate(path) as gate:
        gate.hold("shared")
        time.sleep(0.3)  # both hold shared by now
        gate.hold("exclusive")
        began = time.monotonic()
        time.sleep(0.1)
        with open(log, "a") as handle:
            handle.write(f"{name} exclusive {began:.6f} {time.monotonic():.6f}\n")
        gate.hold("shared")


def test_two_sharers_that_both_want_to_time_do_not_deadlock(tmp_path: Path) -> None:
    path, log = str(tmp_path / "gpu-0.lock"), str(tmp_path / "log")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_upgrade, args=(path, log, name)) for name in ("a", "b")]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(20)
        assert proc.exitcode == 0, "deadlocked"
    got = _intervals(Path(log))
    assert not _overlap(got["a"], got["b"]), got


def test_a_killed_holder_frees_the_gpu(tmp_path: Path) -> None:
    path = str(tmp_path / "gpu-0.lock")
    ctx = mp.get_context("spawn")
    proc = ctx.Process(target=_hold, args=(path, "exclusive", 60, str(tmp_path / "log"), "stuck"))
    proc.start()
    time.sleep(1.0)
    proc.kill()
    proc.join(10)
    started = time.monotonic()
    with GpuGate(path) as gate:
        gate.hold("exclusive")
    assert time.monotonic() - started < 5


def test_gate_files_are_named_by_physical_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert physical_gpu("1") == "5"
    assert gate_path(tmp_path, "0") == str(tmp_path / "gpu-3.lock")
    assert open_gate(None) is None
    assert open_gate(str(tmp_path / "missing-dir" / "gpu-0.lock")) is not None  # created on first use


def test_a_container_candidate_runs_under_the_hosts_exclusive_hold(tmp_path: Path) -> None:
    import fcntl
    import os

    from agent.referee.evaluate import _exclusive, gate_holders

    path = str(tmp_path / "gpu-0.lock")
    assert gate_holders(path, sees_gates=True) == (path, None)  # its supervisor takes the gate itself
    assert gate_holders(path, sees_gates=False) == (None, path)  # a container cannot see the gate files
    assert gate_holders(None, sees_gates=False) == (None, None)
    with _exclusive(path):
        probe = os.open(path, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)  # no one may even check meanwhile
        finally:
            os.close(probe)
    with GpuGate(path) as gate:
        gate.hold("shared")  # released afterwards


def test_a_candidate_whose_sandbox_could_not_open_the_gate_is_not_judged(tmp_path: Path) -> None:
    """The supervisor records "unavailable" when the gate it was given cannot be opened where it
    runs (a folder the sandbox hides): its trials and timings ran ungated beside other evaluations'
    timed sections, so the referee gives a referee_error, never a verdict with those times."""
    from agent.referee.evaluate import ungated_candidate

    hidden = "/proc/no-such-folder/gpu-0.lock"  # cannot be made, as in a sandbox that hides it
    assert open_gate(hidden) is None  # what the supervisor then records as "unavailable"
    path = str(tmp_path / "gpu-0.lock")
    problem = ungated_candidate({"supervisor": {"gate": "unavailable"}}, path)  # type: ignore[typeddict-item]
    assert problem is not None and path in problem and "not the candidate's fault" in problem
    assert ungated_candidate({"supervisor": {"gate": "held"}}, path) is None  # type: ignore[typeddict-item]
    assert ungated_candidate({"supervisor": {"gate": "unavailable"}}, None) is None  # type: ignore[typeddict-item]
    assert ungated_candidate(None, path) is None
