"""The checker's adequacy: judge faulty variants of the verified solutions and report, per fault
class and per origin, how many the referee kills.

Each mutant is one solution folder with one CUDA source changed by one fault (benchmarks/mutants):
the corpus's correct solutions (benchmarks/solutions/levelN/<task>, origin `corpus`) and the template
policy's first candidate rendered for the same tasks on this GPU (origin `templates`). A mutant
that does not compile is stillborn and left out of the rate, as is one the referee gave no verdict
(`no_gpu`, `referee_error`: unjudged, judged again on resume); one judged `correct` survives, and its
witness (the changed line) is listed for a check by hand: an equivalent mutant (the fault changes
nothing the task computes) is not a miss.
Mutants are judged without timing (`profile=False`) unless `--profile`: what is measured is the
checker (the correctness trials, hidden inputs and precision check), and a timing check tripped by a
loaded machine would count as a kill it did not earn.
Needs a GPU.

usage: python benchmarks/mutation_bench.py [--per-class 20] [--seed 0] [--trials 5] [--jobs 2]
       [--only TEXT] [--origins corpus,templates] [--out benchmarks/results/mutation.md]
       [--resume-from EARLIER.json]
The report and its .json are written as mutants are judged: a device session cut short keeps what it
judged, and `--resume-from` an earlier run's .json (same --per-class and --seed) judges only the
rest, keeping the earlier rows (marked with their run's `run` field).
Exit status 0 when every mutant got a verdict and every class's kill rate reaches --min-kill-rate
(default 0.99).
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
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.batch.agent_runs import INFRA_VERDICTS  # noqa: E402
from agent.referee import EvalOptions, evaluate  # noqa: E402
from agent.tasks import load_task  # noqa: E402
from benchmarks.mutants.generate import correct_solutions, mutate_source, sample, sources_of  # noqa: E402
from benchmarks.mutants.operators import FAULT_CLASSES, Mutant  # noqa: E402
from benchmarks.verify_cost import render_candidate  # noqa: E402

TASKS = REPO / "benchmarks" / "tasks"
ORIGINS = ("corpus", "templates")


@dataclass(frozen=True)
class Subject:
    """One mutant and where it is judged: the solution folder that holds its source, the source's
    path in it, the task, and whether the source is the corpus's or the template policy's."""

    mutant: Mutant
    solution: Path
    source: Path
    task: Path
    origin: str


def corpus_subjects(only: str) -> list[Subject]:
    """Mutants of the corpus's correct solutions (benchmarks/solutions)."""
    subjects = []
    for solution in correct_solutions():
        task = TASKS / solution.parent.name / f"{solution.name}.py"
        if only not in str(solution) or not task.is_file():
            continue
        for source in sources_of(solution):
            file = str(source.resolve().relative_to(REPO))
            for mutant in mutate_source(source.read_text(), file):
                subjects.append(Subject(mutant, solution, source.relative_to(solution), task, "corpus"))
    return subjects


def template_subjects(folder: Path, only: str) -> list[Subject]:
    """Mutants of the template policy's kernels as it renders them for the corpus's tasks (its first
    candidate, on this GPU): each stage's kernel file (`kernels/sN_*.cu`). The shared headers are
    left out: most of their functions serve other templates, so their mutants are mostly equivalent."""
    subjects = []
    for task in sorted(TASKS.glob("level*/*.py")):
        if only not in str(task):
            continue
        solution = folder / task.parent.name / task.stem
        try:
            render_candidate(task, solution)
        except SystemExit:  # not covered by the library
            continue
        for source in sorted(solution.glob("kernels/s*_*.cu")):
            relative = source.relative_to(solution)
            file = f"templates/{task.parent.name}/{task.stem}/{relative}"
            for mutant in mutate_source(source.read_text(), file):
                subjects.append(Subject(mutant, solution, relative, task, "templates"))
    return subjects


