"""Producer operators -> stages: GEMMs (mm, bmm, addmm), convolutions (1-3D, transposed,
grouped), reductions over one block of dimensions
(sum, mean, max, min, prod, argmax, argmin, logsumexp, vector norms), softmax and log-softmax
and cumsum and cumprod over the last dimension, layer, group, instance and batch normalization,
and max and average pooling."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, cast

from agent.templates.graph import OpNode
from agent.templates.indexing import IndexError_, operand_for
from agent.templates.ops import LOSS_OPS
from agent.templates.plan import (
    ConvStage,
    GemmStage,
    Instr,
    NormStage,
    PoolStage,
    Program,
    ReduceOp,
    ReduceStage,
    ScanStage,
    SoftmaxStage,
    View,
    numel,
)
from agent.templates.values import Bad, Flipped

if TYPE_CHECKING:
    from agent.templates.recognize import Builder


class Uncovered(Exception):
    """The graph uses something the library lacks; `ops` names uncovered operators, if any."""

    def __init__(self, reason: str, ops: list[str] | None = None) -> None:
        super().__init__(reason)
        self.ops = ops or []


def _arg(node: OpNode, b: Builder, i: int, name: str, default: Any = None) -> Any:
    if name in node.kwargs:
        return b.value(node.kwargs[name])
    return b.value(node.args[i]) if i < len(node.args) else default


def copy_program(view: View) -> Program:
    """Reads `view` in its own index space: a stage's input with nothing fused in front."""
    try:
        operand = operand_for(view, view.shape)
    except IndexError_ as exc:
        raise Uncovered(str(exc)) from None
    return Program(shape=view.shape, operands=[operand], instrs=[Instr(fn="copy", args=["o0"])], outputs=[0])


def lower_producer(b: Builder, node: OpNode, kind: str) -> list[Any]:
    if kind == "gemm":
        return _gemm(b, node)
    if kind == "conv":
        return _conv(b, node)
    if kind == "reduce":
        return _reduce(b, node)
    if kind == "softmax":
        return _softmax(b, node)
    if kind == "scan":
        return _scan(b, node)
    if kind == "pool":
        return _pool(b, node)
    return _norm(b, node)


# -- pooling -------------------------------------------------------------------------------------
def _pool(b: Builder, node: OpNode) -> list[Any]:
    """aten.max_pool{2,3}d_with_indices(x, kernel, stride, padding, dilation, ceil_mode) and
    aten.avg_pool{2,3}d(x, kernel, stride, padding, ceil_mode, count_include_pad,
    divisor_override): a PoolStage. Max pooling's indices are not computed: a task that uses them
    is not covered."""
    name = node.name
    spatial = 3 if name.startswith(("max_pool3d", "avg_pool3d")) else 2
    x = b.tensor(b.value(node.args[0]))
    if len(x.shape) != spatial + 2:
        raise Uncovered(f"{name} of a {len(x.shape)}-dimensional input (unbatched)")
    if not x.is_contiguous():
        raise Uncovered(f"{name} of a non-contiguous input")

    def per_dim(value: Any, default: list[int]) -> list[int]:
        if value is None or value == []:
            return list(default)
        listed = [int(v) for v in (value if isinstance(value, list | tuple) else [value])]
        return listed * spatial if len(listed) == 1 else listed

    kernel = per_dim(_arg(node, b, 1, "kernel_size"), [])
    stride = per_dim(_arg(node, b, 2, "stride"), kernel)
    padding = per_dim(_arg(node, b, 3, "padding", 0), [0] * spatial)
    is_max = name.startswith("max_pool")
    dilation = per_dim(_arg(node, b, 4, "dilation", 1), [1] * spatial) if is_max else [1] * spatial
    if not all(len(v) == spatial for v in (kernel, stride, padding, dilation)):
        raise Uncovered(f"{name} whose kernel, stride, padding or dilation does not name every dimension")
    count_include_pad = True if is_max else bool(_arg(node, b, 5, "count_include_pad", True))
    divisor = 0 if is_max else int(_arg(node, b, 6, "divisor_override", None) or 0)
    meta = node.outputs[0]
    assert meta is not None
    out = b.new_output(meta.shape)
    b.add_stage(
        PoolStage(
            name=f"s{len(b.stages)}",
            op="max" if is_max else "avg",
            x=x,
            out_shape=meta.shape,
            spatial=spatial,
            kernel=kernel,
            stride=stride,
            padding=padding,
            dilation=dilation,
            count_include_pad=count_include_pad,
            divisor=divisor,
            out=out.buf,
            ops=[name],
        )
    )
    if not is_max:
        return [out]

    return [out, Bad(f"the indices of {name}")]


