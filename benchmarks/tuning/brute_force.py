"""Measure every valid point of every tuning-benchmark kernel once, on the GPU, through the tuner itself.

usage: python benchmarks/tuning/brute_force.py --out-dir DIR [--kernels gelu,sgemm] [--work-dir DIR]

For each kernel folder in benchmarks/tuning/kernels/ (a workspace's model files plus
kernels/tune.json, runtime mode) and each of its tasks in benchmarks/tuning/tasks/
(`<kernel>_<shape>.py`): build once (all kernels at once, ninja spreading each build's files over
the cores), then run `agent tune`'s machinery with the exhaustive strategy: the trusted judge
checks every point's output against the reference, the worker times it (events, L2 flush,
median of a few repetitions). One Kernel Tuner cache JSON per task lands in DIR, plus
summary.json. Then one ordinary adaptive `agent tune` run (--e2e-task, --e2e-budget) whose table
lands in DIR/e2e_<task>.txt. Replay the caches with benchmarks/tuning/replay.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from agent.compile import compile_solution  # noqa: E402
from agent.tasks import Task, load_folder  # noqa: E402
from agent.tune.budget import BudgetSpec  # noqa: E402
from agent.tune.runner import TuneOptions, has_sources, run_tuning  # noqa: E402
from agent.workspace import Workspace  # noqa: E402
from sandbox.base import open_sandbox  # noqa: E402

# A few repetitions per point: the cache records the median and the IQR of each.
BRUTE_TIMING = {
    "warmup_ms": 1.0,
    "min_warmup": 2,
    "target_ms": 3.0,
    "min_reps": 5,
    "max_reps": 20,
    "max_seconds": 1.0,
}


def kernel_of(task: Task) -> str:
    return task.name.split("_", 1)[0]


def make_workspace(root: Path, kernel: str, task: Task, dest: Path) -> Workspace:
    """A fresh workspace for `task` holding the benchmark kernel's model files."""
    shutil.rmtree(dest, ignore_errors=True)
    ws = Workspace.create(dest, task)
    source = root / "kernels" / kernel
    shutil.copy(source / "model_new.py", dest / "model_new.py")
    for path in (source / "kernels").iterdir():
        shutil.copy(path, dest / "kernels" / path.name)
    return ws


