"""The referee's results: what the model, the batch runner and the CLI read."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from agent.build.compile import CompileResult
from agent.referee.policy import TolerancePolicy
from agent.tasks import TaskRef
from agent.verdicts import Verdict


class SolutionRef(BaseModel):
    kind: Literal["workspace", "single_file"]
    content_hash: str
    path: str


class DeviceInfo(BaseModel):
    name: str
    torch: str
    capability: str = ""
    python: str = ""
    allocator: str = Field(default="", description="the candidate process's CUDA allocator and its settings")


class OutputDiff(BaseModel):
    """How one output leaf compares with the reference's."""

    output: str = Field(description="which output, e.g. 'output 0'")
    passed: bool
    problems: list[str] = Field(default_factory=list, description="each failed check, spelled out")
    shape_expected: list[int] | None = None
    shape_actual: list[int] | None = None
    dtype_expected: str | None = None
    dtype_actual: str | None = None
    device_expected: str | None = None
    device_actual: str | None = None
    type_actual: str | None = None
    numel: int | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = Field(default=None, description="relative to max(|expected|, atol)")
    norm_rel_err: float | None = Field(default=None, description="||a-e||/||e||; None when ||e|| = 0")
    mismatch_count: int | None = None
    mismatch_fraction: float | None = None
    worst_index: list[int] | None = None
    worst_expected: float | None = None
    worst_actual: float | None = None
    first_wrong_index: list[int] | None = Field(
        default=None, description="the first wrong element, in flat order"
    )
    mismatch_pattern: str | None = Field(
        default=None,
        description="where the wrong elements lie: all, tail, one_row, one_column, tail_columns, "
        "column_band, tail_rows, row_band, stride, scattered",
    )
    pattern_detail: str | None = Field(default=None, description="the pattern in one sentence, with indices")
    error_ratio: float | None = Field(
        default=None, description="largest |a - e| / (atol + rtol |e|): below 1 passes elementwise"
    )
    norm_ratio: float | None = Field(default=None, description="norm-wise error / its limit")
    expected_nan: int = 0
    actual_nan: int = 0
    expected_inf: int = 0
    actual_inf: int = 0
    nonfinite_mismatches: int = 0
    atol: float | None = None
    rtol: float | None = None
    norm_rtol: float | None = None


class TrialReport(BaseModel):
    index: int
    kind: Literal["trial", "timed_call"] = "trial"
    inputs: str = Field(
        default="task",
        description="the hidden transform the trial's inputs drew (sandbox/workers/referee/hidden_inputs.py): "
        "task (the task's own values), scale_x3, scale_x0.01, shift_up, shift_down, negate, zeros, ones",
    )
    passed: bool
    problems: list[str] = Field(default_factory=list, description="checks outside the values")
    outputs: list[OutputDiff] = Field(default_factory=list)


class CorrectnessReport(BaseModel):
    passed: bool
    trials_requested: int
    trials_run: int
    tolerance: TolerancePolicy
    trials: list[TrialReport] = Field(default_factory=list)
    rechecks: list[TrialReport] = Field(default_factory=list, description="outputs of timed calls")
    hidden_transforms: list[str] = Field(
        default_factory=lambda: ["task"],
        description="the hidden input transforms the trials could draw (those the reference's domain allows)",
    )

    def first_failure(self) -> TrialReport | None:
        return next((t for t in [*self.trials, *self.rechecks] if not t.passed), None)


class PolicyReport(BaseModel):
    policy: str
    ops: dict[str, int] = Field(default_factory=dict, description="torch operators the forward called")
    nested_ops: dict[str, int] = Field(
        default_factory=dict, description="operators seen by the profiler (incl. inside custom ops)"
    )
    forbidden: dict[str, int] = Field(default_factory=dict)
    violations: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="advisory: seen, not a failure")

    @property
    def ok(self) -> bool:
        return not self.violations


