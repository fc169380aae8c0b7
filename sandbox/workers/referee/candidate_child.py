"""The untrusted half of the candidate worker: imports the model's code and runs it (torch + stdlib).

usage: python -I candidate_child.py FD      (started by candidate.py, its supervisor)

Its supervisor sends the spec (no key: this process never holds one) as the first line on stdin
and answers requests on the same stdin; this process writes its messages (JSON lines) to fd FD. It
never sees an expected output: the judge computes those after this process has exited. Order:
import torch, then take the GPU gate's shared hold; build the reference's randomized state from
its seed; snapshot what the worker's checks and clocks call; import the candidate and load that
state; run the trials (fresh inputs per trial, allocator poisoned with NaN, operators recorded,
outputs snapshotted in stream order); time it (the supervisor gives the timed inputs' seed when
the window opens and picks the outputs to recheck when it closes); profile it; send the record to
the supervisor, which signs it. A crash, a hang or an early exit sends no record, which the host
reports as a failure.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import siblings  # noqa: F401  (the workers import each other by name)

# isort: split
from lifetime import die_with_parent

if TYPE_CHECKING:
    from protocol import (
        CandidateRecord,
        CandidateRequest,
        ChildMessage,
        SolutionSpec,
        WorkerDevice,
        WorkerFailure,
    )

# Captured before any candidate code runs, so that patching the modules later changes nothing here.
_urandom = os.urandom
_dumps = json.dumps
_loads = json.loads
_write = os.write

WAIT_TO_RUN = "waiting for the GPU (shared, to run)"


class SupervisorLink:
    """Requests to the supervisor and its answers: one JSON object per line each way."""

    def __init__(self, out_fd: int) -> None:
        self._out = out_fd
        self._in = sys.stdin.buffer
        self.stage_name = "start"

    def _send(self, message: Mapping[str, object]) -> None:
        data = (_dumps(message, default=str) + "\n").encode()
        while data:
            data = data[_write(self._out, data) :]

    def receive(self) -> Any:
        """The next line from the supervisor: the spec first, then the answer to each request."""
        line = self._in.readline()
        if not line:
            raise RuntimeError("the supervisor closed the channel")
        return _loads(line)

    def request(self, op: str, **fields: object) -> Any:
        self._send({"op": op, **fields})
        return self.receive()

    def stage(self, name: str) -> None:
        self.stage_name = name
        message: ChildMessage = {"op": "stage", "name": name}
        self._send(message)

    def finish(self, body: CandidateRecord) -> None:
        message: ChildMessage = {"op": "result", "body": body}
        self._send(message)


def main() -> None:
    die_with_parent(os.getppid())  # the supervisor; a killed batch must not leave us on the GPU
    link = SupervisorLink(int(sys.argv[1]))
    spec: CandidateRequest = link.receive()
    body: CandidateRecord = {"run_id": spec["run_id"], "done": False, "failure": None, "trials": []}
    try:
        run(spec, body, link)
        body["done"] = True
    except BaseException as exc:
        body["failure"] = _failure(exc, link.stage_name)
    body["stage"] = link.stage_name
    link.finish(body)
    sys.stderr.flush()
    os._exit(0)  # no candidate atexit handler or finalizer runs after the record is sent


def run(spec: CandidateRequest, body: CandidateRecord, link: SupervisorLink) -> None:
    link.stage("import torch")
    import copy

    # Every worker module is imported before the candidate exists, so it cannot plant its own.
    import guard_identity
    import hidden_inputs  # noqa: F401  (trial_inputs imports it later: ours, before the candidate)
    import torch
    from candidate_trials import SupervisedTiming, profile_kernels, run_trials, time_candidate
    from gpu_handoff import HandoffSender
    from op_policy import make_recorder
    from referee_common import (
        StageFailure,
        build_reference,
        hidden_allowed,
        load_task_module,
        seeded_call,
        state_checksum,
    )

    # Our code alone has run so far (the candidate is imported below): hold the GPU's gate before
    # the first CUDA call, not through this process's startup, which other evaluations' timing
    # would otherwise wait out.
    link.stage(WAIT_TO_RUN)
    link.request("shared")

    device = spec["device"]
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise StageFailure("device", "no_gpu", "no CUDA GPU is visible to the candidate worker")
    body["device"] = _device_info(device)

    link.stage("reference state")
    namespace = load_task_module(spec["task_source"], spec["task_filename"])
    get_inputs = namespace["get_inputs"]
    init_args = seeded_call(namespace["get_init_inputs"], spec["init_seed"], device)
    reference = build_reference(namespace, init_args, spec["state_seed"], device)
    state = {name: t.detach().clone() for name, t in reference.state_dict().items()}
    body["state_checksum"] = state_checksum(state)
    # before the candidate is imported, so nothing of it runs while the domain is probed
    link.stage("hidden inputs' domain")
    allowed = hidden_allowed(reference, get_inputs, spec.get("hidden_probe_seed"), device)
    del reference

    flags_before = _global_flags()
    threads_before = {t.ident for t in threading.enumerate()}
    import torch._dynamo

    identities = guard_identity.snapshot(namespace)

    link.stage("import candidate")
    model_class = _import_candidate(spec["solution"])
    link.stage("construct ModelNew")
    # Torch compute is allowed while the model is built, but not captured into a CUDA graph that
    # the forward then replays: the recorder sees what runs under a capture.
    setup = make_recorder()
    with torch.device(device), setup:
        model = model_class(*copy.deepcopy(init_args))
    if not isinstance(model, torch.nn.Module):
        raise StageFailure("construct ModelNew", "interface", "ModelNew(...) is not a torch.nn.Module")
    with setup:
        model = model.to(device)

    link.stage("load state")
    with setup:
        loaded = model.load_state_dict(state, strict=False)
    body["setup_captured_ops"] = dict(setup.captured)
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

    sender = HandoffSender(spec.get("handoff_socket"), device)
    signature = run_trials(spec, body, link.stage, model, get_inputs, sender, allowed)
    changed = guard_identity.changed(identities, namespace)
    body["identity_changed"] = changed
    if spec["profile"]:
        link.stage("waiting for the GPU (exclusive, to time)")
        link.request("exclusive")
        link.stage("timing")
        timing = SupervisedTiming(link, spec, _urandom, sender)
        time_candidate(spec, body, model, get_inputs, signature, timing)
        link.stage("profile")
        profile_kernels(spec, body, model, get_inputs, _urandom)
        link.request("exclusive_done")
        moved = guard_identity.changed(identities, namespace)
        body["identity_changed"] = sorted({*changed, *moved})
    sender.close()
    body["handoff"] = {"gpu_outputs": sender.sent, "problem": sender.problem}
    flags_after = _global_flags()
    body["flags_changed"] = {
        k: (v, flags_after.get(k)) for k, v in flags_before.items() if flags_after.get(k) != v
    }
    started = [t.name for t in threading.enumerate() if t.ident not in threads_before and t.is_alive()]
    body["threads"] = {"python_new": sorted(started)}


def _failure(exc: BaseException, stage: str) -> WorkerFailure:
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


def _import_candidate(solution: SolutionSpec) -> type:
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
        import inline_build

        os.environ["TORCH_EXTENSIONS_DIR"] = solution["build_dir"]
        try:
            from cuda_env import find_toolkit

            # As build.py sets it: the same nvcc path, or every ninja command differs and rebuilds.
            os.environ["CUDA_HOME"] = find_toolkit().cuda_home
        except Exception:  # a solution without load_inline needs no toolkit
            pass
        inline_build.install(solution["cache_dir"])
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


def _device_info(device: str) -> WorkerDevice:
    import torch

    info: WorkerDevice = {"device": device, "torch": torch.__version__, "python": sys.version.split()[0]}
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        info.update(name=props.name, capability=f"{props.major}.{props.minor}")
        # How the caching allocator hands out memory decides what allocator poisoning can promise.
        settings = [torch.cuda.get_allocator_backend()]
        settings += [
            f"{k}={os.environ[k]}"
            for k in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
            if k in os.environ
        ]
        info["allocator"] = ", ".join(settings)
    else:
        info.update(name="cpu", capability="")
    return info


def _global_flags() -> dict[str, str]:
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
