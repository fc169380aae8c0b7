"""Compare tuners on brute-forced caches without a GPU (Kernel Tuner's simulation idea).

usage: python benchmarks/tuning/replay.py --cache-dir benchmarks/tuning/cache --out benchmarks/results/tuning_h200.md

At budgets of 10%, 25% and 50% of each space's valid points, for: our search (cold, averaged
over --seeds), our search warm-started from the experience of the kernel's other shape (a run
at 25% recorded in a scratch experience library), random search (exact expectation), Kernel
Tuner's default strategy (brute force, which takes no budget: its first B points in order), and
Kernel Tuner strategies in simulation mode where `kernel_tuner` imports. Reported per task:
fraction of the optimum reached (optimum / found, averaged) and the methodology score
(random -> 0, optimum -> 1, from the mean best time); for the warm start also the evaluations
needed to measure a point within 5% of the optimum, cold and warm. A cache that lacks some valid
points (a brute force cut short) is listed and left out. The brute-force run's own summary and
its adaptive run, judged against the optimum of the same cache, close the table.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

import torch  # noqa: E402

from agent.tune.cache import CacheFile, ReplayEvaluator, load_cache  # noqa: E402
from agent.tune.experience import ExperienceLibrary, Features  # noqa: E402
from agent.tune.limits import BudgetSpec, TuneBudget  # noqa: E402
from agent.tune.scoring import expected_random_best, expected_random_fraction, methodology_score  # noqa: E402
from agent.tune.search import Search, SearchOptions  # noqa: E402
from agent.tune.space import Point, Space  # noqa: E402

FRACTIONS = (0.10, 0.25, 0.50)
KT_STRATEGIES = ("random_sample", "greedy_ils", "genetic_algorithm", "simulated_annealing", "pso")
NEAR = 0.95  # "within 5% of the optimum": optimum / time >= NEAR


class IncompleteCache(ValueError):
    """The cache lacks valid points of its own space: it cannot stand in for the GPU."""


class Problem:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.cache: CacheFile = load_cache(path)
        self.space: Space = self.cache.space()
        self.times = self.cache.times()
        meta = self.cache.kernel_agent
        self.kernel: str = meta.get("kernel", path.stem.split("_", 1)[0])
        self.name = path.stem
        self.synthetic = bool(meta.get("synthetic"))
        self.features = Features.model_validate(meta.get("features", {}))
        default_key = meta.get("default")
        index = {self.space.key(p): p for p in self.space.points}
        missing = [key for key in index if key not in self.times]
        if missing:
            raise IncompleteCache(
                f"{path.name}: {len(missing)} of {len(index)} valid points were not measured (e.g. {missing[0]})"
            )
        self.default: Point = index.get(default_key, self.space.points[0])
        values = [self.times[self.space.key(p)] for p in self.space.points]
        if all(v is None for v in values):
            raise IncompleteCache(f"{path.name}: no point of the space was measured correct")
        self.values = values
        self.optimum = min(v for v in values if v is not None)

    def true_time(self, key: str | None) -> float:
        value = self.times.get(key) if key else None
        return value if value is not None else max(v for v in self.values if v is not None)

    def budget(self, fraction: float) -> int:
        return max(2, round(fraction * len(self.space)))


def run_ours(problem: Problem, evals: int, seed: int, warm: Sequence[Point] = ()) -> tuple[float, int | None]:
    """(true time of the returned configuration, evaluations until one within 5% of the optimum
    was measured, or None)."""
    evaluator = ReplayEvaluator(problem.space, problem.times)
    search = Search(
        problem.space,
        TuneBudget(BudgetSpec(max_evals=evals)),
        evaluator,
        SearchOptions(seed=seed),
        default=problem.default,
        warm=warm,
    )
    outcome = search.run()
    assert len(evaluator.measured) <= evals
    near = next(
        (
            i + 1
            for i, key in enumerate(evaluator.measured)
            if (t := problem.times[key]) is not None and problem.optimum / t >= NEAR
        ),
        None,
    )
    return problem.true_time(outcome.best_key), near


def warm_points(source: Problem, target: Problem, library_path: Path) -> tuple[list[Point], str]:
    """Tune `source` at 25% (seed 0), record it, then ask the library for `target`'s warm start."""
    with ExperienceLibrary(library_path) as library:
        evaluator = ReplayEvaluator(source.space, source.times)
        search = Search(
            source.space,
            TuneBudget(BudgetSpec(max_evals=source.budget(0.25))),
            evaluator,
            SearchOptions(seed=0),
            default=source.default,
        )
        outcome = search.run()
        library.record(
            source.features,
            source.space,
            outcome.history,
            default_key=outcome.default_key,
            default_ms=outcome.default_ms,
            best_key=outcome.best_key,
            best_ms=outcome.best_ms,
        )
        points, sources = library.warm_start(target.features, target.space, target.default)
    why = sources[0].reason if sources else "nothing similar"
    return points, why


