"""Does a busy CPU stretch the referee's timing, and does waiting for the GPU asleep help?

In the tenth session's full-size batch on the H200 (`results/h200-2026-12-03e/`) two legitimate
generations were called `policy_violation` by the timing check: the host came back late from the
device-wide sync after every call (a steady 3.9 ms after a 3.4 ms call), so the supervisor's window
outgrew the calls. The suspicion: a sync that spins makes the timing thread a CPU hog, and a loaded
scheduler stalls it one slice at a time. This times one call with the referee's own `time_calls`
in a fresh process per setting, under N busy processes at a given niceness, once with the
driver's default wait (spin) and once with `TimingConfig(blocking_sync=True)`:

    python benchmarks/diag/sync_contention.py --out F.md            # on the GPU machine
    python benchmarks/diag/sync_contention.py --loads 0 16 32 --nice 0 10

What to read: `window/rep - call` is the loop's own cost per repetition (inputs, flush, the host's
round trip); `gap` is the stream end to the device-wide end after each call, `ref gap` the same
after a GPU sleep; `added` is what the worker charged the call for "other streams".
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

WORKERS = Path(__file__).resolve().parents[2] / "sandbox" / "workers"


def child(mode: str, op: str, device: str) -> None:
    """One timing in this process; prints its record as JSON."""
    sys.path.insert(0, str(WORKERS))
    import siblings  # noqa: F401  (the workers import each other by name)
    import torch
    from timing import TimingConfig, _cudart, time_calls

    torch.manual_seed(0)
    if op == "conv3d":  # level-2 problem 48's convolution, at its full size
        model = torch.nn.Conv3d(3, 16, 3).to(device)

        def make_inputs(_index: int) -> list:
            return [torch.rand(128, 3, 16, 64, 64, device=device)]
    else:  # a short call: diag(A) @ B as a broadcast multiply, level-1 problem 12's size
        model = torch.nn.Identity()

        def make_inputs(_index: int) -> list:
            return [torch.rand(4096, 1, device=device) * torch.rand(4096, 4096, device=device)]

    config = TimingConfig(blocking_sync=mode == "blocking")
    with torch.no_grad():
        record = time_calls(lambda x: model(*x), make_inputs, device=device, config=config)
    flags = None
    library = _cudart()
    if library is not None and device.startswith("cuda"):
        import ctypes

        value = ctypes.c_uint(0)
        if library.cudaGetDeviceFlags(ctypes.byref(value)) == 0:
            flags = value.value
    print(json.dumps({"record": record, "device_flags": flags}))


def busy(niceness: int) -> None:
    os.nice(niceness)
    while True:
        pass


def run(args: argparse.Namespace) -> list[dict]:
    rows = []
    for load in args.loads:
        for niceness in args.nice if load else [0]:
            hogs = [
                subprocess.Popen([sys.executable, __file__, "--busy", str(niceness)]) for _ in range(load)
            ]
            time.sleep(1.0 if load else 0.0)
            try:
                for mode in args.modes:
                    for repeat in range(args.repeats):
                        out = subprocess.run(
                            [
                                sys.executable,
                                __file__,
                                "--child",
                                mode,
                                "--op",
                                args.op,
                                "--device",
                                args.device,
                            ],
                            capture_output=True,
                            text=True,
                            check=False,
                        )
                        if out.returncode != 0:
                            print(out.stderr[-2000:], file=sys.stderr)
                            continue
                        found = json.loads(out.stdout.strip().splitlines()[-1])
                        rows.append({"load": load, "nice": niceness, "mode": mode, "repeat": repeat, **found})
                        print(line(rows[-1]), flush=True)
            finally:
                for hog in hogs:
                    hog.kill()
                for hog in hogs:
                    hog.wait()
    return rows


def line(row: dict) -> str:
    r = row["record"]
    per_rep = (r["window_ms"] or 0.0) / max(r["n"], 1)
    return (
        f"| {row['load']} | {row['nice']} | {row['mode']} | {row['device_flags']} | {r['median_ms']:.4f} | "
        f"{r['host_median_ms']:.4f} | {per_rep - r['mean_ms'] + (r['other_streams_ms'] or 0):.4f} | "
        f"{r['sync_gap_ms'] or 0:.4f} | {r['reference_gap_ms'] or 0:.4f} | {r['other_streams_ms'] or 0:.4f} | {r['n']} |"
    )


HEADER = (
    "| busy processes | their nice | sync | device flags | call ms (median) | host ms (median) | "
    "window/rep - call ms | gap ms | ref gap ms | added ms | reps |\n|---|---|---|---|---|---|---|---|---|---|---|"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--loads", type=int, nargs="+", default=[0, 16, 32])
    parser.add_argument("--nice", type=int, nargs="+", default=[0, 10])
    parser.add_argument("--modes", nargs="+", default=["spin", "blocking"])
    parser.add_argument("--op", choices=["conv3d", "mul"], default="conv3d")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--busy", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.busy is not None:
        busy(args.busy)
    if args.child:
        child(args.child, args.op, args.device)
        return
    print(HEADER)
    rows = run(args)
    by_mode: dict[tuple, list[float]] = {}
    for row in rows:
        r = row["record"]
        by_mode.setdefault((row["load"], row["nice"], row["mode"]), []).append(r["sync_gap_ms"] or 0.0)
    summary = [
        f"- load {k[0]} nice {k[1]} {k[2]}: median gap {statistics.median(v):.4f} ms"
        for k, v in by_mode.items()
    ]
    print("\n".join(summary))
    if args.out:
        args.out.write_text(
            f"`python benchmarks/diag/sync_contention.py {' '.join(sys.argv[1:])}`, "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n\n{HEADER}\n"
            + "\n".join(line(r) for r in rows)
            + "\n\n"
            + "\n".join(summary)
            + "\n"
        )


if __name__ == "__main__":
    main()
