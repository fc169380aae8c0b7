"""Batch runs over task folders: a resumable SQLite store, scheduling on GPUs, KernelBench metrics
and reports (`agent batch`, `agent report`)."""

from agent.batch.config import BatchConfig, EvalJob, JudgingOptions, WorkItem
from agent.batch.metrics import Metrics, Sample, compute_metrics, fast_p, geomean_speedup, metrics_by_level
from agent.batch.records import AttemptRecord, RunRecord
from agent.batch.runner import BatchRunner, BatchSummary, run_batch
from agent.batch.store import Store

__all__ = [
    "AttemptRecord",
    "BatchConfig",
    "BatchRunner",
    "BatchSummary",
    "EvalJob",
    "JudgingOptions",
    "Metrics",
    "RunRecord",
    "Sample",
    "Store",
    "WorkItem",
    "compute_metrics",
    "fast_p",
    "geomean_speedup",
    "metrics_by_level",
    "run_batch",
]
