"""Measuring points on the GPU: the search's PointMeasurer over the worker and the judge."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import cast

from agent.tune.results import Measurement
from agent.tune.search import Retimed, SearchAborted
from agent.tune.session import JudgeClient, TuneSessionError, WorkerClient, verdict_for
from agent.tune.space import Point, Space
from sandbox.workers.protocol import MeasureLine, RetimeLine, TimingSettings, TuneItem

# Define mode: points -> (path of the built .so in the sandbox, or None, and why not).
Builder = Callable[[Sequence[Point]], list[tuple[str | None, str]]]


class GpuEvaluator:
    def __init__(
        self,
        space: Space,
        worker: WorkerClient,
        judge: JudgeClient,
        *,
        timing: TimingSettings,
        retime_timing: TimingSettings,
        item_timeout: float,
        builder: Builder | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.space = space
        self.worker = worker
        self.judge = judge
        self.timing = timing
        self.retime_timing = retime_timing
        self.item_timeout = item_timeout
        self.builder = builder
        self.log = log or (lambda _m: None)
        self.modules: dict[Point, str] = {}

    def measure(self, points: Sequence[Point], phase: str) -> list[Measurement]:
        bodies: dict[str, MeasureLine] = {}
        items: list[TuneItem] = []
        for point, (module, error) in zip(points, self._prepare(points), strict=True):
            key = self.space.key(point)
            if module is None and self.builder is not None:
                bodies[key] = {"key": key, "status": "failed", "error": error, "gpu_s": 0.0}
                continue
            items.append({"key": key, "values": self.space.config(point), "module": module, "full": False})
        bodies.update(self._run_items(items, full=False))
        out = []
        for point in points:
            key = self.space.key(point)
            body = bodies[key]
            status, error = (
                verdict_for(self.judge, body)
                if body.get("status") == "ok"
                else (
                    body.get("status", "failed"),
                    body.get("error", ""),
                )
            )
            if status not in ("ok", "incorrect", "failed", "crashed", "timeout"):
                status = "failed"
            out.append(
                Measurement(
                    key=key,
                    config=self.space.config(point),
                    status=status,  # type: ignore[arg-type]
                    time_ms=body.get("time_ms") if status == "ok" else None,
                    iqr_ms=body.get("iqr_ms"),
                    reps=body.get("reps", 0),
                    gpu_s=float(body.get("gpu_s", 0.0)),
                    error=error,
                )
            )
            shown = f"{body.get('time_ms'):.4f} ms" if status == "ok" else f"{status}: {error[:120]}"
            self.log(f"[{phase}] {self.space.describe(point)}  {shown}")
        return out

    def _prepare(self, points: Sequence[Point]) -> list[tuple[str | None, str]]:
        if self.builder is None:
            return [(None, "")] * len(points)
        built = self.builder(points)
        for point, (module, _) in zip(points, built, strict=True):
            if module is not None:
                self.modules[point] = module
        return built

    def _run_items(self, items: list[TuneItem], *, full: bool) -> dict[str, MeasureLine]:
        results: dict[str, MeasureLine] = {}
        pending: list[TuneItem] = [{**item, "full": full or item.get("full", False)} for item in items]
        while pending:
            started = time.monotonic()
            try:
                lines, problem = self.worker.request(
                    {"op": "measure", "items": pending, "timing": self.timing},
                    timeout=self.item_timeout * len(pending) + 60,
                )
            except TuneSessionError as exc:
                raise SearchAborted(str(exc)) from None
            for line in cast("list[MeasureLine]", lines):
                results[line["key"]] = line
            pending = [item for item in pending if item["key"] not in results]
            if problem is not None and pending:
                if lines and lines[-1].get("fatal"):
                    continue  # the culprit reported itself before exiting; a fresh worker takes the rest
                culprit = pending.pop(0)
                status = "timeout" if problem == "timeout" else "crashed"
                results[culprit["key"]] = {
                    "key": culprit["key"],
                    "status": status,
                    "error": f"the worker {problem}" if status == "crashed" else "it ran past the time limit",
                    "gpu_s": time.monotonic() - started,
                }
                self.worker.stop()
        return results

    def retime(self, points: Sequence[Point], rounds: int) -> Retimed | None:
        items: list[TuneItem] = [
            {"key": self.space.key(p), "values": self.space.config(p), "module": self.modules.get(p)}
            for p in points
        ]
        try:
            lines, problem = self.worker.request(
                {"op": "retime", "items": items, "rounds": rounds, "timing": self.retime_timing},
                timeout=self.item_timeout * len(items) * rounds + 60,
            )
        except TuneSessionError as exc:
            raise SearchAborted(str(exc)) from None
        if problem is not None or not lines:
            self.worker.stop()
            return None
        body = cast("RetimeLine", lines[0])
        return Retimed(times=body["times"], gpu_s=float(body.get("gpu_s", 0.0)))

    def verify_full(self, point: Point) -> tuple[str, str]:
        """Re-run one point with its whole output sent to the judge (no fingerprint shortcut)."""
        item: TuneItem = {
            "key": self.space.key(point),
            "values": self.space.config(point),
            "module": self.modules.get(point),
        }
        body = self._run_items([item], full=True)[item["key"]]
        return verdict_for(self.judge, body)
