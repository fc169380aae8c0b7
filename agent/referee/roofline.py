"""Speed of light: the work a task must do (FLOPs, bytes), the GPU's peak rates, and how close a
measured time comes to the floor they set.

The memory floor is compulsory traffic (inputs, parameters and outputs, each moved once) over the
copy bandwidth the judge measured; the compute floor is the FLOPs over the GPU's published peak
(matrix products on tensor cores, the rest on the FP32 cores). A time's "% of floor" is
floor / time: 100% is as fast as the hardware allows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from agent.referee.results import PerformanceReport


NEAR_FLOOR = 0.85
"""At or above this share of the floor little is left to gain."""


class GpuPeaks(BaseModel):
    """Published dense peak rates (no structured sparsity), in TFLOP/s."""

    model: str
    fp32: float = Field(description="FP32 on CUDA cores")
    tf32: float = Field(description="TF32 on tensor cores")
    fp16: float = Field(description="FP16/BF16 on tensor cores, FP32 accumulate")
    source: str


# Matched in order against torch's device name (the first substring that matches wins).
PEAKS: tuple[tuple[str, GpuPeaks], ...] = (
    # NVIDIA H200 Tensor Core GPU datasheet (SXM): FP32 67, TF32 989 / BF16 1979 with sparsity.
    ("H200", GpuPeaks(model="H200 SXM", fp32=67.0, tf32=494.7, fp16=989.5, source="NVIDIA H200 datasheet")),
    # NVIDIA H100 Tensor Core GPU datasheet, PCIe column: FP32 51, TF32 756 / BF16 1513 with sparsity.
    (
        "H100 PCIe",
        GpuPeaks(model="H100 PCIe", fp32=51.0, tf32=378.0, fp16=756.0, source="NVIDIA H100 datasheet"),
    ),
    # NVIDIA H100 Tensor Core GPU datasheet, SXM column: FP32 67, TF32 989 / BF16 1979 with sparsity.
    ("H100", GpuPeaks(model="H100 SXM", fp32=67.0, tf32=494.7, fp16=989.5, source="NVIDIA H100 datasheet")),
    # NVIDIA A100 Tensor Core GPU datasheet: FP32 19.5, TF32 156, BF16 312 (dense).
    ("A100", GpuPeaks(model="A100", fp32=19.5, tf32=156.0, fp16=312.0, source="NVIDIA A100 datasheet")),
    # NVIDIA L40S datasheet: FP32 91.6, TF32 366 / BF16 733 with sparsity.
    ("L40S", GpuPeaks(model="L40S", fp32=91.6, tf32=183.0, fp16=362.0, source="NVIDIA L40S datasheet")),
    # NVIDIA Ada Lovelace architecture whitepaper, appendix (GeForce RTX 4090): FP32 82.6,
    # TF32 82.6 dense, FP16 with FP32 accumulate 165.2 dense.
    (
        "RTX 4090",
        GpuPeaks(model="RTX 4090", fp32=82.6, tf32=82.6, fp16=165.2, source="NVIDIA Ada whitepaper"),
    ),
)


def gpu_peaks(gpu_name: str | None) -> GpuPeaks | None:
    """The peak rates of a GPU by its device name; None for a GPU not in the table."""
    if not gpu_name:
        return None
    return next((peaks for key, peaks in PEAKS if key.lower() in gpu_name.lower()), None)


class WorkEstimate(BaseModel):
    """What one forward call of the reference must do, from its traced op graph."""

    flops: int = Field(description="all floating-point operations")
    matmul_flops: int = Field(description="of which in matrix products and convolutions (tensor-core work)")
    bytes: int = Field(description="compulsory traffic: inputs, parameters and outputs, each once")
    dtype: str = Field(default="float32", description="the widest floating dtype of the inputs and outputs")

    def compute_floor_ms(self, peaks: GpuPeaks, *, tensor_cores: bool) -> float:
        """The compute floor: matrix products on tensor cores (when `tensor_cores`), the rest on FP32 cores."""
        other = self.flops - self.matmul_flops
        if not tensor_cores:
            return self.flops / (peaks.fp32 * 1e12) * 1e3
        matmul_rate = peaks.fp16 if self.dtype in ("float16", "bfloat16") else peaks.tf32
        return (self.matmul_flops / (matmul_rate * 1e12) + other / (peaks.fp32 * 1e12)) * 1e3

    def memory_floor_ms(self, bandwidth_gbps: float) -> float:
        return self.bytes / (bandwidth_gbps * 1e9) * 1e3


class Floors(BaseModel):
    memory_ms: float | None = None
    compute_ms: float | None = Field(default=None, description="with tensor cores for the matrix products")
    bytes: int | None = None
    flops: int | None = None

    @property
    def floor_ms(self) -> float | None:
        known = [f for f in (self.memory_ms, self.compute_ms) if f is not None]
        return max(known) if known else None

    @property
    def bound(self) -> str:
        if self.memory_ms is None or self.compute_ms is None:
            return "memory" if self.memory_ms is not None else "compute"
        return "memory" if self.memory_ms >= self.compute_ms else "compute"


def floors(perf: PerformanceReport, work: WorkEstimate | None, gpu_name: str | None) -> Floors:
    """The floors of one evaluation: the traced work where known, else the judge's input plus
    output bytes, over the judge's bandwidth."""
    bandwidth = perf.bandwidth_gbps
    moved = work.bytes if work is not None else perf.bytes_moved
    memory = moved / (bandwidth * 1e9) * 1e3 if moved and bandwidth else None
    peaks = gpu_peaks(gpu_name)
    compute = work.compute_floor_ms(peaks, tensor_cores=True) if work is not None and peaks else None
    return Floors(memory_ms=memory, compute_ms=compute, bytes=moved, flops=work.flops if work else None)