# -- GEMM ----------------------------------------------------------------------------------------
def matrix_layout(view: View) -> tuple[bool, int] | None:
    """(transposed, leading dimension) of the last two dims as cuBLAS sees a row-major matrix,
    or None when neither of them is unit-strided."""
    rows, cols = view.shape[-2], view.shape[-1]
    s_rows, s_cols = view.stride[-2], view.stride[-1]
    if s_cols == 1 or cols == 1:
        return False, max(s_rows if rows > 1 else cols, cols, 1)
    if s_rows == 1 or rows == 1:
        return True, max(s_cols if cols > 1 else rows, rows, 1)
    return None


def _gemm(b: Builder, node: OpNode) -> list[Any]:
    name = node.name
    offset = 1 if name == "addmm" else 0
    a = b.tensor(b.value(node.args[offset]))
    w = b.tensor(b.value(node.args[offset + 1]))
    if name == "matmul" or len(a.shape) != len(w.shape) or len(a.shape) not in (2, 3):
        raise Uncovered(f"{name} of {a.shape} and {w.shape} tensors")
    if matrix_layout(a) is None or matrix_layout(w) is None:
        raise Uncovered(f"{name} of a matrix with no unit stride")
    batch = a.shape[0] if len(a.shape) == 3 else 1
    m, k, n = a.shape[-2], a.shape[-1], w.shape[-1]
    meta = node.outputs[0]
    assert meta is not None
    if name == "mm" and n == 1:
        return [_matrix_vector(b, a, w, meta.shape)]
    out = b.new_output(meta.shape)
    b.add_stage(
        GemmStage(name=f"s{len(b.stages)}", a=a, b=w, batch=batch, m=m, n=n, k=k, out=out.buf, ops=[name])
    )
    if name != "addmm":
        return [out]
    bias, beta, alpha = b.value(node.args[0]), _arg(node, b, 3, "beta", 1), _arg(node, b, 4, "alpha", 1)
    value: Any = out
    if alpha != 1:
        value = b.ewise("mul", [value, alpha], {}, meta.shape, "addmm")
    if beta != 0:
        scaled = b.ewise("mul", [bias, beta], {}, list(b.tensor(bias).shape), "addmm") if beta != 1 else bias
        value = b.ewise("add", [value, scaled], {"alpha": 1}, meta.shape, "addmm")
    return [value]


def _matrix_vector(b: Builder, a: View, w: View, out_shape: list[int]) -> View:
    """A (M, K) @ w (K, 1) as a row reduction of A times w broadcast along the rows: a GEMV moves
    A once and has nothing for a GEMM's tiles to reuse (level-1 problem 4: cuBLAS read 89% of
    the bandwidth floor)."""
    column = View(buf=w.buf, shape=[w.shape[0]], stride=[w.stride[0]], offset=w.offset)
    product = b.ewise("mul", [a, column], {}, a.shape, "mm")
    return _reduce_stage(b, b.materialize(product), [1], "sum", out_shape, "mm", "float32")


# -- convolution ---------------------------------------------------------------------------------
def _conv(b: Builder, node: OpNode) -> list[Any]:
    """aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
    groups): a ConvStage, its bias an elementwise add that `fuse` folds into its epilogue."""
    x, w = b.tensor(b.value(node.args[0])), b.tensor(b.value(node.args[1]))
    bias = b.value(node.args[2])
    stride, padding, dilation = (list(b.value(node.args[i])) for i in (3, 4, 5))
    transposed, groups = bool(b.value(node.args[6])), int(b.value(node.args[8]))
    spatial = len(x.shape) - 2
    if spatial not in (1, 2, 3) or len(w.shape) != spatial + 2:
        raise Uncovered(f"a convolution of a {len(x.shape)}-dimensional input")
    if not (x.is_contiguous() and w.is_contiguous()):
        raise Uncovered("a convolution of a non-contiguous input or weight")
    if not all(len(v) == spatial for v in (stride, padding, dilation)):
        raise Uncovered("a convolution whose stride, padding or dilation does not name every dimension")
    meta = node.outputs[0]
    assert meta is not None
    out = b.new_output(meta.shape)
    b.add_stage(
        ConvStage(
            name=f"s{len(b.stages)}",
            x=x,
            w=w,
            out_shape=meta.shape,
            spatial=spatial,
            stride=stride,
            padding=padding,
            dilation=dilation,
            groups=groups,
            transposed=transposed,
            out=out.buf,
            ops=["convolution"],
        )
    )
    if bias is None:
        return [out]
    bias_view = b.tensor(bias)
    channels = View(
        buf=bias_view.buf,
        shape=meta.shape,
        stride=[0, bias_view.stride[0]] + [0] * spatial,
        offset=bias_view.offset,
    )
    return [b.ewise("add", [out, channels], {"alpha": 1}, meta.shape, "convolution")]


