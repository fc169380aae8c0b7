"""What the recognizer knows about each traced value while it walks the graph: a view of a buffer, a
value an open elementwise group has not written yet, or a reason it cannot be covered. Its own
module so that `lower` (the producers) and `recognize` (the walk) share it without a cycle."""

from __future__ import annotations

from dataclasses import dataclass

from agent.templates.plan import View


@dataclass
class Lazy:
    """A value an open elementwise group computes but has not written anywhere yet."""

    group: int
    reg: int
    shape: list[int]
    contiguous: bool


@dataclass
class Bad:
    why: str


@dataclass
class Flipped(Bad):
    """`inner` flipped along its last dimension. Only a scan along that dimension reads it (as a
    reverse scan, whose result is flipped again), and a second flip undoes it; anything else that
    reads it is not covered."""

    why: str = "a flipped tensor (flip: read only by a scan)"
    inner: View | None = None


Value = View | Lazy | Bad
