"""Rollouts at scale (issue 20, parts 4 and 5): N concurrent rollouts of the RL environment with a
scripted policy, their evaluations on GPUs through the batch's executor, and the throughput.

    python benchmarks/rl_rollouts.py ../shared/kernelbench/level1 --samples 2 --concurrency 32 \
        --executor ray --evals-per-gpu 4 --out runs/rollouts --table rollouts_h200.md

The policy is the built-in template policy (agent/templates: no API key, no tokens), one fresh
per rollout; tasks its library does not cover are left out and counted. Each rollout is an
agent.rl `KernelSession` driven by the agent loop (`agent.rl.rollouts.converse`), judged through
`BatchReferee` on a `LocalEvaluator` or a `RayEvaluator` (a local Ray instance started here with
the machine's GPUs, or `--address`), behind `DedupReferee`. Prints and writes: rollouts per hour,
evaluations judged and reused, evaluations per GPU-hour, the rewards, and where the evaluation time
went (build, import, inputs, trials, GPU wait, timing, profile, judge: agent.batch.stages).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.batch.config import JudgingOptions  # noqa: E402
from agent.rl.rollouts import run_rollouts  # noqa: E402
from agent.tasks import Task, load_folder  # noqa: E402
from agent.templates import NotCovered, TemplatePolicy, build_policy  # noqa: E402


def covered(tasks: list[Task], max_candidates: int) -> tuple[list[Task], list[str]]:
    kept, left_out = [], []
    for task in tasks:
        policy = build_policy(task.path, max_candidates=max_candidates)
        if isinstance(policy, NotCovered):
            left_out.append(f"{task.name}: {policy.reason[:120]}")
        else:
            kept.append(task)
    return kept, left_out


def evaluator_for(args: argparse.Namespace) -> object:
    import torch

    gpus = [str(i) for i in range(torch.cuda.device_count())]
    if args.executor == "ray":
        from agent.batch.executors.ray import RayEvaluator, import_ray

        ray = import_ray()
        if args.address is None and not ray.is_initialized():
            ray.init(num_gpus=len(gpus), include_dashboard=False, log_to_driver=False)
        return RayEvaluator(args.address, evals_per_gpu=args.evals_per_gpu)
    from agent.batch.executors.local import LocalEvaluator

    return LocalEvaluator(
        gpus=gpus or ["none"], compile_workers=os.cpu_count() or 1, evals_per_gpu=args.evals_per_gpu
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folders", type=Path, nargs="+")
    parser.add_argument("--samples", type=int, default=2, help="rollouts per task")
    parser.add_argument("--concurrency", type=int, default=16, help="rollouts at once")
    parser.add_argument("--executor", choices=["local", "ray"], default="ray")
    parser.add_argument("--address", help="a running Ray cluster (default: start a local one)")
    parser.add_argument("--evals-per-gpu", type=int, default=4)
    parser.add_argument(
        "--max-candidates", type=int, default=4, help="the template policy's candidates per rollout"
    )
    parser.add_argument("--policy", default="kernelbench", help="referee policy")
    parser.add_argument("--limit", type=int, help="at most this many tasks")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--table", type=Path, help="write the markdown table here too")
    args = parser.parse_args()

    tasks = [task for folder in args.folders for task in load_folder(folder)[0]][: args.limit]
    tasks, left_out = covered(tasks, args.max_candidates)
    evaluator = evaluator_for(args)

    def template_policy(task: Task) -> TemplatePolicy:
        policy = build_policy(task.path, max_candidates=args.max_candidates)
        assert isinstance(policy, TemplatePolicy)
        return policy

    report = run_rollouts(
        tasks,
        template_policy,
        samples=args.samples,
        concurrency=args.concurrency,
        evaluator=evaluator,  # type: ignore[arg-type]
        options=JudgingOptions(policy=args.policy),
        out=args.out,
        model_name="templates",
    )
    evaluator.close()  # type: ignore[attr-defined]
    gpu_hours = report.gpu_s / 3600
    rewards = [r.outcome.reward.reward for r in report.rollouts]
    failed = sum(r.outcome.failed for r in report.rollouts)
    lines = [
        "# RL rollouts at scale: throughput",
        "",
        f"- date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"- command: `python benchmarks/rl_rollouts.py {' '.join(sys.argv[1:])}`",
        f"- tasks: {len(tasks)} covered by the template library ({len(left_out)} left out), {args.samples} "
        f"rollouts each, {args.concurrency} at once, executor {args.executor}, {args.evals_per_gpu} evaluations per GPU",
        "",
        "| rollouts | failed | wall s | rollouts / hour | judged | reused (same content) | mean reward |",
        "|---|---|---|---|---|---|---|",
        f"| {len(report.rollouts)} | {failed} | {report.wall_s:.0f} | {report.per_hour:.0f} | {report.judged} | "
        f"{report.reused} | {statistics.mean(rewards) if rewards else 0:.3f} |",
        "",
        f"- evaluations per GPU-hour (the judged ones' candidate and judge processes): {report.judged / gpu_hours:.0f}"
        if gpu_hours
        else "- no GPU time recorded",
        "",
        "| stage | total s | median s | share |",
        "|---|---|---|---|",
        *(
            f"| {s.stage} | {s.total_s:.1f} | {s.median_s:.2f} | {100 * s.share:.0f}% |"
            for s in report.stages
        ),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.table:
        args.table.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
