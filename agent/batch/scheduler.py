"""Shared resources of one batch: GPU slots, compile slots (CPU), and a circuit breaker that
pauses every agent while a model provider is down.

Several evaluations may share a GPU (`evals_per_gpu` slots each): correctness work overlaps, and
timings stay exclusive because the referee's own processes take the GPU's gate
(sandbox/workers/gpu/gpu_gate.py) around every timed or profiled section. The gate is a file per
physical GPU, so two batches, or a batch and `agent eval`, on one machine never time at once.
Where the candidate's processes cannot see the gate files (a sandbox that does not mount them), the referee holds
the gate exclusively around each candidate run itself; the batch then gives each GPU one slot,
since those runs would only queue behind each other.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.messages import Message, ModelResponse, ToolSpec
from agent.models.base import Model, ModelError
from sandbox.workers.gpu.gpu_gate import gate_path

log = logging.getLogger(__name__)

NO_GPU = "none"
AUTO_GATE = "auto"
"""What the referee is told when the batch has no gate folder of its own: the gate of the GPU it
uses, in the referee's default folder (sandbox.paths.gpu_gate_dir)."""


def visible_gpus() -> list[str]:
    """Indices of the GPUs this process can see (`--gpus` default), without creating a CUDA context."""
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:
        return []


def referee_gate(gpu: str, lock_dir: Path | None) -> str | None:
    """The `gpu_gate` the referee takes for an evaluation on `gpu` (an id as this process sees it):
    its default gate, or the gate file under `lock_dir`; None without a GPU."""
    if gpu == NO_GPU:
        return None
    return AUTO_GATE if lock_dir is None else gate_path(lock_dir, gpu)


@dataclass(frozen=True)
class GpuSlot:
    gpu: str
    index: int
    """Which of the GPU's slots (0..slots_per_gpu-1): the worker process that runs the evaluation."""


class GpuPool:
    """`slots_per_gpu` slots per GPU (one without a GPU); `acquire()` waits for a free slot on the
    least busy GPU. Slots only count what this batch has in flight; exclusivity of timings is the
    gates' job, not the pool's."""

    def __init__(self, gpus: Sequence[str], *, slots_per_gpu: int = 1) -> None:
        if slots_per_gpu < 1:
            raise ValueError("slots_per_gpu must be at least 1")
        self.gpus = list(gpus) or [NO_GPU]
        # Without a GPU nothing is shared, and CPU-device timings (tests) must not overlap.
        self.slots_per_gpu = 1 if self.gpus == [NO_GPU] else slots_per_gpu
        self._free = {gpu: list(range(self.slots_per_gpu)) for gpu in self.gpus}
        self._cond = threading.Condition()
        self.busy: dict[str, dict[int, str]] = {gpu: {} for gpu in self.gpus}
        """gpu -> slot -> what holds it."""

    def in_flight(self, gpu: str) -> int:
        with self._cond:
            return len(self.busy[gpu])

    @contextlib.contextmanager
    def acquire(self, holder: str = "") -> Iterator[GpuSlot]:
        with self._cond:
            while not any(self._free.values()):
                self._cond.wait()
            gpu = min((g for g in self.gpus if self._free[g]), key=lambda g: len(self.busy[g]))
            slot = GpuSlot(gpu, self._free[gpu].pop(0))
            self.busy[gpu][slot.index] = holder
        try:
            yield slot
        finally:
            with self._cond:
                del self.busy[gpu][slot.index]
                self._free[gpu].append(slot.index)
                self._cond.notify()


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