def kt_run(problem: Problem, strategy: str, evals: int, seed: int) -> float | None:
    try:
        import numpy as np
        from kernel_tuner import tune_kernel
    except ImportError:
        return None
    names = problem.space.names

    def allowed(params: dict) -> bool:
        return problem.space.check({k: int(params[k]) for k in names}) is None

    np.random.seed(seed)
    random.seed(seed)
    with tempfile.TemporaryDirectory(prefix="tune-kt-") as scratch:
        cache = (
            Path(scratch) / problem.path.name
        )  # Kernel Tuner may write to its cache: never the committed one
        shutil.copy(problem.path, cache)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results, _ = tune_kernel(
                problem.cache.kernel_name,
                "",
                problem.cache.problem_size,
                [],
                problem.cache.tune_params,
                restrictions=allowed,
                cache=str(cache),
                simulation_mode=True,
                strategy=strategy,
                strategy_options={"max_fevals": evals},
                quiet=True,
            )
    found = [r["time"] for r in results if r and "__error__" not in r and not isinstance(r.get("time"), str)]
    return min(found) if found else problem.true_time(None)


def is_cache(path: Path) -> bool:
    """A brute-force cache, not summary.json or an e2e result that sits beside them."""
    try:
        body = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(body, dict) and "cache" in body and "tune_params" in body


def kt_available() -> bool:
    try:
        import kernel_tuner  # noqa: F401
    except ImportError:
        return False
    return True


def evaluate(problems: list[Problem], seeds: int, kt_seeds: int, use_kt: bool) -> list[dict]:
    rows = []
    by_kernel: dict[str, list[Problem]] = {}
    for p in problems:
        by_kernel.setdefault(p.kernel, []).append(p)
    scratch = Path(tempfile.mkdtemp(prefix="tune-replay-"))
    for problem in problems:
        started = time.monotonic()
        partners = [q for q in by_kernel[problem.kernel] if q is not problem]
        warm, why = (
            warm_points(partners[0], problem, scratch / f"{problem.name}.sqlite") if partners else ([], "")
        )
        for fraction in FRACTIONS:
            evals = problem.budget(fraction)
            random_best = expected_random_best(problem.values, evals)
            cold = [run_ours(problem, evals, s) for s in range(seeds)]
            arms: dict[str, list[float]] = {"ours": [t for t, _ in cold]}
            near: dict[str, list[int | None]] = {"ours": [n for _, n in cold]}
            if warm:
                hot = [run_ours(problem, evals, s, warm) for s in range(seeds)]
                arms["ours_warm"] = [t for t, _ in hot]
                near["ours_warm"] = [n for _, n in hot]
            first = [problem.times[problem.space.key(p)] for p in problem.space.points[:evals]]
            arms["kt_default"] = [min((v for v in first if v is not None), default=problem.true_time(None))]
            if use_kt:
                for strategy in KT_STRATEGIES:
                    found = [kt_run(problem, strategy, evals, s) for s in range(kt_seeds)]
                    arms[f"kt_{strategy}"] = [f for f in found if f is not None]
            row = {
                "task": problem.name,
                "kernel": problem.kernel,
                "points": len(problem.space),
                "fraction": fraction,
                "evals": evals,
                "optimum_ms": problem.optimum,
                "default_ms": problem.true_time(problem.space.key(problem.default)),
                "random": {
                    "fraction_of_optimum": expected_random_fraction(problem.values, evals),
                    "best_ms": random_best,
                    "score": 0.0,
                },
                "warm_from": f"{partners[0].name} ({why})" if warm else "",
            }
            for arm, found in arms.items():
                if not found:
                    continue
                mean_best = statistics.fmean(found)
                row[arm] = {
                    "fraction_of_optimum": statistics.fmean(problem.optimum / f for f in found),
                    "worst_fraction": min(problem.optimum / f for f in found),
                    "best_ms": mean_best,
                    "score": methodology_score(mean_best, random_best, problem.optimum),
                    "runs": len(found),
                }
                if arm in near:
                    row[arm]["evals_to_near"] = near[arm]
            rows.append(row)
        print(f"{problem.name}: {time.monotonic() - started:.1f}s", file=sys.stderr, flush=True)
    return rows


