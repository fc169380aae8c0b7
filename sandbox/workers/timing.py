"""The one timing procedure every arm uses: candidate, eager and torch.compile (torch + stdlib).

Per repetition, on a GPU: fresh inputs (made before the clock starts), an L2 flush, a start
event, the call, a device-wide synchronize (work on any stream counts), an end event. Warm-up
first, then enough repetitions for about `target_ms` of GPU time, bounded below and above.
On a CPU (tests) the host clock replaces the events.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

TIMING_VERSION = 1  # part of every baseline cache key: bump when the procedure changes
FLUSH_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class TimingConfig:
    warmup_ms: float = 25.0
    min_warmup: int = 3
    target_ms: float = 100.0
    min_reps: int = 10
    max_reps: int = 400
    max_seconds: float = 10.0

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None) -> TimingConfig:
        return cls(**(values or {}))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def quantile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q
    low, high = math.floor(pos), math.ceil(pos)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (pos - low)


def summarize(
    times_ms: list[float], *, method: str, l2_flush: bool, warmup: int, host_ms: list[float]
) -> dict:
    ordered = sorted(times_ms)
    n = len(ordered)
    mean = sum(ordered) / n
    std = math.sqrt(sum((t - mean) ** 2 for t in ordered) / (n - 1)) if n > 1 else 0.0
    q1, median, q3 = quantile(ordered, 0.25), quantile(ordered, 0.5), quantile(ordered, 0.75)
    return {
        "median_ms": median,
        "q1_ms": q1,
        "q3_ms": q3,
        "iqr_ms": q3 - q1,
        "mean_ms": mean,
        "std_ms": std,
        "cv": std / mean if mean > 0 else 0.0,
        "min_ms": ordered[0],
        "max_ms": ordered[-1],
        "n": n,
        "warmup": warmup,
        "method": method,
        "l2_flush": l2_flush,
        "host_median_ms": quantile(sorted(host_ms), 0.5),
        "version": TIMING_VERSION,
    }


class _Clock:
    def __init__(self, device: str) -> None:
        self.cuda = device.startswith("cuda")
        self.flush: torch.Tensor | None = None
        if self.cuda:
            l2 = getattr(torch.cuda.get_device_properties(torch.device(device)), "L2_cache_size", 0) or 0
            self.flush = torch.empty(max(FLUSH_BYTES, 4 * l2), dtype=torch.int8, device=device)

    @property
    def method(self) -> str:
        return "cuda_event+device_sync" if self.cuda else "host_clock"

    def time_one(self, call: Callable[[Any], Any], inputs: Any) -> tuple[Any, Any, float]:
        """(outputs, pending measurement, host ms). Resolve the measurement with `elapsed_ms`."""
        if not self.cuda:
            start = time.perf_counter()
            out = call(inputs)
            host = (time.perf_counter() - start) * 1e3
            return out, host, host
        assert self.flush is not None
        self.flush.zero_()
        start_event = torch.cuda.Event(enable_timing=True)
        end_event = torch.cuda.Event(enable_timing=True)
        host_start = time.perf_counter()
        start_event.record()
        out = call(inputs)
        torch.cuda.synchronize()
        end_event.record()
        host = (time.perf_counter() - host_start) * 1e3
        return out, (start_event, end_event), host

    def elapsed_ms(self, pending: Any) -> float:
        if not self.cuda:
            return float(pending)
        start_event, end_event = pending
        end_event.synchronize()
        return float(start_event.elapsed_time(end_event))


def time_calls(
    call: Callable[[Any], Any],
    make_inputs: Callable[[int], Any],
    *,
    device: str,
    config: TimingConfig | None = None,
    on_output: Callable[[int, Any, Any], None] | None = None,
) -> dict[str, Any]:
    """Median, IQR and CV of `call(make_inputs(i))` over adaptive repetitions.

    `make_inputs(i)` is called before each repetition's clock starts; `on_output(i, inputs,
    outputs)` after it stopped (timed repetitions only, i counting from 0)."""
    config = config or TimingConfig()
    clock = _Clock(device)
    deadline = time.monotonic() + config.max_seconds
    warm: list[float] = []
    while len(warm) < config.min_warmup or (sum(warm) < config.warmup_ms and time.monotonic() < deadline):
        out, pending, _ = clock.time_one(call, make_inputs(-1 - len(warm)))
        del out
        warm.append(clock.elapsed_ms(pending))
    estimate = max(sorted(warm[1:] or warm)[len(warm[1:] or warm) // 2], 1e-3)
    reps = min(max(math.ceil(config.target_ms / estimate), config.min_reps), config.max_reps)
    pendings: list[Any] = []
    host: list[float] = []
    for index in range(reps):
        if index >= config.min_reps and time.monotonic() > deadline:
            break
        inputs = make_inputs(index)
        out, pending, host_ms = clock.time_one(call, inputs)
        pendings.append(pending)
        host.append(host_ms)
        if on_output is not None:
            on_output(index, inputs, out)
        del out, inputs
    times = [clock.elapsed_ms(p) for p in pendings]
    return summarize(times, method=clock.method, l2_flush=clock.cuda, warmup=len(warm), host_ms=host)


def measure_copy_bandwidth(device: str, nbytes: int = 1 << 30) -> float:
    """Device-to-device copy bandwidth in GB/s (bytes read plus bytes written)."""
    if not device.startswith("cuda"):
        return math.nan
    free, _total = torch.cuda.mem_get_info(torch.device(device))
    nbytes = int(min(nbytes, free // 4))
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    median_ms = quantile(sorted(times), 0.5)
    return 2 * src.numel() * 4 / (median_ms * 1e-3) / 1e9
