"""Per-evaluation overhead of the docker sandbox against the local one, on a GPU (issue 22).

    python benchmarks/docker_gpu/docker_vs_local.py --runs 3 --adversarial 8 --out docker_vs_local.md

The same candidates, judged by agent.referee.evaluate in each sandbox with one baseline cache
(the baselines are timed once, before anything is measured): our ReLU example `--runs` times per
sandbox (the first run builds, the rest find the build up to date), then the first
`--adversarial` single-file candidates of tests/adversarial once each. A sandbox is opened once
per candidate, as `agent solve` does (its opening time is reported apart). Goal: at most 1 s
more per warm evaluation, identical verdicts, speedups within the referee's noise. Prints a
markdown table and writes it to --out; one JSON line per evaluation to --out with .jsonl. Both
are written as the evaluations happen (a run cut short by its time limit keeps what it measured;
the table then says how many candidates it got to).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agent.referee import EvalOptions, EvalResult, evaluate  # noqa: E402
from agent.referee.baselines import BaselineCache  # noqa: E402
from agent.tasks import load_task  # noqa: E402
from agent.workspace import Solution, materialize  # noqa: E402
from sandbox.base import Sandbox, open_sandbox  # noqa: E402

RELU_TASK = ROOT / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"
RELU_EXAMPLE = ROOT / "skills" / "cuda-extension" / "examples" / "relu"
OVERHEAD_GOAL_S = 1.0


def speedup(result: EvalResult) -> float | None:
    perf = result.performance
    return perf.speedup_vs_eager.value if perf and perf.speedup_vs_eager else None


def judge(
    task: Any, solution: Solution, options: EvalOptions, box: Sandbox, cache: BaselineCache
) -> tuple[float, EvalResult]:
    start = time.monotonic()
    result = evaluate(task, solution, options, sandbox=box, baseline_cache=cache)
    return time.monotonic() - start, result


def candidates(adversarial: int) -> list[dict[str, Any]]:
    """(name, task path, how to make the solution, options) of every candidate measured."""
    found: list[dict[str, Any]] = [
        {
            "name": "relu example",
            "task": RELU_TASK,
            "make": lambda dest: Path(shutil.copytree(RELU_EXAMPLE, dest)),
            "options": {"trials": 5, "profile": True},
            "expected": {"correct"},
        }
    ]
    if adversarial:
        from tests.adversarial.suite import load_candidates, materialize

        singles = [c for c in load_candidates() if c.kind == "single_file" and not c.name.startswith("d6")]
        for cand in singles[:adversarial]:
            task = load_task(cand.task_path, instantiate=False)
            found.append(
                {
                    "name": cand.name,
                    "task": cand.task_path,
                    "make": lambda dest, cand=cand, task=task: materialize(cand, task, dest),
                    "options": {
                        "policy": cand.policy,
                        "trials": 2,
                        "profile": cand.profile,
                        "compile_mode": None,
                    },
                    "expected": cand.verdicts,
                    "runs": 1,
                }
            )
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="evaluations of the ReLU example per sandbox")
    parser.add_argument(
        "--adversarial", type=int, default=0, help="single-file adversarial candidates, once each"
    )
    parser.add_argument(
        "--gpus",
        default="0",
        help="the docker sandbox's gpus: 0 (default), all, auto, or none (a CPU dry run)",
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "docker_vs_local_h200.md"
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="docker-vs-local-"))
    cache = BaselineCache(work / "baselines.json")
    table = [
        "| candidate | sandbox | open s | evaluation s (each) | warm median s | verdicts | speedup vs eager |",
        "|---|---|---|---|---|---|---|",
    ]
    summary: list[str] = []
    docker_describe = ""
    warmed: set[Path] = set()
    measured = candidates(args.adversarial)
    jsonl = args.out.with_suffix(".jsonl")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    jsonl.write_text("")

    def write_table(done: int) -> str:
        text = render(args, docker_describe, table, summary, done=done, of=len(measured))
        args.out.write_text(text)
        return text

    for cand in measured:
        task = load_task(Path(cand["task"]), instantiate=False)
        options = EvalOptions(run_timeout_s=300.0, **cand["options"])  # type: ignore[arg-type]
        runs = int(cand.get("runs", args.runs))
        per_kind: dict[str, dict[str, Any]] = {}
        for kind in ("local", "docker"):
            # As the harness does: the solution made into the workspace the referee builds in, and
            # the sandbox opened over that workspace.
            solution = materialize(task, cand["make"](work / kind / cand["name"].replace(" ", "_")))
            root = solution.root
            opened = time.monotonic()
            gpus = None if args.gpus == "none" else args.gpus
            extra: dict[str, Any] = {"gpus": gpus} if kind == "docker" else {}
            with open_sandbox(kind, workspace=root, **extra) as box:
                open_s = time.monotonic() - opened
                if kind == "docker" and not docker_describe:
                    docker_describe = box.describe()
                if kind == "local" and cand["task"] not in warmed:  # the baselines, timed once, unmeasured
                    judge(task, solution, options, box, cache)
                    warmed.add(cand["task"])
                walls, verdicts, speedups = [], [], []
                for run in range(runs):
                    wall, result = judge(task, solution, options, box, cache)
                    walls.append(wall)
                    verdicts.append(result.verdict)
                    speedups.append(speedup(result))
                    record = {
                        "candidate": cand["name"],
                        "sandbox": kind,
                        "run": run,
                        "wall_s": round(wall, 3),
                        "verdict": result.verdict,
                        "speedup_vs_eager": speedups[-1],
                        "reason": result.reason,
                    }
                    with jsonl.open("a") as handle:
                        handle.write(json.dumps(record) + "\n")
            warm = walls[1:] or walls
            per_kind[kind] = {"warm": statistics.median(warm), "verdicts": verdicts, "speedups": speedups}
            shown = [f"{s:.3f}" for s in speedups if s is not None]
            table.append(
                f"| {cand['name']} | {kind} | {open_s:.1f} | {', '.join(f'{w:.1f}' for w in walls)} | "
                f"{statistics.median(warm):.2f} | {', '.join(sorted(set(verdicts)))} | {', '.join(shown) or '-'} |"
            )
        local, docker = per_kind["local"], per_kind["docker"]
        overhead = docker["warm"] - local["warm"]
        same = set(local["verdicts"]) == set(docker["verdicts"]) and len(set(local["verdicts"])) == 1
        expected = set(docker["verdicts"]) <= set(cand["expected"])
        summary.append(
            f"- {cand['name']}: docker {overhead:+.2f} s per warm evaluation "
            f"({'within' if overhead <= OVERHEAD_GOAL_S else 'OVER'} the {OVERHEAD_GOAL_S:.0f} s goal); verdicts "
            f"{'identical' if same else 'DIFFER'} ({', '.join(local['verdicts'])} / {', '.join(docker['verdicts'])})"
            f"{'' if expected else ' — NOT the expected ' + '/'.join(sorted(cand['expected']))}"
        )
        write_table(done=len(summary))
    print(write_table(done=len(summary)))
    return 0


def render(
    args: argparse.Namespace,
    docker_describe: str,
    table: list[str],
    summary: list[str],
    *,
    done: int,
    of: int,
) -> str:
    import torch

    progress = "" if done == of else f" (**partial**: {done} of {of} candidates measured so far)"
    lines = [
        "# Docker sandbox against local: per-evaluation overhead on a GPU (issue 22)",
        "",
        f"- machine: {socket.gethostname()}, {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU'}, "
        f"python {platform.python_version()}, torch {torch.__version__}; {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        f"- command: `python benchmarks/docker_gpu/docker_vs_local.py --runs {args.runs} --adversarial {args.adversarial} --gpus {args.gpus}`{progress}",
        f"- docker sandbox: {docker_describe}",
        "- one baseline cache for both sandboxes; a sandbox opened once per candidate; "
        "warm = every run after the first (the build is up to date)",
        "",
        *table,
        "",
        *summary,
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
