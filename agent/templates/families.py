"""The template families: for each stage kind, its CUDA template (skills/templates/kernels/),
its slots (name, values, the decision maker that owns it), the constraints between them, the
constants those constraints read, and the rendering of one stage's .cu for chosen values.

Constraints use the expression language of kernels/tune.json (agent/tune/expr.py) over the
slot names, the constants and the device limits (max_threads, max_shared_optin, sm_count), so
the tuner enforces exactly the rules the slot agents do.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from agent.paths import skills_dir
from agent.templates.codegen import constants, identity_epilogue, program_function, slot_block
from agent.templates.plan import (
    ConvStage,
    EwiseStage,
    GemmStage,
    NormStage,
    PoolStage,
    Program,
    ReduceStage,
    ScanStage,
    SoftmaxStage,
    Stage,
    View,
    numel,
)

Dimension = Literal["config", "memory", "compute", "reduction"]
TEMPLATE_DIR = "templates"
COMMON_HEADERS = ("tk_common.cuh", "reduce_acc.cuh", "tk_epilogue.cuh", "tk_tile.cuh", "tk_cluster.cuh")
IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
REDUCE_OPS = {"sum": 0, "mean": 1, "max": 2, "min": 3, "prod": 4, "argmax": 5, "argmin": 6, "logsumexp": 7}


@dataclass(frozen=True)
class SlotDecl:
    name: str
    values: tuple[int, ...]
    dimension: Dimension
    doc: str


@dataclass(frozen=True)
class Family:
    name: str
    template: str
    slots: tuple[SlotDecl, ...]
    constraints: tuple[str, ...]


def template_text(name: str) -> str:
    return (skills_dir() / TEMPLATE_DIR / "kernels" / name).read_text(encoding="utf-8")


_BLOCK = SlotDecl("BLOCK", (64, 128, 256, 512, 1024), "config", "threads per block")
_VEC = SlotDecl("VEC", (1, 2, 4), "memory", "floats per load and store (4: float4)")
_UNROLL = SlotDecl("UNROLL", (1, 2, 4, 8), "compute", "independent loads in flight per thread")
_FAST = SlotDecl("FAST", (0, 1), "compute", "1: hardware exp/log/tanh approximations")
_SPLIT = SlotDecl("SPLIT", (1, 4, 16, 64, 256, 1024), "reduction", "blocks sharing one reduction")
_ATOMIC = SlotDecl("ATOMIC", (0, 1), "reduction", "1: split partials merged with atomicAdd")
# A thread-block cluster (sm_90) holding one row or group in its blocks' shared memory: one read.
_CLUSTER = SlotDecl("CLUSTER", (1, 2, 4, 8, 16), "reduction", "blocks of a cluster sharing a row on chip")

# The direct tiled families (dwconv, pool): a block's tile of outputs from an input patch.
_TILE_SLOTS = (
    SlotDecl("BLOCK_W", (32, 64, 128), "config", "threads per block along the output's width"),
    SlotDecl("ROWS", (1, 2, 4, 8), "config", "threads per block along the output's height"),
    SlotDecl("OUT_W", (1, 2, 4, 8), "compute", "outputs per thread along the width"),
    SlotDecl("OUT_H", (1, 2, 4), "compute", "outputs per thread along the height"),
    _FAST,
)
# The input patch of a block's tile of outputs, halo included, in 48 KiB of shared memory.
_PATCH_FITS = "((ROWS * OUT_H - 1) * SH + (KH - 1) * DH + 1) * ((BLOCK_W * OUT_W - 1) * SW + (KW - 1) * DW + 1) * 4 <= 49152"

FAMILIES: dict[str, Family] = {
    "ewise": Family(
        "ewise",
        "ewise.cu",
        (
            SlotDecl("BLOCK", (128, 256, 512, 1024), "config", "threads per block"),
            SlotDecl(
                "GRID_PER_SM", (8, 32, 128, 1024), "config", "most blocks per SM of the grid-stride loop"
            ),
            _VEC,
            _UNROLL,
            _FAST,
        ),
        ("VEC == 1 or CAN_VEC >= VEC",),
    ),
    "reduce_row": Family(
        "reduce_row",
        "reduce_row.cu",
        (
            _BLOCK,
            _VEC,
            _UNROLL,
            _FAST,
            SlotDecl("STRATEGY", (0, 1, 2), "reduction", "0 warp per row, 1 block per row, 2 split rows"),
            _SPLIT,
            _ATOMIC,
        ),
        (
            "VEC == 1 or (R % VEC == 0 and CAN_VEC >= VEC)",
            "(STRATEGY == 2) == (SPLIT > 1)",
            "STRATEGY != 2 or SPLIT * BLOCK * VEC <= R",
            "ATOMIC == 0 or (STRATEGY == 2 and ATOMIC_OK == 1)",
        ),
    ),
    "reduce_col": Family(
        "reduce_col",
        "reduce_col.cu",
        (
            _BLOCK,
            _VEC,
            _UNROLL,
            _FAST,
            SlotDecl("STRATEGY", (0, 1, 2), "reduction", "0 thread per column, 1 block tile, 2 split r"),
            _SPLIT,
            _ATOMIC,
        ),
        (
            "VEC == 1 or (INNER % VEC == 0 and CAN_VEC >= VEC)",
            "(STRATEGY == 2) == (SPLIT > 1)",
            "STRATEGY != 2 or SPLIT <= R",
            "STRATEGY != 1 or BLOCK * VEC <= 2048",
            "ATOMIC == 0 or (STRATEGY == 2 and ATOMIC_OK == 1)",
            # A fused column apply: a thread holds its columns' values in registers (col_apply),
            # and a block's threads must fit a SM's 64 K registers at about 1.2 per value.
            "APPLY == 0 or (STRATEGY == 0 and UNROLL == 1 and R * VEC <= 128 and R * VEC * BLOCK <= 32768)",
        ),
    ),
    "softmax": Family(
        "softmax",
        "softmax.cu",
        (
            _BLOCK,
            _VEC,
            _FAST,
            SlotDecl(
                "STRATEGY", (0, 1, 2), "reduction", "0 warp per row, 1 block per row, 2 cluster per row"
            ),
            SlotDecl("ALGO", (0, 1, 2), "reduction", "0 three passes, 1 online, 2 row in shared memory"),
            _CLUSTER,
        ),
        (
            "VEC == 1 or (D % VEC == 0 and CAN_VEC >= VEC)",
            "ALGO != 2 or (BLOCK // 32 if STRATEGY == 0 else 1) * ((D + CLUSTER - 1) // CLUSTER) * 4"
            " <= max_shared_optin - 4096",
            "(STRATEGY == 2) == (CLUSTER > 1)",
            "STRATEGY != 2 or (ALGO == 2 and compute_capability >= 90)",
        ),
    ),
    "scan": Family(
        "scan",
        "scan.cu",
        (
            _BLOCK,
            SlotDecl("ITEMS", (4, 8, 16), "memory", "consecutive elements per thread and chunk"),
            _VEC,
            _FAST,
        ),
        ("VEC == 1 or (D % VEC == 0 and CAN_VEC >= VEC)", "ITEMS % VEC == 0"),
    ),
    "norm": Family(
        "norm",
        "norm.cu",
        (
            _BLOCK,
            _VEC,
            _FAST,
            SlotDecl(
                "ALGO",
                (0, 1, 2, 3, 4),
                "reduction",
                "0 two-pass, 1 sum+sumsq, 2 Welford, 3 cached, 4 cluster",
            ),
            SlotDecl("SPLIT", (1, 2, 4, 8, 16, 32, 64), "reduction", "blocks sharing one group"),
            _CLUSTER,
        ),
        (
            "VEC == 1 or (INNER % VEC == 0 and CAN_VEC >= VEC)",
            "SPLIT == 1 or ALGO == 1 or ALGO == 2",
            "ALGO != 3 or COUNT * 4 <= max_shared_optin - 4096",
            "SPLIT == 1 or COUNT >= SPLIT * BLOCK * VEC",
            "(ALGO == 4) == (CLUSTER > 1)",
            "ALGO != 4 or (compute_capability >= 90 and (COUNT + CLUSTER - 1) // CLUSTER * 4"
            " <= max_shared_optin - 4096)",
        ),
    ),
    "gemm": Family(
        "gemm",
        "gemm.cu",
        (
            SlotDecl("MATH", (0, 1), "compute", "0 full FP32, 1 TF32 tensor cores"),
            SlotDecl("EPI_BLOCK", (128, 256, 512), "config", "threads per block of the epilogue pass"),
            SlotDecl("EPI_VEC", (1, 2, 4), "memory", "floats per load of the epilogue pass"),
            _FAST,
        ),
        ("MATH == 0 or ALLOW_TF32 == 1", "EPI_VEC == 1 or CAN_VEC >= EPI_VEC"),
    ),
    "gemm_direct": Family(
        "gemm_direct",
        "gemm_direct.cu",
        (
            SlotDecl("BLOCK_M", (64, 128), "config", "rows of C per block"),
            SlotDecl("BLOCK_N", (64, 128), "config", "columns of C per block"),
            SlotDecl("TM", (4, 8), "compute", "rows of C per thread"),
            SlotDecl("TN", (4, 8), "compute", "columns of C per thread, in groups of 4"),
            SlotDecl("KT", (8, 16, 32), "memory", "steps of K staged in shared memory at a time"),
            SlotDecl("VEC", (1, 4), "memory", "floats per store of C (4: float4)"),
            _FAST,
        ),
        (
            "(BLOCK_M / TM) * (BLOCK_N / TN) >= 32",
            "VEC == 1 or (N % 4 == 0 and CAN_VEC >= 4)",
            "M <= 65535 * BLOCK_M",
            "BATCH <= 65535",
        ),
    ),
    "conv": Family(
        "conv",
        "conv.cu",
        (
            SlotDecl("MATH", (0, 1), "compute", "0 full FP32, 1 TF32 tensor cores"),
            SlotDecl("ALGO", (0, 1, 2, 3), "compute", "which of cuDNN's heuristic algorithms (0: its first)"),
            SlotDecl("EPI_BLOCK", (128, 256, 512), "config", "threads per block of the epilogue pass"),
            SlotDecl("EPI_VEC", (1, 2, 4), "memory", "floats per load of the epilogue pass"),
            _FAST,
        ),
        ("MATH == 0 or ALLOW_TF32 == 1", "EPI_VEC == 1 or CAN_VEC >= EPI_VEC"),
    ),
    "dwconv": Family("dwconv", "dwconv.cu", _TILE_SLOTS, (_PATCH_FITS,)),
    "pool": Family("pool", "pool.cu", _TILE_SLOTS, (_PATCH_FITS,)),
}


def is_depthwise(stage: Stage) -> bool:
    """A forward 1D or 2D convolution whose every output channel reads one input channel (groups
    equal to the input's channels): the direct `dwconv` template's, not cuDNN's."""
    return (
        isinstance(stage, ConvStage)
        and not stage.transposed
        and stage.spatial in (1, 2)
        and stage.groups == stage.x.shape[1]
        and stage.w.shape[1] == 1
        and stage.w.shape[0] % stage.groups == 0
    )


# With K of 32 (level 1, problem 9) the direct kernel ran 1.15x cuBLAS's SGEMM on an H200; with K
# of 64 (problem 7) 0.87x: the FMAs, not the stores of C, bound it there, and cuBLAS's tiles win.
DIRECT_GEMM_MAX_K = 32


def is_direct_gemm(stage: Stage) -> bool:
    """A GEMM whose K is short enough for the direct `gemm_direct` template, not cuBLAS."""
    return isinstance(stage, GemmStage) and stage.k <= DIRECT_GEMM_MAX_K


def family_of(stage: Stage) -> Family:
    if isinstance(stage, ReduceStage):
        return FAMILIES["reduce_row" if stage.inner == 1 else "reduce_col"]
    if is_depthwise(stage):
        return FAMILIES["dwconv"]
    if is_direct_gemm(stage):
        return FAMILIES["gemm_direct"]
    return FAMILIES[stage.kind]


def pool_geometry(stage: PoolStage) -> dict[str, int]:
    """The pooling as 3D (2D is 3D of depth 1): sizes, window, stride, padding and dilation per
    dimension."""
    lift = 3 - stage.spatial
    x = stage.x.shape[:2] + [1] * lift + stage.x.shape[2:]
    out = stage.out_shape[:2] + [1] * lift + stage.out_shape[2:]
    k, s = [1] * lift + stage.kernel, [1] * lift + stage.stride
    p, d = [0] * lift + stage.padding, [1] * lift + stage.dilation
    return {
        "N": x[0], "C": x[1], "D": x[2], "H": x[3], "W": x[4], "OD": out[2], "OH": out[3], "OW": out[4],
        "KD": k[0], "KH": k[1], "KW": k[2], "SD": s[0], "SH": s[1], "SW": s[2],
        "PD": p[0], "PH": p[1], "PW": p[2], "DD": d[0], "DH": d[1], "DW": d[2],
    }  # fmt: skip


def gemm_geometry(stage: GemmStage) -> dict[str, int]:
    """How A and B lie in memory: row-major or transposed (a transpose flag, never a copy), the
    leading dimension, and the stride between batches (0 for one matrix)."""
    from agent.templates.lower import matrix_layout

    (ta, lda), (tb, ldb) = matrix_layout(stage.a) or (False, 0), matrix_layout(stage.b) or (False, 0)
    return {
        "TRANS_A": int(ta),
        "LDA": lda,
        "TRANS_B": int(tb),
        "LDB": ldb,
        "STRIDE_A": stage.a.stride[0] if len(stage.a.shape) == 3 else 0,
        "STRIDE_B": stage.b.stride[0] if len(stage.b.shape) == 3 else 0,
    }


def dwconv_geometry(stage: ConvStage) -> dict[str, int]:
    """The depthwise convolution as 2D (1D is 2D of height 1): sizes, filter, stride, padding and
    dilation per dimension, the channel multiplier."""
    lift = 2 - stage.spatial
    x = stage.x.shape[:2] + [1] * lift + stage.x.shape[2:]
    k = [1] * lift + stage.w.shape[2:]
    out = stage.out_shape[:2] + [1] * lift + stage.out_shape[2:]
    stride = [1] * lift + stage.stride
    padding = [0] * lift + stage.padding
    dilation = [1] * lift + stage.dilation
    return {
        "N": x[0], "C_IN": x[1], "C_OUT": out[1], "MULT": out[1] // x[1], "H": x[2], "W": x[3],
        "OH": out[2], "OW": out[3], "KH": k[0], "KW": k[1], "SH": stride[0], "SW": stride[1],
        "PH": padding[0], "PW": padding[1], "DH": dilation[0], "DW": dilation[1],
    }  # fmt: skip


def _can_vec(*programs: Program | None) -> int:
    for width in (4, 2):
        if all(p is None or all(o.vectorizable(width) for o in p.operands) for p in programs):
            return width
    return 1


def stage_constants(stage: Stage, *, allow_tf32: bool = False) -> dict[str, int]:
    """The sizes and capabilities the family's constraints read."""
    if isinstance(stage, EwiseStage):
        return {"N": numel(stage.program.shape), "CAN_VEC": _can_vec(stage.program)}
    if isinstance(stage, ReduceStage):
        atomic_ok = int(stage.op in ("sum", "mean") and stage.epilogue is None)
        return {
            "OUTER": stage.outer,
            "R": stage.r,
            "INNER": stage.inner,
            "CAN_VEC": _can_vec(stage.src, stage.apply),
            "ATOMIC_OK": atomic_ok,
            "APPLY": int(stage.apply is not None),
        }
    if isinstance(stage, SoftmaxStage | ScanStage):
        return {"ROWS": stage.rows, "D": stage.d, "CAN_VEC": _can_vec(stage.src, stage.epilogue)}
    if isinstance(stage, NormStage):
        return {
            "GROUPS": stage.groups,
            "INNER": stage.inner,
            "COUNT": stage.outer * stage.inner,
            "CAN_VEC": _can_vec(stage.src, stage.epilogue),
        }
    if isinstance(stage, PoolStage) or (isinstance(stage, ConvStage) and is_depthwise(stage)):
        g = pool_geometry(stage) if isinstance(stage, PoolStage) else dwconv_geometry(stage)
        return {name: g[name] for name in ("OH", "OW", "KH", "KW", "SH", "SW", "DH", "DW")}
    if isinstance(stage, ConvStage):
        return {
            "N": numel(stage.out_shape),
            "CAN_VEC": _can_vec(stage.epilogue),
            "ALLOW_TF32": int(allow_tf32),
        }
    return {
        "BATCH": stage.batch,
        "M": stage.m,
        "N": stage.n,
        "K": stage.k,
        "CAN_VEC": _can_vec(stage.epilogue),
        "ALLOW_TF32": int(allow_tf32),
    }


def stage_views(stage: Stage) -> list[View]:
    """The views a stage's launcher receives, in the order of its `ins` array."""
    if isinstance(stage, EwiseStage):
        return [o.view for o in stage.program.operands]
    if isinstance(stage, GemmStage):
        return [stage.a, stage.b] + [o.view for o in (stage.epilogue.operands if stage.epilogue else [])]
    if isinstance(stage, ConvStage):
        return [stage.x, stage.w] + [o.view for o in (stage.epilogue.operands if stage.epilogue else [])]
    if isinstance(stage, PoolStage):
        return [stage.x] + [o.view for o in (stage.epilogue.operands if stage.epilogue else [])]
    views = [o.view for o in stage.src.operands]
    views += [o.view for o in (stage.epilogue.operands if stage.epilogue else [])]
    if isinstance(stage, ReduceStage):
        views += [o.view for o in (stage.apply.operands if stage.apply else [])]
    if isinstance(stage, NormStage):
        views += [v for v in (stage.weight, stage.bias) if v is not None]
    return views


def _bind(views: list[View], first: int = 0) -> str:
    return "\n".join(
        f"  P.p[{k}] = ins[{first + k}]" + (f" + {v.offset}" if v.offset else "") + ";"
        for k, v in enumerate(views)
    )


def _epi(program: Program | None, base: int) -> str:
    return program_function(program, "epi", base) if program is not None else identity_epilogue("epi")


def _column_apply_pieces(stage: ReduceStage, nsrc: int) -> dict[str, str]:
    """reduce_col.cu's src_v (src with its first operand passed in) and apply; without an apply,
    stand-ins the unused col_apply compiles against."""
    if stage.apply is None:
        return {"SRC_V": identity_epilogue("src_v"), "APPLY": identity_epilogue("apply", second_input=True)}
    nepi = len(stage.epilogue.operands) if stage.epilogue else 0
    return {
        "SRC_V": program_function(stage.src, "src_v", vin_operand=0),
        "APPLY": program_function(stage.apply, "apply", nsrc + nepi, second_input=True),
    }


def _affine(stage: NormStage) -> str:
    if stage.affine == "elem":
        return "  (void)g;\n  return k;"
    if stage.affine == "channel":
        per_sample = stage.channels // stage.channels_per_group
        return f"  return (g % {per_sample}LL) * {stage.channels_per_group}LL + k / {stage.hw}LL;"
    if stage.affine == "group":
        return "  (void)k;\n  return g;"
    return "  (void)g;\n  (void)k;\n  return 0;"


def _conv_dims(stage: ConvStage) -> str:
    """cuDNN's view of the convolution: at least two spatial dimensions (a 1D one is 2D of height
    1), the input, weight and output dimensions, and per spatial dimension padding, stride and
    dilation. A transposed one's input is the gradient cuDNN's backward-data reads."""
    lift = 1 if stage.spatial == 1 else 0

    def dims(shape: list[int]) -> list[int]:
        return shape[:2] + [1] * lift + shape[2:]

    def per_dim(values: list[int], filler: int) -> list[int]:
        return [filler] * lift + values

    x, y = dims(stage.x.shape), dims(stage.out_shape)
    chunk = batch_chunk(x[0], max(math.prod(x[1:]), math.prod(y[1:])))
    arrays = {
        "kXDims": [chunk, *x[1:]],
        "kWDims": dims(stage.w.shape),
        "kYDims": [chunk, *y[1:]],
        "kPad": per_dim(stage.padding, 0),
        "kStride": per_dim(stage.stride, 1),
        "kDilation": per_dim(stage.dilation, 1),
    }
    lines = [
        f"constexpr int {name}[{len(values)}] = {{{', '.join(str(int(v)) for v in values)}}};"
        for name, values in arrays.items()
    ]
    lines += [
        f"constexpr int64_t kBatchChunks = {x[0] // chunk};",
        f"constexpr int64_t kXChunk = {chunk * math.prod(x[1:])};",
        f"constexpr int64_t kYChunk = {chunk * math.prod(y[1:])};",
    ]
    return "\n".join(lines)


# cuDNN's legacy descriptors index with int: level-1 problem 87's output is 2^31 elements.
CUDNN_MAX_ELEMENTS = 2**31 - 1


def batch_chunk(batch: int, per_sample: int) -> int:
    """The most samples of the batch cuDNN is given at once: the largest divisor of the batch whose
    tensors stay within 32-bit indexing (all of it when they fit, as eager's cuDNN path splits too)."""
    return max(
        (d for d in range(1, batch + 1) if batch % d == 0 and d * per_sample <= CUDNN_MAX_ELEMENTS), default=1
    )


def prefixed(stage: Stage, name: str) -> str:
    """A slot's or constant's name in the workspace: S0_BLOCK for BLOCK of stage s0."""
    return f"{stage.name.upper()}_{name}"


def stage_constraints(stage: Stage, *, allow_tf32: bool = False) -> tuple[list[str], dict[str, int]]:
    """The family's constraints and constants under the stage's prefix (S0_BLOCK, S0_R)."""
    family = family_of(stage)
    constants = stage_constants(stage, allow_tf32=allow_tf32)
    rename = {name: prefixed(stage, name) for name in {s.name for s in family.slots} | set(constants)}
    texts = [IDENT.sub(lambda m: rename.get(m.group(0), m.group(0)), c) for c in family.constraints]
    return texts, {prefixed(stage, k): v for k, v in constants.items()}


def render_stage(stage: Stage, values: dict[str, int], *, sm_count: int) -> str:
    """The stage's .cu: the family's template with its slots and generated pieces filled in."""
    family = family_of(stage)
    prefix = stage.name.upper()
    fill: dict[str, str] = {"NS": stage.name, "SLOTS": slot_block(prefix, values), "OUT_T": "float"}
    common: dict[str, int | float] = {"kSmCount": sm_count}
    if isinstance(stage, EwiseStage):
        program = stage.program
        fill.update(
            PROGRAM=program_function(program, "program"),
            NOUT=str(len(program.outputs)),
            BIND_INPUTS=_bind(stage_views(stage)),
        )
        common |= {"kNumel": numel(program.shape)}
    elif isinstance(stage, GemmStage):
        g = gemm_geometry(stage)
        fill.update(EPI=_epi(stage.epilogue, 0), BIND_INPUTS=_bind(stage_views(stage)[2:], 2))
        common |= {
            "kM": stage.m, "kN": stage.n, "kK": stage.k, "kBatch": stage.batch,
            "kTransA": g["TRANS_A"], "kTransB": g["TRANS_B"], "kLda": g["LDA"], "kLdb": g["LDB"],
            "kStrideA": g["STRIDE_A"], "kStrideB": g["STRIDE_B"], "kOffsetA": stage.a.offset,
            "kOffsetB": stage.b.offset, "kNumel": stage.batch * stage.m * stage.n,
            "kEpilogue": int(stage.epilogue is not None),
        }  # fmt: skip
    elif isinstance(stage, PoolStage):
        g = pool_geometry(stage)
        fill.update(EPI=_epi(stage.epilogue, 0), BIND_INPUTS=_bind(stage_views(stage)[1:], 1))
        common |= {f"k{name}": value for name, value in g.items()}
        common |= {
            "kMax": int(stage.op == "max"), "kCountIncludePad": int(stage.count_include_pad),
            "kDivisor": stage.divisor, "kOffsetX": stage.x.offset, "kNumel": numel(stage.out_shape),
            "kEpilogue": int(stage.epilogue is not None),
        }  # fmt: skip
    elif isinstance(stage, ConvStage) and is_depthwise(stage):
        g = dwconv_geometry(stage)
        fill.update(EPI=_epi(stage.epilogue, 0), BIND_INPUTS=_bind(stage_views(stage)[2:], 2))
        common |= {
            "kN": g["N"], "kCIn": g["C_IN"], "kCOut": g["C_OUT"], "kMult": g["MULT"], "kH": g["H"], "kW": g["W"],
            "kOH": g["OH"], "kOW": g["OW"], "kKH": g["KH"], "kKW": g["KW"], "kSH": g["SH"], "kSW": g["SW"],
            "kPH": g["PH"], "kPW": g["PW"], "kDH": g["DH"], "kDW": g["DW"],
            "kOffsetX": stage.x.offset, "kOffsetW": stage.w.offset, "kNumel": numel(stage.out_shape),
            "kEpilogue": int(stage.epilogue is not None),
        }  # fmt: skip
    elif isinstance(stage, ConvStage):
        fill.update(
            EPI=_epi(stage.epilogue, 0),
            BIND_INPUTS=_bind(stage_views(stage)[2:], 2),
            CONV_DIMS=_conv_dims(stage),
        )
        common |= {
            "kNd": max(stage.spatial, 2), "kGroups": stage.groups, "kTransposed": int(stage.transposed),
            "kOffsetX": stage.x.offset, "kOffsetW": stage.w.offset, "kNumel": numel(stage.out_shape),
            "kEpilogue": int(stage.epilogue is not None),
        }  # fmt: skip
    else:
        nsrc = len(stage.src.operands)
        fill.update(
            SRC=program_function(stage.src, "src"),
            EPI=_epi(stage.epilogue, nsrc),
            BIND_INPUTS=_bind(stage_views(stage)),
        )
        if isinstance(stage, ReduceStage):
            fill["OUT_T"] = "int64_t" if stage.out_dtype == "int64" else "float"
            common |= {
                "kOp": REDUCE_OPS[stage.op], "kRows": stage.outer, "kR": stage.r, "kOuter": stage.outer,
                "kInner": stage.inner, "kAtomicOk": int(stage.op in ("sum", "mean") and stage.epilogue is None),
                "kApply": int(stage.apply is not None),
            }  # fmt: skip
            if stage.inner > 1:
                fill.update(_column_apply_pieces(stage, nsrc))
        elif isinstance(stage, SoftmaxStage):
            common |= {"kRows": stage.rows, "kD": stage.d, "kLog": int(stage.log)}
        elif isinstance(stage, ScanStage):
            common |= {
                "kRows": stage.rows, "kD": stage.d, "kProd": int(stage.op == "prod"), "kReverse": int(stage.reverse),
            }  # fmt: skip
        else:
            nepi = len(stage.epilogue.operands) if stage.epilogue else 0
            weight = nsrc + nepi if stage.weight is not None else -1
            bias = nsrc + nepi + (stage.weight is not None) if stage.bias is not None else -1
            fill["AFFINE"] = _affine(stage)
            common |= {
                "kOuter": stage.outer, "kGroups": stage.groups, "kInner": stage.inner,
                "kWeight": weight, "kBias": bias, "kEps": float(stage.eps),
            }  # fmt: skip
    fill["CONSTANTS"] = constants(common)
    text = template_text(family.template)
    for key, value in fill.items():
        text = text.replace("{{" + key + "}}", value)
    header = (
        f"// Stage {stage.name} ({family.name}): {', '.join(stage.ops)}. Generated from skills/templates.\n"
    )
    return header + text
