"""Batch-judging benchmark: `agent batch --solutions` over our benchmark solutions, timed.

Builds solutions folders of candidates by cycling through benchmarks/solutions (the correct level-1
solutions by default; `--include-broken` adds the broken variants), each a fresh copy
(`<task>__copyN`), so every candidate is compiled from scratch, as in a real batch. Then runs each
arm (a GPU setting, evaluations per GPU, a number of candidates) into a fresh store and reports the
wall time, the time per solution, how many evaluations were in their GPU stage at once, the share
of evaluation time spent compiling, and, per task, the speedups each arm measured: with several
evaluations per GPU they must agree with one per GPU, since the referee's GPU gates keep every
timing exclusive. Baselines (eager, torch.compile) are timed once per task in a warm-up before the
arms (`--no-warmup` to time them in the first arm), so every arm starts from the same cache. The
markdown table is rewritten after every arm, so a run cut short keeps what it measured.

Arms: `--arm GPUS:N:COUNT` (repeatable, e.g. `--arm 0:4:100 --arm 0:1:14`), else every `--gpus`
setting with every `--evals-per-gpu` value on `--count` candidates.

usage (one H200):   python benchmarks/batch_bench.py --arm 0:4:100 --arm 0:1:14 --out batch_h200.md
usage (two H200s):  python benchmarks/batch_bench.py --count 100 --gpus 0 --gpus 0,1 --out ...
CPU smoke test:     python benchmarks/batch_bench.py --fake --count 6 --gpus 0 --evals-per-gpu 1 2
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.batch.config import BatchConfig, JudgingOptions  # noqa: E402
from agent.batch.environment import gpu_inventory, versions  # noqa: E402
from agent.batch.executors.local import LocalEvaluator  # noqa: E402
from agent.batch.progress import LogProgress  # noqa: E402
from agent.batch.runner import BatchRunner  # noqa: E402
from agent.batch.store import Store  # noqa: E402

TASKS = REPO / "benchmarks" / "tasks"
SOLUTIONS = REPO / "benchmarks" / "solutions"
BROKEN = "__broken_"


@dataclass(frozen=True)
class Arm:
    gpus: list[str]
    evals_per_gpu: int
    count: int

    @classmethod
    def parse(cls, spec: str) -> Arm:
        """`GPUS:N:COUNT`, e.g. `0,1:4:100` (GPUS may be empty: no GPU)."""
        gpus, n, count = spec.split(":")
        return cls([g for g in gpus.split(",") if g], int(n), int(count))

    @property
    def gpu_label(self) -> str:
        return ",".join(self.gpus) or "none"

    @property
    def label(self) -> str:
        return f"GPUs {self.gpu_label}, {self.evals_per_gpu}/GPU, {self.count} candidates"

    @property
    def slug(self) -> str:
        return f"gpus{'_'.join(self.gpus) or 'none'}-n{self.evals_per_gpu}-c{self.count}"


def pick_solutions(levels: list[int], include_broken: bool) -> list[Path]:
    found = []
    for level in levels:
        for folder in sorted((SOLUTIONS / f"level{level}").glob("*")):
            if (folder / "model_new.py").is_file() and (include_broken or BROKEN not in folder.name):
                found.append(folder)
    return found


def build_copies(sources: list[Path], count: int, dest: Path) -> dict[str, str]:
    """`count` candidates cycling through `sources`; returns candidate name -> expected verdict."""
    expected: dict[str, str] = {}
    for n, source in zip(range(count), itertools.cycle(sources), strict=False):
        target = dest / source.parent.name / f"{source.name}__copy{n}"
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", ".*"))
        verdict_file = source / "expected.json"
        expected[target.name.partition("__")[2]] = (
            json.loads(verdict_file.read_text())["verdict"] if verdict_file.is_file() else "correct"
        )
    return expected


def run_once(
    args: argparse.Namespace, solutions: Path, arm: Arm, out: Path, *, warm: bool = False
) -> dict[str, Any]:
    slots = arm.evals_per_gpu * max(len(arm.gpus), 1)
    config = BatchConfig(
        tasks=[TASKS / f"level{level}" for level in args.levels],
        mode="solutions",
        solutions=solutions,
        out=out,
        store=out / "store.sqlite",
        gpus=arm.gpus,
        evals_per_gpu=arm.evals_per_gpu,
        concurrency=args.compile_workers + 2 * slots,  # as `agent batch` chooses by default
        compile_workers=args.compile_workers,
        eval=JudgingOptions(
            sandbox=args.sandbox,
            policy=args.policy,
            arch=args.arch,
            compile_mode=None if args.compile_mode == "none" else args.compile_mode,
            refresh_baselines=warm and args.refresh_baselines,
        ),
        instantiate_tasks=not args.fake,
    )
    evaluator = None
    if args.fake:
        from agent.batch.fakes import fake_compile, fake_judge

        evaluator = LocalEvaluator(
            gpus=arm.gpus,
            compile_workers=args.compile_workers,
            evals_per_gpu=arm.evals_per_gpu,
            lock_dir=out.parent / "fake-gpu-gates",
            compile_fn=fake_compile,
            judge_fn=fake_judge,
        )
    started = time.monotonic()
    try:
        summary = BatchRunner(config, evaluator=evaluator, progress=LogProgress()).run()
    finally:
        if evaluator is not None:
            evaluator.close()
    wall = time.monotonic() - started
    with Store(config.store) as store:
        records = store.results()
    db = sqlite3.connect(config.store)
    try:
        finished = [row[0] for row in db.execute("SELECT finished_at FROM attempts ORDER BY finished_at")]
    finally:
        db.close()
    speedups: dict[str, list[float]] = {}
    for r in records:
        if r.correct and r.speedup_eager is not None:
            speedups.setdefault(f"level{r.level}/{r.task_name}", []).append(r.speedup_eager)
    return {
        "arm": arm,
        "store": str(config.store),
        "wall_s": wall,
        "n": len(records),
        "counts": summary.counts,
        "compile_s": sum(r.compile_s for r in records),
        "gpu_s": sum(r.gpu_s for r in records),
        "verdicts": {r.item_key: r.verdict or r.status for r in records},
        "candidates": {r.item_key: r.candidate for r in records},
        "speedups": speedups,
        # between the first and the last evaluation to finish: no start-up, no pipeline fill
        "steady_s": (finished[-1] - finished[0]) / (len(finished) - 1) if len(finished) > 1 else None,
    }


def render(
    args: argparse.Namespace,
    arms: list[Arm],
    runs: list[dict[str, Any]],
    expected: dict[str, str],
    warm_s: float | None,
) -> str:
    gpus = gpu_inventory(sorted({g for arm in arms for g in arm.gpus}))
    v = versions(BatchConfig(tasks=[], mode="solutions", out=Path("."), store=Path(".")))
    warm = (
        f"baselines timed in a warm-up first ({warm_s:.1f} s, one candidate per task)"
        if warm_s is not None
        else "baselines timed in the first arm"
    )
    lines = [
        f"# Batch judging benchmark ({dt.date.today().isoformat()})",
        "",
        f"- command: `python benchmarks/batch_bench.py {' '.join(args.argv)}`",
        f"- candidates cycled from benchmarks/solutions level(s) {args.levels}"
        + (" incl. broken variants" if args.include_broken else " (correct solutions)")
        + "; each a fresh copy, compiled from scratch",
        f"- GPUs: {', '.join(g.get('name', g['id']) for g in gpus) or 'none'}; {os.cpu_count()} cores; "
        f"torch {v.get('torch')}; git {(v.get('git_sha') or '?')[:10]}; sandbox {args.sandbox}; "
        f"policy {args.policy}; compile workers {args.compile_workers}; {warm}"
        + ("; FAKE compile and judge (machinery only)" if args.fake else ""),
        "",
        "| GPUs | evals per GPU | candidates | wall (s) | per solution (s) | steady per solution (s) "
        "| GPU stage per solution (s) | in GPU stage at once | compile share | verdicts | as expected |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        arm: Arm = run["arm"]
        n = max(run["n"], 1)
        share = run["compile_s"] / max(run["compile_s"] + run["gpu_s"], 1e-9)
        at_once = run["gpu_s"] / max(run["wall_s"], 1e-9)
        ok = sum(
            1 for key, verdict in run["verdicts"].items() if expected.get(run["candidates"][key]) == verdict
        )
        verdicts = ", ".join(f"{k} {c}" for k, c in sorted(run["counts"].items()))
        steady = f"{run['steady_s']:.2f}" if run["steady_s"] is not None else "-"
        lines.append(
            f"| {arm.gpu_label} | {arm.evals_per_gpu} | {run['n']} | {run['wall_s']:.1f} "
            f"| {run['wall_s'] / n:.2f} | {steady} | {run['gpu_s'] / n:.2f} | {at_once:.1f} | {share:.0%} "
            f"| {verdicts} | {ok}/{run['n']} |"
        )
    first = runs[0] if runs else None
    for run in runs[1:]:
        assert first is not None
        mine, theirs = run["wall_s"] / max(run["n"], 1), first["wall_s"] / max(first["n"], 1)
        steady = (
            f", steady {run['steady_s'] / first['steady_s']:.2f}x"
            if run["steady_s"] and first["steady_s"]
            else ""
        )
        lines += [
            "",
            f"Per-solution time, {run['arm'].label} vs {first['arm'].label}: "
            f"{mine / max(theirs, 1e-9):.2f}x{steady} (wall {run['wall_s']:.1f} s vs {first['wall_s']:.1f} s)",
        ]
    tasks = sorted({t for run in runs for t in run["speedups"]})
    if tasks:
        lines += [
            "",
            "Speedup vs eager of the correct candidates, per task and arm: median (min-max, n).",
            "",
            "| task | " + " | ".join(run["arm"].label for run in runs) + " |",
            "|---|" + "---|" * len(runs),
        ]
        for task in tasks:
            cells = []
            for run in runs:
                values = run["speedups"].get(task, [])
                cells.append(
                    f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f}, {len(values)})"
                    if values
                    else "-"
                )
            lines.append(f"| {task} | " + " | ".join(cells) + " |")
    missing = arms[len(runs) :]
    if missing:
        lines += ["", "Not run (yet): " + "; ".join(arm.label for arm in missing) + "."]
    lines += [
        "",
        "per solution: wall / candidates (start-up and pipeline fill included). steady per solution: "
        "from the first evaluation to finish to the last, per evaluation. GPU stage per solution: candidate + "
        "judge process seconds per evaluation (waits for the GPU gate included). In GPU stage at once: "
        "GPU-stage seconds / wall, the mean number of evaluations judging at a time. compile share: "
        "compile seconds / (compile + GPU-stage seconds), summed over candidates.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--arm", action="append", default=None, type=Arm.parse, help="GPUS:N:COUNT")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--gpus", action="append", default=None, help="repeatable: 0 then 0,1")
    parser.add_argument("--evals-per-gpu", type=int, nargs="+", default=[4])
    parser.add_argument("--levels", type=int, nargs="+", default=[1])
    parser.add_argument("--include-broken", action="store_true")
    parser.add_argument("--compile-workers", type=int, default=None)
    parser.add_argument("--sandbox", default="local")
    parser.add_argument("--policy", default="strict")
    parser.add_argument("--arch", default=None)
    parser.add_argument("--compile-mode", default="default")
    parser.add_argument("--no-warmup", dest="warmup", action="store_false")
    parser.add_argument("--refresh-baselines", action="store_true", help="re-time baselines in the warm-up")
    parser.add_argument("--fake", action="store_true", help="fake compile and judge: test the machinery")
    parser.add_argument("--keep", type=Path, default=None, help="keep the stores and attempts here")
    parser.add_argument("--out", type=Path, default=None, help="write the markdown table here")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.compile_workers = args.compile_workers or os.cpu_count() or 1
    arms: list[Arm] = args.arm or [
        Arm([g for g in spec.split(",") if g], n, args.count)
        for spec in (args.gpus or ["0"])
        for n in args.evals_per_gpu
    ]
    if not args.arch:
        from agent.build.toolkit import resolve_arch

        args.arch = resolve_arch(None)[0]
    work = Path(tempfile.mkdtemp(prefix="batch-bench-")) if args.keep is None else args.keep
    sources = pick_solutions(args.levels, args.include_broken)
    if not sources:
        parser.error(f"no solutions for levels {args.levels} under {SOLUTIONS}")

    def write(table: str) -> None:
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(table)

    runs: list[dict[str, Any]] = []
    expected: dict[str, str] = {}
    warm_s = None
    try:
        if args.warmup and not args.fake:
            warm = work / "warm-solutions"
            build_copies(sources, len(sources), warm)
            print(f"warm-up: timing baselines with {len(sources)} candidates", flush=True)
            started = time.monotonic()
            run_once(
                args, warm, Arm(arms[0].gpus, arms[0].evals_per_gpu, len(sources)), work / "warm", warm=True
            )
            warm_s = time.monotonic() - started
        folders: dict[int, Path] = {}
        for i, arm in enumerate(arms):
            if arm.count not in folders:
                folders[arm.count] = work / f"solutions-{arm.count}"
                expected |= build_copies(sources, arm.count, folders[arm.count])
            print(f"arm {i + 1}/{len(arms)}: {arm.label}", flush=True)
            runs.append(run_once(args, folders[arm.count], arm, work / f"arm{i}-{arm.slug}"))
            write(render(args, arms, runs, expected, warm_s))
        table = render(args, arms, runs, expected, warm_s)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(table)
    write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
