"""Partition a traced op graph into fusible regions.

Regions are contiguous runs of the trace (its order is a topological order, so regions never form
a cycle and run one after another). Rules, node by node:

- views and layout copies (clone, contiguous) join the next region that starts or grows (a region boundary then passes the base tensor,
  not a strided view of it); views at the end join the last region;
- an elementwise operator joins the open region when it reads a tensor that region produced
  (a GEMM/conv/norm/reduction/softmax epilogue, or a longer chain) or reads only parameters and
  constants (a mask made from a buffer); otherwise it starts a chain;
- a reduction joins an open elementwise chain it reads (its prologue);
- softmax joins an open region holding one GEMM it reads (scores), and a GEMM that reads such a
  region's softmax closes it as attention (matmul-softmax-matmul);
- GEMMs, convolutions, norms and pooling start a region; anything else is a region of its own.

Every node belongs to exactly one region.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from agent.regions.cost import H200, Rates, nbytes, node_eager_s, node_flops, op_class, ref_meta, tensor_refs
from agent.templates.graph import OpGraph, OpNode, Ref, TensorMeta

_CHAIN = frozenset({"ewise", "identity"})


class RegionValue(BaseModel):
    """A tensor crossing a region's boundary: what it is in the whole graph, and its layout."""

    ref: Ref
    meta: TensorMeta

    @property
    def key(self) -> tuple[str, int | str | None, int]:
        return _key(self.ref)


class Region(BaseModel):
    index: int
    kind: str = Field(
        description="attention, gemm, conv, norm, softmax, reduction, pool, elementwise, view or an op"
    )
    nodes: list[int]
    ops: list[str]
    inputs: list[RegionValue] = Field(
        description="tensors read from outside: model inputs, other regions' outputs, constants"
    )
    params: list[str] = Field(description="the model's parameters and buffers the region reads")
    outputs: list[RegionValue] = Field(description="tensors used after the region or returned by the model")
    flops: float
    bytes: int = Field(description="fused: external inputs and parameters read once, outputs written once")
    floor_s: float
    eager_s: float = Field(
        description="estimate: each operator alone at its floor plus a launch, at least the floor"
    )

    @property
    def label(self) -> str:
        shown = [op for op in dict.fromkeys(self.ops) if op not in _VIEW_NAMES][:4]
        return f"r{self.index:02d} {self.kind}: " + ("+".join(shown) or "views")


_VIEW_NAMES = frozenset(
    {
        "view",
        "_unsafe_view",
        "t",
        "transpose",
        "permute",
        "expand",
        "unsqueeze",
        "squeeze",
        "slice",
        "select",
        "alias",
        "split",
        "split_with_sizes",
        "unbind",
    }
)


def _key(ref: Ref) -> tuple[str, int | str | None, int]:
    match ref.t:
        case "node":
            return ("node", ref.id, ref.out)
        case "input":
            return ("input", ref.index, 0)
        case "param":
            return ("param", ref.name, 0)
    return ("constant", f"{ref.shape}:{ref.dtype}", 0)


class _Open:
    def __init__(self, start_class: str) -> None:
        self.nodes: list[OpNode] = []
        self.ids: set[int] = set()
        self.classes: list[str] = []
        self.start = start_class

    def add(self, nodes: list[OpNode], cls: str = "view") -> None:
        self.nodes.extend(nodes)
        self.ids.update(n.id for n in nodes)
        self.classes.extend(cls for _ in nodes)

    def reads_from_me(self, node: OpNode, pending: list[OpNode]) -> bool:
        """Whether the node reads a tensor this region made, directly or through pending views."""
        mine = set(self.ids)
        for view in pending:
            if any(r.t == "node" and r.id in mine for r in tensor_refs(view)):
                mine.add(view.id)
        return any(r.t == "node" and r.id in mine for r in tensor_refs(node))

    @staticmethod
    def reads_only_state(node: OpNode, pending: list[OpNode]) -> bool:
        """Whether the node reads only parameters and constants, directly or through pending views
        (a causal mask made from a buffer): it can run in whichever region is open."""
        state: set[int] = set()
        for view in pending:
            if all(
                r.t in ("param", "constant") or (r.t == "node" and r.id in state) for r in tensor_refs(view)
            ):
                state.add(view.id)
        refs = tensor_refs(node)
        return bool(refs) and all(
            r.t in ("param", "constant") or (r.t == "node" and r.id in state) for r in refs
        )

    def count(self, cls: str) -> int:
        return self.classes.count(cls)