# -- reductions ----------------------------------------------------------------------------------
def _dims(dims: Any, rank: int) -> list[int]:
    if dims is None or dims == []:
        return list(range(rank))
    listed = dims if isinstance(dims, list) else [dims]
    return sorted({int(d) % max(rank, 1) for d in listed})


def _block(shape: list[int], dims: list[int]) -> tuple[int, int, int]:
    kept = [d for d in dims if shape[d] != 1] or dims[:1]
    if kept != list(range(kept[0], kept[-1] + 1)) and any(
        shape[d] != 1 for d in range(kept[0], kept[-1] + 1) if d not in kept
    ):
        raise Uncovered(f"a reduction over the non-adjacent dimensions {dims} of {shape}")
    first, last = (kept[0], kept[-1]) if kept else (0, -1)
    return numel(shape[:first]), numel(shape[first : last + 1]), numel(shape[last + 1 :])


def _reduce(b: Builder, node: OpNode) -> list[Any]:
    name, overload = node.name, node.op.split(".")[-1]
    x = b.tensor(b.value(node.args[0]))
    rank = len(x.shape)
    meta = node.outputs[0]
    assert meta is not None
    if name in ("linalg_vector_norm", "norm"):
        return _vector_norm(b, node, x)
    if name in LOSS_OPS:
        return _loss(b, node, x)
    if overload == "default" and name in ("sum", "mean", "prod"):
        dims = list(range(rank))
    elif (name in ("max", "min") and overload == "dim") or name in ("argmax", "argmin", "prod"):
        dim = _arg(node, b, 1, "dim")
        dims = list(range(rank)) if dim is None else _dims(dim, rank)
    else:
        dims = _dims(_arg(node, b, 1, "dim"), rank)
    op = {"amax": "max", "amin": "min"}.get(name, name)
    value = _reduce_stage(
        b, x, dims, op, meta.shape, name, "int64" if op in ("argmax", "argmin") else "float32"
    )
    if name in ("max", "min") and overload == "dim":
        return [value, Bad(f"the indices of {name}.dim")]
    return [value]


def _reduce_stage(
    b: Builder, x: View, dims: list[int], op: str, out_shape: list[int], name: str, dtype: str
) -> View:
    outer, r, inner = _block(x.shape, dims)
    out = b.new_output(out_shape, dtype)
    b.add_stage(
        ReduceStage(
            name=f"s{len(b.stages)}",
            op=cast(ReduceOp, op),
            src=copy_program(x),
            outer=outer,
            r=r,
            inner=inner,
            out_dtype=dtype,
            out=out.buf,
            ops=[name],
        )
    )
    return out


def _loss(b: Builder, node: OpNode, x: View) -> list[Any]:
    meta = node.outputs[0]
    assert meta is not None
    fn = {"smooth_l1_loss": "smooth_l1", "mse_loss": "sq_diff", "l1_loss": "abs_diff"}[node.name]
    params = {"beta": float(_arg(node, b, 3, "beta", 1.0))} if fn == "smooth_l1" else {}
    diff = b.ewise(fn, [x, b.value(node.args[1])], params, x.shape, node.name)
    reduction = int(_arg(node, b, 2, "reduction", 1))
    if reduction == 0:
        return [diff]
    op = "mean" if reduction == 1 else "sum"
    return [
        _reduce_stage(b, b.materialize(diff), list(range(len(x.shape))), op, meta.shape, node.name, "float32")
    ]


def _vector_norm(b: Builder, node: OpNode, x: View) -> list[Any]:
    meta = node.outputs[0]
    assert meta is not None
    order = float(_arg(node, b, 1, "ord" if node.name == "linalg_vector_norm" else "p", 2.0) or 2.0)
    dims = _dims(_arg(node, b, 2, "dim"), len(x.shape))
    name = node.name
    if math.isinf(order):
        absolute = b.ewise("abs", [x], {}, x.shape, name)
        return [
            _reduce_stage(
                b, b.materialize(absolute), dims, "max" if order > 0 else "min", meta.shape, name, "float32"
            )
        ]
    if order == 2.0:
        powered = b.ewise("mul", [x, x], {}, x.shape, name)
    else:
        absolute = b.ewise("abs", [x], {}, x.shape, name)
        powered = (
            absolute
            if order == 1.0
            else b.ewise("pow_scalar", [absolute], {"exponent": order}, x.shape, name)
        )
    total = _reduce_stage(b, b.materialize(powered), dims, "sum", meta.shape, name, "float32")
    if order == 1.0:
        return [total]
    root = "sqrt" if order == 2.0 else "pow_scalar"
    return [b.ewise(root, [total], {} if order == 2.0 else {"exponent": 1.0 / order}, meta.shape, name)]


