"""The checker's adequacy: judge faulty variants of the verified solutions and report, per fault
class, how many the referee kills.

Each mutant is one solution folder (benchmarks/solutions/levelN/<task>) with one CUDA source
changed by one fault (benchmarks/mutants). A mutant that does not compile is stillborn and left out
of the rate; one judged `correct` survives, and its witness (the changed line) is listed for a
check by hand: an equivalent mutant (the fault changes nothing the task computes) is not a miss.
Mutants are judged without timing (`profile=False`) unless `--profile`: what is measured is the
checker (the correctness trials, hidden inputs and precision check), and a timing check tripped by a
loaded machine would count as a kill it did not earn.
Needs a GPU.

usage: python benchmarks/mutation_bench.py [--per-class 20] [--seed 0] [--trials 5] [--jobs 2]
       [--only TEXT] [--out benchmarks/results/mutation.md] [--resume-from EARLIER.json]
The report and its .json are written as mutants are judged: a device session cut short keeps what it
judged, and `--resume-from` an earlier run's .json (same --per-class and --seed) judges only the
rest, keeping the earlier rows (marked with their run's `run` field).
Exit status 0 when every class's kill rate reaches --min-kill-rate (default 0.99).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.referee import EvalOptions, evaluate  # noqa: E402
from agent.tasks import load_task  # noqa: E402
from benchmarks.mutants.generate import corpus_mutants, correct_solutions, sample  # noqa: E402
from benchmarks.mutants.operators import FAULT_CLASSES, Mutant  # noqa: E402

TASKS = REPO / "benchmarks" / "tasks"


def judge_mutant(mutant: Mutant, args: argparse.Namespace) -> dict:
    source = REPO / mutant.file
    solution = next(p for p in source.parents if p.parent.name.startswith("level"))
    task = load_task(TASKS / solution.parent.name / f"{solution.name}.py")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mutant-") as folder:
        copy = Path(folder) / solution.name
        shutil.copytree(solution, copy)
        (copy / source.relative_to(solution)).write_text(mutant.text)
        options = EvalOptions(trials=args.trials, run_timeout_s=args.run_timeout, profile=args.profile)
        result = evaluate(task, copy, options)
    verdict = result.verdict
    outcome = "stillborn" if verdict == "compile_error" else "survived" if verdict == "correct" else "killed"
    return {
        "key": mutant.key,
        "class": mutant.fault_class,
        "file": mutant.file,
        "line": mutant.line,
        "before": mutant.before,
        "after": mutant.after,
        "verdict": verdict,
        "reason": result.reason[:300],
        "outcome": outcome,
        "seconds": round(time.monotonic() - start, 1),
    }


def summary_table(rows: list[dict]) -> tuple[str, dict[str, float]]:
    lines = [
        "| fault class | mutants | stillborn | killed | survived | kill rate |",
        "|---|---|---|---|---|---|",
    ]
    rates: dict[str, float] = {}
    for fault_class in [*FAULT_CLASSES, "all"]:
        group = [r for r in rows if fault_class in ("all", r["class"])]
        count = {o: sum(r["outcome"] == o for r in group) for o in ("stillborn", "killed", "survived")}
        judged = count["killed"] + count["survived"]
        rate = count["killed"] / judged if judged else float("nan")
        rates[fault_class] = rate
        lines.append(
            f"| {fault_class} | {len(group)} | {count['stillborn']} | {count['killed']} | {count['survived']} | "
            f"{rate:.1%} |"
        )
    return "\n".join(lines), rates


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--per-class", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--run-timeout", type=float, default=120)
    parser.add_argument("--only", default="", help="only solutions whose path contains this text")
    parser.add_argument("--min-kill-rate", type=float, default=0.99)
    parser.add_argument(
        "--profile",
        action="store_true",
        help="time each mutant too (by default the checker alone judges: a timing verdict is no kill)",
    )
    parser.add_argument("--out", type=Path, default=None, help="markdown report (a .json beside it)")
    parser.add_argument(
        "--resume-from", type=Path, default=None, help="an earlier run's .json: judge only the rest"
    )
    args = parser.parse_args()

    solutions = [
        s
        for s in correct_solutions()
        if args.only in str(s) and (TASKS / s.parent.name / f"{s.name}.py").is_file()
    ]
    mutants = sample(corpus_mutants(solutions), args.per_class, args.seed)
    keys = {m.key for m in mutants}
    earlier = [r for r in earlier_rows(args.resume_from) if r.get("key") in keys]
    done = {r["key"] for r in earlier}
    todo = [m for m in mutants if m.key not in done]
    print(f"{len(mutants)} mutants of {len(solutions)} solutions; {len(earlier)} judged earlier", flush=True)
    started = time.monotonic()
    run = f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC on {platform.node()}"
    rows = list(earlier)
    report = write_report(rows, args, started, len(mutants))
    with ThreadPoolExecutor(args.jobs) as pool:
        for future in as_completed([pool.submit(judge_mutant, m, args) for m in todo]):
            rows.append(future.result() | {"run": run})
            print(
                f"{rows[-1]['class']:18} {rows[-1]['outcome']:9} {rows[-1]['file']}:{rows[-1]['line']}",
                flush=True,
            )
            report = write_report(rows, args, started, len(mutants))
    print(report)
    _, rates = summary_table(rows)
    failing = [c for c in FAULT_CLASSES if rates[c] == rates[c] and rates[c] < args.min_kill_rate]
    sys.exit(1 if failing else 0)


def earlier_rows(path: Path | None) -> list[dict]:
    if path is None:
        return []
    if not path.is_file():
        raise SystemExit(f"--resume-from {path}: no such file (an earlier run's mutation .json)")
    return json.loads(path.read_text())


def write_report(rows: list[dict], args: argparse.Namespace, started: float, planned: int) -> str:
    """The report so far (and its .json beside it with --out)."""
    table, _ = summary_table(rows)
    survivors = [
        f"- {r['class']} `{r['file']}:{r['line']}`: `{r['before']}` -> `{r['after']}`"
        for r in rows
        if r["outcome"] == "survived"
    ]
    runs = sorted({r.get("run", "?") for r in rows})
    partial = "" if len(rows) == planned else f" (partial: {len(rows)} of {planned} mutants judged)"
    report = "\n".join(
        [
            f"# Mutation kill rate ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC){partial}",
            "",
            f"- command: `python benchmarks/mutation_bench.py --per-class {args.per_class} --seed {args.seed}"
            f" --trials {args.trials} --jobs {args.jobs}{' --only ' + args.only if args.only else ''}"
            f"{' --profile' if args.profile else ''}"
            f"{' --resume-from ' + str(args.resume_from) if args.resume_from else ''}`",
            f"- machine: {platform.node()}, {_gpu_name()}; wall {time.monotonic() - started:.0f} s",
            f"- rows judged in: {'; '.join(runs) if runs else 'none yet'}",
            "",
            table,
            "",
            "## Survivors (witnesses to check by hand for equivalence)",
            "",
            *(survivors or ["none"]),
        ]
    )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report + "\n")
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    return report


def _gpu_name() -> str:
    try:
        import torch

        return torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    except Exception as exc:  # the report still names the machine
        return f"GPU unknown ({type(exc).__name__})"


if __name__ == "__main__":
    main()
