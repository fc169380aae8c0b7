"""How a strided view is read in an index space: broadcasting by strides, then coalescing the
dimensions it walks contiguously, so most operands cost one multiply-add per element."""

from __future__ import annotations

from agent.templates.plan import Operand, Term, View, contiguous_strides


class IndexError_(ValueError):
    """The view does not broadcast to the space."""


def broadcast_strides(view: View, shape: list[int]) -> list[int]:
    """The view's stride for every dimension of `shape` (0 where it broadcasts)."""
    pad = len(shape) - len(view.shape)
    if pad < 0:
        raise IndexError_(f"a {view.shape} tensor cannot be read in a {shape} space")
    strides = []
    for d, size in enumerate(shape):
        own = view.shape[d - pad] if d >= pad else 1
        if own == size and size != 1:
            strides.append(view.stride[d - pad])
        elif own == 1 or size == 1:
            strides.append(0)
        else:
            raise IndexError_(f"a {view.shape} tensor cannot be read in a {shape} space")
    return strides


def operand_for(view: View, shape: list[int]) -> Operand:
    strides = broadcast_strides(view, shape)
    wanted = contiguous_strides(shape)
    if all(s == w for s, w, n in zip(strides, wanted, shape, strict=True) if n != 1):
        return Operand(view=view, kind="same")
    if all(s == 0 for s in strides):
        return Operand(view=view, kind="scalar")
    # Innermost first: extend the current term while the next dimension continues its walk.
    terms: list[Term] = []
    inner = 1
    for size, stride in zip(reversed(shape), reversed(strides), strict=True):
        if size == 1:
            continue
        last = terms[-1] if terms else None
        if last is not None and stride == last.stride * last.size:
            last.size *= size
        else:
            terms.append(Term(inner=inner, size=size, stride=stride))
        inner *= size
    kept = [t for t in reversed(terms) if t.stride != 0]
    return Operand(view=view, kind="general", terms=kept)


def index_expr(operand: Operand, i: str, total: int) -> str:
    """The element offset (from the view's start) that index `i` (below `total`) reads, as a
    CUDA expression."""
    if operand.kind == "same":
        return i
    if operand.kind == "scalar":
        return "0"
    parts = []
    for term in operand.terms:
        div = i if term.inner == 1 else f"({i} / {term.inner}LL)"
        # The outermost term needs no modulo: i never reaches the space's size.
        coord = div if term.inner * term.size >= total else f"({div} % {term.size}LL)"
        parts.append(coord if term.stride == 1 else f"{coord} * {term.stride}LL")
    return " + ".join(parts) if parts else "0"
