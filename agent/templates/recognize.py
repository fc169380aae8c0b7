"""Match a traced op graph to the template families: a `Plan` of stages, or `NotCovered`.

The graph is walked once. Elementwise operators join an open elementwise group when they read
its values in its own index space (any DAG, any number of operands, broadcasting by strides);
GEMMs, reductions, softmax and normalizations become stages of their own. Views are exact:
their strides come from the trace, which is valid because every buffer is laid out as the
reference's tensor was (checked). Afterwards `fuse` folds elementwise groups into the stages
next to them (prologues of reductions, epilogues of every producer).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.templates.fuse import fuse
from agent.templates.graph import OpGraph, OpNode, Ref
from agent.templates.indexing import operand_for
from agent.templates.lower import Uncovered, lower_producer
from agent.templates.ops import BINARY, EWISE_SCALARS, UNARY, _names, classify, lit
from agent.templates.plan import (
    MAX_OPERANDS,
    Buffer,
    EwiseStage,
    Instr,
    NotCovered,
    Plan,
    Program,
    Stage,
    View,
    contiguous_strides,
    numel,
)
from agent.templates.values import Bad, Flipped, Lazy, Value

RANDOM_OPS = _names("bernoulli bernoulli_ rand rand_like randn randn_like native_dropout normal_ uniform_")


@dataclass
class Group:
    stage: int
    shape: list[int]
    operands: list[View] = field(default_factory=list)
    instrs: list[Instr] = field(default_factory=list)
    outputs: dict[int, str] = field(default_factory=dict)
    ops: list[str] = field(default_factory=list)


class Builder:
    def __init__(self, graph: OpGraph) -> None:
        self.graph = graph
        self.buffers: dict[str, Buffer] = {}
        self.producer: dict[str, int] = {}
        self.ref_contiguous: dict[str, bool] = {}
        self.stages: list[Stage | None] = []
        self.groups: list[Group] = []
        self.values: dict[tuple[int, int], Value] = {}
        self.ops: list[str] = []
        self.missing: list[str] = []
        self.inputs: dict[int, View | Any] = {}
        for info in graph.inputs:
            if info.kind == "tensor" and info.shape is not None:
                self.inputs[info.index] = self._add_buffer(
                    f"in{info.index}", "input", info.shape, info.dtype or "float32", info.index, -1
                )
            else:
                self.inputs[info.index] = info.value
        self.params: dict[str, View] = {}
        for k, p in enumerate(graph.params):
            self.params[p.name] = self._add_buffer(f"p{k}", "param", p.shape, p.dtype, p.name, -1)

    # -- buffers and values ---------------------------------------------------------------------
    def _add_buffer(
        self, name: str, kind: Any, shape: list[int], dtype: str, source: Any, producer: int
    ) -> View:
        self.buffers[name] = Buffer(name=name, kind=kind, shape=shape, dtype=dtype, source=source)
        self.producer[name] = producer
        self.ref_contiguous[name] = True
        return View(buf=name, shape=shape, stride=contiguous_strides(shape))

    def new_output(self, shape: list[int], dtype: str = "float32") -> View:
        """A buffer the stage about to be appended writes."""
        name = f"t{sum(b.kind == 'temp' for b in self.buffers.values())}"
        return self._add_buffer(name, "temp", shape, dtype, None, len(self.stages))

    def add_stage(self, stage: Stage) -> None:
        self.stages.append(stage)

    def value(self, ref: Ref) -> Any:
        match ref.t:
            case "input":
                return self.inputs[ref.index or 0]
            case "param":
                return self.params[ref.name or ""]
            case "node":
                return self.values.get((ref.id or 0, ref.out), Bad(f"output {ref.out} of %{ref.id}"))
            case "list":
                return [self.value(item) for item in ref.items or []]
            case "constant":
                raise Uncovered("a tensor constant made outside forward that is no parameter or buffer")
            case _:
                return ref.value

    def tensor(self, value: Any, what: str = "operand", *, any_dtype: bool = False) -> View:
        """`value` as a view of a written buffer (an elementwise value is materialized)."""
        if isinstance(value, Lazy):
            return self.materialize(value)
        if isinstance(value, Bad):
            raise Uncovered(f"uses {value.why}, which the library does not produce")
        if not isinstance(value, View):
            raise Uncovered(f"a non-tensor {what} ({value!r})")
        if self.buffers[value.buf].dtype != "float32" and not any_dtype:
            raise Uncovered(f"a {self.buffers[value.buf].dtype} tensor (only float32 is covered)")
        return value

    def materialize(self, lazy: Lazy) -> View:
        group = self.groups[lazy.group]
        name = group.outputs.get(lazy.reg)
        if name is None:
            name = f"t{sum(b.kind == 'temp' for b in self.buffers.values())}"
            self._add_buffer(name, "temp", lazy.shape, "float32", None, group.stage)
            self.ref_contiguous[name] = lazy.contiguous
            group.outputs[lazy.reg] = name
        return View(buf=name, shape=lazy.shape, stride=contiguous_strides(lazy.shape))

    # -- elementwise ----------------------------------------------------------------------------
    def ewise(self, fn: str, args: list[Any], params: dict[str, Any], shape: list[int], op: str) -> Lazy:
        """Add one elementwise instruction; it joins the group of a same-shaped operand when every
        other operand is ready before that group runs."""
        group = self._joinable(args, shape)
        if group is None:
            group = Group(stage=len(self.stages), shape=shape)
            self.groups.append(group)
            self.stages.append(None)
        gi = self.groups.index(group)
        rendered = []
        for arg in args:
            if isinstance(arg, Lazy) and arg.group == gi and arg.shape == shape:
                rendered.append(f"r{arg.reg}")
            elif isinstance(arg, Lazy | View | Bad):
                view = self.tensor(arg)
                if view not in group.operands:
                    group.operands.append(view)
                rendered.append(f"o{group.operands.index(view)}")
            elif isinstance(arg, bool | int | float):
                rendered.append(lit(arg))
            else:
                raise Uncovered(f"{op} with a {type(arg).__name__} argument")
        if len(group.operands) > MAX_OPERANDS:
            raise Uncovered(f"an elementwise chain reading more than {MAX_OPERANDS} tensors")
        group.instrs.append(Instr(fn=fn, args=rendered, params=params))
        group.ops.append(op)
        return Lazy(gi, len(group.instrs) - 1, shape, True)

    def _joinable(self, args: list[Any], shape: list[int]) -> Group | None:
        for arg in args:
            if not (isinstance(arg, Lazy) and arg.shape == shape):
                continue
            group = self.groups[arg.group]
            if all(self._ready_before(other, arg.group, group.stage, shape) for other in args):
                return group
        return None

    def _ready_before(self, value: Any, gi: int, stage: int, shape: list[int]) -> bool:
        if isinstance(value, Lazy):
            if value.group == gi:
                return value.shape == shape
            return self.groups[value.group].stage < stage
        if isinstance(value, View):
            return self.producer[value.buf] < stage
        return True

    # -- the walk -------------------------------------------------------------------------------
    def run(self) -> Plan:
        for node in self.graph.nodes:
            try:
                self.node(node)
            except Uncovered as exc:
                if not exc.ops and not self.missing:
                    raise
                self.missing.extend(op for op in exc.ops if op not in self.missing)
                for k in range(len(node.outputs)):
                    self.values[(node.id, k)] = Bad(f"the result of {node.name}")
        if self.missing:
            raise Uncovered(f"operators not covered: {', '.join(self.missing)}", self.missing)
        outputs = [self._output(self.value(ref)) for ref in self.graph.outputs]
        return self._plan(outputs)

    def node(self, node: OpNode) -> None:
        name, overload = node.name, node.op.split(".")[-1]
        if name in RANDOM_OPS:
            raise Uncovered(f"{name} is random (the task draws numbers in forward)", [name])
        if node.writes is not None and node.args[node.writes].t == "param":
            self.values[(node.id, 0)] = Bad(f"the state update {name}")
            return
        if name in ("empty", "empty_like", "zeros_like"):
            self.values[(node.id, 0)] = Bad(f"an uninitialized {name} tensor")
            return
        kind = classify(name, overload)
        if kind is None:
            raise Uncovered(f"{name}", [name])
        meta = node.outputs[0]
        if meta is None:
            raise Uncovered(f"{name} returns no tensor")
        if kind not in ("view", "identity") and meta.dtype != (
            "int64" if name in ("argmax", "argmin") else "float32"
        ):
            raise Uncovered(f"{name} producing {meta.dtype} (only float32 is covered)")
        if kind == "view":
            self._view(node)
        elif kind == "flip":
            self.values[(node.id, 0)] = self._flip(node)
        elif kind == "identity":
            self._identity(node)
        elif kind == "ewise":
            self.ops.append(name)
            self.values[(node.id, 0)] = self._ewise_node(node)
        else:
            self.ops.append(name)
            for out, value in enumerate(lower_producer(self, node, kind)):
                self.values[(node.id, out)] = value

    def _view(self, node: OpNode) -> None:
        value = self.value(node.args[node.view_of or 0])
        if isinstance(value, Bad):  # a view of what the library does not produce (max_pool1d squeezes
            self.values[(node.id, 0)] = value  # its unused indices): an error only where it is read
            return
        source = self.tensor(value, any_dtype=True)
        if not self.ref_contiguous[source.buf]:
            raise Uncovered("a view of a tensor the reference laid out non-contiguously")
        meta = node.outputs[0]
        assert meta is not None
        self.values[(node.id, 0)] = View(
            buf=source.buf, shape=meta.shape, stride=meta.stride, offset=meta.offset
        )

    def _flip(self, node: OpNode) -> Value:
        """flip(x, dims) over the last dimension: a marker a scan reads backwards (flip, cumsum,
        flip is a reverse cumsum in one pass); a flip of a flip is the value itself."""
        value = self.value(node.args[0])
        raw = self.value(node.args[1]) if len(node.args) > 1 else self.value(node.kwargs["dims"])
        dims = raw if isinstance(raw, list) else [raw]
        if isinstance(value, Flipped):
            assert value.inner is not None
            return value.inner
        if isinstance(value, Bad):
            return value
        x = self.tensor(value)
        if sorted(int(d) % max(len(x.shape), 1) for d in dims) != [len(x.shape) - 1]:
            raise Uncovered(
                f"flip over dimensions {dims} of {x.shape} (only the last, around a scan)", ["flip"]
            )
        return Flipped(inner=x)

    def _identity(self, node: OpNode) -> None:
        dtype = node.kwargs.get("dtype")
        if dtype is not None and dtype.value not in (None, "float32"):
            raise Uncovered(f"a cast to {dtype.value}")
        value = self.value(node.args[0])
        meta = node.outputs[0]
        assert meta is not None
        if isinstance(value, View) and not value.is_full(self.buffers[value.buf]) and node.view_of is None:
            value = self.ewise("copy", [value], {}, meta.shape, node.name)
        self.values[(node.id, 0)] = value

    def _ewise_node(self, node: OpNode) -> Lazy:
        meta = node.outputs[0]
        assert meta is not None
        name = (
            node.name.rstrip("_") if node.name.endswith("_") and not node.name.startswith("_") else node.name
        )
        args = [self.value(a) for a in node.args]
        kw = {k: self.value(v) for k, v in node.kwargs.items()}
        overload = node.op.split(".")[-1]
        kw["_shape"] = meta.shape
        fn, tensors, params = ewise_spec(name, overload, args, kw)
        lazy = self.ewise(fn, tensors, params, meta.shape, name)
        lazy.contiguous = contiguous_strides(meta.shape) == meta.stride or numel(meta.shape) <= 1
        return lazy

    def _output(self, value: Any) -> View:
        view = self.tensor(value, "output", any_dtype=True)
        if self.buffers[view.buf].kind != "temp":
            view = self.materialize(self.ewise("copy", [view], {}, view.shape, "copy"))
        return view

    def _plan(self, outputs: list[View]) -> Plan:
        for gi, group in enumerate(self.groups):
            if not group.outputs:
                continue
            regs = sorted(group.outputs)
            program = Program(
                shape=group.shape,
                operands=[operand_for(v, group.shape) for v in group.operands],
                instrs=group.instrs,
                outputs=regs,
            )
            outs = [group.outputs[r] for r in regs]
            self.stages[group.stage] = EwiseStage(
                name=f"g{gi}", program=program, outs=outs, out=outs[0], ops=group.ops
            )
        plan = Plan(
            task=self.graph.path.rsplit("/", 1)[-1].removesuffix(".py"),
            family="",
            ops=self.ops,
            stages=[s for s in self.stages if s is not None],
            buffers=self.buffers,
            inputs=self.graph.inputs,
            params=self.graph.params,
            outputs=outputs,
            output_is_tuple=self.graph.output_is_tuple,
            notes=list(self.graph.notes),
        )
        return fuse(plan)


def ewise_spec(
    name: str, overload: str, args: list[Any], kw: dict[str, Any]
) -> tuple[str, list[Any], dict[str, Any]]:
    """(library function, tensor-or-scalar arguments, scalar parameters) of one aten call."""
    if name in ("max", "min") and overload == "other":
        return ("maximum" if name == "max" else "minimum"), args[:2], {}
    if name == "pow":
        if overload == "Tensor_Scalar":
            return "pow_scalar", args[:1], {"exponent": args[1]}
        if overload == "Scalar":
            return "scalar_pow", args[1:2], {"base": args[0]}
        return "pow", args[:2], {}
    if name == "rsub":
        return "rsub", args[:2], {"alpha": kw.get("alpha", args[2] if len(args) > 2 else 1)}
    if name in ("add", "sub"):
        alpha = kw.get("alpha", args[2] if len(args) > 2 else 1)
        return name, args[:2], {"alpha": alpha}
    if name == "div":
        return "div", args[:2], {"rounding_mode": kw.get("rounding_mode")}
    if name in BINARY:
        return name, args[:2], {}
    if name in EWISE_SCALARS:
        fn, names, defaults = EWISE_SCALARS[name]
        params = dict(defaults)
        for i, pname in enumerate(names):
            if 1 + i < len(args):
                params[pname] = args[1 + i]
        params.update({k: v for k, v in kw.items() if k in names or k == "approximate"})
        params.pop("_shape", None)
        if any(isinstance(v, View | Lazy) for v in params.values()):
            raise Uncovered(f"{name} with tensor bounds")
        return fn, args[:1], params
    if name in ("triu", "tril"):
        shape = kw.pop("_shape")
        diagonal = args[1] if len(args) > 1 else kw.get("diagonal", 0)
        return name, args[:1], {"diagonal": int(diagonal), "rows": shape[-2], "cols": shape[-1]}
    if name == "selu":
        return "elu", args[:1], {"alpha": 1.6732632423543772, "scale": 1.0507009873554805, "input_scale": 1.0}
    if name in UNARY:
        return name, args[:1], {}
    raise Uncovered(name, [name])


def recognize(graph: OpGraph) -> Plan | NotCovered:
    """The plan for `graph`, or why the library does not cover it."""
    task = graph.path.rsplit("/", 1)[-1].removesuffix(".py")
    try:
        return Builder(graph).run()
    except Uncovered as exc:
        return NotCovered(task=task, reason=str(exc), ops=exc.ops)
