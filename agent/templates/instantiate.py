"""A plan and one value per slot -> the files of a workspace in our layout:

kernels/tk_common.cuh, ...              the library's shared headers that the stages include
kernels/s<k>_<family>.cu                one pure-CUDA file per stage, extern "C" launcher
kernels/tk_binding.cpp                  the lean binding: checks, allocation, launches
kernels/tune_config.h, kernels/tune.json the slot values and the space the tuner may search
model_new.py                            ModelNew with the task's parameters and buffers
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from agent.templates.families import (
    COMMON_HEADERS,
    IDENT,
    family_of,
    prefixed,
    render_stage,
    stage_constraints,
    stage_views,
    template_text,
)
from agent.templates.plan import EwiseStage, Plan, Stage, View, numel

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
_TORCH_DTYPES = {"float32": "torch::kFloat32", "int64": "torch::kLong"}


def stage_file(stage: Stage) -> str:
    return f"kernels/{stage.name}_{family_of(stage).name}.cu"


def instantiate(
    plan: Plan,
    config: dict[str, int],
    *,
    sm_count: int = 132,
    allow_tf32: bool = False,
    tunable: dict[str, list[int]] | None = None,
) -> dict[str, str]:
    """Every model file of the workspace for `config` (one value per prefixed slot). `tunable`
    (SlotSpace.tunable) is what kernels/tune.json declares; by default the slots with more than
    one feasible value, heaviest stage first, as many as the tuner accepts."""
    if tunable is None:
        from agent.templates.slots import SlotSpace

        tunable = SlotSpace(plan, allow_tf32=allow_tf32).tunable()
    stages: dict[str, str] = {}
    for stage in plan.stages:
        values = {s.name: config[prefixed(stage, s.name)] for s in family_of(stage).slots}
        stages[stage_file(stage)] = render_stage(stage, values, sm_count=sm_count)
    files = {f"kernels/{h}": template_text(h) for h in included_headers(stages.values())}
    files |= stages
    files["kernels/tk_binding.cpp"] = render_binding(plan)
    files["kernels/tune_config.h"] = tune_header({k: config[k] for k in tunable})
    files["kernels/tune.json"] = tune_space(plan, config, tunable, allow_tf32=allow_tf32)
    files["model_new.py"] = render_model(plan)
    return files


def included_headers(sources: Iterable[str]) -> list[str]:
    """The library headers (COMMON_HEADERS) that `sources` include, directly or through one another."""
    found: set[str] = set()
    pending = list(sources)
    while pending:
        for name in _INCLUDE.findall(pending.pop()):
            if name in COMMON_HEADERS and name not in found:
                found.add(name)
                pending.append(template_text(name))
    return [h for h in COMMON_HEADERS if h in found]


def tune_header(values: dict[str, int]) -> str:
    lines = [
        "// Written by the template policy (and by the tuner, agent tune): the values of kernels/tune.json's",
        "// parameters. Each stage's .cu holds the values of its other slots.",
        "#pragma once",
    ]
    for name, value in values.items():
        lines += [f"#ifndef {name}", f"#define {name} {int(value)}", "#endif"]
    return "\n".join(lines) + "\n"


def tune_space(plan: Plan, config: dict[str, int], tunable: dict[str, list[int]], *, allow_tf32: bool) -> str:
    """kernels/tune.json: the declared slots, the constraints among them (undeclared slots pinned
    to their current values), and the constants those read."""
    tuned = set(tunable)
    constraints: list[str] = []
    constants: dict[str, int] = {}
    for stage in plan.stages:
        texts, values = stage_constraints(stage, allow_tf32=allow_tf32)
        own = {prefixed(stage, s.name) for s in family_of(stage).slots}
        for text in texts:
            free = {m.group(0) for m in IDENT.finditer(text)} & own
            if not free & tuned:
                continue
            for name in free - tuned:
                text = re.sub(rf"\b{name}\b", str(config[name]), text)
            constraints.append(text)
        constants.update(values)
    space = {
        "mode": "define",
        "params": tunable,
        "constraints": constraints,
        "constants": constants,
        "default": {k: config[k] for k in tunable},
    }
    return json.dumps(space, indent=2) + "\n"


# -- the binding and ModelNew -------------------------------------------------------------------
def _shape(shape: list[int]) -> str:
    return "std::vector<int64_t>{" + ", ".join(str(s) for s in shape) + "}"


def _used_buffers(plan: Plan) -> tuple[list[str], list[str]]:
    used = {v.buf for s in plan.stages for v in stage_views(s)}
    inputs = [b.name for b in plan.buffers.values() if b.kind == "input"]
    params = [b.name for b in plan.buffers.values() if b.kind == "param" and b.name in used]
    return inputs, params


def _view_expr(view: View, plan: Plan) -> str:
    buffer = plan.buffers[view.buf]
    if view.is_full(buffer):
        return view.buf
    if view.is_contiguous() and view.offset == 0 and numel(view.shape) == numel(buffer.shape):
        return f"{view.buf}.view({_shape(view.shape)})"
    stride = "std::vector<int64_t>{" + ", ".join(str(s) for s in view.stride) + "}"
    return f"{view.buf}.as_strided({_shape(view.shape)}, {stride}, {view.offset})"


def render_binding(plan: Plan) -> str:
    inputs, params = _used_buffers(plan)
    lines = [
        "// Lean binding generated by the template library: shape checks, allocation, one launch per stage.",
        "#include <c10/cuda/CUDAStream.h>",
        "#include <torch/csrc/utils/pybind.h>",
        "#include <torch/types.h>",
        "",
        "#include <vector>",
        "",
        '#include "../binding_registry.h"',
        "",
        "using Launch = cudaError_t (*)(const float* const*, void* const*, void*, cudaStream_t);",
    ]
    for stage in plan.stages:
        lines.append(
            f'extern "C" cudaError_t {stage.name}_launch(const float* const*, void* const*, void*, cudaStream_t);'
        )
        lines.append(f'extern "C" size_t {stage.name}_scratch_bytes();')
    lines += [
        "",
        "static torch::Tensor checked(const torch::Tensor& t, const std::vector<int64_t>& shape, const char* what) {",
        '  TORCH_CHECK(t.is_cuda(), what, " must be a CUDA tensor");',
        '  TORCH_CHECK(t.scalar_type() == torch::kFloat32, what, " must be float32");',
        '  TORCH_CHECK(t.sizes().vec() == shape, what, " has shape ", t.sizes(), ", the kernels were generated for ", shape);',
        "  return t.contiguous();",
        "}",
        "",
        "static void run(Launch launch, size_t scratch_bytes, const std::vector<const float*>& ins,",
        "                const std::vector<void*>& outs, const torch::TensorOptions& options, const char* what) {",
        "  torch::Tensor scratch;",
        "  if (scratch_bytes > 0) scratch = torch::empty({(int64_t)scratch_bytes}, options.dtype(torch::kUInt8));",
        "  cudaError_t err = launch(ins.data(), outs.data(), scratch_bytes > 0 ? scratch.data_ptr() : nullptr,",
        "                          c10::cuda::getCurrentCUDAStream().stream());",
        '  TORCH_CHECK(err == cudaSuccess, what, " failed: ", cudaGetErrorString(err));',
        "}",
        "",
        "static std::vector<torch::Tensor> tk_forward(const std::vector<torch::Tensor>& inputs,",
        "                                             const std::vector<torch::Tensor>& params) {",
        f"  TORCH_CHECK(inputs.size() == {len(inputs)} && params.size() == {len(params)},",
        f'              "tk_forward: expected {len(inputs)} inputs and {len(params)} parameters");',
    ]
    for k, name in enumerate(inputs):
        lines.append(
            f'  auto {name} = checked(inputs[{k}], {_shape(plan.buffers[name].shape)}, "input {name[2:]}");'
        )
    for k, name in enumerate(params):
        source = plan.buffers[name].source
        lines.append(f'  auto {name} = checked(params[{k}], {_shape(plan.buffers[name].shape)}, "{source}");')
    first = (inputs + params)[0]
    lines.append(f"  const auto options = {first}.options();")
    for buffer in plan.buffers.values():
        if buffer.kind == "temp":
            dtype = _TORCH_DTYPES[buffer.dtype]
            lines.append(
                f"  auto {buffer.name} = torch::empty({_shape(buffer.shape)}, options.dtype({dtype}));"
            )
    for stage in plan.stages:
        ins = ", ".join(f"{v.buf}.data_ptr<float>()" for v in stage_views(stage))
        outs = stage.outs if isinstance(stage, EwiseStage) else [stage.out]
        out_ptrs = ", ".join(f"{o}.data_ptr()" for o in outs)
        what = f'"stage {stage.name} ({family_of(stage).name})"'
        lines.append(
            f"  run({stage.name}_launch, {stage.name}_scratch_bytes(), {{{ins}}}, {{{out_ptrs}}}, options, {what});"
        )
    returned = ", ".join(_view_expr(v, plan) for v in plan.outputs)
    lines += [
        f"  return {{{returned}}};",
        "}",
        "",
        'REGISTER_BINDING(templates) { m.def("tk_forward", &tk_forward, "the template library\'s stages"); }',
        "",
    ]
    return "\n".join(lines)


def _access(name: str) -> str:
    expr = "self"
    for part in name.split("."):
        expr = f"{expr}.{part}" if part.isidentifier() else f'getattr({expr}, "{part}")'
    return expr


def render_model(plan: Plan) -> str:
    inputs, params = _used_buffers(plan)
    state = [(p.name, p.shape, p.dtype, p.kind) for p in plan.params]
    checks = [
        f"        if inputs[{i.index}] != {i.value!r}:\n"
        f'            raise ValueError(f"input {i.index} is {{inputs[{i.index}]!r}}; the kernels were generated for {i.value!r}")'
        for i in plan.inputs
        if i.kind in ("int", "float", "bool")
    ]
    tensor_args = ", ".join(f"inputs[{plan.buffers[n].source}]" for n in inputs)
    param_args = ", ".join(_access(str(plan.buffers[n].source)) for n in params)
    result = "tuple(outs)" if plan.output_is_tuple else "outs[0]"
    state_lines = "".join(f"    ({n!r}, {s!r}, {d!r}, {k!r}),\n" for n, s, d, k in state)
    return f'''"""Generated by the template library (agent/templates): {plan.describe()}"""

import torch
import torch.nn as nn

# isort: split
import cuda_extension  # built by the harness from kernels/

STATE = [
{state_lines}]


def _register(module: nn.Module, dotted: str, tensor: torch.Tensor, kind: str) -> None:
    *path, leaf = dotted.split(".")
    for part in path:
        if not hasattr(module, part):
            module.add_module(part, nn.Module())
        module = getattr(module, part)
    if kind == "parameter":
        module.register_parameter(leaf, nn.Parameter(tensor))
    else:
        module.register_buffer(leaf, tensor)


class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        for name, shape, dtype, kind in STATE:
            _register(self, name, torch.empty(shape, dtype=getattr(torch, dtype)), kind)

    def forward(self, *inputs):
{"".join(c + chr(10) for c in checks)}        outs = cuda_extension.tk_forward([{tensor_args}], [{param_args}])
        return {result}
'''