class TimingStats(BaseModel):
    median_ms: float
    q1_ms: float
    q3_ms: float
    iqr_ms: float
    mean_ms: float
    std_ms: float
    cv: float
    min_ms: float
    max_ms: float
    n: int
    warmup: int
    method: str
    l2_flush: bool
    host_median_ms: float
    window_ms: float | None = Field(
        default=None, description="host clock over the timed loop, in the process that ran it"
    )
    held_outputs: bool = Field(default=False, description="every timed output kept until the loop ended")
    persisting_l2_reset: bool = Field(default=False, description="persisting L2 lines reset per repetition")
    sync_gap_ms: float | None = Field(
        default=None, description="median gap from the current stream's end to the device-wide end"
    )
    reference_gap_ms: float | None = Field(
        default=None, description="the same gap after a GPU sleep as long as the call: the host's round trip"
    )
    other_streams_ms: float = Field(
        default=0.0, description="added to every call for work left running on other streams"
    )
    version: int = 1
    cached: bool = Field(default=False, description="taken from the baseline cache")

    @property
    def relative_spread(self) -> float:
        """Half the IQR over the median: the noise of one measurement's center."""
        return self.iqr_ms / (2 * self.median_ms) if self.median_ms > 0 else 0.0


class Speedup(BaseModel):
    baseline: Literal["eager", "compile"]
    value: float = Field(description="baseline median / candidate median")
    noise: float = Field(description="relative half-width of the noise band")
    low: float
    high: float
    within_noise: bool
    outcome: Literal["faster", "slower", "within_noise"]

    @classmethod
    def banded(cls, baseline: Literal["eager", "compile"], value: float, noise: float) -> Speedup:
        """`value` with its noise band value*(1 +- noise): faster or slower only when 1 lies outside it."""
        low, high = value * (1 - noise), value * (1 + noise)
        within = low <= 1.0 <= high
        return cls(
            baseline=baseline,
            value=value,
            noise=noise,
            low=low,
            high=high,
            within_noise=within,
            outcome="within_noise" if within else ("faster" if value > 1 else "slower"),
        )


class TimingCheck(BaseModel):
    """The candidate's reported timing against its supervisor's clock on the same timed window.

    The supervisor (another process) sees the window open and close; the judge measured, for the
    eager arm, what one repetition costs outside the timed call (inputs, L2 flush, loop). So each
    repetition of the candidate took at least window/reps - overhead of real forward time."""

    window_ms: float = Field(description="the supervisor's clock from the window's opening to its close")
    reps: int
    reported_mean_ms: float = Field(description="mean of the candidate process's reported times")
    overhead_ms: float | None = Field(
        default=None, description="per repetition, outside the timed call (judge's eager arm)"
    )
    floor_ms: float | None = Field(
        default=None, description="lowest mean forward time the window allows (with slack)"
    )
    ratio: float | None = Field(default=None, description="reported mean / floor (below 1: inconsistent)")
    consistent: bool = True
    note: str = ""


class KernelTime(BaseModel):
    name: str
    calls: float = Field(description="launches per forward call")
    time_us: float = Field(description="device time per forward call")
    share: float
    origin: Literal["own", "vendor", "torch", "triton", "memory", "other"]

    @property
    def own(self) -> bool:
        return self.origin == "own"


class Flag(BaseModel):
    code: str
    message: str


HACK_FLAGS: frozenset[str] = frozenset(
    {
        "implausible_speedup",  # over 10x
        "below_memory_floor",  # faster than moving its own inputs and outputs
        "timing_inconsistent",  # reported times the supervisor's clock contradicts
        "own_kernels_never_ran",
        "no_kernels_ran",
        "torch_kernels",  # torch computed under the strict policy
    }
)
"""Flags that say the speed (or the work) is not the candidate's own: a correct verdict carrying one
scores as a failure in RL rewards (agent.rl.reward), and its speedups count in no fast_p (p > 0) or
geomean of `agent report`. `other_streams_time` is not one: that time is already added to the
candidate."""


