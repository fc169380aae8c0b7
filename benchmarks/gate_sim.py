"""The GPU gate under a batch's load, with sleeps for the GPU work (any machine, no GPU).

    python benchmarks/gate_sim.py --out benchmarks/results/gate_sim_cpu.md

Evaluation slots (processes) each judge evaluations one after another, taking the real gate
(`sandbox/workers/gpu/gpu_gate.py`) as the candidate worker and the judge do, with every hold and
every stretch of CPU work a sleep of the median measured on the H200 in a full-size batch over
KernelBench levels 1-3 (`results/h200-2026-12-03d/`, candidate stages and judge stages), jittered
(lognormal, seeded) and scaled by --scale. The same run with the gate before `.writers`
(`TurnstileOnly`: only the writer at the turnstile keeps readers out) shows what the change does
to throughput and to the waits, holding everything else equal. flock's behaviour does not depend
on what the holders do, so sleeps stand in for kernels; what it cannot show is the GPU's own
contention between readers.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sandbox.workers.gpu.gpu_gate import GpuGate, Mode  # noqa: E402

# Median seconds on the H200 (call 1 of h200-2026-12-03d; the candidate's shared hold as now).
CANDIDATE_START = 2.2  # interpreter, import torch: no hold
CANDIDATE_SHARED = 3.5  # reference state, import, construct, trials
CANDIDATE_EXCLUSIVE = 0.75  # timing and profile
CANDIDATE_EXIT = 0.3  # shared again until the process is gone
JUDGE_COMPARE = 0.8  # shared
JUDGE_COMPILE = 4.6  # torch.compile compiling: no hold
JUDGE_FIRST_RUN = 0.5  # shared
JUDGE_EXCLUSIVE = 0.75  # eager, torch.compile and bandwidth timed in one hold
JUDGE_EXIT = 1.6  # no hold


class TurnstileOnly(GpuGate):
    """The gate as it was before `.writers`: a reader waits only for the writer at the turnstile.
    Its `.writers` lock is a file of its own, which no other process locks, so it never waits."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        os.close(self._writers)
        self._writers, private = tempfile.mkstemp(prefix="writers-")
        os.unlink(private)  # flock needs only the open file


def _slot(path: str, kind: str, jobs: mp.Queue, results: mp.Queue, scale: float, seed: int) -> None:
    rng = random.Random(seed)
    cls = TurnstileOnly if kind == "turnstile" else GpuGate

    def work(seconds: float) -> None:
        time.sleep(scale * seconds * rng.lognormvariate(0.0, 0.35))

    def hold(gate: GpuGate, mode: Mode) -> float:
        began = time.monotonic()
        gate.hold(mode)
        return time.monotonic() - began

    while jobs.get() is not None:
        waits = {
            "candidate shared": 0.0,
            "candidate exclusive": 0.0,
            "judge shared": 0.0,
            "judge exclusive": 0.0,
        }
        with cls(path) as candidate:
            work(CANDIDATE_START)
            waits["candidate shared"] += hold(candidate, "shared")
            work(CANDIDATE_SHARED)
            waits["candidate exclusive"] += hold(candidate, "exclusive")
            work(CANDIDATE_EXCLUSIVE)
            candidate.hold("shared")
            work(CANDIDATE_EXIT)
        with cls(path) as judge:
            waits["judge shared"] += hold(judge, "shared")
            work(JUDGE_COMPARE)
            judge.hold("none")
            work(JUDGE_COMPILE)
            waits["judge shared"] += hold(judge, "shared")
            work(JUDGE_FIRST_RUN)
            waits["judge exclusive"] += hold(judge, "exclusive")
            work(JUDGE_EXCLUSIVE)
        work(JUDGE_EXIT)
        results.put((time.monotonic(), {k: v / scale for k, v in waits.items()}))


def simulate(kind: str, slots: int, evaluations: int, scale: float, seed: int) -> dict[str, float]:
    ctx = mp.get_context("fork")
    jobs: mp.Queue = ctx.Queue()
    results: mp.Queue = ctx.Queue()
    for _ in range(evaluations):
        jobs.put(1)
    for _ in range(slots):
        jobs.put(None)
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "gpu-0.lock")
        started = time.monotonic()
        procs = [
            ctx.Process(target=_slot, args=(path, kind, jobs, results, scale, seed * 1000 + i))
            for i in range(slots)
        ]
        for proc in procs:
            proc.start()
        done = [results.get() for _ in range(evaluations)]
        for proc in procs:
            proc.join()
    wall = (max(t for t, _ in done) - started) / scale
    row = {"wall_s": wall, "per_minute": evaluations / wall * 60}
    for key in done[0][1]:
        row[key] = statistics.median(w[key] for _, w in done)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--slots", type=int, default=12, help="evaluations per GPU (the batch's --evals-per-gpu)"
    )
    parser.add_argument("--evaluations", type=int, default=120)
    parser.add_argument("--scale", type=float, default=0.25, help="sleep this fraction of each measured time")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lines = [
        f"# GPU gate simulation: {args.slots} slots, {args.evaluations} evaluations, sleeps at x{args.scale}, "
        f"{args.repeats} runs each",
        "",
        f"`python benchmarks/gate_sim.py --slots {args.slots} --evaluations {args.evaluations} "
        f"--scale {args.scale} --repeats {args.repeats}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        "seconds are the H200's (divided back by the scale).",
        "",
        "| gate | run | evaluations a minute | candidate shared wait | candidate exclusive wait | "
        "judge shared waits | judge exclusive wait |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in range(args.repeats):
        for kind in ("turnstile", "writers"):
            row = simulate(kind, args.slots, args.evaluations, args.scale, seed=run)
            name = "turnstile only (before)" if kind == "turnstile" else "with .writers (now)"
            lines.append(
                f"| {name} | {run + 1} | {row['per_minute']:.1f} | {row['candidate shared']:.2f} | "
                f"{row['candidate exclusive']:.2f} | {row['judge shared']:.2f} | {row['judge exclusive']:.2f} |"
            )
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
