"""Shared pieces of the batch tests: tiny task folders, fake solutions, configs, and a command-line
entry (`python -m tests.batch.helpers CONFIG.json`) that runs a fake batch in its own process, for
the kill -9 and two-writer tests."""

from __future__ import annotations

import itertools
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent.batch.config import BatchConfig, JudgingOptions
from agent.batch.executors import Evaluator
from agent.batch.fakes import fake_compile, fake_judge
from agent.batch.runner import BatchRunner, BatchSummary, make_evaluator

TASK_TEMPLATE = """import torch
import torch.nn as nn

# task {name}


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []
"""

REPO = Path(__file__).resolve().parents[2]


def make_tasks(root: Path, names: dict[int, list[str]]) -> Path:
    """`root/levelN/<name>.py` for each level -> names; returns root."""
    for level, stems in names.items():
        folder = root / f"level{level}"
        folder.mkdir(parents=True, exist_ok=True)
        for stem in stems:
            (folder / f"{stem}.py").write_text(TASK_TEMPLATE.format(name=stem))
    return root


def fake_model_new(spec: dict[str, Any]) -> str:
    return f"# fake-eval: {json.dumps(spec)}\nclass ModelNew:\n    pass\n"


def make_workspace_solution(root: Path, level: int, folder: str, spec: dict[str, Any]) -> Path:
    path = root / f"level{level}" / folder
    (path / "kernels").mkdir(parents=True, exist_ok=True)
    (path / "model_new.py").write_text(fake_model_new(spec))
    (path / "kernels" / "k.cu").write_text("// kernel\n")
    return path


def fake_config(tmp: Path, tasks: Path, solutions: Path | None, **overrides: Any) -> BatchConfig:
    extra = overrides.pop("extra", {})
    base: dict[str, Any] = {
        "tasks": [tasks],
        "mode": "solutions" if solutions is not None else "agent",
        "solutions": solutions,
        "model": None if solutions is not None else "scripted",
        "out": tmp / "out",
        "store": tmp / "out" / "store.sqlite",
        "gpus": ["0", "1"],
        "evals_per_gpu": 2,
        "concurrency": 4,
        "compile_workers": 2,
        "instantiate_tasks": False,
        "gpu_lock_dir": tmp / "gpu-locks",
        "eval": JudgingOptions(arch="9.0", extra=extra),
    }
    base.update(overrides)
    return BatchConfig(**base)


def fake_evaluator(config: BatchConfig) -> Evaluator:
    """The evaluator the batch would make for `config`, with the fake compile and judge."""
    return make_evaluator(config, compile_fn=fake_compile, judge_fn=fake_judge)


def run_fake_batch(config: BatchConfig) -> BatchSummary:
    evaluator = fake_evaluator(config)
    try:
        return BatchRunner(config, evaluator=evaluator).run()
    finally:
        evaluator.close()


def read_log(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def spans_by_gpu(entries: list[dict[str, Any]], start: str, end: str) -> dict[str, list[tuple[float, float]]]:
    by_gpu: dict[str, list[tuple[float, float]]] = {}
    for e in entries:
        by_gpu.setdefault(str(e["gpu"]), []).append((e[start], e[end]))
    return {gpu: sorted(spans) for gpu, spans in by_gpu.items()}


def assert_timings_exclusive(entries: list[dict[str, Any]], *, start: str = "timing_start") -> None:
    """No two timed sections (or, with start="start", whole judged intervals) on one GPU overlap."""
    end = start.replace("start", "end")
    for gpu, spans in spans_by_gpu(entries, start, end).items():
        for (s0, e0), (s1, e1) in itertools.pairwise(spans):
            assert s1 >= e0, f"GPU {gpu}: [{s1:.3f}, {e1:.3f}] overlaps [{s0:.3f}, {e0:.3f}]"


def most_at_once(entries: list[dict[str, Any]]) -> dict[str, int]:
    """GPU -> the most judged intervals that were in progress on it at one moment."""
    peaks: dict[str, int] = {}
    for gpu, spans in spans_by_gpu(entries, "start", "end").items():
        events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])  # ends sort first
        now = peak = 0
        for _, delta in events:
            now += delta
            peak = max(peak, now)
        peaks[gpu] = peak
    return peaks


@contextmanager
def local_ray_evaluator(lock_dir: Path, *, num_cpus: int, num_gpus: int) -> Iterator[Any]:
    """A RayEvaluator with the fake compile and judge (two judges per GPU) on a local Ray instance,
    shut down on leaving: `num_gpus` are logical GPUs (Ray schedules them and sets
    CUDA_VISIBLE_DEVICES as on a GPU node), no dashboard, a small object store, loopback only, the
    workers' output not forwarded. Callers skip first when ray is not installed
    (pytest.importorskip): ray is imported only here."""
    import ray

    from agent.batch.executors.ray import RayEvaluator
    from agent.batch.fakes import fake_compile, fake_judge

    ray.init(
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        include_dashboard=False,
        object_store_memory=100 * 1024 * 1024,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )
    try:
        evaluator = RayEvaluator(
            compile_fn=fake_compile,
            judge_fn=fake_judge,
            eval_timeout_s=300,
            evals_per_gpu=2,
            lock_dir=lock_dir,
        )
        try:
            yield evaluator
        finally:
            evaluator.close()
    finally:
        ray.shutdown()


def main(argv: list[str]) -> int:
    """Run the batch described by a JSON file: {"config": BatchConfig JSON, "go": optional file to wait for}."""
    spec = json.loads(Path(argv[0]).read_text())
    go = spec.get("go")
    while go and not Path(go).exists():
        time.sleep(0.02)
    config = BatchConfig.model_validate(spec["config"])
    summary = run_fake_batch(config)
    print(json.dumps({"run_id": summary.run_id, "skipped": summary.skipped, "counts": summary.counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