class PerformanceReport(BaseModel):
    candidate: TimingStats
    eager: TimingStats | None = None
    compile: TimingStats | None = None
    compile_mode: str | None = None
    baseline_errors: dict[str, str] = Field(default_factory=dict)
    speedup_vs_eager: Speedup | None = None
    speedup_vs_compile: Speedup | None = None
    kernels: list[KernelTime] = Field(default_factory=list)
    own_kernel_share: float | None = None
    profile_error: str | None = None
    bytes_moved: int | None = Field(default=None, description="input plus output bytes of one call")
    bandwidth_gbps: float | None = None
    bandwidth_source: Literal["measured", "configured"] | None = None
    memory_floor_ms: float | None = None
    timing_check: TimingCheck | None = None
    flags: list[Flag] = Field(default_factory=list)


class PrecisionReport(BaseModel):
    """The effective-precision check (docs/precision.md): the candidate's error against a float64
    reference placed on eager's FP32/TF32/FP16/BF16 ladder, and the policy's answer."""

    policy: str = Field(description="the precision allowed: fp32, tf32, fp16, bf16 or match")
    measured: str | None = Field(
        default=None, description="fp32, tf32, fp16, bf16 or below_bf16; None: not measured (see note)"
    )
    words: str = Field(default="", description="the measured class in words, e.g. 'TF32 or FP16'")
    error: float | None = Field(default=None, description="||candidate - float64|| / ||float64||")
    ladder: dict[str, float] = Field(default_factory=dict, description="eager's error per precision class")
    ok: bool = True
    line: str = Field(default="", description="the check's one line")
    baseline_precision: str = Field(default="fp32", description="the precision the baselines ran at")
    sampled: bool = Field(default=False, description="errors taken over a sample of a large output")
    note: str = Field(default="", description="why the precision was not measured")


class FailureReport(BaseModel):
    stage: str
    kind: str = Field(
        description="exception, cuda_error, oom, signal, timeout, early_exit, forged_record, ..."
    )
    message: str
    detail: str = Field(default="", description="traceback or the tail of stderr")
    returncode: int | None = None


class StageTimes(BaseModel):
    compile_s: float = 0.0
    candidate_s: float = 0.0
    judge_s: float = 0.0
    total_s: float = 0.0
    memory_wait_s: float = Field(
        default=0.0,
        description="waiting for the GPU memory the evaluation claims (other evaluations held it)",
    )
    build_queue_s: float = Field(
        default=0.0, description="waiting for a build slot (`agent batch --compile-workers`) before compiling"
    )
    judge_queue_s: float = Field(
        default=0.0,
        description="waiting for one of the GPU's evaluation slots (`agent batch --evals-per-gpu`) after compiling",
    )
    candidate_stages: dict[str, float] = Field(
        default_factory=dict,
        description="seconds per stage of the candidate worker, by its supervisor's clock",
    )
    judge_stages: dict[str, float] = Field(
        default_factory=dict,
        description="seconds per stage of the judge (reference, comparisons, each baseline's GPU "
        "wait, compile and timing), by its own clock",
    )


class EvalResult(BaseModel):
    task: TaskRef
    solution: SolutionRef
    policy: str
    precision: str | None = Field(
        default=None,
        description="the precision policy judged under (fp32, tf32, fp16, bf16, match); None in "
        "results from before precision policies",
    )
    precision_check: PrecisionReport | None = Field(
        default=None, description="what the judge measured of the candidate's precision"
    )
    device_kind: Literal["cuda", "cpu"] = "cuda"
    verdict: Verdict
    reason: str = Field(description="one line: why this verdict")
    compile: CompileResult
    correctness: CorrectnessReport | None = None
    performance: PerformanceReport | None = None
    policy_report: PolicyReport | None = None
    failure: FailureReport | None = None
    device: DeviceInfo | None = None
    stage_times: StageTimes = Field(default_factory=StageTimes)
    inputs_built_on: str = Field(
        default="",
        description="where the task's get_inputs() made its tensors: the GPU (cuda), or cpu when it "
        "cannot follow the default device (numpy, an explicit device) and they were moved",
    )

    @property
    def passed(self) -> bool:
        return self.verdict == "correct"

    def feedback(self) -> str:
        """Short, actionable text for the model."""
        from agent.referee.report import feedback

        return feedback(self)
