"""Shares of one GPU's memory among the evaluations on it (sandbox/workers/gpu/gpu_memory.py)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from agent.referee.evaluate import memory_need
from agent.tasks import ArgSpec, InputSpec, Task
from sandbox.base import WORKERS_DIR
from sandbox.workers.gpu.gpu_memory import UNITS, MemoryClaim, units_for

HOLD = f"""
import sys, time
sys.path.insert(0, {str(WORKERS_DIR)!r})
import siblings
from gpu_memory import MemoryClaim
claim = MemoryClaim(sys.argv[1], int(sys.argv[2]))
assert claim.acquire(10)
print("held", flush=True)
time.sleep(60)
"""


def hold_in_another_process(gate: Path, units: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(gate), str(units)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_claims_share_the_units_and_wait_for_what_is_taken(tmp_path: Path) -> None:
    gate = tmp_path / "gpu-0.lock"
    other = hold_in_another_process(gate, 10)
    try:
        small = MemoryClaim(str(gate), 6)
        assert small.acquire(timeout=1) and small.held
        too_many = MemoryClaim(str(gate), 1)
        assert not too_many.acquire(timeout=0.3) and not too_many.held
        assert too_many.waited_s >= 0.3
        small.release()
        assert too_many.acquire(timeout=1)
        too_many.release()
    finally:
        other.kill()
        other.wait()


CHURN = f"""
import sys, time
sys.path.insert(0, {str(WORKERS_DIR)!r})
import siblings
from gpu_memory import MemoryClaim
print("started", flush=True)
while True:
    claim = MemoryClaim(sys.argv[1], 1)
    if claim.acquire(60):
        time.sleep(0.3)
        claim.release()
"""


def test_a_large_claim_is_not_starved_by_small_ones_that_follow_each_other(tmp_path: Path) -> None:
    gate = tmp_path / "gpu-0.lock"
    churners = []
    try:
        for _ in range(2):  # staggered: one of them holds a unit at every moment
            churner = subprocess.Popen(
                [sys.executable, "-c", CHURN, str(gate)], stdout=subprocess.PIPE, text=True
            )
            assert churner.stdout is not None and churner.stdout.readline().strip() == "started"
            churners.append(churner)
            time.sleep(0.15)
        whole = MemoryClaim(str(gate), UNITS)
        assert whole.acquire(timeout=5, patience=0.5), (
            "the whole-GPU claim never found every unit free at once"
        )
        assert whole.waited_s < 2.5
        whole.release()
    finally:
        for churner in churners:
            churner.kill()
            churner.wait()


def test_small_claims_that_fit_go_ahead_of_a_large_one_until_its_patience_runs_out(tmp_path: Path) -> None:
    gate = tmp_path / "gpu-0.lock"
    other = hold_in_another_process(gate, 10)
    large = MemoryClaim(str(gate), UNITS)
    waiting = threading.Thread(target=large.acquire, kwargs={"timeout": 20, "patience": 1.0})
    waiting.start()
    try:
        time.sleep(0.2)
        small = MemoryClaim(str(gate), 1)
        assert small.acquire(timeout=0.5), "a claim that fits waited behind a large one still patient"
        small.release()
        time.sleep(1.5)  # the large claim is in line now: it keeps the free units and the admission
        late = MemoryClaim(str(gate), 1)
        assert not late.acquire(timeout=0.5)
    finally:
        other.kill()
        other.wait()
        waiting.join(timeout=20)
    assert large.held
    large.release()


def test_a_killed_evaluation_frees_its_units(tmp_path: Path) -> None:
    gate = tmp_path / "gpu-0.lock"
    other = hold_in_another_process(gate, UNITS)
    claim = MemoryClaim(str(gate), 1)
    assert not claim.acquire(timeout=0.2)
    other.kill()
    other.wait()
    started = time.monotonic()
    assert claim.acquire(timeout=5)
    assert time.monotonic() - started < 1
    claim.release()


def test_a_claim_larger_than_the_gpu_takes_it_whole() -> None:
    assert units_for(10 << 30, 100 << 30) == 2
    assert MemoryClaim("x", units_for(500 << 30, 100 << 30)).units == UNITS
    assert MemoryClaim("x", 0).units == 1


def tensor(*shape: int) -> ArgSpec:
    return ArgSpec(kind="tensor", shape=list(shape), dtype="float32")


def test_the_need_grows_with_the_tasks_inputs_outputs_and_state(tmp_path: Path) -> None:
    def task(inputs: list[ArgSpec], outputs: list[ArgSpec] | None = None, parameters: int = 0) -> Task:
        spec = InputSpec(inputs=inputs, init_inputs=[], parameters=parameters, outputs=outputs)
        return Task(path=tmp_path / "t.py", name="t", sha256="0" * 64, spec=spec)

    big = tensor(4096, 393216)  # KernelBench level 1's elementwise size: 6.4 GB
    relu = memory_need(task([big], [big]))
    assert 85e9 < relu < 95e9  # 87 GB measured on the H200 for one full-size ReLU evaluation
    assert memory_need(task([big])) == relu  # outputs unknown: taken as large as the inputs
    row_sum = memory_need(task([big], [tensor(4096, 1)]))
    assert row_sum < relu / 2
    small = memory_need(task([tensor(16, 1024)], [tensor(16, 1024)]))
    assert small < 4e9
    assert memory_need(task([tensor(16, 1024)], parameters=10**9)) >= small + 3 * 4e9
    # on an H200 two full-size elementwise evaluations never share it; several small ones do
    budget = int(0.92 * 143e9)
    assert 2 * units_for(relu, budget) > UNITS >= units_for(relu, budget) + 4 * units_for(small, budget)
    assert 2 * units_for(row_sum, budget) <= UNITS


INHERIT = f"""
import os, sys
sys.path.insert(0, {str(WORKERS_DIR)!r})
import siblings
from gpu_memory import keep_one
fds = [int(fd) for fd in sys.argv[1].split(",")]
print("holding", flush=True)
sys.stdin.readline()
keep_one(fds)
print("kept one", flush=True)
sys.stdin.readline()
"""


def test_the_judge_inherits_the_claim_and_gives_back_all_but_one_unit(tmp_path: Path) -> None:
    gate = str(tmp_path / "gpu-0.lock")
    claim = MemoryClaim(gate, UNITS)
    assert claim.acquire(timeout=1)
    judge = subprocess.Popen(
        [sys.executable, "-c", INHERIT, ",".join(map(str, claim.fds))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        pass_fds=claim.fds,
    )
    assert judge.stdin is not None and judge.stdout is not None
    try:
        assert judge.stdout.readline().strip() == "holding"
        claim.release()  # the host's copies: the judge's keep the units
        other = MemoryClaim(gate, 1)
        assert not other.acquire(timeout=0.3)
        judge.stdin.write("\n")
        judge.stdin.flush()
        assert judge.stdout.readline().strip() == "kept one"
        assert other.acquire(timeout=1)
        other.release()
        assert not MemoryClaim(gate, UNITS).acquire(timeout=0.3)  # one unit is still the judge's
        judge.stdin.write("\n")
        judge.stdin.flush()
        judge.wait(timeout=10)
        whole = MemoryClaim(gate, UNITS)
        assert whole.acquire(timeout=1)  # the judge is gone, and its unit with it
        whole.release()
    finally:
        judge.kill()
        judge.wait()
