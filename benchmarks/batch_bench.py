"""Batch-judging benchmark: `agent batch --solutions` over our benchmark solutions, timed.

Builds a solutions folder of `--count` candidates by cycling through benchmarks/solutions (the
correct level-1 solutions by default; `--include-broken` adds the broken variants), each a fresh
copy (`<task>__copyN`), so every candidate is compiled from scratch, as in a real batch. Then, for
each `--gpus` setting, runs the batch into a fresh store and reports the wall time, the time per
solution, the share of evaluation time spent compiling, how busy the GPUs were and, with two
settings, the ratio of their wall times. Baselines (eager, torch.compile) are timed once per task
before the timed runs (`--no-warmup` to include that), so both settings start from the same cache.

usage (one H200):   python benchmarks/batch_bench.py --count 100 --gpus 0 --out benchmarks/results/batch_h200.md
usage (two H200s):  python benchmarks/batch_bench.py --count 100 --gpus 0 --gpus 0,1 --out ...
CPU smoke test:     python benchmarks/batch_bench.py --fake --count 6 --gpus 0 --gpus 0,1
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.batch.environment import gpu_inventory, versions  # noqa: E402
from agent.batch.executors.local import LocalEvaluator  # noqa: E402
from agent.batch.models import BatchConfig, EvalOptions  # noqa: E402
from agent.batch.progress import LogProgress  # noqa: E402
from agent.batch.runner import BatchRunner  # noqa: E402
from agent.batch.store import Store  # noqa: E402

TASKS = REPO / "benchmarks" / "tasks"
SOLUTIONS = REPO / "benchmarks" / "solutions"
BROKEN = "__broken_"


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
    args: argparse.Namespace, solutions: Path, gpus: list[str], out: Path, *, warm: bool = False
) -> dict[str, Any]:
    config = BatchConfig(
        tasks=[TASKS / f"level{level}" for level in args.levels],
        mode="solutions",
        solutions=solutions,
        out=out,
        store=out / "store.sqlite",
        gpus=gpus,
        concurrency=args.compile_workers + 2 * len(gpus),
        compile_workers=args.compile_workers,
        eval=EvalOptions(
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
            gpus=gpus, compile_workers=args.compile_workers, compile_fn=fake_compile, judge_fn=fake_judge
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
    return {
        "gpus": gpus,
        "wall_s": wall,
        "n": len(records),
        "counts": summary.counts,
        "compile_s": sum(r.compile_s for r in records),
        "gpu_s": sum(r.gpu_s for r in records),
        "verdicts": {r.item_key: r.verdict or r.status for r in records},
        "candidates": {r.item_key: r.candidate for r in records},
    }


def render(args: argparse.Namespace, runs: list[dict[str, Any]], expected: dict[str, str]) -> str:
    gpus = gpu_inventory(sorted({g for r in runs for g in r["gpus"]}))
    v = versions(BatchConfig(tasks=[], mode="solutions", out=Path("."), store=Path(".")))
    lines = [
        f"# Batch judging benchmark ({dt.date.today().isoformat()})",
        "",
        f"- {args.count} candidates cycled from benchmarks/solutions level(s) {args.levels}"
        + (" incl. broken variants" if args.include_broken else " (correct solutions)")
        + "; each a fresh copy, compiled from scratch",
        f"- GPUs: {', '.join(g.get('name', g['id']) for g in gpus) or 'none'}; torch {v.get('torch')}; "
        f"git {(v.get('git_sha') or '?')[:10]}; sandbox {args.sandbox}; policy {args.policy}; "
        f"compile workers {args.compile_workers}; baselines {'warmed first' if args.warmup else 'timed in the run'}"
        + ("; FAKE compile and judge (machinery only)" if args.fake else ""),
        "",
        "| GPUs | candidates | wall (s) | per solution (s) | compile share | GPU busy | verdicts | as expected |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        share = run["compile_s"] / max(run["compile_s"] + run["gpu_s"], 1e-9)
        busy = run["gpu_s"] / max(run["wall_s"] * max(len(run["gpus"]), 1), 1e-9)
        ok = sum(
            1 for key, verdict in run["verdicts"].items() if expected.get(run["candidates"][key]) == verdict
        )
        verdicts = ", ".join(f"{k} {n}" for k, n in sorted(run["counts"].items()))
        lines.append(
            f"| {','.join(run['gpus']) or 'none'} | {run['n']} | {run['wall_s']:.1f} | {run['wall_s'] / max(run['n'], 1):.2f}"
            f" | {share:.0%} | {busy:.0%} | {verdicts} | {ok}/{run['n']} |"
        )
    if len(runs) >= 2:
        base, other = runs[0], runs[-1]
        lines += [
            "",
            f"Wall-time ratio {','.join(base['gpus'])} vs {','.join(other['gpus'])}: "
            f"{base['wall_s'] / max(other['wall_s'], 1e-9):.2f}x",
        ]
    lines += [
        "",
        "compile share: compile seconds / (compile + GPU-stage seconds), summed over candidates. "
        "GPU busy: GPU-stage seconds / (wall x GPUs).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--levels", type=int, nargs="+", default=[1])
    parser.add_argument("--gpus", action="append", default=None, help="repeatable: 0 then 0,1")
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
    import os

    args.compile_workers = args.compile_workers or os.cpu_count() or 1
    settings = [[g for g in spec.split(",") if g] for spec in (args.gpus or ["0"])]
    if not args.arch:
        from agent.toolkit import resolve_arch

        args.arch = resolve_arch(None)[0]
    work = Path(tempfile.mkdtemp(prefix="batch-bench-")) if args.keep is None else args.keep
    sources = pick_solutions(args.levels, args.include_broken)
    if not sources:
        parser.error(f"no solutions for levels {args.levels} under {SOLUTIONS}")
    try:
        if args.warmup and not args.fake:
            warm = work / "warm-solutions"
            build_copies(sources, len(sources), warm)
            print(f"warm-up: timing baselines with {len(sources)} candidates", flush=True)
            run_once(args, warm, settings[0], work / "warm", warm=True)
        solutions = work / "solutions"
        expected = build_copies(sources, args.count, solutions)
        runs = []
        for i, gpus in enumerate(settings):
            print(
                f"run {i + 1}/{len(settings)}: {args.count} candidates on GPUs {gpus or 'none'}", flush=True
            )
            runs.append(run_once(args, solutions, gpus, work / f"run{i}"))
        table = render(args, runs, expected)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
