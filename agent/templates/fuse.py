"""Fold elementwise groups into the stages around them, so a chain costs one pass over memory.

- prologue: a group whose only output only feeds a reduction, softmax, scan or norm is computed
  inside that stage's loads (MSE: sub, pow, then mean reads both inputs once);
- epilogue: a group that is the only reader of a producer's output, in its index space, is
  applied where the producer writes (GEMM and convolution: one in-place pass after cuBLAS or
  cuDNN; the others: in their store loop);
- column apply: a group that reads a column reduction's result back over the reduced space
  (RMSNorm over channels: x / rms) is computed by the reduction from the column it holds.
"""

from __future__ import annotations

from collections import Counter

from agent.templates.families import is_depthwise, is_direct_gemm
from agent.templates.indexing import operand_for
from agent.templates.plan import (
    MAX_OPERANDS,
    ConvStage,
    EwiseStage,
    GemmStage,
    NormStage,
    Operand,
    Plan,
    PoolStage,
    Program,
    ReduceStage,
    ScanStage,
    SoftmaxStage,
    Stage,
    View,
    numel,
)

Producer = GemmStage | ConvStage | ReduceStage | SoftmaxStage | ScanStage | NormStage | PoolStage
SrcReader = ReduceStage | SoftmaxStage | ScanStage | NormStage  # read their input through `src`
FAMILIES = {
    "ewise": "elementwise",
    "gemm": "gemm",
    "conv": "convolution",
    "reduce": "reduction",
    "softmax": "softmax",
    "scan": "scan",
    "norm": "normalization",
    "pool": "pooling",
}


def stage_views(stage: Stage) -> list[View]:
    """Every view a stage reads."""
    programs: list[Program | None]
    if isinstance(stage, EwiseStage):
        programs = [stage.program]
    elif isinstance(stage, GemmStage | ConvStage | PoolStage):
        programs = [stage.epilogue]
    else:
        programs = [stage.src, stage.epilogue]
        if isinstance(stage, ReduceStage):
            programs.append(stage.apply)
    views = [o.view for p in programs if p is not None for o in p.operands]
    if isinstance(stage, GemmStage):
        views += [stage.a, stage.b]
    if isinstance(stage, ConvStage):
        views += [stage.x, stage.w]
    if isinstance(stage, PoolStage):
        views += [stage.x]
    if isinstance(stage, NormStage):
        views += [v for v in (stage.weight, stage.bias) if v is not None]
    return views


def _pointers(stage: Stage) -> int:
    """Operand pointers the stage's kernels receive (tk::Ptrs holds MAX_OPERANDS)."""
    own = 2 if isinstance(stage, GemmStage | ConvStage) else 1 if isinstance(stage, PoolStage) else 0
    return len(stage_views(stage)) - own


def _uses(plan: Plan) -> Counter[str]:
    uses: Counter[str] = Counter(v.buf for s in plan.stages for v in stage_views(s))
    uses.update(v.buf for v in plan.outputs)
    return uses


def _producers(plan: Plan) -> dict[str, int]:
    where: dict[str, int] = {}
    for i, stage in enumerate(plan.stages):
        for out in stage.outs if isinstance(stage, EwiseStage) else [stage.out]:
            where[out] = i
    return where


def _prologue(plan: Plan) -> bool:
    uses, where = _uses(plan), _producers(plan)
    for stage in plan.stages:
        if not isinstance(stage, SrcReader) or stage.src.fns != ["copy"]:
            continue
        view = stage.src.operands[0].view
        source = plan.stages[where[view.buf]] if view.buf in where else None
        if (
            isinstance(source, EwiseStage)
            and source.outs == [view.buf]
            and uses[view.buf] == 1
            and view.is_full(plan.buffers[view.buf])
            and source.program.shape == view.shape
            and _pointers(stage) - 1 + len(source.program.operands) <= MAX_OPERANDS
        ):
            stage.src = source.program
            stage.ops = source.ops + stage.ops
            plan.stages.remove(source)
            del plan.buffers[view.buf]
            return True
    return False


def _epilogue(plan: Plan) -> bool:
    uses, where = _uses(plan), _producers(plan)
    for pi, stage in enumerate(plan.stages):
        if not isinstance(stage, Producer) or stage.epilogue is not None:
            continue
        out = plan.buffers[stage.out]
        if out.dtype != "float32":
            continue
        readers = [s for s in plan.stages if any(v.buf == out.name for v in stage_views(s))]
        if len(readers) != 1 or not isinstance(readers[0], EwiseStage):
            continue
        group = readers[0]
        program = group.program
        mine = [o for o in program.operands if o.view.buf == out.name]
        others = [o for o in program.operands if o.view.buf != out.name]
        if (
            len(group.outs) != 1
            or program.shape != out.shape
            or uses[out.name] != len(mine)
            or any(o.kind != "same" or not o.view.is_full(out) for o in mine)
            or any(where.get(o.view.buf, -1) >= pi for o in others)
            or _pointers(stage) + len(others) > MAX_OPERANDS
        ):
            continue
        stage.epilogue = _take_input(program, out.name)
        _absorb(plan, stage, group, out.name)
        return True
    return False


def _absorb(plan: Plan, stage: Producer, group: EwiseStage, buf: str) -> None:
    """`group`, now computed by `stage`, leaves the plan with `buf`, the buffer between them."""
    stage.out = group.outs[0]
    stage.ops = stage.ops + group.ops
    plan.stages.remove(group)
    del plan.buffers[buf]


