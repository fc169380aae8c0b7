"""The batch runner: every task of some folders, agent runs or judged solutions, into one store.

Each work item is claimed in the store when a worker thread starts it and recorded when it ends,
so the batch resumes where a killed one stopped. A failure of one item (an exception, a worker
crash, a provider outage that outlasts its retries) becomes an `error` row and the batch goes on.
"""

from __future__ import annotations

import fnmatch
import logging
import queue
import re
import shutil
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent.batch.agent_runs import (
    INFRA_VERDICTS,
    BatchReferee,
    NotAttempted,
    TaskRunner,
    attempt_from_run,
    provider_outage,
    solve_runner,
    template_policy,
)
from agent.batch.config import BatchConfig, EvalJob, JudgingOptions, WorkItem
from agent.batch.environment import gpu_inventory, versions
from agent.batch.executors import Evaluator
from agent.batch.jobs import CompileFn, JudgeFn, compile_job, judge_job
from agent.batch.layouts import copy_solution, discover_solutions
from agent.batch.progress import NullProgress, ProgressState
from agent.batch.records import AttemptRecord
from agent.batch.scheduler import BreakerModel, CircuitBreaker
from agent.batch.store import Store
from agent.models.base import Model, ModelError
from agent.models.registry import TEMPLATES_MODEL
from agent.run.by_region import RegionwisePolicy
from agent.tasks import Task, TaskLoadError, load_folder
from sandbox.base import SandboxError

log = logging.getLogger(__name__)

HEARTBEAT_S = 30.0


@dataclass
class BatchSummary:
    run_id: int
    batch_key: str
    store: Path
    total: int
    skipped: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    unmatched: list[str] = field(default_factory=list)
    load_errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    interrupted: bool = False


def load_tasks(
    folders: list[Path], *, instantiate: bool, sandbox_kind: str = "local", timeout: float = 120.0
) -> tuple[list[Task], list[str]]:
    tasks: dict[str, Task] = {}
    errors: list[str] = []
    for folder in folders:
        try:
            found, failed = load_folder(
                folder, instantiate=instantiate, sandbox_kind=sandbox_kind, timeout=timeout
            )
        except (TaskLoadError, SandboxError) as exc:
            errors.append(str(exc))
            continue
        errors += [str(e) for e in failed]
        for task in found:
            tasks.setdefault(task.key, task)
    return list(tasks.values()), errors


def select(items: list[WorkItem], patterns: list[str]) -> list[WorkItem]:
    """Items whose task matches one of `patterns` (name, levelN/name, key, or a glob of those)."""

    def names(item: WorkItem) -> list[str]:
        level = f"level{item.task.level}/" if item.task.level is not None else ""
        return [item.task.name, f"{level}{item.task.name}", item.task.key, item.item_key]

    return [
        item
        for item in items
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns for name in names(item))
    ]


def interleave_levels(items: list[WorkItem]) -> list[WorkItem]:
    """The order items start in: one of each level in turn, the highest level first, each level
    in its own order. Levels load the machine differently (level 1 at full size: GPU memory,
    each elementwise task most of it; level 3: CPU, minutes of torch.compile per baseline), so
    mixing them keeps both busy where a batch over level1 level2 level3 in folder order would
    queue the memory-bound tasks behind each other and end on a tail of long compiles."""
    by_level: dict[int, list[WorkItem]] = {}
    for item in items:
        by_level.setdefault(item.task.level if item.task.level is not None else 0, []).append(item)
    queues = [by_level[level] for level in sorted(by_level, reverse=True)]
    return [
        queue_[i] for i in range(max(map(len, queues), default=0)) for queue_ in queues if i < len(queue_)
    ]


