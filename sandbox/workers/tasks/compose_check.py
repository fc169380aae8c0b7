"""Check a composed model against its task on the CPU (torch + stdlib only).

usage: python -I compose_check.py TASK.py MODEL_NEW.py [--seed N]

Builds the task's `Model` and the composed `ModelNew` from the same seed (the composed one builds
the original inside and maps its parameters into the regions), runs both on the task's inputs and
reports {"ok", "max_abs_diff", "outputs", "error"} as one JSON document.
"""

from __future__ import annotations

import os
import runpy
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import siblings  # noqa: F401  (the workers import each other by name)

# isort: split
from protocol import emit, stdout_to_stderr
from task_error import short_error


def _flat(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def check(task_path: str, model_new_path: str, seed: int) -> dict[str, Any]:
    import torch

    task = runpy.run_path(task_path, run_name="__kernel_agent_task__")
    composed = runpy.run_path(model_new_path, run_name="__kernel_agent_composed__")
    torch.manual_seed(seed)
    init_inputs = list(task["get_init_inputs"]())
    torch.manual_seed(seed)
    reference = task["Model"](*init_inputs)
    torch.manual_seed(seed)
    candidate = composed["ModelNew"](*init_inputs)
    torch.manual_seed(seed + 1)
    inputs = list(task["get_inputs"]())
    copies = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    with torch.no_grad():
        expected = _flat(reference(*inputs))
        actual = _flat(candidate(*copies))
    if len(expected) != len(actual):
        return {
            "ok": False,
            "outputs": len(actual),
            "error": f"{len(actual)} outputs, expected {len(expected)}",
        }
    worst = 0.0
    for want, got in zip(expected, actual, strict=True):
        if not isinstance(want, torch.Tensor):
            if want != got:
                return {"ok": False, "outputs": len(actual), "error": f"output {got!r}, expected {want!r}"}
            continue
        if got.shape != want.shape or got.dtype != want.dtype:
            return {
                "ok": False,
                "outputs": len(actual),
                "error": f"output {tuple(got.shape)} {got.dtype}, expected {tuple(want.shape)} {want.dtype}",
            }
        if want.numel():
            worst = max(worst, float((got.double() - want.double()).abs().max()))
        if not torch.allclose(got, want, rtol=1e-4, atol=1e-5, equal_nan=True):
            return {"ok": False, "outputs": len(actual), "max_abs_diff": worst, "error": "outputs differ"}
    return {"ok": True, "outputs": len(actual), "max_abs_diff": worst}


def main(argv: list[str]) -> None:
    seed = 0
    if "--seed" in argv:
        at = argv.index("--seed")
        seed, argv = int(argv[at + 1]), argv[:at] + argv[at + 2 :]
    try:
        with stdout_to_stderr():
            result = check(argv[0], argv[1], seed)
    except Exception as exc:
        result = {"ok": False, "error": short_error(exc)}
    emit(result)


if __name__ == "__main__":
    main(sys.argv[1:])
