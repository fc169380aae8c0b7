"""Pieces every referee document shares: the seeded task, tolerances, a worker's failure and
device, an output leaf and its comparison, the solution a worker imports."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict


class SeededTask(TypedDict):
    """A task's source and the seeds its Model and inputs are rebuilt from (fresh per evaluation)."""

    device: str
    task_source: str
    task_filename: str
    init_seed: int
    state_seed: int


class RefereeTask(SeededTask):
    """The candidate's and the judge's task: one input seed per correctness trial."""

    trial_seeds: list[int]
    # the seed of the probe input each side checks the hidden transforms' domain on
    # (referee_common.hidden_allowed); absent or None: every trial uses the task's own inputs
    hidden_probe_seed: NotRequired[int | None]


Tolerances = dict[str, list[float]]
"""[atol, rtol, norm_rtol] per dtype name, plus "int" and "default" (TolerancePolicy.for_worker)."""


class WorkerFailure(TypedDict):
    """Why a referee worker stopped: where, what kind (exception, oom, cuda_error, ...), the text."""

    stage: str
    kind: str
    message: str
    traceback: str


class WorkerDevice(TypedDict):
    """The device a referee worker ran on, as that process saw it."""

    device: str
    torch: str
    python: str
    name: NotRequired[str]
    capability: NotRequired[str]
    allocator: NotRequired[str]  # the candidate's CUDA allocator and its settings (on a GPU)


class LeafDescription(TypedDict):
    """One output leaf, described without calling into it (referee_common.describe_leaf)."""

    type: str
    exact_tensor: bool
    shape: NotRequired[list[int]]
    dtype: NotRequired[str]
    device: NotRequired[str]


class DiffRecord(TypedDict):
    """How one output leaf compares with the expected one (compare.py); keys beyond `passed` and
    `problems` depend on the leaf (tensor or value) and on how far the comparison got."""

    passed: bool
    problems: list[str]
    shape_expected: NotRequired[list[int]]
    shape_actual: NotRequired[list[int]]
    dtype_expected: NotRequired[str]
    dtype_actual: NotRequired[str]
    numel: NotRequired[int]
    atol: NotRequired[float]
    rtol: NotRequired[float]
    norm_rtol: NotRequired[float]
    max_abs_err: NotRequired[float]
    max_rel_err: NotRequired[float]
    norm_rel_err: NotRequired[float | None]
    mismatch_count: NotRequired[int]
    mismatch_fraction: NotRequired[float]
    expected_nan: NotRequired[int]
    actual_nan: NotRequired[int]
    expected_inf: NotRequired[int]
    actual_inf: NotRequired[int]
    nonfinite_mismatches: NotRequired[int]
    worst_index: NotRequired[list[int]]
    worst_expected: NotRequired[float]
    worst_actual: NotRequired[float]
    error_ratio: NotRequired[float]
    norm_ratio: NotRequired[float | None]
    first_wrong_index: NotRequired[list[int]]
    mismatch_pattern: NotRequired[str]
    pattern_detail: NotRequired[str]
    value_expected: NotRequired[str]
    value_actual: NotRequired[str]


class ExtensionSolutionSpec(TypedDict):
    """A workspace solution: its built extension (None without sources) and model_new.py."""

    extension: str
    module_path: str | None
    entry: str
    module_name: str


class WorkspaceSolutionSpec(ExtensionSolutionSpec):
    """The candidate worker's workspace solution."""

    kind: Literal["workspace"]


class SingleFileSolutionSpec(TypedDict):
    """A KernelBench single-file solution: load_inline builds into `build_dir` on import."""

    kind: Literal["single_file"]
    build_dir: str
    cache_dir: str
    entry: str
    module_name: str


SolutionSpec = WorkspaceSolutionSpec | SingleFileSolutionSpec
