"""A `Plan`: what the template library will build for a task, as stages over buffers.

Every tensor is a strided `View` of a buffer (a task input, a parameter, or a stage's output,
always contiguous). An elementwise computation is a `Program` over an index space (a shape,
walked in row-major order by a flat index i): its operands are views read at i (`same`: the
view is contiguous in that space, `scalar`: one element, `general`: coordinates times strides),
its instructions are the library's elementwise functions (ops.UNARY / ops.BINARY).

Stages run in order; each is one template family: ewise, gemm, conv, reduce, softmax, scan, norm,
pool. Reductions, softmax, scans and norms read their input through a `src` program (a fused prologue) and
write through an optional `epilogue`; a GEMM's or a convolution's is an in-place elementwise pass.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from agent.templates.graph import InputInfo, ParamInfo

MAX_OPERANDS = 16  # tk::kMaxOperands in skills/templates/kernels/tk_common.cuh


def numel(shape: list[int]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def contiguous_strides(shape: list[int]) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return list(reversed(strides))


class Buffer(BaseModel):
    name: str
    kind: Literal["input", "param", "temp"]
    shape: list[int]
    dtype: str = "float32"
    source: int | str | None = Field(default=None, description="input index or parameter name")


class View(BaseModel):
    buf: str
    shape: list[int]
    stride: list[int]
    offset: int = 0

    def is_full(self, buffer: Buffer) -> bool:
        """The whole buffer in its own row-major order."""
        return self.offset == 0 and self.shape == buffer.shape and self.is_contiguous()

    def is_contiguous(self) -> bool:
        expected = contiguous_strides(self.shape)
        return all(s == e for s, e, n in zip(self.stride, expected, self.shape, strict=True) if n != 1)


class Term(BaseModel):
    """One coalesced dimension of an operand's index: ((i / inner) % size) * stride."""

    inner: int
    size: int
    stride: int


class Operand(BaseModel):
    view: View
    kind: Literal["same", "scalar", "general"]
    terms: list[Term] = Field(default_factory=list)

    def vectorizable(self, width: int) -> bool:
        """Whether `width` consecutive indices (the first a multiple of width) read `width`
        consecutive, aligned elements."""
        if self.view.offset % width:
            return False
        if self.kind in ("same", "scalar"):
            return True
        inner = self.terms[-1]
        return inner.inner == 1 and inner.stride == 1 and inner.size % width == 0


class Instr(BaseModel):
    fn: str
    args: list[str] = Field(description="rK register, oK operand, v the incoming value, or a literal")
    params: dict[str, Any] = Field(default_factory=dict)


class Program(BaseModel):
    shape: list[int]
    operands: list[Operand] = Field(default_factory=list)
    instrs: list[Instr] = Field(default_factory=list)
    outputs: list[int] = Field(default_factory=list, description="registers written out")

    def vectorizable(self, width: int) -> bool:
        return numel(self.shape) % width == 0 and all(o.vectorizable(width) for o in self.operands)

    @property
    def fns(self) -> list[str]:
        return [i.fn for i in self.instrs]


class _Stage(BaseModel):
    name: str = ""
    out: str = Field(default="", description="the buffer it writes")
    ops: list[str] = Field(default_factory=list, description="the task's operators this stage computes")


class EwiseStage(_Stage):
    kind: Literal["ewise"] = "ewise"
    program: Program
    outs: list[str] = Field(default_factory=list, description="one buffer per program output")


class GemmStage(_Stage):
    kind: Literal["gemm"] = "gemm"
    a: View
    b: View
    batch: int
    m: int
    n: int
    k: int
    epilogue: Program | None = None


class ConvStage(_Stage):
    """A convolution of `spatial` dimensions (1-3), as cuDNN takes it: x (N, C, *spatial) and the
    weight contiguous; a transposed one's weight is (C_in, C_out / groups, *kernel)."""

    kind: Literal["conv"] = "conv"
    x: View
    w: View
    out_shape: list[int]
    spatial: int
    stride: list[int]
    padding: list[int]
    dilation: list[int]
    groups: int
    transposed: bool = False
    epilogue: Program | None = None


ReduceOp = Literal["sum", "mean", "max", "min", "prod", "argmax", "argmin", "logsumexp"]


class ReduceStage(_Stage):
    """out[o, j] = epilogue(reduce_r src[o, r, j]) over the input seen as [outer, r, inner]. With
    `apply` (a column reduction fused with the elementwise pass that reads it back, RMSNorm over
    channels) the stage writes apply(v = src's first operand at [o, r, j], w = out[o, j]) over the
    whole [outer, r, inner] space instead, each column's values held in registers: x is read once."""

    kind: Literal["reduce"] = "reduce"
    op: ReduceOp
    src: Program
    outer: int
    r: int
    inner: int
    out_dtype: str = "float32"
    epilogue: Program | None = None
    apply: Program | None = None


class SoftmaxStage(_Stage):
    kind: Literal["softmax"] = "softmax"
    log: bool
    src: Program
    rows: int
    d: int
    epilogue: Program | None = None


class ScanStage(_Stage):
    """An inclusive running sum (cumsum) or product (cumprod) along the last dimension: rows of d;
    `reverse` runs it from each row's end (a cumsum between two flips)."""

    kind: Literal["scan"] = "scan"
    op: Literal["sum", "prod"]
    reverse: bool = False
    src: Program
    rows: int
    d: int
    epilogue: Program | None = None


class NormStage(_Stage):
    kind: Literal["norm"] = "norm"
    src: Program
    outer: int
    groups: int
    inner: int
    eps: float
    weight: View | None = None
    bias: View | None = None
    affine: Literal["none", "elem", "channel", "group"] = "none"
    channels_per_group: int = 1
    hw: int = 1
    channels: int = 1
    epilogue: Program | None = None


class PoolStage(_Stage):
    """Max or average pooling over the 2 or 3 spatial dimensions of a contiguous x (N, C, *spatial);
    1D pooling arrives traced as 2D of height 1. The output's size (ceil_mode) comes from the trace."""

    kind: Literal["pool"] = "pool"
    op: Literal["max", "avg"]
    x: View
    out_shape: list[int]
    spatial: int
    kernel: list[int]
    stride: list[int]
    padding: list[int]
    dilation: list[int]
    count_include_pad: bool = True
    divisor: int = 0  # avg: divisor_override, 0 for none
    epilogue: Program | None = None


Stage = Annotated[
    EwiseStage | GemmStage | ConvStage | ReduceStage | SoftmaxStage | ScanStage | NormStage | PoolStage,
    Field(discriminator="kind"),
]


class Plan(BaseModel):
    """What the library builds for one task."""

    task: str
    family: str = Field(description="the family of the stage that moves the most data")
    ops: list[str] = Field(description="the task's compute operators, in order")
    stages: list[Stage]
    buffers: dict[str, Buffer]
    inputs: list[InputInfo]
    params: list[ParamInfo]
    outputs: list[View]
    output_is_tuple: bool = False
    notes: list[str] = Field(default_factory=list)

    def describe(self) -> str:
        chain = " -> ".join(f"{s.kind}[{', '.join(s.ops)}]" for s in self.stages)
        return f"{self.task}: {self.family} family, {len(self.stages)} stage(s): {chain}"


class NotCovered(BaseModel):
    """Why the library does not cover a task, naming the operators it lacks."""

    task: str
    reason: str
    ops: list[str] = Field(default_factory=list)

    def describe(self) -> str:
        return f"{self.task}: not covered: {self.reason}"