def kt_note(use_kt: bool, no_kt: bool) -> str:
    if use_kt:
        from importlib.metadata import version

        return f"kernel_tuner {version('kernel_tuner')} in simulation mode"
    if no_kt:
        return "--no-kt: Kernel Tuner's strategies were not run"
    return "kernel_tuner NOT available: its strategies were not run"


def near_cell(values: list[int | None], budget: int) -> str:
    """Median evaluations to a point within 5% of the optimum; a run that never got there counts
    as past the budget."""
    reached = [v for v in values if v is not None]
    if len(reached) * 2 <= len(values):
        return f"> {budget} ({len(reached)}/{len(values)} runs)"
    ordered = sorted(v if v is not None else budget + 1 for v in values)
    return f"{statistics.median(ordered):g} ({len(reached)}/{len(values)} runs)"


def markdown(
    rows: list[dict],
    problems: list[Problem],
    args: argparse.Namespace,
    use_kt: bool,
    skipped: list[str] | None = None,
) -> str:
    arms = ["ours", "ours_warm", "random", "kt_default"] + (
        [f"kt_{s}" for s in KT_STRATEGIES] if use_kt else []
    )
    device = sorted({p.cache.device_name for p in problems})
    synthetic = any(p.synthetic for p in problems)
    lines = []
    if synthetic:
        lines += ["> **SYNTHETIC caches (analytic model): these numbers are NOT measurements.**", ""]
    lines += [
        "# Tuning benchmark: replay of brute-forced spaces",
        "",
        f"Caches: `{args.cache_dir}` ({len(problems)} tasks; device: {', '.join(device)}). "
        f"Generated by `benchmarks/tuning/replay.py` on {time.strftime('%Y-%m-%d')}, "
        f"torch {torch.__version__}; our search averaged over {args.seeds} seeds, Kernel Tuner strategies "
        f"over {args.kt_seeds} seeds ({kt_note(use_kt, args.no_kt)}).",
        "",
        "Command: `python benchmarks/tuning/replay.py " + " ".join(sys.argv[1:]) + "`",
        "",
    ]
    if skipped:
        lines += ["Left out (incomplete caches):", "", *[f"- {why}" for why in skipped], ""]
    lines += [
        "Fraction = optimum / time of the configuration returned (mean over seeds); score = methodology score "
        "from the mean best time (random search without replacement = 0, optimum = 1). `kt_default` is Kernel "
        "Tuner's default strategy, brute force, which accepts no budget: the best of its first B points in "
        "enumeration order. `ours_warm` starts from the experience of the same kernel's other shape.",
        "",
    ]
    lines += [
        "## Mean over tasks",
        "",
        "| budget | " + " | ".join(arms) + " |",
        "|---" * (len(arms) + 1) + "|",
    ]
    for fraction in FRACTIONS:
        cells = []
        for arm in arms:
            sel = [r[arm] for r in rows if r["fraction"] == fraction and arm in r]
            if not sel:
                cells.append("-")
                continue
            frac = statistics.fmean(s["fraction_of_optimum"] for s in sel)
            score = statistics.fmean(s["score"] for s in sel)
            cells.append(f"{frac:.3f} / {score:+.2f}")
        lines.append(f"| {fraction:.0%} | " + " | ".join(cells) + " |")
    lines += ["", "Cells: fraction of optimum / score.", ""]
    goal = [r["ours"]["fraction_of_optimum"] for r in rows if r["fraction"] == 0.25]
    worst = min(r["ours"]["worst_fraction"] for r in rows if r["fraction"] == 0.25)
    lines += [
        f"Goal (95% of the optimum at 25% of the evaluations): ours reaches {statistics.fmean(goal):.3f} on "
        f"average, {min(goal):.3f} on the hardest task, {worst:.3f} in the worst single run.",
        "",
        "## Per task",
        "",
        "| task | points | budget | default | " + " | ".join(arms) + " | warm start from |",
        "|---" * (len(arms) + 5) + "|",
    ]
    for r in rows:
        cells = [f"{r[a]['fraction_of_optimum']:.3f} / {r[a]['score']:+.2f}" if a in r else "-" for a in arms]
        default = f"{r['optimum_ms'] / r['default_ms']:.3f}"
        lines.append(
            f"| {r['task']} | {r['points']} | {r['evals']} ({r['fraction']:.0%}) | {default} | "
            + " | ".join(cells)
            + f" | {r['warm_from']} |"
        )
    lines += [
        "",
        "`default` = optimum / time of the untuned start (what the tuner must never return worse than).",
        "",
    ]
    lines += warm_section(rows)
    lines += run_notes(args.cache_dir, {p.name: p for p in problems})
    return "\n".join(lines)


