"""Run a built workspace's ModelNew forward once on the task's inputs (torch + stdlib only): the
program the `ncu` and `sanitize` tools start under Nsight Compute or compute-sanitizer.

usage: python -I ncu_run.py SPEC_JSON

SPEC_JSON keys: module_path (the built extension), extension (its module name), entry
(model_new.py), task (reference.py), seed, runs (forward calls; the first is a warm-up where the
profiler skips launches). Imports the candidate: it runs only in a sandbox. Prints one result
record: ok, or the failure (kind "no_gpu" when CUDA is not available).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import siblings  # noqa: F401  (the workers import each other by name)

# isort: split
from protocol import emit, stdout_to_stderr


def run(spec: dict[str, object]) -> dict[str, object]:
    import torch
    from referee_common import classify_error, describe_error, load_task_module, seeded_call

    if not torch.cuda.is_available():
        return {"ok": False, "kind": "no_gpu", "message": "CUDA is not available in the sandbox"}
    started = time.monotonic()
    try:
        extension = str(spec["extension"])
        loaded = importlib.util.spec_from_file_location(extension, str(spec["module_path"]))
        if loaded is None or loaded.loader is None:
            return {"ok": False, "kind": "import", "message": f"cannot load {spec['module_path']}"}
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
        sys.modules[extension] = module
        task_path = str(spec["task"])
        with open(task_path, encoding="utf-8") as handle:
            namespace = load_task_module(handle.read(), task_path)
        entry = importlib.util.spec_from_file_location("model_new", str(spec["entry"]))
        if entry is None or entry.loader is None:
            return {"ok": False, "kind": "import", "message": f"cannot load {spec['entry']}"}
        candidate = importlib.util.module_from_spec(entry)
        sys.modules["model_new"] = candidate
        entry.loader.exec_module(candidate)
        seed = int(str(spec.get("seed", 0)))
        init_args = seeded_call(namespace["get_init_inputs"], seed, "cuda")
        inputs = seeded_call(namespace["get_inputs"], seed + 1, "cuda")
        model = candidate.ModelNew(*init_args).cuda().eval()
        with torch.no_grad():
            for _ in range(max(1, int(str(spec.get("runs", 1))))):
                model(*inputs)
        torch.cuda.synchronize()
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        message, _ = describe_error(exc)
        return {"ok": False, "kind": classify_error(exc), "message": message[:2000]}
    return {"ok": True, "seconds": time.monotonic() - started}


def main() -> None:
    spec = json.loads(sys.argv[1])
    with stdout_to_stderr():
        result = run(spec)
    emit(result)


if __name__ == "__main__":
    main()
