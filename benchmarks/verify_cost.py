"""What the precision checks cost (issue 45): verify time per candidate with this tree's referee
against an earlier tree's (before the precision policy, hidden inputs and the effective-precision
check), on the same candidates at KernelBench's full sizes. Needs a GPU.

Each task's candidate is the template policy's first rendering (this tree renders it once; both
referees judge the same files). Each referee judges it `--runs` + 1 times without timing the
candidate (`profile=False`: what is left is verification, the correctness trials and the checks);
the first run builds the extension and is left out. Verify time = wall time minus the build.

usage: python benchmarks/verify_cost.py --old PATH_TO_EARLIER_TREE [--runs 3] [--trials 5]
       [--out benchmarks/results/precision/verify_cost.md]
PATH_TO_EARLIER_TREE: e.g. `git archive f75eadd | tar -x -C .old` (the commit before issue 45).
Exit status 0 when every task's median ratio is at most --max-ratio (default 1.3).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TASKS = (
    "level1/19_ReLU.py",
    "level1/23_Softmax.py",
    "level1/40_LayerNorm.py",
    "level2/76_Gemm_Add_ReLU.py",
)

# Runs inside the tree being measured (its own `agent` package): judges one folder N times and
# prints one JSON line per run.
JUDGE = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from agent.referee import EvalOptions, evaluate
from agent.tasks import load_task
task = load_task(Path(sys.argv[2]))
for run in range(int(sys.argv[4])):
    started = time.monotonic()
    result = evaluate(task, Path(sys.argv[3]), EvalOptions(trials=int(sys.argv[5]), profile=False))
    wall = time.monotonic() - started
    t = result.stage_times
    print(json.dumps({"run": run, "verdict": result.verdict, "reason": result.reason[:400], "wall_s": wall,
                      "compile_s": t.compile_s, "candidate_s": t.candidate_s, "judge_s": t.judge_s,
                      "candidate_stages": getattr(t, "candidate_stages", {}),
                      "judge_stages": getattr(t, "judge_stages", {})}), flush=True)
"""


def render_candidate(task: Path, folder: Path) -> None:
    from agent.templates import NotCovered, plan_task, visible_device_limits
    from agent.templates.instantiate import instantiate
    from agent.templates.slots import Observation, SlotSpace, default_makers, initial_config
    from agent.tune.space import DeviceLimits

    plan = plan_task(task)
    if isinstance(plan, NotCovered):
        raise SystemExit(f"{task}: the template library does not cover it ({plan.reason})")
    gpu = visible_device_limits() or DeviceLimits()
    space = SlotSpace(plan, gpu)
    config = initial_config(space, default_makers(), Observation(plan=plan, gpu=gpu))
    for name, text in instantiate(plan, config, sm_count=gpu.sm_count).items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def judge_runs(tree: Path, task: Path, folder: Path, runs: int, trials: int) -> list[dict]:
    command = [
        sys.executable,
        "-c",
        JUDGE,
        str(tree.resolve()),
        str(task),
        str(folder),
        str(runs + 1),
        str(trials),
    ]
    # the tree's own packages first, for the referee's worker processes too
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(tree.resolve()), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(command, capture_output=True, text=True, cwd=tree, env=env, check=False)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if len(rows) != runs + 1:
        raise SystemExit(f"{tree}: judging {task.name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return rows[1:]


def verify_s(row: dict) -> float:
    return row["wall_s"] - row["compile_s"]


def slowest_stages(row: dict, count: int = 4) -> str:
    """A run's slowest judge and candidate stages, slowest first."""
    named = [(f"judge {k}", v) for k, v in row.get("judge_stages", {}).items()]
    named += [(f"candidate {k}", v) for k, v in row.get("candidate_stages", {}).items()]
    top = sorted(named, key=lambda kv: -kv[1])[:count]
    return ", ".join(f"{name} {seconds:.1f}" for name, seconds in top) or "not recorded"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--old", type=Path, required=True, help="the earlier tree (a plain copy of the repository)"
    )
    parser.add_argument(
        "--kernelbench",
        type=Path,
        default=None,
        help="KernelBench's folder (default .kb, else ../shared/kernelbench)",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--max-ratio", type=float, default=1.3)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/precision/verify_cost.md")
    args = parser.parse_args()
    if not (args.old / "agent" / "referee").is_dir():
        parser.error(
            f"--old {args.old}: no agent/referee there; make it with `git archive COMMIT | tar -x -C {args.old}`"
        )
    kernelbench = args.kernelbench or next(
        p for p in (REPO / ".kb", REPO.parent / "shared" / "kernelbench") if p.is_dir()
    )
    lines = [
        "# Verify time per candidate: this referee against the one before issue 45",
        "",
        f"Command: `python benchmarks/verify_cost.py {' '.join(sys.argv[1:])}` on {platform.node()}, "
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC. Candidate: the template policy's first rendering; "
        f"{args.trials} trials, no timing; {args.runs} runs after a first that builds; seconds are medians (min-max).",
        "",
        "| task | verdict (old / new) | old verify s | new verify s | ratio | new candidate s | new judge s |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    ratios: list[float] = []
    failures: list[str] = []
    stages: list[str] = []
    raw: dict[str, dict] = {}
    for relative in TASKS:
        task = kernelbench / relative
        with tempfile.TemporaryDirectory(prefix="verify-cost-") as folder:
            solution = Path(folder) / "solution"
            render_candidate(task, solution)
            old = judge_runs(args.old, task, solution, args.runs, args.trials)
            new = judge_runs(REPO, task, solution, args.runs, args.trials)
        raw[relative] = {"old": old, "new": new}
        old_s = [verify_s(r) for r in old]
        new_s = [verify_s(r) for r in new]
        # a verdict other than correct ends the judging early: its time is no verify time
        comparable = all(r["verdict"] == "correct" for r in old + new)
        ratio = statistics.median(new_s) / statistics.median(old_s)
        if comparable:
            ratios.append(ratio)
        else:
            failures += [
                f"- {relative}, {which} tree: {r['verdict']}: {r.get('reason', '')}"
                for which, r in (("old", old[0]), ("new", new[0]))
                if r["verdict"] != "correct"
            ]
        lines.append(
            f"| {relative} | {old[0]['verdict']} / {new[0]['verdict']} "
            f"| {statistics.median(old_s):.2f} ({min(old_s):.2f}-{max(old_s):.2f}) "
            f"| {statistics.median(new_s):.2f} ({min(new_s):.2f}-{max(new_s):.2f}) "
            f"| {f'{ratio:.2f}' if comparable else 'not comparable'} "
            f"| {statistics.median(r['candidate_s'] for r in new):.2f} | {statistics.median(r['judge_s'] for r in new):.2f} |"
        )
        print(lines[-1], flush=True)
        stages.append(f"- {relative}: {slowest_stages(new[0])}")
    largest = f"Largest ratio {max(ratios):.2f}" if ratios else "No comparable task"
    lines += ["", f"{largest} (target at most {args.max_ratio})."]
    if failures:
        lines += ["", "Not comparable (a verdict other than correct):", *failures]
    lines += ["", "The new referee's slowest stages (first measured run, seconds):", *stages]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    args.out.with_suffix(".json").write_text(json.dumps(raw, indent=1))
    print("\n".join(lines))
    return 0 if ratios and not failures and max(ratios) <= args.max_ratio else 1


if __name__ == "__main__":
    raise SystemExit(main())
