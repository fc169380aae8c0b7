"""Judge every solution under benchmarks/solutions/ and check each gets the verdict it must.

A folder `levelN/<task>` is a correct solution (verdict `correct`); `levelN/<task>__broken_<what>`
carries `expected.json` with the verdict it must get (and, for compile errors, the file and line).

usage: python benchmarks/judge_solutions.py [--profile] [--jobs 4] [--run-timeout 30] [--out FILE.md]
Exit status 0 only when every solution got its expected verdict.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.referee import EvalOptions, evaluate  # noqa: E402
from agent.tasks import load_task  # noqa: E402

SOLUTIONS = REPO / "benchmarks" / "solutions"
TASKS = REPO / "benchmarks" / "tasks"


def expectation(folder: Path) -> dict:
    expected = folder / "expected.json"
    return (
        json.loads(expected.read_text())
        if expected.is_file()
        else {"verdict": "correct", "why": "correct solution"}
    )


def judge(folder: Path, args: argparse.Namespace) -> dict:
    level = folder.parent.name
    task = load_task(TASKS / level / f"{folder.name.split('__')[0]}.py")
    want = expectation(folder)
    start = time.monotonic()
    options = EvalOptions(
        profile=args.profile,
        trials=args.trials,
        run_timeout_s=args.run_timeout,
        compile_mode="default" if args.profile else None,
    )
    result = evaluate(task, folder, options)
    ok = result.verdict == want["verdict"]
    if ok and want["verdict"] == "compile_error" and "line" in want:
        first = result.compile.errors[0] if result.compile and result.compile.errors else None
        ok = first is not None and (first.file, first.line) == (want["file"], want["line"])
    speedup = ""
    if result.performance is not None:
        speedup = " / ".join(f"{s.baseline} {s.value:.2f}x" for s in result.performance.speedups)
    return {
        "solution": f"{level}/{folder.name}",
        "expected": want["verdict"],
        "got": result.verdict,
        "ok": ok,
        "reason": result.reason.replace("|", "/")[:110],
        "speedup": speedup,
        "wall_s": time.monotonic() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", action="store_true", help="also time correct solutions (slower)")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--run-timeout", type=float, default=30.0)
    parser.add_argument("--only", default="", help="substring filter on solution folders")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    folders = sorted(p for p in SOLUTIONS.glob("level*/*") if p.is_dir() and args.only in str(p))
    started = time.monotonic()
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda f: judge(f, args), folders))
    total = time.monotonic() - started
    good = sum(r["ok"] for r in rows)
    lines = [
        "## Benchmark solutions judged by the referee",
        "",
        f"- date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- command: `python benchmarks/judge_solutions.py{' --profile' if args.profile else ''} --jobs {args.jobs}"
        f" --trials {args.trials} --run-timeout {args.run_timeout:g}`",
        f"- {good}/{len(rows)} got their expected verdict; wall {total:.0f} s",
        "",
        "| solution | expected | got | ok | speedup | wall s | reason |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['solution']} | {r['expected']} | {r['got']} | {'yes' if r['ok'] else '**NO**'} | {r['speedup']} "
            f"| {r['wall_s']:.1f} | {r['reason']} |"
        )
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table)
    sys.exit(0 if good == len(rows) else 1)


if __name__ == "__main__":
    main()