def share(floor_ms: float | None, time_ms: float | None) -> float | None:
    """floor / time: the fraction of the speed of light a time reaches."""
    if not floor_ms or not time_ms:
        return None
    return floor_ms / time_ms


def human_count(value: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def speed_of_light_lines(
    perf: PerformanceReport, work: WorkEstimate | None, gpu_name: str | None
) -> list[str]:
    """The profile's speed-of-light lines: work, floors, % of floor for yours and both baselines,
    and one sentence on the headroom."""
    found = floors(perf, work, gpu_name)
    peaks = gpu_peaks(gpu_name)
    floor = found.floor_ms
    if floor is None:
        why = "no bandwidth measured" if not perf.bandwidth_gbps else "nothing to bound"
        return [f"speed of light: unknown ({why})"]
    work_parts = [human_count(found.bytes, "B") if found.bytes else None]
    work_parts.append(human_count(found.flops, "FLOP") if found.flops is not None else None)
    memory = f"memory {found.memory_ms:.4g} ms" if found.memory_ms is not None else "memory unknown"
    if found.compute_ms is not None and work is not None and peaks is not None and work.matmul_flops:
        fp32 = work.compute_floor_ms(peaks, tensor_cores=False)
        compute = f"compute {found.compute_ms:.4g} ms on tensor cores ({fp32:.4g} ms on FP32 cores)"
    elif found.compute_ms is not None:
        compute = f"compute {found.compute_ms:.4g} ms"
    else:
        compute = "compute unknown (GPU not in the peak table or work not traced)"
    lines = [
        f"speed of light: {', '.join(p for p in work_parts if p)}; floors: {memory}, {compute} "
        f"({found.bound}-bound, floor {floor:.4g} ms)"
    ]
    arms = [("yours", perf.candidate), ("eager", perf.eager), ("torch.compile", perf.compile)]
    shares = {name: share(floor, stats.median_ms if stats else None) for name, stats in arms}
    lines.append(
        "% of floor: "
        + " | ".join(f"{name} {100 * s:.0f}%" if s is not None else f"{name} -" for name, s in shares.items())
    )
    lines.append(headroom(shares, found.bound))
    return lines


def headroom(shares: dict[str, float | None], bound: str) -> str:
    """One sentence: how much is left to gain, and whether to keep going."""
    yours, compiled = shares.get("yours"), shares.get("torch.compile")
    if yours is not None and yours >= NEAR_FLOOR:
        return f"yours is at {100 * yours:.0f}% of the {bound} floor: little is left to gain; consider submitting."
    if compiled is not None and compiled >= NEAR_FLOOR:
        return (
            f"torch.compile is at {100 * compiled:.0f}% of the {bound} floor: little is left to gain here; "
            "match it and consider submitting."
        )
    if yours is not None:
        return f"yours is at {100 * yours:.0f}% of the {bound} floor: up to {1 / yours:.1f}x is left in principle."
    return f"the {bound} floor bounds what any kernel can reach."
