"""The work of a reference forward (FLOPs, compulsory bytes) counted from its traced op graph.

Counting rules, per aten operator: matrix products and convolutions 2 x multiply-adds (tensor-core
work); softmax 5, normalizations 8, variance 3 FLOPs per input element; other reductions 1 per
input element; views and copies none; every other operator 1 per output element. Compulsory bytes
are the input, parameter and buffer, and output tensors, each moved once.
"""

from __future__ import annotations

import math

from agent.referee.roofline import WorkEstimate
from agent.templates.graph import OpGraph, OpNode, Ref, TensorMeta

DTYPE_BYTES = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2, "bool": 1}
NO_FLOPS = frozenset(
    {
        "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "unsqueeze", "squeeze",
        "slice", "select", "detach", "alias", "clone", "contiguous", "copy_", "copy", "empty", "empty_like",
        "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "new_empty", "new_zeros", "cat",
        "stack", "split", "split_with_sizes", "chunk", "unbind", "index", "gather", "narrow", "flatten",
        "as_strided", "lift_fresh", "_to_copy", "to", "arange", "unfold", "pad", "constant_pad_nd",
    }
)  # fmt: skip
REDUCTIONS = frozenset(
    {"sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "prod", "norm", "linalg_vector_norm",
     "logsumexp", "cumsum", "cumprod", "all", "any"}
)  # fmt: skip
VARIANCE = frozenset({"var", "std", "var_mean", "std_mean"})
SOFTMAX = frozenset({"_softmax", "softmax", "_log_softmax", "log_softmax"})
NORMS = frozenset(
    {"native_layer_norm", "layer_norm", "native_batch_norm", "_native_batch_norm_legit",
     "_native_batch_norm_legit_no_training", "native_group_norm", "group_norm", "instance_norm", "rms_norm",
     "_fused_rms_norm"}
)  # fmt: skip
CONVOLUTIONS = frozenset({"convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose2d"})
ATTENTION = frozenset(
    {"_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
     "scaled_dot_product_attention", "_scaled_dot_product_attention_math", "_scaled_dot_product_cudnn_attention"}
)  # fmt: skip


def tensor_bytes(shape: list[int] | None, dtype: str | None) -> int:
    return math.prod(shape or []) * DTYPE_BYTES.get(dtype or "", 4)


def _arg_meta(graph: OpGraph, ref: Ref) -> TensorMeta | None:
    """The shape and dtype of an argument, where the graph knows it."""
    if ref.t == "input" and ref.index is not None:
        info = next((i for i in graph.inputs if i.index == ref.index), None)
        if info is not None and info.shape is not None and info.dtype is not None:
            return TensorMeta(shape=info.shape, stride=info.stride or [], dtype=info.dtype)
    if ref.t == "param" and ref.name is not None:
        return next((p for p in graph.params if p.name == ref.name), None)
    if ref.t == "node" and ref.id is not None:
        node = next((n for n in graph.nodes if n.id == ref.id), None)
        if node is not None and ref.out < len(node.outputs):
            return node.outputs[ref.out]
    return None


def _out_numel(node: OpNode) -> int:
    return sum(out.numel for out in node.outputs if out is not None)


def node_flops(graph: OpGraph, node: OpNode) -> tuple[int, int]:
    """(all FLOPs, of which matrix-product FLOPs) of one operator."""
    name = node.name
    args = [_arg_meta(graph, a) for a in node.args]
    first = args[0] if args else None
    if name in NO_FLOPS or node.view_of is not None:
        return 0, 0
    if name in ("mm", "bmm", "matmul", "addmm", "baddbmm", "addbmm", "linear", "dot", "mv", "addmv"):
        a_index = 1 if name in ("addmm", "baddbmm", "addbmm", "addmv") else 0
        a = args[a_index] if len(args) > a_index else None
        inner = a.shape[-1] if a is not None and a.shape else 0
        product = 2 * _out_numel(node) * inner
        extra = _out_numel(node) if name.startswith("add") or (name == "linear" and len(args) > 2) else 0
        return product + extra, product
    if name in CONVOLUTIONS:
        weight = args[1] if len(args) > 1 else None
        transposed = len(node.args) > 6 and node.args[6].t == "const" and bool(node.args[6].value)
        if weight is None or len(weight.shape) < 3:
            return _out_numel(node), 0
        taps = math.prod(weight.shape[2:])
        if transposed and first is not None:
            product = 2 * first.numel * weight.shape[1] * taps
        else:
            product = 2 * _out_numel(node) * weight.shape[1] * taps
        return product, product
    if name in ATTENTION and len(args) >= 3 and args[0] is not None and args[1] is not None:
        q, k = args[0], args[1]
        product = 4 * math.prod(q.shape[:-1]) * k.shape[-2] * q.shape[-1]
        return product, product
    element_in = first.numel if first is not None else _out_numel(node)
    if name in SOFTMAX:
        return 5 * element_in, 0
    if name in NORMS:
        return 8 * element_in, 0
    if name in VARIANCE:
        return 3 * element_in, 0
    if name in REDUCTIONS:
        return element_in, 0
    return _out_numel(node), 0


def _output_bytes(graph: OpGraph) -> int:
    total = 0
    for ref in graph.outputs:
        meta = _arg_meta(graph, ref)
        if meta is not None:
            total += tensor_bytes(meta.shape, meta.dtype)
    return total


def _widest_float(graph: OpGraph) -> str:
    dtypes = {i.dtype for i in graph.inputs if i.dtype} | {p.dtype for p in graph.params}
    for dtype in ("float64", "float32", "bfloat16", "float16"):
        if dtype in dtypes:
            return dtype
    return "float32"


def estimate_work(graph: OpGraph) -> WorkEstimate:
    """FLOPs and compulsory bytes of one forward call of the traced reference."""
    flops = matmul = 0
    for node in graph.nodes:
        total, product = node_flops(graph, node)
        flops, matmul = flops + total, matmul + product
    moved = sum(tensor_bytes(i.shape, i.dtype) for i in graph.inputs if i.kind == "tensor")
    moved += sum(tensor_bytes(p.shape, p.dtype) for p in graph.params)
    moved += _output_bytes(graph)
    return WorkEstimate(flops=flops, matmul_flops=matmul, bytes=moved, dtype=_widest_float(graph))