def judge_mutant(subject: Subject, args: argparse.Namespace) -> dict:
    mutant = subject.mutant
    task = load_task(subject.task)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mutant-") as folder:
        copy = Path(folder) / subject.solution.name
        shutil.copytree(subject.solution, copy)
        (copy / subject.source).write_text(mutant.text)
        options = EvalOptions(trials=args.trials, run_timeout_s=args.run_timeout, profile=args.profile)
        result = evaluate(task, copy, options)
    verdict = result.verdict
    return {
        "key": mutant.key,
        "origin": subject.origin,
        "class": mutant.fault_class,
        "file": mutant.file,
        "line": mutant.line,
        "before": mutant.before,
        "after": mutant.after,
        "verdict": verdict,
        "reason": result.reason[:300],
        "outcome": outcome_of(verdict),
        "seconds": round(time.monotonic() - start, 1),
    }


def outcome_of(verdict: str) -> str:
    if verdict == "compile_error":
        return "stillborn"
    if verdict == "correct":
        return "survived"
    if verdict in INFRA_VERDICTS:  # no verdict on the mutant: no GPU, or the referee's own error
        return "unjudged"
    return "killed"


def summary_table(rows: list[dict], by: str = "class") -> tuple[str, dict[str, float]]:
    """Mutants, stillborn, killed, survived and the kill rate per fault class (or per origin)."""
    groups = FAULT_CLASSES if by == "class" else ORIGINS
    lines = [
        f"| {'fault class' if by == 'class' else by} | mutants | stillborn | unjudged | killed | survived | kill rate |",
        "|---|---|---|---|---|---|---|",
    ]
    rates: dict[str, float] = {}
    for name in [*groups, "all"]:
        group = [r for r in rows if name in ("all", r.get(by))]
        count = {
            o: sum(r["outcome"] == o for r in group) for o in ("stillborn", "unjudged", "killed", "survived")
        }
        judged = count["killed"] + count["survived"]
        rate = count["killed"] / judged if judged else float("nan")
        rates[name] = rate
        lines.append(
            f"| {name} | {len(group)} | {count['stillborn']} | {count['unjudged']} | {count['killed']} | "
            f"{count['survived']} | {rate:.1%} |"
        )
    return "\n".join(lines), rates


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--per-class", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--run-timeout", type=float, default=120)
    parser.add_argument("--only", default="", help="only solutions and tasks whose path contains this text")
    parser.add_argument(
        "--origins",
        type=lambda text: [o for o in text.split(",") if o],
        default=list(ORIGINS),
        help="corpus, templates or both (comma-separated): whose sources are mutated",
    )
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

    rendered = Path(tempfile.mkdtemp(prefix="mutation-templates-"))
    found = {
        "corpus": corpus_subjects(args.only) if "corpus" in args.origins else [],
        "templates": template_subjects(rendered, args.only) if "templates" in args.origins else [],
    }
    # each origin sampled on its own: the rendered templates have several times the corpus's sites
    subjects = {
        s.mutant.key: s for origin in ORIGINS for s in _sampled(found[origin], args.per_class, args.seed)
    }
    mutants = [s.mutant for s in subjects.values()]
    keys = set(subjects)
    earlier = [
        r for r in earlier_rows(args.resume_from) if r.get("key") in keys and r["outcome"] != "unjudged"
    ]
    done = {r["key"] for r in earlier}
    todo = [subjects[m.key] for m in mutants if m.key not in done]
    counts = ", ".join(f"{len({s.solution for s in found[o]})} {o} solutions" for o in ORIGINS if found[o])
    print(f"{len(mutants)} mutants of {counts}; {len(earlier)} judged earlier", flush=True)
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
    shutil.rmtree(rendered, ignore_errors=True)
    print(report)
    _, rates = summary_table(rows)
    failing = [c for c in FAULT_CLASSES if rates[c] == rates[c] and rates[c] < args.min_kill_rate]
    unjudged = any(r["outcome"] == "unjudged" for r in rows)
    sys.exit(1 if failing or unjudged else 0)


def _sampled(subjects: list[Subject], per_class: int, seed: int) -> list[Subject]:
    by_key = {s.mutant.key: s for s in subjects}
    return [by_key[m.key] for m in sample([s.mutant for s in subjects], per_class, seed)]


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
            summary_table(rows, by="origin")[0],
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