def warm_section(rows: list[dict]) -> list[str]:
    """The gain from a warm start: fraction reached cold and warm, and evaluations to a point
    within 5% of the optimum (at the largest budget, so most runs get there)."""
    warm_rows = [r for r in rows if "ours_warm" in r]
    if not warm_rows:
        return []
    lines = [
        "## Warm start",
        "",
        "`ours_warm` first measures the best points the experience library holds for the same kernel's other "
        "shape (its own tuning run at 25% of that space, recorded in a scratch library); those evaluations "
        "count against the budget like any other.",
        "",
        "| budget | ours | ours_warm | gain |",
        "|---|---|---|---|",
    ]
    for fraction in FRACTIONS:
        sel = [r for r in warm_rows if r["fraction"] == fraction]
        cold = statistics.fmean(r["ours"]["fraction_of_optimum"] for r in sel)
        hot = statistics.fmean(r["ours_warm"]["fraction_of_optimum"] for r in sel)
        lines.append(f"| {fraction:.0%} | {cold:.3f} | {hot:.3f} | {hot - cold:+.3f} |")
    largest = max(FRACTIONS)
    lines += [
        "",
        f"Evaluations until a point within {1 - NEAR:.0%} of the optimum was measured (median over seeds, "
        f"budget {largest:.0%} of the space):",
        "",
        "| task | budget | ours | ours_warm | warm start from |",
        "|---|---|---|---|---|",
    ]
    for r in warm_rows:
        if r["fraction"] != largest:
            continue
        lines.append(
            f"| {r['task']} | {r['evals']} | {near_cell(r['ours']['evals_to_near'], r['evals'])} | "
            f"{near_cell(r['ours_warm']['evals_to_near'], r['evals'])} | {r['warm_from']} |"
        )
    lines.append("")
    return lines


