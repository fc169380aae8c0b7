"""Shared resources of one batch: GPU slots (exclusive), compile slots (CPU), and a circuit breaker
that pauses every agent while a model provider is down.

A GPU slot is held for a whole evaluation, so no timing is ever taken while another candidate runs
on the same GPU. Slots are also file locks (one file per physical GPU), so two batches on one
machine, or a batch and `agent eval`-style tools that take the same lock, never time at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from agent.messages import Message, ModelResponse, ToolSpec
from agent.models.base import Model, ModelError
from agent.paths import cache_dir

log = logging.getLogger(__name__)

NO_GPU = "none"


def physical_gpu(gpu: str) -> str:
    """The id `gpu` names outside this process: an index into our CUDA_VISIBLE_DEVICES, if set."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if visible and gpu.isdigit() and int(gpu) < len(visible):
        return visible[int(gpu)]
    return gpu


def visible_gpus() -> list[str]:
    """Indices of the GPUs this process can see (`--gpus` default), without creating a CUDA context."""
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:
        return []


class GpuPool:
    """One slot per GPU; `acquire()` waits for any free one and holds its lock file too."""

    def __init__(self, gpus: Sequence[str], *, lock_dir: Path | None = None) -> None:
        self.gpus = list(gpus) or [NO_GPU]
        self._free = list(self.gpus)
        self._cond = threading.Condition()
        self.lock_dir = lock_dir if lock_dir is not None else cache_dir() / "gpu-locks"
        self.busy: dict[str, str] = {}
        """gpu -> what holds it (for the progress display)."""

    @contextlib.contextmanager
    def acquire(self, holder: str = "") -> Iterator[str]:
        with self._cond:
            while not self._free:
                self._cond.wait()
            gpu = self._free.pop(0)
            self.busy[gpu] = holder
        try:
            with self._file_lock(gpu):
                yield gpu
        finally:
            with self._cond:
                self.busy.pop(gpu, None)
                self._free.append(gpu)
                self._cond.notify()

    @contextlib.contextmanager
    def _file_lock(self, gpu: str) -> Iterator[None]:
        if gpu == NO_GPU:
            yield
            return
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        with open(self.lock_dir / f"gpu-{physical_gpu(gpu)}.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


class CircuitBreaker:
    """Opens on a provider outage (a transient ModelError) and stays open for a backoff that doubles
    with each outage in a row; every agent waits while it is open instead of failing its task."""

    def __init__(
        self,
        *,
        base_s: float = 30.0,
        max_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_s = base_s
        self.max_s = max_s
        self._clock = clock
        self._cond = threading.Condition()
        self._open_until = 0.0
        self.consecutive = 0
        self.trips = 0
        self.last_error: str | None = None

    @property
    def open_for(self) -> float:
        """Seconds until it closes (0 when closed)."""
        return max(0.0, self._open_until - self._clock())

    def trip(self, error: BaseException) -> float:
        """Record an outage; returns how long the breaker stays open from now."""
        with self._cond:
            self.last_error = str(error)
            if self.open_for > 0:  # the same outage, seen by another agent
                return self.open_for
            self.consecutive += 1
            self.trips += 1
            delay = min(self.max_s, self.base_s * 2 ** (self.consecutive - 1))
            self._open_until = self._clock() + delay
            log.warning("model provider outage (%s); pausing model calls for %.0fs", error, delay)
            return delay

    def success(self) -> None:
        with self._cond:
            self.consecutive = 0

    def wait(self, stop: threading.Event | None = None) -> float:
        """Block while open; returns the seconds waited. Returns early when `stop` is set."""
        waited = 0.0
        while True:
            remaining = self.open_for
            if remaining <= 0 or (stop is not None and stop.is_set()):
                return waited
            step = min(remaining, 1.0)
            if stop is not None:
                stop.wait(step)
            else:
                time.sleep(step)
            waited += step


class BreakerModel:
    """A Model that waits for the breaker before every call and trips it on provider outages."""

    def __init__(self, model: Model, breaker: CircuitBreaker, stop: threading.Event | None = None) -> None:
        self.model = model
        self.name = model.name
        self.breaker = breaker
        self.stop = stop
        self.outage: ModelError | None = None
        """The last provider outage seen (agent loops turn a ModelError into a status; this keeps
        whether it was transient), cleared by the next good answer."""

    def query(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        max_output_tokens: int | None = None,
    ) -> ModelResponse:
        self.breaker.wait(self.stop)
        try:
            response = self.model.query(messages, tools, max_output_tokens=max_output_tokens)
        except ModelError as exc:
            if exc.transient:
                self.outage = exc
                self.breaker.trip(exc)
            raise
        self.outage = None
        self.breaker.success()
        return response
