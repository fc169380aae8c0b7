"""Does a niced build give way to a timing? The referee's timing loop beside CPU hogs.

The timing check bounds a candidate's reported times by the supervisor's clock on the whole timed
window, less the loop's own cost per repetition (inputs, L2 flush) measured when the baselines were
timed. A busy CPU stretches the window, and the check then doubts an honest timing. This times the
real loop (`sandbox/workers/gpu/timing.py`) on a 19_ReLU-sized call, alone and beside CPU hogs (1 and 4
per core: a batch's builds each run several compiler processes) at niceness 0 and at the build
worker's niceness, and reports the loop's cost per repetition
(window / reps - mean call time) over several windows.

usage (GPU machine): python benchmarks/nice_bench.py --windows 15 --out nice_bench_h200.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "sandbox" / "workers"))
import siblings  # noqa: E402,F401  (the workers import each other by name)
from build import BUILD_NICENESS  # noqa: E402
from timing import time_calls  # noqa: E402

HOG = "while True: pass"


def loop_costs(windows: int) -> list[tuple[float, float]]:
    """(loop cost per repetition, mean call) in ms, one per timed window."""
    x = torch.randn(4096, 16384, device="cuda")
    out = []
    for _ in range(windows):
        stats = time_calls(torch.relu, lambda _i: torch.randn_like(x), device="cuda")
        out.append((stats["window_ms"] / stats["n"] - stats["mean_ms"], stats["mean_ms"]))
    return out


def with_hogs(niceness: int, per_core: int, windows: int) -> list[tuple[float, float]]:
    hogs = [
        subprocess.Popen([sys.executable, "-c", HOG], preexec_fn=lambda: os.nice(niceness))
        for _ in range(per_core * (os.cpu_count() or 1))
    ]
    try:
        return loop_costs(windows)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def row(label: str, costs: list[tuple[float, float]]) -> str:
    loop = sorted(c for c, _ in costs)
    calls = [m for _, m in costs]
    return (
        f"| {label} | {len(loop)} | {statistics.median(loop):.3f} | {loop[0]:.3f} | {loop[-1]:.3f} "
        f"| {statistics.median(calls):.4f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--windows", type=int, default=15)
    parser.add_argument("--hogs-per-core", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    loop_costs(2)  # CUDA context, allocator, kernels loaded
    arms = [("alone", 0, 0)]
    for per_core in args.hogs_per_core:
        arms.append((f"{per_core} hog(s) per core, niceness 0", 0, per_core))
        arms.append(
            (f"{per_core} hog(s) per core, niceness {BUILD_NICENESS} (builds')", BUILD_NICENESS, per_core)
        )
    lines = [
        f"# Timing loop beside CPU hogs ({dt.date.today()})",
        "",
        f"- command: `python benchmarks/nice_bench.py --windows {args.windows} --hogs-per-core "
        f"{' '.join(map(str, args.hogs_per_core))}`",
        f"- machine: {torch.cuda.get_device_name()}, {os.cpu_count()} cores, torch {torch.__version__}",
        "- call: torch.relu on a fresh 4096x16384 float32 input per repetition (19_ReLU's size), "
        "timed by the referee's loop (CUDA events around a device sync, L2 flush)",
        "",
        "| CPU load | windows | loop cost per rep, median (ms) | min | max | call mean, median (ms) |",
        "|---|---|---|---|---|---|",
    ]
    for label, niceness, per_core in arms:
        lines.append(row(label, with_hogs(niceness, per_core, args.windows)))
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
