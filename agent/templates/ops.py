"""What each aten operator of a traced graph is to the template library: an elementwise function
(with its CUDA expression), a view, a no-op, a side effect on state, or a producer family
(GEMM, reduction, softmax, normalization). Anything not listed is not covered."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

OpClass = Literal[
    "ewise",
    "view",
    "identity",
    "side_effect",
    "gemm",
    "conv",
    "reduce",
    "softmax",
    "scan",
    "flip",
    "norm",
    "pool",
]

# Unary: (x, params) -> CUDA expression. `params` are the operator's scalar arguments by name.
Unary = Callable[[str, dict[str, Any]], str]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


Binary = Callable[[str, str, dict[str, Any]], str]


def lit(value: float | int | bool) -> str:
    """A float literal CUDA reads exactly as written (inf and nan spelled out)."""
    value = float(value)
    if math.isnan(value):
        return "__int_as_float(0x7fc00000)"
    if math.isinf(value):
        return "__int_as_float(0x7f800000)" if value > 0 else "__int_as_float(0xff800000)"
    return f"{value!r}f" if "e" in repr(value) or "." in repr(value) else f"{value!r}.0f"


def _clamp(x: str, p: dict[str, Any]) -> str:
    out = x
    if p.get("min") is not None:
        out = f"fmaxf({out}, {lit(p['min'])})"
    if p.get("max") is not None:
        out = f"fminf({out}, {lit(p['max'])})"
    return out


def _gelu(x: str, p: dict[str, Any]) -> str:
    if p.get("approximate", "none") == "tanh":
        return f"(0.5f * {x} * (1.0f + T_TANH(0.7978845608028654f * ({x} + 0.044715f * {x} * {x} * {x}))))"
    return f"(0.5f * {x} * (1.0f + erff({x} * 0.7071067811865476f)))"


def _softplus(x: str, p: dict[str, Any]) -> str:
    beta, threshold = lit(p.get("beta", 1.0)), lit(p.get("threshold", 20.0))
    return f"(({x}) * {beta} > {threshold} ? ({x}) : log1pf(T_EXP(({x}) * {beta})) / {beta})"


def _elu(x: str, p: dict[str, Any]) -> str:
    alpha, scale = float(p.get("alpha", 1.0)), float(p.get("scale", 1.0))
    input_scale = lit(p.get("input_scale", 1.0))
    return f"(({x}) > 0.0f ? ({x}) * {lit(scale)} : expm1f(({x}) * {input_scale}) * {lit(alpha * scale)})"


def _pow_scalar(x: str, p: dict[str, Any]) -> str:
    e = float(p["exponent"])
    table = {1.0: f"({x})", 2.0: f"(({x}) * ({x}))", 3.0: f"(({x}) * ({x}) * ({x}))", 0.5: f"sqrtf({x})"}
    return table.get(e, f"powf({x}, {lit(e)})")


UNARY: dict[str, Unary] = {
    "relu": lambda x, p: f"fmaxf({x}, 0.0f)",
    "leaky_relu": lambda x, p: f"(({x}) > 0.0f ? ({x}) : ({x}) * {lit(p.get('negative_slope', 0.01))})",
    "sigmoid": lambda x, p: f"T_SIGMOID({x})",
    "tanh": lambda x, p: f"T_TANH({x})",
    "gelu": _gelu,
    "softplus": _softplus,
    "elu": _elu,
    "hardsigmoid": lambda x, p: f"(fminf(fmaxf(({x}) + 3.0f, 0.0f), 6.0f) / 6.0f)",
    "hardswish": lambda x, p: f"(({x}) * fminf(fmaxf(({x}) + 3.0f, 0.0f), 6.0f) / 6.0f)",
    "hardtanh": lambda x, p: (
        f"fminf(fmaxf({x}, {lit(p.get('min_val', -1.0))}), {lit(p.get('max_val', 1.0))})"
    ),
    "silu": lambda x, p: f"(({x}) * T_SIGMOID({x}))",
    "mish": lambda x, p: f"(({x}) * T_TANH(({x}) > 20.0f ? ({x}) : log1pf(T_EXP({x}))))",
    "clamp": _clamp,
    "clamp_min": lambda x, p: f"fmaxf({x}, {lit(p['min'])})",
    "clamp_max": lambda x, p: f"fminf({x}, {lit(p['max'])})",
    "threshold": lambda x, p: f"(({x}) > {lit(p['threshold'])} ? ({x}) : {lit(p['value'])})",
    "neg": lambda x, p: f"(-({x}))",
    "abs": lambda x, p: f"fabsf({x})",
    "exp": lambda x, p: f"T_EXP({x})",
    "exp2": lambda x, p: f"exp2f({x})",
    "expm1": lambda x, p: f"expm1f({x})",
    "log": lambda x, p: f"T_LOG({x})",
    "log2": lambda x, p: f"log2f({x})",
    "log10": lambda x, p: f"log10f({x})",
    "log1p": lambda x, p: f"log1pf({x})",
    "sqrt": lambda x, p: f"sqrtf({x})",
    "rsqrt": lambda x, p: f"T_RSQRT({x})",
    "reciprocal": lambda x, p: f"(1.0f / ({x}))",
    "sin": lambda x, p: f"sinf({x})",
    "cos": lambda x, p: f"cosf({x})",
    "erf": lambda x, p: f"erff({x})",
    "sign": lambda x, p: f"(float)((({x}) > 0.0f) - (({x}) < 0.0f))",
    "floor": lambda x, p: f"floorf({x})",
    "ceil": lambda x, p: f"ceilf({x})",
    "round": lambda x, p: f"rintf({x})",
    "trunc": lambda x, p: f"truncf({x})",
    "pow_scalar": _pow_scalar,
    "scalar_pow": lambda x, p: f"powf({lit(p['base'])}, {x})",
    "copy": lambda x, p: f"({x})",
    # Index-dependent: `idx` is the element's flat index in the program's space.
    "triu": lambda x, p: (
        f"((idx % {p['cols']}LL) - ((idx / {p['cols']}LL) % {p['rows']}LL) >= {p['diagonal']}LL ? ({x}) : 0.0f)"
    ),
    "tril": lambda x, p: (
        f"((idx % {p['cols']}LL) - ((idx / {p['cols']}LL) % {p['rows']}LL) <= {p['diagonal']}LL ? ({x}) : 0.0f)"
    ),
}

BINARY: dict[str, Binary] = {
    "add": lambda a, b, p: (
        f"(({a}) + ({b}))" if p.get("alpha", 1) == 1 else f"(({a}) + {lit(p['alpha'])} * ({b}))"
    ),
    "sub": lambda a, b, p: (
        f"(({a}) - ({b}))" if p.get("alpha", 1) == 1 else f"(({a}) - {lit(p['alpha'])} * ({b}))"
    ),
    "mul": lambda a, b, p: f"(({a}) * ({b}))",
    "div": lambda a, b, p: {
        None: f"(({a}) / ({b}))",
        "trunc": f"truncf(({a}) / ({b}))",
        "floor": f"floorf(({a}) / ({b}))",
    }[p.get("rounding_mode")],
    "maximum": lambda a, b, p: f"fmaxf({a}, {b})",
    "minimum": lambda a, b, p: f"fminf({a}, {b})",
    "pow": lambda a, b, p: f"powf({a}, {b})",
    "xlogy": lambda a, b, p: f"(({a}) == 0.0f ? 0.0f : ({a}) * T_LOG({b}))",
    "smooth_l1": lambda a, b, p: (
        f"(fabsf(({a}) - ({b})) < {lit(p.get('beta', 1.0))} ? 0.5f * (({a}) - ({b})) * (({a}) - ({b})) / "
        f"{lit(p.get('beta', 1.0))} : fabsf(({a}) - ({b})) - 0.5f * {lit(p.get('beta', 1.0))})"
    ),
    "sq_diff": lambda a, b, p: f"((({a}) - ({b})) * (({a}) - ({b})))",
    "abs_diff": lambda a, b, p: f"fabsf(({a}) - ({b}))",
    "rsub": lambda a, b, p: (
        f"(({b}) - ({a}))" if p.get("alpha", 1) == 1 else f"(({b}) - {lit(p['alpha'])} * ({a}))"
    ),
}

# aten name -> (the function above, names of the scalar arguments after the tensor ones, defaults).
EWISE_SCALARS: dict[str, tuple[str, list[str], dict[str, Any]]] = {
    "leaky_relu": ("leaky_relu", ["negative_slope"], {"negative_slope": 0.01}),
    "gelu": ("gelu", [], {"approximate": "none"}),
    "softplus": ("softplus", ["beta", "threshold"], {"beta": 1.0, "threshold": 20.0}),
    "elu": ("elu", ["alpha", "scale", "input_scale"], {"alpha": 1.0, "scale": 1.0, "input_scale": 1.0}),
    "hardtanh": ("hardtanh", ["min_val", "max_val"], {"min_val": -1.0, "max_val": 1.0}),
    "clamp": ("clamp", ["min", "max"], {"min": None, "max": None}),
    "clamp_min": ("clamp_min", ["min"], {}),
    "clamp_max": ("clamp_max", ["max"], {}),
    "threshold": ("threshold", ["threshold", "value"], {}),
}

VIEW_OPS = _names(
    "view _unsafe_view reshape t transpose permute unsqueeze squeeze expand select slice alias "
    "flatten unflatten"
)
IDENTITY_OPS = _names("clone contiguous detach lift_fresh _to_copy alias_copy")
GEMM_OPS = _names("mm bmm addmm matmul")
REDUCE_OPS = frozenset(
    [
        "sum",
        "mean",
        "max",
        "min",
        "amax",
        "amin",
        "argmax",
        "argmin",
        "prod",
        "logsumexp",
        "linalg_vector_norm",
        "norm",
    ]
)
SOFTMAX_OPS = _names("_softmax _log_softmax _safe_softmax softmax log_softmax")
SCAN_OPS = _names("cumsum cumprod")
NORM_OPS = _names("native_layer_norm native_group_norm native_batch_norm")
LOSS_OPS = _names("smooth_l1_loss mse_loss l1_loss")
POOL_OPS = _names("max_pool2d_with_indices max_pool3d_with_indices avg_pool2d avg_pool3d")


def classify(name: str, overload: str) -> OpClass | None:
    """The class of an aten operator (`name` without namespace and overload), or None."""
    if name in VIEW_OPS:
        return "view"
    if name in IDENTITY_OPS:
        return "identity"
    if name in GEMM_OPS:
        return "gemm"
    if name == "convolution":
        return "conv"
    if name in POOL_OPS:
        return "pool"
    if name in REDUCE_OPS and not (name in ("max", "min") and overload in ("other", "default")):
        return "reduce"
    if name in ("max", "min") and overload == "other":
        return "ewise"  # torch.max(a, b) is elementwise
    if name in SOFTMAX_OPS:
        return "softmax"
    if name in SCAN_OPS:
        return "scan"
    if name == "flip":
        return "flip"
    if name in NORM_OPS:
        return "norm"
    base = name.rstrip("_") if name.endswith("_") and not name.startswith("_") else name
    if base in LOSS_OPS:
        return "reduce"
    if base in UNARY or base in BINARY or base in EWISE_SCALARS or base in ("pow", "rsub"):
        return "ewise"
    if base in ("silu", "mish", "relu", "sigmoid", "tanh", "hardswish", "hardsigmoid", "selu"):
        return "ewise"
    return None


MATH_HEADER = """// Math the generated expressions use; FAST picks the hardware approximations (the compute agent's
// FAST_MATH slot), otherwise the accurate library functions.
#pragma once
#include <cuda_runtime.h>
#include <math.h>

#ifndef T_FAST
#define T_FAST 0
#endif
#if T_FAST
#define T_EXP(x) __expf(x)
#define T_LOG(x) __logf(x)
#define T_RSQRT(x) rsqrtf(x)
#define T_TANH(x) (1.0f - 2.0f / (__expf(2.0f * (x)) + 1.0f))
#define T_SIGMOID(x) (1.0f / (1.0f + __expf(-(x))))
#else
#define T_EXP(x) expf(x)
#define T_LOG(x) logf(x)
#define T_RSQRT(x) (1.0f / sqrtf(x))
#define T_TANH(x) tanhf(x)
#define T_SIGMOID(x) (1.0f / (1.0f + expf(-(x))))
#endif
"""