def e2e_verdict(result_path: Path, problems: dict[str, Problem]) -> list[str]:
    """The adaptive run's pick, judged by the brute force of the same task on the same GPU."""
    try:
        body = json.loads(result_path.read_text())
    except (OSError, ValueError):
        return []
    outcome = body.get("outcome") or {}
    problem = problems.get(body.get("task", ""))
    best = outcome.get("best_key")
    if problem is None or not best:
        return []
    usage = outcome.get("usage") or {}
    brute = problem.times.get(best)
    if brute is None:
        return [f"Its pick {best} has no correct time in the brute-force cache.", ""]
    return [
        f"Its pick `{best}` after {usage.get('evaluations')} of {len(problem.space)} points "
        f"({usage.get('evaluations', 0) / len(problem.space):.0%}) and {usage.get('wall_seconds', 0):.1f} s: "
        f"the brute force timed it at {brute:.4f} ms, {problem.optimum / brute:.3f} of the optimum "
        f"({problem.optimum:.4f} ms); the untuned start {problem.true_time(outcome.get('default_key')):.4f} ms.",
        "",
    ]


def run_notes(cache_dir: Path, problems: dict[str, Problem] | None = None) -> list[str]:
    """The brute-force run's own record (summary.json) and its adaptive run's table, when present."""
    lines: list[str] = []
    summary_path = cache_dir / "summary.json"
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text())
        lines += [
            "## The brute-force run",
            "",
            f"Build of all kernels {summary.get('compile_s', 0):.1f} s; whole run {summary.get('total_s', 0):.1f} s; "
            f"timing per point: {json.dumps(summary.get('timing', {}))}.",
            "",
            "| task | points measured | statuses | seconds | GPU-s | default ms | best ms |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, t in summary.get("tasks", {}).items():
            best = f"{t['best_ms']:.4f}" if t.get("best_ms") else "-"
            default = f"{t['default_ms']:.4f}" if t.get("default_ms") else "-"
            lines.append(
                f"| {name} | {t.get('measured')} / {t.get('valid_points')} | {t.get('statuses')} | "
                f"{t.get('seconds', 0):.1f} | {t.get('gpu_seconds', 0):.1f} | {default} | {best} |"
            )
        lines.append("")
    for table in sorted(cache_dir.glob("e2e_*.txt")):
        lines += [
            f"## Adaptive `agent tune` run: {table.stem[4:]}",
            "",
            "```",
            table.read_text().rstrip(),
            "```",
            "",
        ]
        lines += e2e_verdict(table.with_suffix(".json"), problems or {})
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, default=HERE / "cache")
    parser.add_argument("--out", type=Path, default=None, help="markdown results table")
    parser.add_argument("--json", type=Path, default=None, help="every row as JSON")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--kt-seeds", type=int, default=5)
    parser.add_argument("--no-kt", action="store_true", help="skip Kernel Tuner even where it imports")
    parser.add_argument("--only", default="", help="comma-separated task names")
    parser.add_argument(
        "--allow-synthetic", action="store_true", help="accept synthetic caches (tables say so)"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    files = sorted(args.cache_dir.glob("*.json"))
    files = [f for f in files if is_cache(f) and (not args.only or f.stem in args.only.split(","))]
    if not files:
        print(f"no cache files in {args.cache_dir}", file=sys.stderr)
        return 2
    problems: list[Problem] = []
    skipped: list[str] = []
    for f in files:
        try:
            problems.append(Problem(f))
        except IncompleteCache as exc:
            skipped.append(str(exc))
            print(f"left out: {exc}", file=sys.stderr)
    if not problems:
        print(f"no complete cache in {args.cache_dir}", file=sys.stderr)
        return 2
    if any(p.synthetic for p in problems) and not args.allow_synthetic:
        print("these caches are SYNTHETIC: pass --allow-synthetic to replay them anyway", file=sys.stderr)
        return 2
    use_kt = kt_available() and not args.no_kt
    if not use_kt and not args.no_kt:
        print(
            "kernel_tuner is not importable here: its strategies are skipped (pip install kernel_tuner)",
            file=sys.stderr,
        )
    rows = evaluate(problems, args.seeds, args.kt_seeds, use_kt)
    text = markdown(rows, problems, args, use_kt, skipped)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
