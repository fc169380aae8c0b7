"""The Ray executor: evaluations placed on a Ray cluster's GPUs, results returned to the driver,
which alone writes the store.

One evaluation is two Ray tasks on the same GPU node: a compile (`num_cpus=1`) in a node-local
folder, then a judge pinned to that node so it finds the build. The judge asks for
`num_gpus=1/evals_per_gpu`: Ray runs up to `evals_per_gpu` judges on one GPU and sets
CUDA_VISIBLE_DEVICES for each, which every process of the evaluation inherits. As with the local
executor, sharing is safe because the referee's processes take the node's gate of that GPU
(shared for correctness, exclusive for timing); with a sandbox kind whose processes cannot, a
judge takes a whole GPU (`num_gpus=1`) and the referee holds the gate around each candidate run. Files travel with
the task (the task's source and the candidate's model files), so workers need no shared
filesystem. `ray` is an optional dependency: `pip install 'kernel-agent[ray]'`.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

from agent.batch.config import EvalJob
from agent.batch.executors import EvaluationError
from agent.batch.executors.local import gates_in_referee, resolve_sandbox
from agent.batch.jobs import CompileFn, JudgeFn, compile_job, judge_job
from agent.batch.scheduler import NO_GPU, referee_gate
from agent.build.compile import CompileResult
from agent.referee.results import EvalResult
from agent.tasks import Task
from agent.workspace import Workspace

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError(
            "--executor ray needs Ray: pip install 'kernel-agent[ray]' (or pip install ray)"
        ) from exc
    return ray


class Shipped:
    """An evaluation job as it travels: the task's source and the candidate's files."""

    def __init__(self, job: EvalJob) -> None:
        self.job = job
        self.task_source = job.task.path.read_bytes()
        path = job.solution
        if path.is_dir():
            self.kind = "workspace"
            self.files = Workspace(path).model_files()
        else:
            self.kind = "single_file"
            self.files = {path.name: path.read_text(encoding="utf-8")}

    def unpack(self, root: Path) -> EvalJob:
        """Recreate the job under `root` on the worker's node."""
        task = self.job.task
        level = f"level{task.level}" if task.level is not None else "tasks"
        task_path = root / "task" / level / task.path.name
        task_path.parent.mkdir(parents=True)
        task_path.write_bytes(self.task_source)
        local_task: Task = task.model_copy(update={"path": task_path})
        if self.kind == "workspace":
            ws = Workspace.create(root / "workspace", local_task)
            for rel, text in self.files.items():
                (ws.root / rel).parent.mkdir(parents=True, exist_ok=True)
                (ws.root / rel).write_text(text, encoding="utf-8")
            solution = ws.root
        else:
            ((name, text),) = self.files.items()
            solution = root / "solution" / name
            solution.parent.mkdir(parents=True)
            solution.write_text(text, encoding="utf-8")
        return self.job.model_copy(update={"task": local_task, "solution": solution})


def _remote_compile(shipped: Shipped, compile_fn: CompileFn) -> tuple[str, EvalJob, CompileResult]:
    root = Path(tempfile.gettempdir()) / "kernel-agent-ray" / uuid.uuid4().hex
    job = shipped.unpack(root)
    compiled = compile_fn(job)
    if not compiled.ok:
        shutil.rmtree(root, ignore_errors=True)
    return str(root), job, compiled


def _remote_judge(
    root: str,
    job: EvalJob,
    compiled: CompileResult,
    judge_fn: JudgeFn,
    lock_dir: Path | None,
) -> EvalResult:
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES") or None
    local = NO_GPU if gpu is None else "0"  # the one GPU Ray gave this worker, as it sees it
    try:
        return judge_fn(job, compiled, gpu, referee_gate(local, lock_dir))
    finally:
        shutil.rmtree(root, ignore_errors=True)


