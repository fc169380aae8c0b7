"""A region as a standalone KernelBench-style task file: its own `Model` (the region's aten
operators, the model's parameters it reads as parameters of the same shapes), `get_inputs` (its
boundary tensors with the model's shapes, dtypes and strides) and `get_init_inputs` (none).

The file needs torch alone, so `agent.tasks.load_task`, every policy, the referee and the tuner
take it as they take any task. `region_class_source` gives the same class under another name for
the composed model (compose.py).
"""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import BaseModel

from agent.regions.partition import Region
from agent.templates.graph import OpGraph, Ref, TensorMeta

_DTYPES = frozenset(
    {
        "float64",
        "float32",
        "float16",
        "bfloat16",
        "int64",
        "int32",
        "int16",
        "int8",
        "uint8",
        "bool",
        "complex64",
    }
)

HELPERS = """
def _pick(value, index):
    return value[index] if isinstance(value, (list, tuple)) else value


def _strided(tensor, shape, stride, offset):
    return tensor.as_strided(shape, stride, offset)


def _make(shape, stride, offset, dtype, kind="input"):
    span = offset + 1 + sum((s - 1) * st for s, st in zip(shape, stride)) if all(shape) else 0
    if dtype == torch.bool:
        base = torch.rand(span) > 0.5
    elif dtype.is_floating_point:
        if kind == "running_var":
            base = torch.rand(span, dtype=dtype) + 0.5
        elif kind == "running_mean":
            base = torch.zeros(span, dtype=dtype)
        else:
            base = torch.randn(span, dtype=dtype)
    else:
        base = torch.randint(0, 2 if kind == "input" else 1, (span,), dtype=dtype)
    return base.as_strided(shape, stride, offset)
"""


class RegionTask(BaseModel):
    region: int
    path: Path
    param_names: dict[str, str] = {}  # the model's parameter name -> the region Model's attribute


def param_attr(name: str) -> str:
    return "p_" + name.replace(".", "_")


def _contiguous(meta: TensorMeta) -> bool:
    expected, acc = [], 1
    for size in reversed(meta.shape):
        expected.append(acc)
        acc *= max(size, 1)
    return all(
        s == 1 or st == e for s, st, e in zip(meta.shape, meta.stride, reversed(expected), strict=False)
    )


def _make_expr(meta: TensorMeta, kind: str = "input") -> str:
    return f"_make({meta.shape}, {meta.stride}, {meta.offset}, torch.{meta.dtype}, {kind!r})"


def _literal(value: object, kwarg: str | None) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "float('-inf')"
    if isinstance(value, str):
        if kwarg == "device":
            return "_device"
        if kwarg in ("dtype", "layout", "memory_format") or value.startswith("torch."):
            name = value.removeprefix("torch.")
            return f"torch.{name}" if name.isidentifier() else repr(value)
        if value in _DTYPES:
            return f"torch.{value}"
    return repr(value)


class _Writer:
    def __init__(self, graph: OpGraph, region: Region) -> None:
        self.graph = graph
        self.region = region
        self.names: dict[tuple, str] = {v.key: f"a{i}" for i, v in enumerate(region.inputs)}

    def expr(self, ref: Ref, kwarg: str | None = None) -> str:
        match ref.t:
            case "list":
                return "[" + ", ".join(self.expr(item) for item in ref.items or []) + "]"
            case "param":
                return f"self.{param_attr(ref.name or '')}"
            case "const":
                return _literal(ref.value, kwarg)
        from agent.regions.partition import _key

        key = _key(ref)
        if key in self.names:
            return self.names[key]
        if ref.t == "node":
            return f"_pick(v{ref.id}, {ref.out})"
        raise ValueError(f"region {self.region.index}: {ref.describe()} is read but never bound")

    def forward_lines(self) -> list[str]:
        lines = []
        for node_id in self.region.nodes:
            node = self.graph.nodes[node_id]  # a node's id is its position in the trace
            ns, name, *rest = node.op.split(".")
            overload = rest[0] if rest else "default"
            args = [self.expr(a) for a in node.args]
            args += [f"{k}={self.expr(v, k)}" for k, v in node.kwargs.items()]
            lines.append(f"v{node.id} = torch.ops.{ns}.{name}.{overload}({', '.join(args)})")
        outs = [self.expr(v.ref) for v in self.region.outputs]
        if len(outs) == 1:
            lines.append(f"return {outs[0]}")
        else:
            lines.append(f"return ({', '.join(outs)}{',' if outs else ''})")
        return lines


def region_class_source(graph: OpGraph, region: Region, class_name: str = "Model") -> str:
    writer = _Writer(graph, region)
    init = ["super().__init__()"]
    for name in region.params:
        meta = graph.param(name)
        kind = name.rsplit(".", 1)[-1]
        if meta.kind == "parameter":
            init.append(
                f"self.{param_attr(name)} = nn.Parameter({_make_expr(meta, 'param')}.contiguous(),"
                f" requires_grad={meta.dtype not in _INT_DTYPES})"
            )
        else:
            init.append(f"self.register_buffer({param_attr(name)!r}, {_make_expr(meta, kind)}.contiguous())")
    args = ", ".join(["self", *writer.names.values()])
    body = [
        f"class {class_name}(nn.Module):",
        f'    """Region {region.index} ({region.kind}) of the model: {len(region.nodes)} operators."""',
        "",
        "    def __init__(self):",
    ]
    body += [f"        {line}" for line in init]
    body += ["", f"    def forward({args}):", "        _device = " + _device_expr(writer, region)]
    body += [f"        {line}" for line in writer.forward_lines()]
    return "\n".join(body) + "\n"


_INT_DTYPES = frozenset({"int64", "int32", "int16", "int8", "uint8", "bool"})


def _device_expr(writer: _Writer, region: Region) -> str:
    if writer.names:
        return f"{next(iter(writer.names.values()))}.device"
    if region.params:
        return f"self.{param_attr(region.params[0])}.device"
    return "torch.get_default_device()"


def region_task_source(graph: OpGraph, region: Region, *, model_path: str) -> str:
    """The region's task file text."""
    inputs = ",\n        ".join(_make_expr(v.meta) for v in region.inputs)
    shapes = "; ".join(f"a{i}: {v.meta.dtype}{v.meta.shape}" for i, v in enumerate(region.inputs))
    return (
        f'"""Region {region.index} of {model_path}: {region.kind} ({", ".join(dict.fromkeys(region.ops))}).\n\n'
        f"Inputs: {shapes or 'none'}. Extracted from the model's traced forward; the operators are\n"
        'the ones the model ran, with its shapes and dtypes."""\n\n'
        "import torch\nimport torch.nn as nn\n"
        + HELPERS
        + "\n\n"
        + region_class_source(graph, region)
        + "\n\ndef get_inputs():\n"
        + (f"    return [\n        {inputs},\n    ]\n" if region.inputs else "    return []\n")
        + "\n\ndef get_init_inputs():\n    return []\n"
    )


def region_task_filename(region: Region) -> str:
    return f"region_{region.index:02d}_{region.kind.replace(' ', '_')}.py"


def write_region_tasks(graph: OpGraph, regions: list[Region], out_dir: Path) -> list[RegionTask]:
    """One task file a region, `region_NN_KIND.py`, in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for region in regions:
        path = out_dir / region_task_filename(region)
        path.write_text(region_task_source(graph, region, model_path=Path(graph.path).name), encoding="utf-8")
        written.append(
            RegionTask(region=region.index, path=path, param_names={p: param_attr(p) for p in region.params})
        )
    return written
