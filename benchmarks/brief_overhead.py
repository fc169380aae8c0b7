"""What the task brief costs on a GPU, and what it and a profile say there.

For each task: the baselines timed by the judge with no candidate (cold: an empty baseline cache),
then again (cached), the rendered brief, and the GPU seconds both took. With `--profile-example`,
the cuda-extension skill's ReLU example is judged on the first task and its profile reply (with the
speed-of-light lines) is printed. Writes markdown to stdout.

    python benchmarks/brief_overhead.py TASK.py [TASK.py ...] [--profile-example]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from agent.referee import EvalOptions, evaluate
from agent.referee.baselines import BaselineCache
from agent.referee.report import feedback
from agent.run.brief import gather_facts, measure_baselines, render_brief
from agent.tasks import load_task
from agent.tools.candidates import visible_gpu
from agent.workspace import Workspace
from sandbox.base import open_sandbox

EXAMPLE = Path(__file__).resolve().parents[1] / "skills" / "cuda-extension" / "examples" / "relu"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="+", type=Path)
    parser.add_argument("--profile-example", action="store_true")
    args = parser.parse_args()
    gpu = visible_gpu()
    options = EvalOptions()
    scratch = Path(tempfile.mkdtemp(prefix="brief-bench-"))
    print(f"# Task brief on {gpu}\n")
    print("| task | cold s | cached s | eager ms | torch.compile ms | bandwidth GB/s |")
    print("|---|---|---|---|---|---|")
    briefs = []
    for path in args.tasks:
        task = load_task(path)
        cache = BaselineCache(scratch / f"{task.name}.json")
        with open_sandbox("local", workspace=scratch) as box:
            started = time.monotonic()
            cold = measure_baselines(task, options, box, gpu=gpu or "", cache=cache)
            cold_s = time.monotonic() - started
            started = time.monotonic()
            cached = measure_baselines(task, options, box, gpu=gpu or "", cache=cache)
            cached_s = time.monotonic() - started
        facts = gather_facts(task, options=options, gpu=gpu, baseline="compile", baselines=cold)
        briefs.append((task, facts))
        print(
            f"| {task.name} | {cold_s:.1f} | {cached_s:.1f} | {cold.eager_ms} | {cold.compile_ms} | "
            f"{cold.bandwidth_gbps} |" + (f" errors: {cold.errors}" if cold.errors else "")
        )
        assert cached.cached, f"{task.name}: the second measurement was not read from the cache"
    for task, facts in briefs:
        print(f"\n## {task.name}\n\n```\n{render_brief(facts)}\n```")
    if args.profile_example:
        task, facts = briefs[0]
        workspace = Workspace.create(scratch / "ws", task)
        for source in EXAMPLE.rglob("*"):
            if source.is_file() and "__pycache__" not in source.parts:
                target = workspace.root / source.relative_to(EXAMPLE)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
        result = evaluate(task, workspace, options, sandbox="local")
        print(
            f"\n## profile of the ReLU example on {task.name}\n\n```\n{feedback(result, work=facts.work)}\n```"
        )
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