class RayEvaluator:
    def __init__(
        self,
        address: str | None = None,
        *,
        evals_per_gpu: int = 1,
        sandbox: str = "local",
        lock_dir: Path | None = None,
        eval_timeout_s: float = 3600.0,
        compile_fn: CompileFn = compile_job,
        judge_fn: JudgeFn = judge_job,
        init_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if evals_per_gpu < 1:
            raise ValueError("evals_per_gpu must be at least 1")
        ray = import_ray()
        self.ray = ray
        self._owns = not ray.is_initialized()
        if self._owns:
            ray.init(address=address, **(init_kwargs or {}))
        self.eval_timeout_s = eval_timeout_s
        self.compile_fn = compile_fn
        self.judge_fn = judge_fn
        # `auto` is resolved on the driver: the workers' nodes are assumed to be set up alike.
        self.sandbox = resolve_sandbox(sandbox)
        self.referee_gates = gates_in_referee(self.sandbox)
        self.evals_per_gpu = evals_per_gpu if self.referee_gates else 1
        self.lock_dir = lock_dir
        self._compile = ray.remote(num_cpus=1)(_remote_compile)
        # Ray recycles a GPU task's worker after one call by default; ours does its GPU work in
        # child processes, so keeping the worker (and its imports) saves seconds per evaluation.
        self._judge = ray.remote(num_cpus=1, num_gpus=1 / self.evals_per_gpu, max_calls=0)(_remote_judge)
        self._nodes = itertools.cycle(self._gpu_nodes())
        self._lock = threading.Lock()
        self._counts = {"compiling": 0, "judging": 0}

    def _gpu_nodes(self) -> list[str]:
        nodes = [
            n["NodeID"]
            for n in self.ray.nodes()
            if n.get("Alive")
            for _ in range(int(n.get("Resources", {}).get("GPU", 0)))
        ]
        if not nodes:
            raise EvaluationError("the Ray cluster has no node with a GPU resource; evaluations need one")
        return nodes

    def evaluate(self, job: EvalJob, *, holder: str = "") -> EvalResult:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if job.options.sandbox == "auto":
            job = job.model_copy(update={"options": job.options.model_copy(update={"sandbox": self.sandbox})})
        with self._lock:
            node = next(self._nodes)
        place = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
        with self._counting("compiling"):
            root, remote_job, compiled = self._get(
                self._compile.options(scheduling_strategy=place).remote(Shipped(job), self.compile_fn)
            )
        if not compiled.ok:
            return self.judge_fn(job, compiled, None, None)
        with self._counting("judging"):
            result: EvalResult = self._get(
                self._judge.options(scheduling_strategy=place).remote(
                    root, remote_job, compiled, self.judge_fn, self.lock_dir
                )
            )
        result.solution.path = str(job.solution)
        return result

    def _get(self, ref: Any) -> Any:
        ray = self.ray
        try:
            return ray.get(ref, timeout=self.eval_timeout_s)
        except ray.exceptions.GetTimeoutError as exc:
            ray.cancel(ref, force=True)
            raise EvaluationError(
                f"the Ray evaluation ran past {self.eval_timeout_s:.0f}s and was cancelled"
            ) from exc
        except ray.exceptions.RayError as exc:
            raise EvaluationError(f"the Ray evaluation failed: {_ANSI.sub('', str(exc))}") from exc

    def activity(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def close(self) -> None:
        if self._owns and self.ray.is_initialized():
            self.ray.shutdown()

    def _counting(self, key: str) -> _Count:
        return _Count(self, key)


class _Count:
    def __init__(self, owner: RayEvaluator, key: str) -> None:
        self.owner, self.key = owner, key

    def __enter__(self) -> None:
        with self.owner._lock:
            self.owner._counts[self.key] += 1

    def __exit__(self, *exc: object) -> None:
        with self.owner._lock:
            self.owner._counts[self.key] -= 1


__all__ = ["RayEvaluator", "Shipped", "import_ray"]
