"""The untrusted candidate worker: imports the model's code and runs it (torch + stdlib only).

usage: python -I candidate.py      (the spec, JSON, on stdin)

A fresh process per evaluation, run through the Sandbox. It never sees an expected output:
the judge computes those after this process has exited, from its own copy of the inputs.
Order: read the spec and the run's key before any candidate code exists in the process;
build the reference's randomized state from its seed; import the candidate and load that
state; run the trials (fresh inputs per trial, allocator poisoned with NaN, operators
recorded, outputs snapshotted in stream order); time it; profile it; write the completion
record, authenticated with the run's key, to the result file. A crash, a hang or an early
exit leaves no valid record, which the host reports as a failure.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# Captured before any candidate code runs, so that patching the modules later changes nothing here.
_urandom = os.urandom
_dumps = json.dumps
_hmac_new = hmac.new
_sha256 = hashlib.sha256
_replace = os.replace


class ResultWriter:
    def __init__(self, key: bytes, exchange_dir: str) -> None:
        self._key = key
        self.path = os.path.join(exchange_dir, "result.json")
        self._progress = os.open(
            os.path.join(exchange_dir, "progress.txt"), os.O_WRONLY | os.O_CREAT | os.O_APPEND
        )
        self.stage_name = "start"

    def stage(self, name: str) -> None:
        self.stage_name = name
        os.write(self._progress, (name + "\n").encode())

    def finish(self, body: dict) -> None:
        payload = _dumps(body, sort_keys=True, default=str)
        mac = _hmac_new(self._key, payload.encode(), _sha256).hexdigest()
        tmp = self.path + ".tmp"
        with open(tmp, "w") as handle:
            handle.write(_dumps({"body": payload, "mac": mac}))
        _replace(tmp, self.path)


def main() -> None:
    spec = json.loads(sys.stdin.buffer.read())
    key = bytes.fromhex(spec.pop("key"))
    writer = ResultWriter(key, spec["exchange_dir"])
    del key
    body: dict = {"run_id": spec["run_id"], "done": False, "failure": None, "trials": []}
    try:
        run(spec, body, writer)
        body["done"] = True
    except BaseException as exc:
        body["failure"] = _failure(exc, writer.stage_name)
    body["stage"] = writer.stage_name
    writer.finish(body)
    sys.stderr.flush()
    os._exit(0)  # no candidate atexit handler or finalizer runs after the record is written


def run(spec: dict, body: dict, writer: ResultWriter) -> None:
    writer.stage("import torch")
    import copy

    import torch

    # Every worker module is imported before the candidate exists, so it cannot plant its own.
    from candidate_trials import profile_kernels, run_trials, time_candidate
    from referee_common import StageFailure, build_reference, load_task_module, seeded_call, state_checksum

    device = spec["device"]
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise StageFailure("device", "no_gpu", "no CUDA GPU is visible to the candidate worker")
    body["device"] = _device_info(device)

    writer.stage("reference state")
    namespace = load_task_module(spec["task_source"], spec["task_filename"])
    get_inputs = namespace["get_inputs"]
    init_args = seeded_call(namespace["get_init_inputs"], spec["init_seed"], device)
    reference = build_reference(namespace, init_args, spec["state_seed"], device)
    state = {name: t.detach().clone() for name, t in reference.state_dict().items()}
    body["state_checksum"] = state_checksum(state)
    del reference

    flags_before = _global_flags()
    threads_before = {t.ident for t in threading.enumerate()}

    writer.stage("import candidate")
    model_class = _import_candidate(spec["solution"])
    writer.stage("construct ModelNew")
    with torch.device(device):
        model = model_class(*copy.deepcopy(init_args))
    if not isinstance(model, torch.nn.Module):
        raise StageFailure("construct ModelNew", "interface", "ModelNew(...) is not a torch.nn.Module")
    model = model.to(device)

    writer.stage("load state")
    loaded = model.load_state_dict(state, strict=False)
    body["state_load"] = {"missing": list(loaded.missing_keys), "unexpected": list(loaded.unexpected_keys)}
    if state and (loaded.missing_keys or loaded.unexpected_keys):
        raise StageFailure(
            "load state",
            "state_mismatch",
            "ModelNew's parameters and buffers do not match the reference Model's: "
            f"missing {list(loaded.missing_keys)}, unexpected {list(loaded.unexpected_keys)}. "
            "Keep the reference's parameter names and shapes so its state_dict loads.",
        )
    del state

    signature = run_trials(spec, body, writer.stage, model, get_inputs)
    if spec["profile"]:
        writer.stage("timing")
        time_candidate(spec, body, model, get_inputs, signature, _urandom)
        writer.stage("profile")
        profile_kernels(spec, body, model, get_inputs, _urandom)
    flags_after = _global_flags()
    body["flags_changed"] = {
        k: [v, flags_after.get(k)] for k, v in flags_before.items() if flags_after.get(k) != v
    }
    started = [t.name for t in threading.enumerate() if t.ident not in threads_before and t.is_alive()]
    body["threads"] = {"python_new": sorted(started)}


def _failure(exc: BaseException, stage: str) -> dict:
    try:
        from referee_common import StageFailure, classify_error, describe_error

        if isinstance(exc, StageFailure):
            return {"stage": exc.stage, "kind": exc.kind, "message": exc.message, "traceback": ""}
        message, tb = describe_error(exc)
        return {"stage": stage, "kind": classify_error(exc), "message": message, "traceback": tb}
    except BaseException:  # torch itself may be what failed to import
        return {
            "stage": stage,
            "kind": "exception",
            "message": f"{type(exc).__name__}: {exc}",
            "traceback": "",
        }


def _import_candidate(solution: dict) -> type:
    import importlib.util

    import torch
    from referee_common import StageFailure

    if solution["kind"] == "workspace":
        ext_spec = importlib.util.spec_from_file_location(solution["extension"], solution["module_path"])
        if ext_spec is None or ext_spec.loader is None:
            raise StageFailure("import candidate", "import", f"cannot load {solution['module_path']}")
        extension = importlib.util.module_from_spec(ext_spec)
        ext_spec.loader.exec_module(extension)
        sys.modules[solution["extension"]] = extension
    else:
        os.environ["TORCH_EXTENSIONS_DIR"] = solution["build_dir"]
        try:
            from cuda_env import find_toolkit

            os.environ.setdefault("CUDA_HOME", find_toolkit().cuda_home)
        except Exception:  # a solution without load_inline needs no toolkit
            pass
    entry_spec = importlib.util.spec_from_file_location(solution["module_name"], solution["entry"])
    if entry_spec is None or entry_spec.loader is None:
        raise StageFailure("import candidate", "import", f"cannot load {solution['entry']}")
    module = importlib.util.module_from_spec(entry_spec)
    sys.modules[solution["module_name"]] = module
    entry_spec.loader.exec_module(module)
    model_class = module.__dict__.get("ModelNew")
    if not isinstance(model_class, type) or not issubclass(model_class, torch.nn.Module):
        raise StageFailure(
            "import candidate", "interface", "the solution defines no `class ModelNew(nn.Module)`"
        )
    return model_class


def _device_info(device: str) -> dict:
    import torch

    info = {"device": device, "torch": torch.__version__, "python": sys.version.split()[0]}
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        info.update(name=props.name, capability=f"{props.major}.{props.minor}")
    else:
        info.update(name="cpu", capability="")
    return info


def _global_flags() -> dict:
    """Backend switches that change numerics or speed of torch operators (TF32 and friends)."""
    import warnings

    import torch

    getters = {
        "cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
        "cuda.matmul.allow_fp16_reduced_precision_reduction": lambda: (
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
        ),
        "cuda.matmul.allow_bf16_reduced_precision_reduction": lambda: (
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
        ),
        "cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
        "cudnn.benchmark": lambda: torch.backends.cudnn.benchmark,
        "cudnn.deterministic": lambda: torch.backends.cudnn.deterministic,
        "float32_matmul_precision": lambda: torch.get_float32_matmul_precision(),
        "deterministic_algorithms": lambda: torch.are_deterministic_algorithms_enabled(),
    }
    flags = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, get in getters.items():
            try:
                flags[name] = repr(get())
            except Exception as exc:
                flags[name] = f"unreadable: {type(exc).__name__}"
    return flags


if __name__ == "__main__":
    main()