class BatchRunner:
    def __init__(
        self,
        config: BatchConfig,
        *,
        evaluator: Evaluator | None = None,
        task_runner: TaskRunner | None = None,
        model_factory: Callable[[WorkItem], Model] | None = None,
        progress: ProgressState | None = None,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self.config = config
        self._evaluator = evaluator
        self.task_runner: TaskRunner = task_runner or solve_runner
        self.model_factory = model_factory or self._default_model
        self.progress = progress or NullProgress()
        self.breaker = breaker or CircuitBreaker()
        self.stop = threading.Event()
        self._refreshed: set[str] = set()
        self._gpu_name: str | None = None
        self._lock = threading.Lock()
        self._solve_options = {
            **({"model": config.model} if config.model else {}),
            **config.solve_options,
            "budget": config.budget,
        }
        """SolveConfig fields for every agent run, the budget as the config parsed it."""

    # -- the batch ------------------------------------------------------------------------
    def run(self) -> BatchSummary:
        config = self.config
        started = time.monotonic()
        tasks, load_errors = load_tasks(
            config.tasks,
            instantiate=config.instantiate_tasks,
            sandbox_kind=config.eval.sandbox,
            timeout=config.inspect_timeout_s,
        )
        items, unmatched = self._items(tasks)
        store = Store(config.store)
        evaluator = self._evaluator or make_evaluator(config)
        self.progress.activity = evaluator.activity
        batch_key = config.batch_key()
        inventory = gpu_inventory(config.gpus)
        self._gpu_name = _gpu_name(inventory, config)
        run_id = store.start_run(config, versions=versions(config), gpus=inventory, load_errors=load_errors)
        summary = BatchSummary(
            run_id, batch_key, config.store, len(items), unmatched=unmatched, load_errors=load_errors
        )
        store.add_tasks(tasks)
        if config.redo:
            redone = store.supersede(batch_key, [i.item_key for i in select(items, config.redo)])
            self.progress.note(f"--redo: {redone} recorded attempts superseded")
        for message in [*load_errors, *unmatched]:
            self.progress.note(message)
        heart = threading.Thread(target=self._heartbeat, args=(store, run_id), daemon=True)
        heart.start()
        self.progress.start(len(items), f"batch {batch_key} ({config.mode})")
        status = "finished"
        try:
            self._run_items(store, run_id, batch_key, evaluator, items, summary)
        except KeyboardInterrupt:
            status, summary.interrupted = "interrupted", True
            self.stop.set()
            store.abandon_running(run_id, "the batch was interrupted")
        finally:
            self.stop.set()
            self.progress.stop()
            store.finish_run(run_id, status)
            if self._evaluator is None:
                evaluator.close()
            summary.counts = _count(store, batch_key, run_id)
            summary.wall_s = time.monotonic() - started
            store.close()
        return summary

    def _run_items(
        self,
        store: Store,
        run_id: int,
        batch_key: str,
        evaluator: Evaluator,
        items: list[WorkItem],
        summary: BatchSummary,
    ) -> None:
        work: queue.Queue[WorkItem] = queue.Queue()
        for item in interleave_levels(items):
            work.put(item)

        def worker() -> None:
            while not self.stop.is_set():
                try:
                    item = work.get_nowait()
                except queue.Empty:
                    return
                try:
                    processed = self._process(store, run_id, batch_key, evaluator, item)
                except Exception as exc:  # the store itself failed: leave the item to the next run
                    log.exception("%s: could not be run or recorded", item.label)
                    self.progress.note(
                        f"{item.label}: not recorded ({type(exc).__name__}: {exc}); rerun to retry"
                    )
                    continue
                if not processed:
                    with self._lock:
                        summary.skipped += 1

        # Daemon threads: on Ctrl-C the driver returns at once; what they were running stays
        # `running` in the store and is redone by the next run (its owner is then dead).
        threads = [threading.Thread(target=worker, daemon=True) for _ in range(self.config.concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.5)

    def _process(
        self, store: Store, run_id: int, batch_key: str, evaluator: Evaluator, item: WorkItem
    ) -> bool:
        claim = store.claim(run_id, batch_key, item, retry_errors=self.config.retry_errors)
        if claim is None:
            self.progress.skip(item)
            return False
        for stale in claim.stale_output_dirs:
            shutil.rmtree(stale, ignore_errors=True)
        out_dir = self.config.out / "attempts" / _slug(item) / f"attempt-{claim.attempt_id}"
        store.set_output_dir(claim.attempt_id, out_dir)
        self.progress.begin(item)
        started = time.monotonic()
        try:
            if self.config.mode == "solutions":
                outcome = self._judge(item, out_dir, evaluator)
            else:
                outcome = self._solve(item, out_dir, evaluator)
        except Exception:
            outcome = AttemptRecord(status="error", error=traceback.format_exc())
        outcome.wall_s = time.monotonic() - started
        store.finish_attempt(claim.attempt_id, outcome)
        self.progress.end(item, outcome)
        return True

    # -- one item -------------------------------------------------------------------------
    def _judge(self, item: WorkItem, out_dir: Path, evaluator: Evaluator) -> AttemptRecord:
        solution = copy_solution(item, out_dir / "solution")
        result = evaluator.evaluate(
            EvalJob(task=item.task, solution=solution, options=self._options(item.task)), holder=item.label
        )
        times = result.stage_times
        return AttemptRecord(
            status="error" if result.verdict in INFRA_VERDICTS else "done",
            result=result,
            gpu_s=times.candidate_s + times.judge_s,
            solution_path=str(solution),
            error=result.reason if result.verdict in INFRA_VERDICTS else None,
        )

    def _solve(self, item: WorkItem, out_dir: Path, evaluator: Evaluator) -> AttemptRecord:
        try:
            agent_model = self.model_factory(item)
        except NotAttempted as exc:  # a result (nothing to try), not a failure: not redone
            return AttemptRecord(status="done", error=str(exc))
        # A region-by-region templates run is no loop's model (agent/run/by_region.py): solve() must
        # see it as it is, and it has no provider to break.
        model = (
            agent_model
            if isinstance(agent_model, RegionwisePolicy)
            else BreakerModel(agent_model, self.breaker, self.stop)
        )
        tries = self.config.max_outage_retries + 1
        for attempt in range(tries):
            self.breaker.wait(self.stop)
            run_dir = out_dir if attempt == 0 else out_dir.with_name(f"{out_dir.name}-retry{attempt}")
            referee = BatchReferee(
                evaluator, self._options(item.task), holder=item.label, gpu_name=self._gpu_name
            )
            try:
                solved = self.task_runner(
                    item.task,
                    model=model,
                    out_dir=run_dir,
                    referee=referee,
                    options=dict(self._solve_options),
                )
            except ModelError as exc:
                if exc.transient and attempt + 1 < tries:
                    self.progress.note(f"{item.label}: provider outage ({exc}); retrying after the breaker")
                    continue
                return AttemptRecord(
                    status="error",
                    evaluations=referee.evaluations,
                    gpu_s=referee.gpu_s,
                    error=f"model error{' (provider outage)' if exc.transient else ''}: {exc}",
                )
            if provider_outage(solved, model) and attempt + 1 < tries:
                continue
            return attempt_from_run(solved, referee)
        raise AssertionError("unreachable")

    # -- helpers --------------------------------------------------------------------------
    def _items(self, tasks: list[Task]) -> tuple[list[WorkItem], list[str]]:
        if self.config.mode == "agent":
            items = [
                WorkItem(task=t, candidate=f"sample_{i}") for t in tasks for i in range(self.config.samples)
            ]
            return items, []
        assert self.config.solutions is not None
        found = discover_solutions(self.config.solutions, tasks)
        return found.items, found.unmatched

    def _options(self, task: Task) -> JudgingOptions:
        """Baselines are re-timed at most once per task per batch when --refresh-baselines is given."""
        options = self.config.eval
        if options.refresh_baselines:
            with self._lock:
                first = task.key not in self._refreshed
                self._refreshed.add(task.key)
            options = options.model_copy(update={"refresh_baselines": first})
        return options

    def _default_model(self, item: WorkItem) -> Model:
        from agent.models import resolve_model

        if not self.config.model:
            raise ValueError("agent mode needs --model")
        if self.config.model == TEMPLATES_MODEL:
            return template_policy(item.task)
        return resolve_model(self.config.model, timeout_s=self.config.request_timeout_s)

    def _heartbeat(self, store: Store, run_id: int) -> None:
        while not self.stop.wait(HEARTBEAT_S):
            try:
                store.heartbeat(run_id)
            except Exception as exc:  # a busy store must not kill the batch
                log.warning("heartbeat failed: %s", exc)


def make_evaluator(
    config: BatchConfig, *, compile_fn: CompileFn = compile_job, judge_fn: JudgeFn = judge_job
) -> Evaluator:
    if config.executor == "ray":
        from agent.batch.executors.ray import RayEvaluator

        return RayEvaluator(
            address=config.address,
            evals_per_gpu=config.evals_per_gpu,
            sandbox=config.eval.sandbox,
            lock_dir=config.gpu_lock_dir,
            eval_timeout_s=config.eval_timeout_s,
            compile_fn=compile_fn,
            judge_fn=judge_fn,
        )
    from agent.batch.executors.local import LocalEvaluator

    return LocalEvaluator(
        gpus=config.gpus,
        compile_workers=config.compile_workers,
        evals_per_gpu=config.evals_per_gpu,
        sandbox=config.eval.sandbox,
        lock_dir=config.gpu_lock_dir,
        eval_timeout_s=config.eval_timeout_s,
        compile_fn=compile_fn,
        judge_fn=judge_fn,
    )


def run_batch(config: BatchConfig, **kwargs: object) -> BatchSummary:
    return BatchRunner(config, **kwargs).run()  # type: ignore[arg-type]


def _count(store: Store, batch_key: str, run_id: int) -> dict[str, int]:
    counts: dict[str, int] = {}
    for rec in store.attempts(batch_key):
        if rec.run_id == run_id:
            key = "error" if rec.status == "error" else rec.verdict or rec.status
            counts[key] = counts.get(key, 0) + 1
    return counts


def _gpu_name(inventory: list[dict[str, object]], config: BatchConfig) -> str | None:
    """What agents are told they run on (the prompt's GPU line); None when the batch has no GPU."""
    if config.executor == "ray":
        return "a GPU of the Ray cluster"
    if not inventory:
        return None
    arch = (config.eval.arch or "").replace(".", "")
    name = str(inventory[0].get("name") or f"GPU {inventory[0]['id']}")
    return f"{name} (sm_{arch})" if arch else name


def _slug(item: WorkItem) -> str:
    level = f"level{item.task.level}" if item.task.level is not None else "tasks"
    candidate = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.candidate)
    return f"{level}/{item.task.name}/{candidate}"
