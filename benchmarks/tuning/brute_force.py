"""Measure every valid point of every tuning-benchmark kernel once, on the GPU, through the tuner itself.

usage: python benchmarks/tuning/brute_force.py --out-dir DIR [--kernels gelu,sgemm] [--work-dir DIR]
       python benchmarks/tuning/brute_force.py --out-dir DIR --build-only     (no GPU needed)

For each kernel folder in benchmarks/tuning/kernels/ (a workspace's model files plus
kernels/tune.json, runtime mode) and each of its tasks in benchmarks/tuning/tasks/
(`<kernel>_<shape>.py`): build once (all kernels at once, ninja spreading each build's files over
the cores), then run `agent tune`'s machinery with the exhaustive strategy: the trusted judge
checks every point's output against the reference, the worker times it (events, L2 flush,
median of a few repetitions). One Kernel Tuner cache JSON per task lands in DIR, plus
summary.json (rewritten after every task, so a run cut short keeps what it measured). Then one
ordinary adaptive `agent tune` run (--e2e-task, at --e2e-fraction of its space's points, at most
--e2e-budget seconds) whose table lands in DIR/e2e_<task>.txt. Replay the caches with
benchmarks/tuning/replay.py.

--build-only builds the kernels, imports each built extension in the sandbox, checks every task's
space (valid points, the untuned start) and writes DIR/build.json; it measures nothing. Run
against the same --work-dir, it leaves the builds for a later measuring run up to date.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from agent.build.compile import compile_solution  # noqa: E402
from agent.tasks import Task, load_folder  # noqa: E402
from agent.tune.limits import BudgetSpec  # noqa: E402
from agent.tune.runner import TuneOptions, default_point, has_sources, run_tuning  # noqa: E402
from agent.tune.space import DeviceLimits, Space, SpaceError, load_space_file, shape_names  # noqa: E402
from agent.workspace import Workspace  # noqa: E402
from sandbox.base import open_sandbox  # noqa: E402

# A few repetitions per point: the cache records the median and the IQR of each. The GPU stays
# busy from point to point, so half a millisecond of warm-up (at least two calls) is enough.
BRUTE_TIMING = {
    "warmup_ms": 0.5,
    "min_warmup": 2,
    "target_ms": 3.0,
    "min_reps": 5,
    "max_reps": 20,
    "max_seconds": 1.0,
}


def kernel_of(task: Task) -> str:
    return task.name.split("_", 1)[0]


def make_workspace(root: Path, kernel: str, task: Task, dest: Path) -> Workspace:
    """A workspace for `task` holding the benchmark kernel's model files: the one already at `dest`
    when it holds exactly those (its files keep their times, so an interrupted build resumes),
    else a fresh one."""
    source = root / "kernels" / kernel
    wanted = {"model_new.py": (source / "model_new.py").read_text()}
    wanted.update({f"kernels/{p.name}": p.read_text() for p in (source / "kernels").iterdir()})
    if (dest / "model_new.py").is_file():
        existing = Workspace.open(dest)
        if existing.model_files() == wanted:
            return existing
    shutil.rmtree(dest, ignore_errors=True)
    ws = Workspace.create(dest, task)
    shutil.copy(source / "model_new.py", dest / "model_new.py")
    for path in (source / "kernels").iterdir():
        shutil.copy(path, dest / "kernels" / path.name)
    return ws


# Run in the sandbox: a build can link yet not load (an undefined symbol), or lack a function
# model_new.py calls; either would cost a GPU run a whole task.
EXTENSION_CHECK = """import importlib.util, sys
import torch
path, names = sys.argv[1], sys.argv[2:]
spec = importlib.util.spec_from_file_location("cuda_extension", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
missing = [n for n in names if not hasattr(module, n)]
print("missing: " + ", ".join(missing) if missing else "ok")
"""


@dataclass
class Built:
    kernel: str
    ok: bool
    seconds: float
    status: str
    feedback: str


def extension_calls(workspace: Workspace) -> list[str]:
    return sorted(set(re.findall(r"cuda_extension\.(\w+)", workspace.entry.read_text())))


def build_all(
    kernels: list[str], workspaces: dict[str, Workspace], args: argparse.Namespace, *, check_import: bool
) -> list[Built]:
    """Every kernel built at once (ninja spreads each build's files over the cores)."""

    def build(kernel: str) -> Built:
        ws = workspaces[kernel]
        if not has_sources(ws):
            return Built(kernel, True, 0.0, "none", "nothing to build")
        with open_sandbox(args.sandbox, workspace=ws.root) as box:
            result = compile_solution(ws, box, arch=args.arch, timeout=900)
            if not result.ok or not check_import or result.module_path is None:
                return Built(kernel, result.ok, result.duration_s, result.status, result.feedback())
            names = extension_calls(ws)
            run = box.exec(box.python_command("-c", EXTENSION_CHECK, result.module_path, *names), timeout=300)
        if run.stdout.strip().splitlines()[-1:] != ["ok"]:
            detail = (run.stdout.strip() + "\n" + "\n".join(run.stderr.strip().splitlines()[-6:])).strip()
            return Built(
                kernel,
                False,
                result.duration_s,
                "import",
                f"the built extension does not load or lacks {names}:\n{detail}",
            )
        return Built(
            kernel,
            True,
            result.duration_s,
            result.status,
            result.feedback() + f"; loads, has {', '.join(names)}",
        )

    # Builds run side by side; each sandboxed build has a memory cap, so bound its parallel nvcc jobs.
    os.environ.setdefault("MAX_JOBS", str(max(2, (os.cpu_count() or 8) // 2)))
    with ThreadPoolExecutor(max_workers=max(1, len(kernels))) as pool:
        return list(pool.map(build, kernels))


def check_spaces(
    tasks: list[Task], workspaces: dict[str, Workspace], device: str
) -> dict[str, dict[str, Any]]:
    """Each task's space as the tuner will see it: valid points, what was rejected, the untuned start."""
    limits = DeviceLimits.detect() if device.startswith("cuda") else DeviceLimits()
    report: dict[str, dict[str, Any]] = {}
    for task in tasks:
        ws = workspaces[kernel_of(task)]
        assert task.spec is not None
        try:
            space = Space(load_space_file(ws.root), limits=limits, shapes=shape_names(task.spec.inputs))
        except SpaceError as exc:
            report[task.name] = {"ok": False, "problem": str(exc)}
            continue
        start, problem = default_point(space, ws)
        report[task.name] = {
            "ok": start is not None,
            "valid_points": len(space),
            "total": space.total,
            "rejected": space.rejection_summary(),
            "default": space.key(start) if start is not None else None,
            "problem": problem,
            "limits": limits.name,
        }
    return report


def adaptive_run(
    tasks: list[Task],
    workspaces: dict[str, Workspace],
    failed: set[str],
    args: argparse.Namespace,
    out_dir: Path,
) -> dict[str, Any]:
    """One ordinary `agent tune` run (adaptive search, paired final, write-back) on an already built kernel."""
    from agent.tune.render import render

    task = next((t for t in tasks if t.name == args.e2e_task and kernel_of(t) not in failed), None)
    if task is None:
        return {"skipped": f"{args.e2e_task} not measured"}
    ws = workspaces[kernel_of(task)]
    points = check_spaces([task], workspaces, args.device)[task.name].get("valid_points") or 0
    evals = max(2, round(args.e2e_fraction * points))
    options = TuneOptions(
        budget=BudgetSpec(wall_seconds=args.e2e_budget, max_evals=evals),
        use_experience=False,
        record_experience=False,
        arch=args.arch,
        device=args.device,
    )
    started = time.monotonic()
    with open_sandbox(args.sandbox, workspace=ws.root) as box:
        result = run_tuning(task, ws, box, options, sandbox_kind=box.kind)
    table = render(result)
    (out_dir / f"e2e_{task.name}.txt").write_text(table + "\n")
    (out_dir / f"e2e_{task.name}.json").write_text(result.model_dump_json(indent=1))
    print(f"adaptive run on {task.name} ({options.budget.describe()}):\n{table}", flush=True)
    return {
        "task": task.name,
        "ok": result.ok,
        "message": result.message,
        "evals_budget": evals,
        "seconds": time.monotonic() - started,
    }


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
    parser.add_argument(
        "--build-only", action="store_true", help="build, load-check and check the spaces; measure nothing"
    )
    parser.add_argument("--e2e-task", default="softmax_4096x2048", help="task of the final adaptive run")
    parser.add_argument(
        "--e2e-fraction", type=float, default=0.25, help="its evaluations, as a share of the space's points"
    )
    parser.add_argument(
        "--e2e-budget", type=float, default=40.0, help="its wall-clock cap in seconds (0: skip it)"
    )
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
    compile_start = time.monotonic()
    built = build_all(kernels, workspaces, args, check_import=args.build_only)
    compile_s = time.monotonic() - compile_start
    for b in built:
        print(
            f"build {b.kernel}: {'ok' if b.ok else 'FAILED'} ({b.status}) in {b.seconds:.1f}s"
            + (f": {b.feedback}" if b.ok else f"\n{b.feedback}"),
            flush=True,
        )
    failed_builds = {b.kernel for b in built if not b.ok}

    if args.build_only:
        spaces = check_spaces(tasks, workspaces, args.device)
        for name, s in spaces.items():
            line = (
                f"{s['valid_points']} valid of {s['total']} ({s['rejected']}); default {s['default']}"
                if "valid_points" in s
                else ""
            )
            print(
                f"space {name}: {'ok' if s['ok'] else 'PROBLEM'} {line} {s.get('problem', '')}".rstrip(),
                flush=True,
            )
        report = {
            "compile_s": compile_s,
            "errors": [str(e) for e in errors],
            "builds": [asdict(b) for b in built],
            "spaces": spaces,
        }
        (out_dir / "build.json").write_text(json.dumps(report, indent=1))
        ok = not errors and not failed_builds and all(s["ok"] for s in spaces.values())
        print(f"build-only {'ok' if ok else 'FAILED'} in {time.monotonic() - started:.1f}s", flush=True)
        return 0 if ok else 1

    summary: dict[str, Any] = {"compile_s": compile_s, "tasks": {}, "timing": BRUTE_TIMING}

    def write_summary() -> None:
        summary["total_s"] = time.monotonic() - started
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))

    for task in tasks:
        kernel = kernel_of(task)
        if kernel in failed_builds:
            summary["tasks"][task.name] = {"ok": False, "message": "the build failed", "measured": 0}
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
        write_summary()
        print(
            f"{task.name}: {len(history)}/{result.space_points} points {statuses} in {seconds:.1f}s; "
            f"default {outcome.default_ms if outcome else None} ms, best {outcome.best_ms if outcome else None} ms "
            f"({result.message})",
            flush=True,
        )
    if args.e2e_budget > 0:
        summary["e2e"] = adaptive_run(tasks, workspaces, failed_builds, args, out_dir)
    write_summary()
    print(f"done in {summary['total_s']:.1f}s (compile {compile_s:.1f}s); caches in {out_dir}", flush=True)
    complete = all(v["ok"] and v["measured"] == v.get("valid_points") for v in summary["tasks"].values())
    return 0 if not failed_builds and complete else 1


if __name__ == "__main__":
    sys.exit(main())
