"""Which timing procedure is steady from one process to the next, on a GPU.

    python benchmarks/timing_modes_bench.py --processes 10 --out benchmarks/results/timing_modes_h200.md

The referee compares timings taken in different processes (the candidate's, the judge's). This
times the same torch ops in `--processes` fresh processes, each with every procedure below in
turn (interleaved blocks, so drift hits all alike), and reports each procedure's median per
process and the coefficient of variation across processes:

- `sync_end`: start event, the call, device-wide synchronize, end event (the referee's procedure,
  sandbox/workers/gpu/timing.py: the host's launch of the call and its wake-up after the sync are inside).
- `blocked_sync_end`: the same, with a GPU sleep queued before the start event, so the call's
  launches are queued before the clock starts.
- `blocked_stream_end`: blocker, start, the call, end event on the current stream (GPU time of
  the current stream only: misses side streams, shown for comparison).
- `stream_end`: start event, the call, end event on the current stream (no blocker).
- `sync_end_minus_matched`: per block, `stream_end`'s median plus the excess (never negative) of
  `sync_end`'s gap between the two end events over the same gap of a reference call: a GPU sleep
  as long as the call, timed right after each repetition. A call that leaves work on another
  stream has a longer gap than its reference (the op `side_stream_sleep_1ms`).
- `excess_matched`: that excess, signed (median over blocks); `excess_matched_block`: the same
  with the reference's gaps from one block before the timed ones.
- `gap`, `gap_p90`: `sync_end`'s gap between the two end events (median, 90th percentile): what
  the host's round trip after the sync adds.
`--schedules auto,spin,yield,blocking` runs each process under that cudaDeviceSchedule flag.
Each process also reports the CPU it last ran on.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

MODES = (
    "sync_end",
    "stream_end",
    "blocked_sync_end",
    "blocked_stream_end",
    "sync_end_minus_matched",
    "excess_matched",
    "excess_matched_block",
    "gap",
    "gap_p90",
)
SCHEDULES = {"auto": 0, "spin": 1, "yield": 2, "blocking": 4}  # cudaDeviceSchedule*
BLOCK_CYCLES = 400_000  # about 200 us at 2 GHz: long enough to queue one call's launches


def child(reps: int, blocks: int, schedule: str) -> dict:
    import ctypes

    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox/workers"))
    import siblings  # noqa: F401  (the workers import each other by name)
    from timing import FLUSH_BYTES, _cudart  # the referee's flush, so the procedures compare alike

    cudart = _cudart()
    flags = ctypes.c_uint(0)
    if cudart is not None and schedule != "auto":
        assert cudart.cudaSetDeviceFlags(SCHEDULES[schedule]) == 0, "cudaSetDeviceFlags failed"
    device = "cuda"
    flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device=device)
    side = torch.cuda.Stream()

    def side_sleep(_x) -> None:  # 1 ms on another stream, not joined: the exploit the gap must see
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(2_000_000)

    ops = {
        "relu_256MiB": (lambda: torch.randn(4096, 16384, device=device), torch.relu),
        "matmul_4096": (
            lambda: torch.randn(4096, 4096, device=device),
            lambda x: torch.mm(x, x),
        ),
        "sleep_1ms": (lambda: None, lambda _x: torch.cuda._sleep(2_000_000)),
        "side_stream_sleep_1ms": (lambda: None, side_sleep),
    }

    def one(blocked: bool, call, inputs) -> tuple[float, float, float]:
        """(start to device end, start to stream end, gap between the two ends) of one repetition."""
        flush.zero_()
        start, stream_end, device_end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        if blocked:
            torch.cuda._sleep(BLOCK_CYCLES)
        start.record()
        out = call(inputs)
        stream_end.record()
        torch.cuda.synchronize()
        device_end.record()
        device_end.synchronize()
        del out
        return (
            start.elapsed_time(device_end),
            start.elapsed_time(stream_end),
            stream_end.elapsed_time(device_end),
        )

    torch.zeros(1, device=device)
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    begin, finish = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    torch.cuda._sleep(4_000_000)
    finish.record()
    finish.synchronize()
    cycles_per_ms = 4_000_000 / begin.elapsed_time(finish)
    if cudart is not None:
        cudart.cudaGetDeviceFlags(ctypes.byref(flags))
    result: dict = {"cpu": _cpu(), "ops": {}, "device_flags": flags.value, "cycles_per_ms": cycles_per_ms}
    for name, (make, call) in ops.items():
        for _ in range(20):
            call(make())
        torch.cuda.synchronize()
        null = sorted(one(True, lambda x: None, None)[0] for _ in range(50))
        null_ms = null[len(null) // 2]
        estimate = statistics.median(one(False, call, make())[1] for _ in range(10))
        cycles = max(1, int(estimate * cycles_per_ms))

        def matched(_x, cycles=cycles) -> None:
            torch.cuda._sleep(cycles)

        block_gaps = [one(False, matched, None)[2] for _ in range(reps)]
        times: dict[str, list[float]] = {m: [] for m in MODES}
        for _ in range(blocks):
            for mode in ("sync_end", "blocked_sync_end"):
                gaps, refs, streams = [], [], []
                for _ in range(reps // blocks):
                    x = make()
                    total, stream, gap = one(mode == "blocked_sync_end", call, x)
                    times[mode].append(total)
                    times[mode.replace("sync", "stream")].append(stream)
                    if mode == "sync_end":
                        times["gap"].append(gap)
                        gaps.append(gap)
                        streams.append(stream)
                        refs.append(one(False, matched, None)[2])
                if mode == "sync_end":
                    excess = statistics.median(gaps) - statistics.median(refs)
                    times["excess_matched"].append(excess)
                    times["excess_matched_block"].append(
                        statistics.median(gaps) - statistics.median(block_gaps)
                    )
                    times["sync_end_minus_matched"].append(statistics.median(streams) + max(0.0, excess))
        medians = {m: statistics.median(v) for m, v in times.items() if m != "gap_p90"}
        medians["gap_p90"] = sorted(times["gap"])[int(0.9 * (len(times["gap"]) - 1))]
        result["ops"][name] = {"null_ms": null_ms, "medians": medians, "matched_cycles": cycles}
    return result


def _cpu() -> str:
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        return fields[36]  # field 39: the CPU it last ran on
    except (OSError, IndexError):
        return "?"


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--reps", type=int, default=64)
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--schedules", default="auto", help="comma-separated: " + ", ".join(SCHEDULES))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.reps, args.blocks, args.schedules)))
        return 0
    schedules = args.schedules.split(",")
    runs: dict[str, list[dict]] = {name: [] for name in schedules}
    command = [sys.executable, __file__, "--child", "--reps", str(args.reps), "--blocks", str(args.blocks)]
    for index in range(args.processes):
        for schedule in schedules:  # interleaved, so drift of the machine hits every schedule
            started = time.monotonic()
            done = subprocess.run([*command, "--schedules", schedule], capture_output=True, text=True)
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                return 1
            runs[schedule].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"process {index + 1} ({schedule}): {time.monotonic() - started:.1f} s", file=sys.stderr)
    lines = [
        "# Timing procedures: medians per process and their spread across processes",
        "",
        f"- date: {time.strftime('%Y-%m-%dT%H:%M:%S%z')}",
        f"- command: `python benchmarks/timing_modes_bench.py --processes {args.processes} --reps {args.reps} "
        f"--blocks {args.blocks} --schedules {args.schedules}`",
        f"- machine: {os.uname().nodename}, {os.cpu_count()} CPUs",
        f"- blocker: torch.cuda._sleep({BLOCK_CYCLES}); fresh inputs per repetition, 256 MiB L2 flush",
        "",
    ]
    for schedule, group in runs.items():
        for op in group[0]["ops"]:
            flags = group[0]["device_flags"]
            lines += [f"## {op}, schedule {schedule} (device flags {flags})", ""]
            lines += [
                "| process | cpu | null ms | " + " | ".join(MODES) + " |",
                "|---" * (3 + len(MODES)) + "|",
            ]
            for index, run in enumerate(group):
                entry = run["ops"][op]
                cells = " | ".join(f"{entry['medians'][m]:.4f}" for m in MODES)
                lines.append(f"| {index + 1} | {run['cpu']} | {entry['null_ms']:.4f} | {cells} |")
            cvs = " | ".join(f"{100 * cv([r['ops'][op]['medians'][m] for r in group]):.2f}%" for m in MODES)
            lines += [f"| CV across processes | | | {cvs} |", ""]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
