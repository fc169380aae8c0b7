"""How much of one GPU's memory the evaluations on it may take at once (stdlib only).

Several evaluations share a GPU (`agent batch --evals-per-gpu`), and KernelBench's full-size
tasks need a lot of it: level 1 elementwise tasks have 6.4 GB inputs and outputs, pooling up to
17 GB, and an evaluation holds several copies (the candidate's pristine inputs, its output
snapshots, the outputs handed to the judge, the judge's own inputs and expected outputs). Two of
them at once can run the GPU out of memory, which would read as the candidate's failure.

So each evaluation first claims an estimate of what it needs, in units of a sixteenth of the
GPU's budget, each unit a flock(2) file beside the GPU's gate. Claims are taken one evaluation at
a time under an admission lock (no two can each hold half of what both need). A claim that has
waited a while keeps that lock and gathers units as they come free while the claims behind it
wait, so a large one is not starved by small ones. One that needs more than the whole budget takes every unit and runs with the GPU
to itself. Locks die with their process, so a killed evaluation frees its memory.

The host takes the claim and hands it to the judge it starts (inherited descriptors): the judge
holds it through the candidate's run and its own comparisons, then lets all but one unit go
before it times the baselines, when the outputs it held are freed (`keep_one`).
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import time

UNITS = 16
POLL_S = 0.1
# How long a claim lets smaller ones that fit go ahead before it gets in line: about one evaluation
# of a full-size task, so a large claim waits for the evaluations running, not for all that follow.
PATIENCE_S = 30.0


class MemoryClaim:
    """The units one evaluation holds on one GPU until `release()`."""

    def __init__(self, gate_path: str, units: int) -> None:
        self.gate_path = gate_path
        self.units = max(1, min(UNITS, units))
        self.waited_s = 0.0
        self._held: dict[int, int] = {}  # unit -> the descriptor that locks it

    def acquire(self, timeout: float, patience: float = PATIENCE_S) -> bool:
        """Wait for the units; False when `timeout` passed first (nothing is held then).

        For `patience` seconds the claim takes its units only when all of them are free at once,
        so smaller claims that fit meanwhile go ahead of it. Then it gets in line: it keeps the
        admission lock, and the units it has, until it has them all. Without that, small claims
        taking units as soon as they come free kept large ones waiting as long as evaluations
        followed each other (a batch's full-size norms waited for an hour).
        """
        started = time.monotonic()
        deadline = started + timeout
        admission = _open(self.gate_path + ".mem.admit")
        try:
            while _flock_by(admission, deadline):
                if self._take_free_units():
                    break
                if time.monotonic() - started >= patience:  # in line from now on, the lock kept
                    while not self._take_free_units() and time.monotonic() <= deadline:
                        time.sleep(POLL_S)
                    break
                self.release()
                fcntl.flock(admission, fcntl.LOCK_UN)
                if time.monotonic() > deadline:
                    break
                time.sleep(POLL_S)
        finally:
            os.close(admission)  # lets the next claim in
        self.waited_s = time.monotonic() - started
        if not self.held:
            self.release()
        return self.held

    def _take_free_units(self) -> bool:
        for unit in range(UNITS):
            if len(self._held) == self.units:
                break
            if unit in self._held:
                continue
            fd = _open(f"{self.gate_path}.mem.{unit}")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self._held[unit] = fd
        return self.held

    @property
    def held(self) -> bool:
        return len(self._held) == self.units

    @property
    def fds(self) -> list[int]:
        """The units' descriptors: a process that inherits them holds the units too (flock locks
        belong to the open file, not to the process), until the last copy is closed."""
        return list(self._held.values())

    def release(self) -> None:
        for fd in self._held.values():
            os.close(fd)  # closing drops the lock
        self._held = {}


def keep_one(fds: list[int]) -> None:
    """In the process the units were handed to: give back all but one of them."""
    for fd in fds[1:]:
        with contextlib.suppress(OSError):
            os.close(fd)


def units_for(need_bytes: int, budget_bytes: int) -> int:
    return UNITS if budget_bytes <= 0 else math.ceil(UNITS * need_bytes / budget_bytes)


def _open(path: str) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except PermissionError:  # a read-only view of the folder: the file must exist already
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)


def _flock_by(fd: int, deadline: float) -> bool:
    """Lock `fd` exclusively, polling until `deadline`."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL_S)
