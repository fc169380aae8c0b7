"""Fault classes: each turns one site of a CUDA source's device code into a faulty variant that
still compiles (the class's rewrites keep types valid: a swapped operator between numbers, an
index expression xor 1, a removed barrier statement, an intrinsic of the same signature)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from pydantic import BaseModel

FAULT_CLASSES: tuple[str, ...] = (
    "arithmetic_swap",
    "off_by_one",
    "skipped_tail",
    "wrong_index",
    "removed_sync",
    "reduced_precision",
    "dropped_epilogue",
)


class Mutant(BaseModel):
    """One faulty variant of one source file: where it differs and its full text."""

    fault_class: str
    file: str
    line: int
    before: str
    after: str
    text: str

    @property
    def key(self) -> str:
        return f"{self.fault_class}:{self.file}:{self.line}:{self.after.strip()}"


# A line-level rewrite: (code of the line without its comment, the file's text) -> variants.
Rewrite = Callable[[str, str], Iterator[str]]


def _each_match(
    pattern: re.Pattern[str], code: str, replace: Callable[[re.Match[str]], str]
) -> Iterator[str]:
    for match in pattern.finditer(code):
        yield code[: match.start()] + replace(match) + code[match.end() :]


_ARITH = re.compile(r"(?<=[\w)\]]) ([+\-*/]) (?=[\w(])")
_ARITH_SWAP = {"+": "-", "-": "+", "*": "+", "/": "*"}


def arithmetic_swap(code: str, _text: str) -> Iterator[str]:
    yield from _each_match(_ARITH, code, lambda m: f" {_ARITH_SWAP[m.group(1)]} ")


_LESS = re.compile(r"(?<=[\w)\]]) (<|<=) (?=[\w(])")


def off_by_one(code: str, _text: str) -> Iterator[str]:
    if not re.search(r"\b(if|for|while)\b|\?", code):
        return
    yield from _each_match(_LESS, code, lambda m: " <= " if m.group(1) == "<" else " < ")


_LOOP_BOUND = re.compile(r"(\bfor\s*\([^;]*;\s*)([\w.]+) < ([^;]+);")


def skipped_tail(code: str, _text: str) -> Iterator[str]:
    """The loop stops a warp short of its bound: the tail a kernel handling whole tiles misses."""
    yield from _each_match(_LOOP_BOUND, code, lambda m: f"{m.group(1)}{m.group(2)} + 32 < {m.group(3)};")


_INDEX = re.compile(r"(?<=[\w\]])\[([^\[\]]*\w[^\[\]]*)\]")


def wrong_index(code: str, _text: str) -> Iterator[str]:
    """An index off by xor 1: the neighbouring element (or row, or thread's slot)."""
    if re.match(r"\s*(__shared__|extern|constexpr|static)\b", code):
        return
    yield from _each_match(_INDEX, code, lambda m: f"[({m.group(1)}) ^ 1]")


_SYNC = re.compile(r"\b(__syncthreads|__syncwarp)\s*\([^()]*\)\s*;")


def removed_sync(code: str, _text: str) -> Iterator[str]:
    yield from _each_match(_SYNC, code, lambda _m: ";")


_FAST_MATH = re.compile(r"(?<![\w.])(expf|logf|sinf|cosf|powf|exp2f|log2f|tanf)\(")
_ACCUMULATE = re.compile(r"^(\s*)([A-Za-z_]\w*) \+= ([^;,]+);")


def reduced_precision(code: str, text: str) -> Iterator[str]:
    """A fast-math intrinsic for a libm call, or a float accumulator rounded to half each step."""
    yield from _each_match(_FAST_MATH, code, lambda m: f"__{m.group(1)}(")
    match = _ACCUMULATE.match(code)
    if match and re.search(rf"\bfloat\b[^;{{}}]*\b{match.group(2)}\s*=", text):
        indent, name, term = match.groups()
        rest = code[match.end() :]
        yield f"{indent}{name} = __half2float(__float2half({name} + ({term})));{rest}"


_RELU = re.compile(r"\bfmaxf\(([^,()]+(?:\([^()]*\))?[^,()]*),\s*0(?:\.0*)?f?\)")
_EPILOGUE_TERM = re.compile(
    r" \+ (?:\w*(?:bias|res|beta|shift|skip)\w*(?:\[[^\]]*\]|\.\w+)?|[bo]\[[^\]]*\]|[bo]\.[xyzw])(?=[\s;,)])"
)
_STORE_LAST_TERM = re.compile(r"^(\s*[\w.]+(?:\[[^\]]*\])?(?:\.[xyzw])?\s*=\s*)(.+?) \+ ([^+;()]+);$")


def dropped_epilogue(code: str, _text: str) -> Iterator[str]:
    """The end of a fused op left out: ReLU's max, a bias or residual term, a store's last term."""
    yield from _each_match(_RELU, code, lambda m: f"({m.group(1)})")
    yield from _each_match(_EPILOGUE_TERM, code, lambda _m: "")
    match = _STORE_LAST_TERM.match(code)
    if match and ("[" in match.group(1) or "." in match.group(1)):
        yield f"{match.group(1)}{match.group(2)};"


REWRITES: dict[str, Rewrite] = {
    "arithmetic_swap": arithmetic_swap,
    "off_by_one": off_by_one,
    "skipped_tail": skipped_tail,
    "wrong_index": wrong_index,
    "removed_sync": removed_sync,
    "reduced_precision": reduced_precision,
    "dropped_epilogue": dropped_epilogue,
}
# What a class's mutants need at the top of the file to compile.
HEADERS: dict[str, str] = {"reduced_precision": "#include <cuda_fp16.h>\n"}