def _joins(current: _Open | None, node: OpNode, cls: str, pending: list[OpNode]) -> bool:
    if current is None:
        return False
    if cls in _CHAIN and current.start != "other" and current.reads_only_state(node, pending):
        return True
    if not current.reads_from_me(node, pending):
        return False
    if cls in _CHAIN:
        return current.start != "other"
    if cls == "reduce":
        return current.start in _CHAIN
    if cls == "softmax":
        return current.count("gemm") == 1 and current.count("softmax") == 0
    if cls == "gemm":
        return current.count("gemm") == 1 and current.count("softmax") == 1
    return False


def _auxiliary(graph: OpGraph, node: OpNode) -> bool:
    """A scalar or empty side product that reads only parameters (BatchNorm's batch counter,
    its empty reserve): it rides with the next region instead of making one of its own."""
    if any(r.t not in ("param", "constant") for r in tensor_refs(node)):
        return False
    return all(o is None or o.numel <= 1 for o in node.outputs)


def partition(graph: OpGraph, rates: Rates = H200) -> list[Region]:
    groups: list[_Open] = []
    pending: list[OpNode] = []
    current: _Open | None = None
    for node in graph.nodes:
        cls = op_class(node)
        if cls in ("view", "identity") or _auxiliary(graph, node):
            pending.append(node)
            continue
        if not _joins(current, node, cls, pending) or current is None:
            current = _Open(cls)
            groups.append(current)
        current.add(pending)
        pending = []
        current.add([node], cls)
    if pending:
        if current is None:
            current = _Open("view")
            groups.append(current)
        current.add(pending)
    readers: dict[tuple, set[int]] = {}
    for node in graph.nodes:
        for ref in tensor_refs(node):
            if ref.t == "node":
                readers.setdefault(_key(ref), set()).add(node.id)
    returned = {_key(ref) for ref in graph.outputs if ref.t == "node"}
    return [_region(graph, i, g, rates, readers, returned) for i, g in enumerate(groups)]


def _kind(group: _Open) -> str:
    classes = set(group.classes)
    if group.count("gemm") == 2 and "softmax" in classes:
        return "attention"
    for cls, name in (
        ("conv", "conv"),
        ("gemm", "gemm"),
        ("norm", "norm"),
        ("pool", "pool"),
        ("softmax", "softmax"),
        ("reduce", "reduction"),
        ("scan", "scan"),
    ):
        if cls in classes:
            return name
    if "ewise" in classes or "identity" in classes:
        return "elementwise"
    if classes <= {"view"}:
        return "view"
    return next(n.name for n, c in zip(group.nodes, group.classes, strict=True) if c != "view")


def _region(
    graph: OpGraph,
    index: int,
    group: _Open,
    rates: Rates,
    readers: dict[tuple, set[int]],
    returned: set[tuple],
) -> Region:
    ids = group.ids
    inputs: dict[tuple, RegionValue] = {}
    params: list[str] = []
    for node in group.nodes:
        for ref in tensor_refs(node):
            if ref.t == "param":
                if ref.name not in params:
                    params.append(ref.name or "")
            elif not (ref.t == "node" and ref.id in ids):
                meta = ref_meta(graph, ref)
                if meta is not None and _key(ref) not in inputs:
                    inputs[_key(ref)] = RegionValue(ref=ref, meta=meta)
    outputs = []
    for node in group.nodes:
        for k, meta in enumerate(node.outputs):
            key = ("node", node.id, k)
            if meta is not None and (key in returned or readers.get(key, set()) - ids):
                outputs.append(RegionValue(ref=Ref(t="node", id=node.id, out=k), meta=meta))
    flops = sum(node_flops(graph, n) for n in group.nodes)
    moved = sum(nbytes(v.meta) for v in inputs.values()) + sum(nbytes(graph.param(p)) for p in params)
    # A view handed on is written by nobody: only outputs that are new tensors cost bytes.
    moved += sum(nbytes(v.meta) for v in outputs if op_class(graph.nodes[v.ref.id or 0]) != "view")
    dtype = outputs[0].meta.dtype if outputs else "float32"
    floor = rates.floor_s(flops, moved, dtype)
    return Region(
        index=index,
        kind=_kind(group),
        nodes=[n.id for n in group.nodes],
        ops=[n.name for n in group.nodes],
        inputs=list(inputs.values()),
        params=params,
        outputs=outputs,
        flops=flops,
        bytes=moved,
        floor_s=floor,
        # Run alone, the operators can read less than the region's boundary suggests (a slice of
        # an input), but never beat the fused floor.
        eager_s=max(sum(node_eager_s(graph, n, rates) for n in group.nodes), floor),
    )
