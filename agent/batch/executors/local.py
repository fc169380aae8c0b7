"""The local executor: compiles in the calling thread under a pool of CPU slots, then judges in a
worker process pinned to one GPU while holding one of that GPU's slots.

Why processes pinned per GPU: the referee's judge and candidate processes inherit the environment
of the process that starts them, and CUDA_VISIBLE_DEVICES is process-wide; a long-lived worker
started with it set is the one place where every process of an evaluation sees only its GPU.
A worker runs one call at a time, so a GPU with `evals_per_gpu` slots has that many workers.

Sharing a GPU is safe only because the referee's processes take the GPU's gate themselves
(`gpu_gate`): shared for correctness work, exclusive for timing and profiling. With a sandbox
whose processes cannot see the gate files (a backend that does not mount them), the referee holds
the gate exclusively around each candidate run instead, and a GPU gets one slot (more would only
queue).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from agent.batch.config import EvalJob
from agent.batch.executors import EvaluationError
from agent.batch.jobs import CompileFn, JudgeFn, compile_job, judge_job
from agent.batch.scheduler import NO_GPU, GpuPool, referee_gate
from agent.referee.results import EvalResult
from sandbox.workers.gpu.gpu_gate import physical_gpu


class ProcessWorker:
    """One worker process (agent.batch.executors.worker) that runs functions sent to it, one at a
    time, with `env` added to its environment. Started lazily, restarted after it dies or
    overruns; it exits by itself when its parent dies (its pipe closes)."""

    def __init__(self, env: dict[str, str], *, startup_timeout_s: float = 600.0) -> None:
        self.env = env
        self.startup_timeout_s = startup_timeout_s
        self._ready = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._inbox: Connection | None = None
        self._outbox: Connection | None = None

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float) -> Any:
        outbox, inbox = self._ensure()
        try:
            if not self._ready:
                if not inbox.poll(self.startup_timeout_s):
                    self.stop(kill=True)
                    raise EvaluationError(
                        f"the evaluation worker did not start within {self.startup_timeout_s:.0f}s"
                    )
                inbox.recv()
                self._ready = True
            outbox.send((fn, args))
            if not inbox.poll(timeout):
                self.stop(kill=True)
                raise EvaluationError(f"the evaluation worker ran past {timeout:.0f}s and was killed")
            kind, value = inbox.recv()
        except (EOFError, OSError) as exc:
            code = self._proc.poll() if self._proc is not None else None
            self.stop(kill=True)
            raise EvaluationError(f"the evaluation worker process died (exit status {code})") from exc
        if kind == "error":
            raise EvaluationError(f"the evaluation raised in its worker process:\n{value}")
        return value

    def start(self) -> None:
        self._ensure()

    def _ensure(self) -> tuple[Connection, Connection]:
        if self._proc is not None and self._proc.poll() is None and self._outbox and self._inbox:
            return self._outbox, self._inbox
        self.stop(kill=True)
        self._ready = False
        to_child_r, to_child_w = os.pipe()
        to_parent_r, to_parent_w = os.pipe()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "agent.batch.executors.worker", str(to_child_r), str(to_parent_w)],
            pass_fds=(to_child_r, to_parent_w),
            env={**os.environ, **self.env},
            stdin=subprocess.DEVNULL,
        )
        os.close(to_child_r)
        os.close(to_parent_w)
        self._outbox = Connection(to_child_w, readable=False)
        self._inbox = Connection(to_parent_r, writable=False)
        return self._outbox, self._inbox

    def stop(self, *, kill: bool = False) -> None:
        proc, outbox, inbox = self._proc, self._outbox, self._inbox
        self._proc, self._outbox, self._inbox = None, None, None
        if outbox is not None:
            with contextlib.suppress(OSError):
                if not kill:
                    outbox.send(None)
            outbox.close()
        if inbox is not None:
            inbox.close()
        if proc is not None:
            if kill:
                proc.kill()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def gates_in_referee(sandbox: str) -> bool:
    """Whether the referee's processes in sandboxes of this kind can take the GPU gates: the local
    sandbox shows them the gate folder, and docker mounts it into containers with GPUs. A
    registered backend of another kind is not assumed to."""
    return sandbox in ("local", "docker")


def resolve_sandbox(sandbox: str) -> str:
    """`auto` resolved once for the whole batch, so every evaluation shares a GPU the same way."""
    if sandbox != "auto":
        return sandbox
    from sandbox.auto import choose_kind

    return choose_kind().kind


class LocalEvaluator:
    def __init__(
        self,
        *,
        gpus: list[str],
        compile_workers: int,
        evals_per_gpu: int = 1,
        sandbox: str = "local",
        lock_dir: Path | None = None,
        eval_timeout_s: float = 3600.0,
        compile_fn: CompileFn = compile_job,
        judge_fn: JudgeFn = judge_job,
    ) -> None:
        self.sandbox = resolve_sandbox(sandbox)
        self.referee_gates = gates_in_referee(self.sandbox)
        self.pool = GpuPool(gpus, slots_per_gpu=evals_per_gpu if self.referee_gates else 1)
        self.lock_dir = lock_dir
        self.compile_slots = threading.BoundedSemaphore(compile_workers)
        self.eval_timeout_s = eval_timeout_s
        self.compile_fn = compile_fn
        self.judge_fn = judge_fn
        self.workers = {
            gpu: [
                ProcessWorker({} if gpu == NO_GPU else {"CUDA_VISIBLE_DEVICES": physical_gpu(gpu)})
                for _ in range(self.pool.slots_per_gpu)
            ]
            for gpu in self.pool.gpus
        }
        self._counts = {"compiling": 0, "waiting_gpu": 0, "judging": 0}
        self._counts_lock = threading.Lock()
        for workers in self.workers.values():  # their imports overlap the first compiles
            for worker in workers:
                worker.start()

    @property
    def evals_per_gpu(self) -> int:
        return self.pool.slots_per_gpu

    def evaluate(self, job: EvalJob, *, holder: str = "") -> EvalResult:
        if job.options.sandbox == "auto":
            job = job.model_copy(update={"options": job.options.model_copy(update={"sandbox": self.sandbox})})
        queued = time.monotonic()
        with self.compile_slots, self._counting("compiling"):
            build_queue_s = time.monotonic() - queued
            compiled = self.compile_fn(job)
        if not compiled.ok:
            result = self.judge_fn(job, compiled, None, None)  # a compile_error verdict: no GPU is touched
            result.stage_times.build_queue_s = build_queue_s
            return result
        self._bump("waiting_gpu", 1)
        waiting = True
        queued = time.monotonic()
        try:
            with self.pool.acquire(holder) as slot:
                self._bump("waiting_gpu", -1)
                waiting = False
                judge_queue_s = time.monotonic() - queued
                gpu = slot.gpu
                physical = None if gpu == NO_GPU else physical_gpu(gpu)
                gate = referee_gate(gpu, self.lock_dir)
                with self._counting("judging"):
                    result = self.workers[gpu][slot.index].call(
                        self.judge_fn, job, compiled, physical, gate, timeout=self.eval_timeout_s
                    )
        finally:
            if waiting:
                self._bump("waiting_gpu", -1)
        result.stage_times.build_queue_s = build_queue_s
        result.stage_times.judge_queue_s = judge_queue_s
        return result

    def activity(self) -> dict[str, int]:
        with self._counts_lock:
            counts = dict(self._counts)
        if len(self.pool.gpus) > 1:  # how the judging spreads over the GPUs
            counts |= {f"on gpu {gpu}": self.pool.in_flight(gpu) for gpu in self.pool.gpus}
        return counts

    def close(self) -> None:
        for workers in self.workers.values():
            for worker in workers:
                worker.stop()

    def _counting(self, what: str) -> _Counter:
        return _Counter(self._bump, what)

    def _bump(self, what: str, delta: int) -> None:
        with self._counts_lock:
            self._counts[what] += delta


class _Counter:
    def __init__(self, bump: Callable[[str, int], None], key: str) -> None:
        self.bump, self.key = bump, key

    def __enter__(self) -> None:
        self.bump(self.key, 1)

    def __exit__(self, *exc: object) -> None:
        self.bump(self.key, -1)