def _inline(plan: Plan) -> bool:
    """An elementwise group whose only output only feeds a later group of the same space is
    computed inside that group."""
    uses = _uses(plan)
    for stage in plan.stages:
        if not isinstance(stage, EwiseStage) or len(stage.outs) != 1:
            continue
        out = plan.buffers[stage.outs[0]]
        readers = [s for s in plan.stages if any(v.buf == out.name for v in stage_views(s))]
        if len(readers) != 1 or not isinstance(readers[0], EwiseStage) or readers[0] is stage:
            continue
        reader = readers[0]
        mine = [o for o in reader.program.operands if o.view.buf == out.name]
        if (
            reader.program.shape != out.shape
            or uses[out.name] != len(mine)
            or any(o.kind != "same" or not o.view.is_full(out) for o in mine)
            or len(stage.program.operands) + len(reader.program.operands) > MAX_OPERANDS
        ):
            continue
        reader.program = _splice(stage.program, reader.program, out.name)
        reader.ops = stage.ops + reader.ops
        plan.stages.remove(stage)
        del plan.buffers[out.name]
        return True
    return False


def _splice(first: Program, second: Program, buf: str) -> Program:
    """`second` with its reads of `buf` replaced by `first`'s output, computed in front of it."""
    operands = list(first.operands)
    rename: dict[str, str] = {}
    for k, operand in enumerate(second.operands):
        if operand.view.buf == buf:
            rename[f"o{k}"] = f"r{first.outputs[0]}"
            continue
        if operand not in operands:
            operands.append(operand)
        rename[f"o{k}"] = f"o{operands.index(operand)}"
    shift = len(first.instrs)
    for k in range(len(second.instrs)):
        rename[f"r{k}"] = f"r{k + shift}"
    instrs = list(first.instrs) + [
        i.model_copy(update={"args": [rename.get(a, a) for a in i.args]}) for i in second.instrs
    ]
    outputs = [o + shift for o in second.outputs]
    return second.model_copy(update={"operands": operands, "instrs": instrs, "outputs": outputs})


# A column-apply thread holds its columns' R * VEC values in registers (reduce_col.cu, col_apply).
COLUMN_APPLY_MAX_R = 64


def _column_apply(plan: Plan) -> bool:
    uses, where = _uses(plan), _producers(plan)
    for pi, stage in enumerate(plan.stages):
        if (
            not isinstance(stage, ReduceStage)
            or stage.apply is not None
            or stage.inner == 1
            or stage.r > COLUMN_APPLY_MAX_R
            or stage.op in ("argmax", "argmin")
            or not stage.src.operands
            or stage.src.operands[0].kind != "same"
            or stage.src.operands.count(stage.src.operands[0]) != 1
        ):
            continue
        x = stage.src.operands[0]
        readers = [s for s in plan.stages if any(v.buf == stage.out for v in stage_views(s))]
        if len(readers) != 1 or not isinstance(readers[0], EwiseStage):
            continue
        group = readers[0]
        program = group.program
        out = plan.buffers[stage.out]
        # out[o, j] read at every r of its column: the reduction's result broadcast over r.
        column = View(buf=out.name, shape=[stage.outer, 1, stage.inner], stride=[stage.inner, stage.inner, 1])
        broadcast = operand_for(column, [stage.outer, stage.r, stage.inner])
        mine = [o for o in program.operands if o.view.buf == out.name]
        others = [o for o in program.operands if o.view.buf != out.name and o != x]
        if (
            len(group.outs) != 1
            or program.shape != stage.src.shape
            or uses[out.name] != len(mine)
            or any(o.kind != broadcast.kind or o.terms != broadcast.terms or o.view.offset for o in mine)
            or any(o.view.buf == x.view.buf and o != x for o in program.operands)
            or any(where.get(o.view.buf, -1) >= pi for o in others)
            or _pointers(stage) + len(others) > MAX_OPERANDS
        ):
            continue
        stage.apply = _take_input(_take_input(program, out.name, "w"), x.view, "v")
        _absorb(plan, stage, group, out.name)
        return True
    return False


def _take_input(program: Program, source: str | View, value: str = "v") -> Program:
    """`program` with every operand reading `source` (a buffer, or exactly one view of it) replaced
    by the incoming value `value` (v, or w: a column apply's second)."""
    kept: list[Operand] = []
    rename: dict[str, str] = {}
    for k, operand in enumerate(program.operands):
        if operand.view.buf == source if isinstance(source, str) else operand.view == source:
            rename[f"o{k}"] = value
        else:
            rename[f"o{k}"] = f"o{len(kept)}"
            kept.append(operand)
    instrs = [i.model_copy(update={"args": [rename.get(a, a) for a in i.args]}) for i in program.instrs]
    return program.model_copy(update={"operands": kept, "instrs": instrs})


def _weight(stage: Stage) -> int:
    if isinstance(stage, EwiseStage):
        return numel(stage.program.shape)
    if isinstance(stage, GemmStage | ConvStage):
        return 1 << 62
    if isinstance(stage, PoolStage):
        return numel(stage.x.shape)
    return numel(stage.src.shape)


def fuse(plan: Plan) -> Plan:
    while _inline(plan) or _prologue(plan) or _epilogue(plan) or _column_apply(plan):
        pass
    for i, stage in enumerate(plan.stages):
        stage.name = f"s{i}"
        stage.ops = list(dict.fromkeys(stage.ops))
    primary = max(plan.stages, key=_weight)
    if is_depthwise(primary):
        plan.family = "depthwise convolution"
    elif is_direct_gemm(primary):
        plan.family = "short-K gemm"
    else:
        plan.family = FAMILIES[primary.kind]
    return plan
