"""FLOPs and bytes of traced operators, estimated from shapes, and the speed-of-light floor.

Formulas (N = elements of the output, dtype sizes from the trace):

- GEMM (mm, addmm, bmm, baddbmm): 2 * batch * M * N * K (the addmm/baddbmm bias add is not counted).
- convolution: 2 * N_big * prod(weight.shape[1:]), where N_big is the output's elements for a
  forward convolution and the input's for a transposed one (each output, or each input of a
  transposed convolution, meets every weight of one filter once).
- softmax and log-softmax: 5 per element (max, subtract, exp, sum, divide);
  norms: 8 per input element (mean, variance, normalize, affine); reductions: 1 per input
  element; pooling: 1 per output element and window element; elementwise: 1 per output element.
- views (view, transpose, expand, ...) cost nothing: they move no data.
- bytes of an operator run alone (as eager runs it): every tensor argument read once plus every
  output written once. Bytes of a fused region: its external inputs read once plus its outputs
  written once; intermediates stay on chip.
- floor = max(FLOPs / peak, bytes / bandwidth); the estimated eager time of a region is the sum of
  its operators' floors run alone plus one launch each (`LAUNCH_S`).
"""

from __future__ import annotations

from pydantic import BaseModel

from agent.templates.graph import OpGraph, OpNode, Ref, TensorMeta
from agent.templates.ops import classify

_DTYPE_BYTES = {
    "float64": 8,
    "int64": 8,
    "complex64": 8,
    "float32": 4,
    "int32": 4,
    "float16": 2,
    "bfloat16": 2,
    "int16": 2,
    "bool": 1,
    "int8": 1,
    "uint8": 1,
}
LAUNCH_S = 4e-6
"""A kernel launch as eager pays it between two small operators (the H200's ~4 us)."""


class Rates(BaseModel):
    """A GPU's nominal rates: DRAM bandwidth and peak arithmetic by dtype."""

    name: str = "H200 (nominal)"
    bandwidth_bytes_s: float = 4.8e12
    fp32_flops_s: float = 67e12
    half_flops_s: float = 989e12

    def peak(self, dtype: str) -> float:
        return self.half_flops_s if dtype in ("float16", "bfloat16") else self.fp32_flops_s

    def floor_s(self, flops: float, nbytes: float, dtype: str = "float32") -> float:
        return max(flops / self.peak(dtype), nbytes / self.bandwidth_bytes_s)


H200 = Rates()


def nbytes(meta: TensorMeta | None) -> int:
    return 0 if meta is None else meta.numel * _DTYPE_BYTES.get(meta.dtype, 4)


def ref_meta(graph: OpGraph, ref: Ref) -> TensorMeta | None:
    """The shape, stride and dtype a tensor reference stands for; None for non-tensors."""
    match ref.t:
        case "input":
            info = graph.inputs[ref.index or 0]
            if info.kind != "tensor" or info.shape is None:
                return None
            return TensorMeta(
                shape=info.shape, stride=info.stride or [], offset=info.offset, dtype=info.dtype or "float32"
            )
        case "param":
            return graph.param(ref.name or "")
        case "node":
            outs = graph.nodes[ref.id or 0].outputs
            return outs[ref.out] if ref.out < len(outs) else None
        case "constant":
            shape = ref.shape or []
            return TensorMeta(shape=shape, stride=_contiguous(shape), dtype=ref.dtype or "float32")
    return None


def _contiguous(shape: list[int]) -> list[int]:
    stride, acc = [], 1
    for size in reversed(shape):
        stride.append(acc)
        acc *= max(size, 1)
    return list(reversed(stride))


def tensor_refs(node: OpNode) -> list[Ref]:
    """Every tensor the node reads (list arguments flattened)."""
    found: list[Ref] = []

    def walk(ref: Ref) -> None:
        if ref.t == "list":
            for item in ref.items or []:
                walk(item)
        elif ref.t in ("input", "param", "node", "constant"):
            found.append(ref)

    for ref in [*node.args, *node.kwargs.values()]:
        walk(ref)
    return found


def op_class(node: OpNode) -> str:
    """The template library's class of the operator (ops.classify), or "other"."""
    parts = node.op.split(".")
    overload = parts[2] if len(parts) > 2 else "default"
    if node.view_of is not None and node.writes is None:
        return "view"
    name = node.name
    if name in ("baddbmm", "addbmm"):
        return "gemm"
    if name in ("max_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "_adaptive_avg_pool2d"):
        return "pool"
    if name in ("_native_batch_norm_legit", "_native_batch_norm_legit_functional", "native_batch_norm"):
        return "norm"
    if name in ("eq", "ne", "lt", "le", "gt", "ge", "masked_fill", "where", "logical_not", "bitwise_not"):
        return "ewise"
    return classify(name, overload) or "other"


def node_flops(graph: OpGraph, node: OpNode) -> float:
    kind = op_class(node)
    out = node.outputs[0] if node.outputs else None
    out_n = out.numel if out else 0
    tensors = [m for m in (ref_meta(graph, r) for r in tensor_refs(node)) if m is not None]
    if kind == "gemm" and out is not None and tensors:
        # K: the reduced size, the last dimension of the first matrix operand (addmm: the second).
        first = tensors[1] if node.name in ("addmm", "baddbmm") and len(tensors) > 1 else tensors[0]
        k = first.shape[-1] if first.shape else 1
        return 2.0 * out_n * k
    if kind == "conv" and len(tensors) >= 2 and out is not None:
        weight = tensors[1]
        transposed = bool(node.args[6].value) if len(node.args) > 6 and node.args[6].t == "const" else False
        big = tensors[0].numel if transposed else out_n
        inner = 1
        for size in weight.shape[1:]:
            inner *= size
        return 2.0 * big * inner
    in_n = tensors[0].numel if tensors else out_n
    if kind == "softmax":
        return 5.0 * in_n
    if kind == "norm":
        return 8.0 * in_n
    if kind == "reduce":
        return float(in_n)
    if kind == "pool" and out is not None:
        return float(out_n) * max(1, in_n // max(out_n, 1))
    if kind == "view":
        return 0.0
    return float(out_n)


def node_bytes(graph: OpGraph, node: OpNode) -> int:
    if op_class(node) == "view":
        return 0
    read = sum(nbytes(ref_meta(graph, r)) for r in tensor_refs(node))
    return read + sum(nbytes(o) for o in node.outputs)


def node_eager_s(graph: OpGraph, node: OpNode, rates: Rates) -> float:
    """One operator run alone: its floor plus a launch (a view launches nothing)."""
    if op_class(node) == "view":
        return 0.0
    dtype = node.outputs[0].dtype if node.outputs and node.outputs[0] else "float32"
    return rates.floor_s(node_flops(graph, node), node_bytes(graph, node), dtype) + LAUNCH_S