def adaptive_run(
    tasks: list[Task], workspaces: dict, failed: set[str], args: argparse.Namespace, out_dir: Path
) -> dict:
    """One ordinary `agent tune` run (adaptive search, paired final, write-back) on an already built kernel."""
    from agent.tune.tool import render

    task = next((t for t in tasks if t.name == args.e2e_task and kernel_of(t) not in failed), None)
    if task is None:
        return {"skipped": f"{args.e2e_task} not measured"}
    ws = workspaces[kernel_of(task)]
    options = TuneOptions(
        budget=BudgetSpec(wall_seconds=args.e2e_budget),
        use_experience=False,
        record_experience=False,
        arch=args.arch,
        device=args.device,
    )
    with open_sandbox(args.sandbox, workspace=ws.root) as box:
        result = run_tuning(task, ws, box, options, sandbox_kind=box.kind)
    table = render(result)
    (out_dir / f"e2e_{task.name}.txt").write_text(table + "\n")
    (out_dir / f"e2e_{task.name}.json").write_text(result.model_dump_json(indent=1))
    print(f"adaptive run on {task.name} ({args.e2e_budget:g}s budget):\n{table}", flush=True)
    return {"task": task.name, "ok": result.ok, "message": result.message}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument(
        "--work-dir", type=Path, default=Path("/tmp/kernel-agent-tuning-work"), help="where the workspaces go"
    )
    parser.add_argument("--kernels", default="", help="comma-separated subset (default: all)")
    parser.add_argument("--sandbox", default="local")
    parser.add_argument("--arch", default=None)
    parser.add_argument("--root", type=Path, default=HERE, help="folder with kernels/ and tasks/")
    parser.add_argument("--device", default="cuda", help="cpu only for dry runs of pure-Python kernels")
    parser.add_argument("--e2e-task", default="softmax_4096x2048", help="task of the final adaptive run")
    parser.add_argument("--e2e-budget", type=float, default=25.0, help="its budget in seconds (0: skip it)")
    args = parser.parse_args()
    out_dir: Path = args.out_dir
    work: Path = args.work_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    tasks, errors = load_folder(args.root / "tasks")
    for error in errors:
        print(f"task error: {error}", flush=True)
    wanted = {k for k in args.kernels.split(",") if k}
    tasks = [t for t in tasks if not wanted or kernel_of(t) in wanted]
    kernels = sorted({kernel_of(t) for t in tasks})
    print(
        f"{len(tasks)} tasks, kernels: {', '.join(kernels)} (loaded in {time.monotonic() - started:.1f}s)",
        flush=True,
    )

    workspaces = {
        k: make_workspace(args.root, k, next(t for t in tasks if kernel_of(t) == k), work / k)
        for k in kernels
    }
    # Builds run side by side; each sandboxed build has a memory cap, so bound its parallel nvcc jobs.
    os.environ.setdefault("MAX_JOBS", str(max(2, (os.cpu_count() or 8) // 2)))

    def build(kernel: str) -> tuple[str, bool, float, str]:
        ws = workspaces[kernel]
        if not has_sources(ws):
            return kernel, True, 0.0, "nothing to build"
        with open_sandbox(args.sandbox, workspace=ws.root) as box:
            result = compile_solution(ws, box, arch=args.arch, timeout=900)
        return kernel, result.ok, result.duration_s, result.feedback()

    compile_start = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(kernels)) as pool:
        built = list(pool.map(build, kernels))
    compile_s = time.monotonic() - compile_start
    for kernel, ok, seconds, feedback in built:
        print(
            f"build {kernel}: {'ok' if ok else 'FAILED'} in {seconds:.1f}s" + ("" if ok else f"\n{feedback}"),
            flush=True,
        )
    failed_builds = {k for k, ok, _, _ in built if not ok}

    summary: dict = {"compile_s": compile_s, "tasks": {}, "timing": BRUTE_TIMING}
    for task in tasks:
        kernel = kernel_of(task)
        if kernel in failed_builds:
            continue
        ws = workspaces[kernel]
        task_start = time.monotonic()
        count = [0]

        def log(line: str, name: str = task.name, count: list[int] = count) -> None:
            count[0] += 1
            if count[0] % 25 == 1 or "FAILED" in line or "incorrect" in line or "crashed" in line:
                print(f"  {name} #{count[0]}: {line}", flush=True)

        options = TuneOptions(
            budget=BudgetSpec(wall_seconds=900),
            strategy="exhaustive",
            batch=32,
            apply=False,
            use_experience=False,
            record_experience=False,
            retime_rounds=0,
            timing=dict(BRUTE_TIMING),
            arch=args.arch,
            device=args.device,
            cache_out=out_dir / f"{task.name}.json",
            cache_meta={"kernel": kernel, "task_file": task.path.name},
        )
        print(f"{task.name}: measuring every valid point", flush=True)
        with open_sandbox(args.sandbox, workspace=ws.root) as box:
            result = run_tuning(task, ws, box, options, sandbox_kind=box.kind, log=log)
        seconds = time.monotonic() - task_start
        outcome = result.outcome
        history = outcome.history if outcome else []
        statuses: dict[str, int] = {}
        for m in history:
            statuses[m.status] = statuses.get(m.status, 0) + 1
        summary["tasks"][task.name] = {
            "ok": result.ok,
            "message": result.message,
            "valid_points": result.space_points,
            "measured": len(history),
            "statuses": statuses,
            "seconds": seconds,
            "gpu_seconds": outcome.usage.gpu_seconds if outcome else 0.0,
            "default_ms": outcome.default_ms if outcome else None,
            "best_ms": outcome.best_ms if outcome else None,
            "best": outcome.best_key if outcome else None,
            "device": result.device,
        }
        print(
            f"{task.name}: {len(history)}/{result.space_points} points {statuses} in {seconds:.1f}s; "
            f"default {outcome.default_ms if outcome else None} ms, best {outcome.best_ms if outcome else None} ms "
            f"({result.message})",
            flush=True,
        )
    if args.e2e_budget > 0:
        summary["e2e"] = adaptive_run(tasks, workspaces, failed_builds, args, out_dir)
    summary["total_s"] = time.monotonic() - started
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"done in {summary['total_s']:.1f}s (compile {compile_s:.1f}s); caches in {out_dir}", flush=True)
    return 0 if not failed_builds and all(v["ok"] for v in summary["tasks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
