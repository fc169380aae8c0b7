"""Shared or exclusive use of one GPU across processes (stdlib only).

Correctness work (trials, expected outputs) may share a GPU; timing may not: a repetition timed
while another process runs kernels on the same GPU measures both. Every referee process that
touches a GPU holds its gate: `shared` for correctness work, `exclusive` for timing and
profiling. The gate is three flock(2) files beside each other, so it works across processes,
sandboxes that can see the files, and separate batches on one machine:

- `<path>` itself: readers hold LOCK_SH, a writer LOCK_EX.
- `<path>.turn`: a turnstile. A writer holds it while it waits for the readers to drain and while
  it times, so readers that arrive later queue behind it (no writer starvation).
- `<path>.writers`: every writer holds LOCK_SH on it from the moment it asks until it is done;
  a reader first takes LOCK_EX on it, and lets it go at once. So no reader gets in while any
  writer waits, not only the one at the turnstile: the writers queued behind a timing go one
  after another, and the readers' holds are drained once for all of them, not once each (on the
  H200, draining was most of a full batch's GPU time: `benchmarks/results/h200-2026-12-03d/`).
  Readers wait out at most the timings already queued: each evaluation times at most twice.

A process never waits on the turnstile while holding the main lock, nor on `.writers` while
holding anything, so two readers that both want to become writers cannot deadlock. Locks die with
their process: a killed worker frees its GPU.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import Literal

Mode = Literal["none", "shared", "exclusive"]


def physical_gpu(gpu: str) -> str:
    """The id `gpu` names outside this process: an index into our CUDA_VISIBLE_DEVICES, if set."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if visible and gpu.isdigit() and int(gpu) < len(visible):
        return visible[int(gpu)]
    return gpu


def gate_path(lock_dir: str | os.PathLike[str], gpu: str) -> str:
    """The gate file of GPU `gpu` (an index as this process sees it) under `lock_dir`."""
    return physical_gate_path(lock_dir, physical_gpu(gpu))


def physical_gate_path(lock_dir: str | os.PathLike[str], physical: str) -> str:
    """The gate file of the machine's GPU `physical` under `lock_dir`."""
    return os.path.join(os.fspath(lock_dir), f"gpu-{physical}.lock")


class GpuGate:
    """One process's hold on one GPU's gate: `hold("shared")`, `hold("exclusive")`, `release()`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.mode: Mode = "none"
        self._main = self._open(path)
        self._turn = self._open(path + ".turn")
        self._writers = self._open(path + ".writers")

    @staticmethod
    def _open(path: str) -> int:
        # Read-only is enough for flock, and is all a sandbox that mounts the folder read-only allows.
        try:
            return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            return os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def hold(self, mode: Mode) -> None:
        if mode == self.mode:
            return
        if mode == "none":
            self.release()
        elif mode == "shared":
            if self.mode == "exclusive":
                fcntl.flock(self._main, fcntl.LOCK_SH)  # downgrade: others may read now
                fcntl.flock(self._turn, fcntl.LOCK_UN)
                fcntl.flock(self._writers, fcntl.LOCK_UN)
            else:
                fcntl.flock(self._writers, fcntl.LOCK_EX)  # wait until no writer waits or times
                fcntl.flock(self._writers, fcntl.LOCK_UN)
                fcntl.flock(self._turn, fcntl.LOCK_EX)  # wait behind a writer that came meanwhile
                fcntl.flock(self._main, fcntl.LOCK_SH)
                fcntl.flock(self._turn, fcntl.LOCK_UN)
        else:
            fcntl.flock(self._main, fcntl.LOCK_UN)  # never wait on the turnstile holding the main lock
            fcntl.flock(self._writers, fcntl.LOCK_SH)  # readers that come now wait behind us
            fcntl.flock(self._turn, fcntl.LOCK_EX)
            fcntl.flock(self._main, fcntl.LOCK_EX)
        self.mode = mode

    def release(self) -> None:
        fcntl.flock(self._main, fcntl.LOCK_UN)
        fcntl.flock(self._turn, fcntl.LOCK_UN)
        fcntl.flock(self._writers, fcntl.LOCK_UN)
        self.mode = "none"

    def close(self) -> None:
        for fd in (self._main, self._turn, self._writers):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.mode = "none"

    def __enter__(self) -> GpuGate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def gate_files(path: str) -> list[str]:
    """The files a gate at `path` locks; a read-only view (a sandbox's) needs them to exist."""
    return [path, path + ".turn", path + ".writers"]


def open_gate(path: str | None) -> GpuGate | None:
    """The gate at `path`, or None when no gate was asked for or its file cannot be opened here."""
    if not path:
        return None
    try:
        return GpuGate(path)
    except OSError:
        return None
