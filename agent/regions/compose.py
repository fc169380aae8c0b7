"""The whole model's `ModelNew`, composed from one module per region.

The composed file holds the task's own source (so `Model` builds the original parameters from the
same seed, as the referee seeds `Model` and `ModelNew` alike), then a `ModelNew` whose `__init__`
builds the original once and adopts its submodules, parameters and buffers under their own names
(so the referee's state_dict of the reference loads into it unchanged), makes each region's module
and gives it the model's own tensors under the region's names (the state_dict mapping; shared, so
a state loaded later reaches every region), and whose `forward` calls the regions in trace order,
passing each the tensors its inputs name. A region without a solution runs its reference
`Model`, the same aten operators the original ran, so torch keeps the rest of the model.

A region solution is a module file's text defining `ModelNew` (or `Model` for a reference); it is
executed in a namespace of its own inside the composed file, so two solutions never collide.
`check_composition` runs the composed file against the task in a sandbox on the CPU.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from pydantic import BaseModel

from agent.regions.extract import HELPERS, param_attr, region_class_source
from agent.regions.partition import Region, _key
from agent.templates.graph import OpGraph, Ref


class CompositionCheck(BaseModel):
    ok: bool
    max_abs_diff: float | None = None
    outputs: int = 0
    error: str | None = None


_COMPOSE_HELPERS = """
def _load_solution(source, class_name):
    namespace = {'__name__': '_region_solution'}
    exec(compile(source, '<region solution>', 'exec'), namespace)
    return namespace[class_name]


def _adopt(module, original):
    \"\"\"The original model's submodules, parameters and buffers, under their own names.\"\"\"
    for name, child in original.named_children():
        module.add_module(name, child)
    for name, param in original.named_parameters(recurse=False):
        module.register_parameter(name, param)
    for name, buffer in original.named_buffers(recurse=False):
        module.register_buffer(name, buffer, persistent=name not in original._non_persistent_buffers_set)


def _share(region, state, mapping):
    \"\"\"The region module's parameters and buffers become the model's own tensors (the same
    objects): a state_dict loaded into the model reaches the region.\"\"\"
    for attr, name in mapping.items():
        tensor = state[name]
        if attr in region._parameters:
            region._parameters[attr] = tensor if isinstance(tensor, _nn.Parameter) else _nn.Parameter(tensor, requires_grad=False)
        elif attr in region._buffers:
            region._buffers[attr] = tensor
        else:
            raise AttributeError(f"the region module has no parameter or buffer {attr} (for {name})")
"""


def _value_expr(ref: Ref, names: dict[tuple, str]) -> str:
    if ref.t == "input":
        return f"inputs[{ref.index}]"
    if ref.t == "param":
        raise ValueError(f"the model returns its parameter {ref.name}: not composed from regions")
    if ref.t == "constant":
        raise ValueError(
            "the model reads a tensor made outside forward that is no parameter or buffer: not composed"
        )
    key = _key(ref)
    if key not in names:
        raise ValueError(f"{ref.describe()} is read before any region produced it")
    return names[key]


def composed_source(
    graph: OpGraph, regions: list[Region], task_source: str, solutions: dict[int, str] | None = None
) -> str:
    """The composed model file. `solutions` maps a region's index to its module file's text; a
    region without one runs its reference Model."""
    solutions = solutions or {}
    parts = [task_source.rstrip(), "", "# --- composed from regions ---", "import torch.nn as _nn", HELPERS]
    for region in regions:
        parts.append(region_class_source(graph, region, class_name=f"_Region{region.index:02d}"))
    parts.append(_COMPOSE_HELPERS)
    for index, source in sorted(solutions.items()):
        cls = "ModelNew" if "class ModelNew" in source else "Model"
        # Loaded at import, not in __init__: a solution that builds its extension on import (a
        # standalone model_new.py) builds while the referee compiles the composed file.
        parts.append(
            f"_SOLUTION_{index:02d} = {source!r}\n_CLASS_{index:02d} = _load_solution(_SOLUTION_{index:02d}, {cls!r})\n"
        )
    init = [
        "def __init__(self, *init_inputs):",
        "    super().__init__()",
        "    _adopt(self, Model(*init_inputs))",
        "    state = dict(self.state_dict(keep_vars=True))",
        "    regions = []",
    ]
    for region in regions:
        if region.index in solutions:
            init.append(f"    module = _CLASS_{region.index:02d}()")
        else:
            init.append(f"    module = _Region{region.index:02d}()")
        mapping = {param_attr(p): p for p in region.params}
        init.append(f"    _share(module, state, {mapping!r})")
        init.append("    regions.append(module)")
    # A plain list, not a ModuleList: the region modules' tensors are the model's own (shared), so
    # the state_dict holds the original names alone and loading it reaches every region.
    init.append("    self._regions = regions")
    names: dict[tuple, str] = {}
    forward = ["def forward(self, *inputs):"]
    for region in regions:
        args = ", ".join(_value_expr(v.ref, names) for v in region.inputs)
        forward.append(f"    r{region.index} = self._regions[{region.index}]({args})")
        for k, value in enumerate(region.outputs):
            pick = f"r{region.index}" if len(region.outputs) == 1 else f"r{region.index}[{k}]"
            names[value.key] = pick
    outs = [_value_expr(ref, names) for ref in graph.outputs]
    if graph.output_is_tuple:
        forward.append(f"    return ({', '.join(outs)},)")
    else:
        forward.append(f"    return {outs[0]}")
    body = [
        "class ModelNew(torch.nn.Module):",
        '    """The model as its regions: each region a module, called in the order the model ran."""',
        "",
    ]
    body += [f"    {line}" for line in init] + [""] + [f"    {line}" for line in forward]
    parts.append("\n".join(body))
    return "\n\n".join(parts) + "\n"


def check_composition(
    task_path: Path, composed: str, *, sandbox_kind: str = "local", timeout: float = 300.0, seed: int = 0
) -> CompositionCheck:
    """Run the task's Model and the composed ModelNew on the task's inputs, on the CPU, in a
    sandbox (the task's code is untrusted), both built from the same seed."""
    from sandbox.base import open_sandbox
    from sandbox.workers.protocol import parse as parse_worker_result

    scratch = Path(tempfile.mkdtemp(prefix="kernel-agent-compose-"))
    try:
        shutil.copyfile(task_path, scratch / "task.py")
        (scratch / "model_new.py").write_text(composed, encoding="utf-8")
        with open_sandbox(sandbox_kind, workspace=scratch, gpus=None) as box:
            cmd = box.python_command(
                box.worker("tasks/compose_check.py"), "task.py", "model_new.py", "--seed", str(seed)
            )
            result = box.exec(cmd, timeout=timeout, cwd=box.workspace_path)
        report = parse_worker_result(result.stdout)
        if report is None:
            tail = (result.stderr.strip().splitlines() or [result.describe_failure()])[-1]
            return CompositionCheck(ok=False, error=f"the composition check failed: {tail}")
        return CompositionCheck.model_validate(report)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def describe(check: CompositionCheck) -> str:
    return json.dumps(check.model_dump())
