"""Overhead of a sandboxed command against a bare subprocess, per backend.

    python benchmarks/sandbox_bench.py [--reps 40] [--out benchmarks/results/sandbox_overhead.md]

The docker backend is measured with the small test image the sandbox tests build (Debian from
debootstrap, the host's python mounted read-only); the container starts once and every command
is one `docker exec`. Targets: local under 50 ms, docker exec under 300 ms.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402, F401 - the harness has torch imported: spawning must stay cheap for a big process

from sandbox.base import Sandbox  # noqa: E402
from sandbox.local import LocalSandbox  # noqa: E402

TARGET_MS = {"local": 50.0, "docker": 300.0}
COMMANDS = {"true": ["true"], "python -c pass": [sys.executable, "-c", "pass"]}


def timed_once(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) * 1000


def runner(box: Sandbox | None, cmd: list[str]) -> Callable[[], object]:
    if box is None:
        return lambda: subprocess.run(cmd, check=True)

    def run() -> None:
        result = box.exec(cmd, timeout=60)
        if not result.ok:
            raise SystemExit(f"{box.kind}: {cmd} failed: {result}")

    return run


Row = tuple[str, str, list[float], list[float]]


def measure(boxes: dict[str, Sandbox | None], reps: int) -> list[Row]:
    """Interleaved: each repetition runs the bare command and then every sandbox, so a load spike
    from elsewhere on the machine hits both sides of a pair. Returns (backend, command, times,
    overheads) with overhead = sandbox time minus the bare time of the same repetition."""
    rows = []
    for label, cmd in COMMANDS.items():
        runs = {name: runner(box, cmd) for name, box in boxes.items()}
        for run in runs.values():
            run()  # warm-up
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(reps):
            for name, run in runs.items():
                times[name].append(timed_once(run))
        bare = times["bare subprocess"]
        for name, series in times.items():
            overheads = [t - b for t, b in zip(series, bare, strict=True)]
            rows.append((name, label, series, overheads))
    return rows


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def machine() -> str:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )
    gpu = "no GPU" if not list(Path("/dev").glob("nvidia[0-9]*")) else "GPU present"
    return f"{os.cpu_count()}-core CPU machine ({model}), {gpu}, {platform.platform()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/sandbox_overhead.md")
    parser.add_argument("--no-docker", action="store_true")
    parser.add_argument(
        "--append", action="store_true", help="add this run to the file instead of replacing it"
    )
    args = parser.parse_args()

    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp, "ws")
        ws.mkdir()
        cache = Path(tmp, "cache")
        boxes: dict[str, Sandbox | None] = {
            "bare subprocess": None,
            "local (auto isolation)": LocalSandbox(workspace=ws, cache_dir=cache),
            "local (isolation=none)": LocalSandbox(workspace=ws, cache_dir=cache, isolation="none"),
        }
        if not args.no_docker:
            boxes.update(open_docker(ws, notes))
        try:
            for name, box in boxes.items():
                if box is not None:
                    notes.insert(0, f"{name}: {box.describe()}")
            rows = measure(boxes, args.reps)
            docker_box = boxes.get("docker exec")
            if docker_box is not None:
                restart = [timed_once(docker_box._restart) for _ in range(5)]  # type: ignore[attr-defined]
                notes.append(
                    f"docker: recreate after a timeout {statistics.median(restart):.0f} ms (median of 5)"
                )
        finally:
            for box in boxes.values():
                if box is not None:
                    box.close()

    table = render(rows, notes, args.reps, args.append)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.append and args.out.exists():
        table = args.out.read_text().rstrip() + "\n\n" + table
    else:
        table = "# Sandbox overhead per command\n\n" + table
    args.out.write_text(table)
    print(table)


def open_docker(ws: Path, notes: list[str]) -> dict[str, Sandbox]:
    from sandbox.docker import DockerSandbox
    from tests.sandbox.conftest import docker_options, docker_or_reason
    from tests.sandbox.debian_image import ensure_test_image

    client, reason = docker_or_reason()
    if client is None:
        notes.append(f"docker: not measured: {reason}")
        return {}
    image = ensure_test_image(client)
    start = time.perf_counter()
    box = DockerSandbox(workspace=ws, **docker_options(image, client))
    notes.append(
        f"docker: container start (create + start + keep-alive probe) "
        f"{(time.perf_counter() - start) * 1000:.0f} ms, once per task"
    )
    return {"docker exec": box}


def render(rows: list[Row], notes: list[str], reps: int, append: bool) -> str:
    date = subprocess.run(["date"], capture_output=True, text=True, check=False).stdout.strip()
    load = Path("/proc/loadavg").read_text().split()[:3]
    bare_python = next(statistics.median(t) for b, c, t, _ in rows if b == "bare subprocess" and c != "true")
    lines = [
        f"## Run of {date}",
        "",
        f"- Machine: {machine()}; load average at the end: {' '.join(load)}",
        f"- Command: `python benchmarks/sandbox_bench.py --reps {reps}{' --append' if append else ''}`",
        f"- {reps} interleaved repetitions after one warm-up; times in ms. Overhead: median over",
        "  repetitions of (sandboxed time minus the bare subprocess time of the same repetition).",
        "",
        f"- Bare `python -c pass` median here: {bare_python:.0f} ms; the machine is shared, and",
        "  wall times grow with its load (a sandboxed command has more processes to schedule).",
        "",
        "| backend | command | median | p90 | overhead median | overhead p90 | target | met |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for backend, label, times, overheads in rows:
        kind = "docker" if backend.startswith("docker") else "local" if backend.startswith("local") else ""
        target = TARGET_MS.get(kind)
        over = statistics.median(overheads)
        met = "" if target is None else ("yes" if over < target else "**no**")
        lines.append(
            f"| {backend} | `{label}` | {statistics.median(times):.1f} | {p90(times):.1f} | "
            f"{over:.1f} | {p90(overheads):.1f} | {'' if target is None else f'< {target:.0f}'} | {met} |"
        )
    lines += ["", "What each backend enforced during the run:", ""]
    lines += [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
