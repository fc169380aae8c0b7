"""CUDA for the pieces a template leaves open: a `Program` becomes one device function that
computes V consecutive elements (V = 1 is the scalar path, the tail and every non-vector
template; V = 2 or 4 reads vectorizable operands with one float2/float4 load each)."""

from __future__ import annotations

from agent.templates.indexing import index_expr
from agent.templates.ops import BINARY, UNARY, lit
from agent.templates.plan import Instr, Program, numel


def _arg(a: str, lane: str) -> str:
    if a.startswith("r") and a[1:].isdigit():
        return a
    if a.startswith("o") and a[1:].isdigit():
        return f"a{a[1:]}[{lane}]"
    if a == "v":
        return f"vin[{lane}]"
    if a == "w":
        return f"win[{lane}]"
    return a


def _expr(instr: Instr, lane: str) -> str:
    args = [_arg(a, lane) for a in instr.args]
    params = instr.params
    if instr.fn in UNARY:
        return UNARY[instr.fn](args[0], params)
    if instr.fn in BINARY:
        return BINARY[instr.fn](args[0], args[1], params)
    raise ValueError(f"no CUDA for elementwise function {instr.fn!r}")


def program_function(
    program: Program, name: str, base: int = 0, *, second_input: bool = False, vin_operand: int | None = None
) -> str:
    """`template <int V> void name(const tk::Ptrs& P, int64_t i0, const float* vin, float (*out)[V])`:
    the outputs of elements i0 .. i0+V-1 (i0 a multiple of V when V > 1). Operand k is
    P.p[base + k], already offset to its view's start, except operand `vin_operand`, whose values
    the caller already holds and passes as vin. `second_input` adds `const float* win` after vin,
    what the argument w reads (a column apply's reduced value)."""
    total = numel(program.shape)
    win = ", const float* win" if second_input else ""
    lines = [
        "template <int V>",
        f"__device__ __forceinline__ void {name}(const tk::Ptrs& P, int64_t i0, const float* vin{win}, float (*out)[V]) {{",
    ]
    if vin_operand is None and not any("v" in i.args for i in program.instrs):
        lines.append("  (void)vin;")
    if second_input and not any("w" in i.args for i in program.instrs):
        lines.append("  (void)win;")
    for k, operand in enumerate(program.operands):
        ptr = f"P.p[{base + k}]"
        lines.append(f"  float a{k}[V];")
        if k == vin_operand:
            lines.append(f"  for (int l = 0; l < V; ++l) a{k}[l] = vin[l];")
        elif operand.kind == "scalar":
            lines.append(f"  {{ const float s = __ldg({ptr}); for (int l = 0; l < V; ++l) a{k}[l] = s; }}")
        elif operand.vectorizable(4):
            # Vectorizable for every width the template may pick (1, 2, 4): one aligned load.
            lines.append(f"  tk::load_vec<V>(a{k}, {ptr} + ({index_expr(operand, 'i0', total)}));")
        else:
            lines.append("#pragma unroll")
            lines.append("  for (int l = 0; l < V; ++l) {")
            lines.append("    const int64_t idx = i0 + l;")
            lines.append(f"    a{k}[l] = __ldg({ptr} + ({index_expr(operand, 'idx', total)}));")
            lines.append("  }")
    lines.append("#pragma unroll")
    lines.append("  for (int l = 0; l < V; ++l) {")
    lines.append("    const int64_t idx = i0 + l;")
    lines.append("    (void)idx;")
    for r, instr in enumerate(program.instrs):
        lines.append(f"    const float r{r} = {_expr(instr, 'l')};")
    for j, reg in enumerate(program.outputs):
        lines.append(f"    out[{j}][l] = r{reg};")
    lines += ["  }", "}"]
    return "\n".join(lines)


def identity_epilogue(name: str, *, second_input: bool = False) -> str:
    """The epilogue of a stage that has none: out = v (`second_input`: the signature of a column
    apply's, win unused)."""
    win = ", const float* win" if second_input else ""
    return "\n".join(
        [
            "template <int V>",
            f"__device__ __forceinline__ void {name}(const tk::Ptrs& P, int64_t i0, const float* vin{win}, float (*out)[V]) {{",
            "  (void)P;",
            "  (void)i0;",
            *(["  (void)win;"] if second_input else []),
            "  for (int l = 0; l < V; ++l) out[0][l] = vin[l];",
            "}",
        ]
    )


def constants(values: dict[str, int | float]) -> str:
    """constexpr declarations of a stage's sizes (the task's shapes are fixed; the binding checks)."""
    out = []
    for key, value in values.items():
        if isinstance(value, float):
            out.append(f"[[maybe_unused]] constexpr float {key} = {lit(value)};")
        else:
            out.append(f"[[maybe_unused]] constexpr int64_t {key} = {int(value)}LL;")
    return "\n".join(out)


def slot_block(prefix: str, values: dict[str, int]) -> str:
    """The stage's slots: `#ifndef S0_BLOCK / #define S0_BLOCK 256 / #endif` (tune_config.h, read
    first, wins), then the short names the template uses."""
    lines = []
    for key, value in values.items():
        full = f"{prefix}_{key}"
        lines += [f"#ifndef {full}", f"#define {full} {int(value)}", "#endif"]
    lines += [f"#define {key} {prefix}_{key}" for key in values]
    return "\n".join(lines)