# -- softmax and normalization -------------------------------------------------------------------
def _softmax(b: Builder, node: OpNode) -> list[Any]:
    x = b.tensor(b.value(node.args[0]))
    dim = int(_arg(node, b, 1, "dim")) % len(x.shape)
    if numel(x.shape[dim + 1 :]) != 1:
        raise Uncovered(f"{node.name} over dimension {dim} of {x.shape} (only the last is covered)")
    meta = node.outputs[0]
    assert meta is not None
    out = b.new_output(meta.shape)
    d = x.shape[dim]
    b.add_stage(
        SoftmaxStage(
            name=f"s{len(b.stages)}",
            log=node.name.startswith("_log") or node.name == "log_softmax",
            src=copy_program(x),
            rows=numel(x.shape) // max(d, 1),
            d=d,
            out=out.buf,
            ops=[node.name],
        )
    )
    return [out]


def _scan(b: Builder, node: OpNode) -> list[Any]:
    """aten.cumsum / aten.cumprod(x, dim, dtype=None) along the last dimension: a ScanStage. Of a
    flipped x (recognize.Flipped) it scans x from each row's end, and its result is flipped: the
    flip after it undoes that."""

    value = b.value(node.args[0])
    if isinstance(value, Flipped) and value.inner is not None:
        flipped, x = True, value.inner
    else:
        flipped, x = False, b.tensor(value)
    dim = int(_arg(node, b, 1, "dim")) % max(len(x.shape), 1)
    if numel(x.shape[dim + 1 :]) != 1:
        raise Uncovered(f"{node.name} over dimension {dim} of {x.shape} (only the last is covered)")
    meta = node.outputs[0]
    assert meta is not None
    out = b.new_output(meta.shape)
    d = x.shape[dim] if x.shape else 1
    b.add_stage(
        ScanStage(
            name=f"s{len(b.stages)}",
            op="sum" if node.name.startswith("cumsum") else "prod",
            reverse=flipped,
            src=copy_program(x),
            rows=numel(x.shape) // max(d, 1),
            d=d,
            out=out.buf,
            ops=["flip", node.name] if flipped else [node.name],
        )
    )
    return [Flipped(inner=out) if flipped else out]


def _param_view(b: Builder, value: Any) -> View | None:
    return None if value is None else b.tensor(value)


def _norm(b: Builder, node: OpNode) -> list[Any]:

    x = b.tensor(b.value(node.args[0]))
    meta = node.outputs[0]
    assert meta is not None
    name = node.name
    common: dict[str, Any] = {}
    if name == "native_layer_norm":
        d = numel(list(_arg(node, b, 1, "normalized_shape")))
        weight, bias, eps = _arg(node, b, 2, "weight"), _arg(node, b, 3, "bias"), _arg(node, b, 4, "eps")
        common = dict(outer=1, groups=numel(x.shape) // d, inner=d, affine="elem")
    elif name == "native_group_norm":
        weight, bias = _arg(node, b, 1, "weight"), _arg(node, b, 2, "bias")
        n, c, hw, g, eps = (
            _arg(node, b, i, k) for i, k in [(3, "N"), (4, "C"), (5, "HxW"), (6, "group"), (7, "eps")]
        )
        common = dict(
            outer=1,
            groups=n * g,
            inner=(c // g) * hw,
            affine="channel",
            channels_per_group=c // g,
            hw=hw,
            channels=c,
        )
    else:
        weight, bias = _arg(node, b, 1, "weight"), _arg(node, b, 2, "bias")
        if not _arg(node, b, 5, "training"):
            raise Uncovered("batch norm in eval mode")
        eps = _arg(node, b, 7, "eps")
        channels = x.shape[1]
        common = dict(
            outer=x.shape[0], groups=channels, inner=numel(x.shape[2:]), affine="group", channels=channels
        )
    w, bb = _param_view(b, weight), _param_view(b, bias)
    if w is None and bb is None:
        common["affine"] = "none"
    out = b.new_output(meta.shape)
    b.add_stage(
        NormStage(
            name=f"s{len(b.stages)}",
            src=copy_program(x),
            eps=float(eps),
            weight=w,
            bias=bb,
            out=out.buf,
            ops=[name],
            **common,
        )
    )
    return [out, Bad(f"the mean of {name}"), Bad(f"the inverse deviation of {name}")]
