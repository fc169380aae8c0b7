"""The tuner's candidate worker: times many configurations in one process (torch + stdlib only).

usage: python -I tune_worker.py      (the spec, JSON, on stdin; runs inside the Sandbox)

It imports the candidate once (runtime mode: one build, the values set in the `TUNE` dict of
model_new.py before each call; define mode: one build per configuration, each loaded from its
own copy of the .so) and then serves requests from a mailbox folder the host can see:

  req_<n>.json   {"op": "measure", "items": [{"key", "values", "module", "full"}], "timing": {..}}
                 {"op": "retime", "items": [...], "rounds": R, "timing": {..}}
                 {"op": "stop"}
  res_<n>.jsonl  one line per item as it finishes, then {"done": true}

Per measured item: one call on pristine inputs whose outputs go to the judge (a file when their
bits are new, else just their fingerprint), then the timing procedure every referee arm uses
(timing.py: L2 flush, events, device-wide sync, median). It never sees an expected output.
A CUDA error leaves the context unusable: the item is reported and the worker exits, and the
host starts a new one. A watchdog ends the process when one item runs past its time limit.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import threading
import time
import types
from collections.abc import Mapping

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import siblings  # noqa: F401  (the workers import each other by name)

# isort: split
from protocol import (
    DoneLine,
    ItemFailure,
    MeasureLine,
    RetimeLine,
    RetimeRequest,
    TimingSettings,
    TuneHang,
    TuneItem,
    TuneRequest,
    TuneWorkerFailed,
    TuneWorkerReady,
    TuneWorkerStart,
    stdout_to_stderr,
)


def _load_module(name: str, path: str, *, register: bool = False) -> types.ModuleType:
    """Import the file at `path` as module `name` (put in sys.modules before it runs with `register`)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path} as {name}")
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _write_json(path: str, body: Mapping[str, object]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(body, handle)
    os.replace(tmp, path)


class Watchdog:
    def __init__(self, exchange: str) -> None:
        self.exchange = exchange
        self.deadline: float | None = None
        self.key = ""
        threading.Thread(target=self._watch, daemon=True).start()

    def arm(self, key: str, seconds: float) -> None:
        self.key, self.deadline = key, time.monotonic() + seconds

    def disarm(self) -> None:
        self.deadline = None

    def _watch(self) -> None:
        while True:
            time.sleep(0.2)
            if self.deadline is not None and time.monotonic() > self.deadline:
                hang: TuneHang = {"key": self.key}
                _write_json(os.path.join(self.exchange, "hang.json"), hang)
                os._exit(3)


class Candidate:
    """The candidate's model(s): one for runtime mode, one per variant .so in define mode."""

    def __init__(self, spec: TuneWorkerStart, state: dict, init_args: list) -> None:
        self.spec = spec
        self.state = state
        self.init_args = init_args
        self.models: dict[str, object] = {}
        self.tune: dict | None = None

    def model_for(self, item: TuneItem | None) -> object:
        # Define mode keys models by configuration: a slot's .so path is reused by later variants.
        module = (item or {}).get("module")
        key = item["key"] if module and item else ""
        if key not in self.models:
            self.models[key] = self._load(module)
        return self.models[key]

    def _load(self, module: str | None) -> object:
        import copy

        import torch

        solution = self.spec["solution"]
        path = module or solution.get("module_path")
        if path:
            if module:  # each variant from a path of its own: a rebuilt .so at a reused path
                private = os.path.join(self.spec["exchange_dir"], "so", str(len(self.models)))
                os.makedirs(private, exist_ok=True)
                path = shutil.copy(module, os.path.join(private, solution["extension"] + ".so"))
            sys.modules[solution["extension"]] = _load_module(solution["extension"], path)
        name = f"{solution['module_name']}_{len(self.models)}"
        entry = _load_module(name, solution["entry"], register=True)
        if self.spec["mode"] == "runtime":
            tune = entry.__dict__.get("TUNE")
            missing = [p for p in self.spec["params"] if not isinstance(tune, dict) or p not in tune]
            if missing:
                raise LookupError(
                    f"model_new.py needs a module-level dict TUNE with keys {self.spec['params']}; "
                    f"missing {missing}"
                )
            self.tune = tune
        device = self.spec["device"]
        with torch.device(device):
            model = entry.ModelNew(*copy.deepcopy(self.init_args))
        model = model.to(device)
        loaded = model.load_state_dict(self.state, strict=False)
        if self.state and (loaded.missing_keys or loaded.unexpected_keys):
            raise LookupError(f"ModelNew's state does not match Model's: {loaded}")
        return model

    def apply(self, item: TuneItem) -> object:
        model = self.model_for(item)
        if self.tune is not None and self.spec["mode"] == "runtime":
            self.tune.update(item["values"])
        return model


def main() -> None:
    spec: TuneWorkerStart = json.loads(sys.stdin.buffer.read())
    exchange = spec["exchange_dir"]
    with stdout_to_stderr():
        try:
            ctx = setup(spec)
        except BaseException as exc:
            from referee_common import describe_error

            message, tb = describe_error(exc)
            failed: TuneWorkerFailed = {"message": message, "traceback": tb}
            _write_json(os.path.join(exchange, "failed.json"), failed)
            sys.stderr.flush()
            os._exit(0)
        serve(spec, ctx)
    sys.stderr.flush()
    os._exit(0)


def setup(spec: TuneWorkerStart) -> dict:
    import torch
    from referee_common import build_reference, checksum, load_task_module, seeded_call, tensors_in

    device = spec["device"]
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("no CUDA GPU is visible to the tuning worker")
    namespace = load_task_module(spec["task_source"], spec["task_filename"])
    init_args = seeded_call(namespace["get_init_inputs"], spec["init_seed"], device)
    reference = build_reference(namespace, init_args, spec["state_seed"], device)
    state = {name: t.detach().clone() for name, t in reference.state_dict().items()}
    del reference
    inputs = seeded_call(namespace["get_inputs"], spec["input_seed"], device)
    candidate = Candidate(spec, state, init_args)
    if spec["mode"] == "runtime":
        candidate.model_for(None)
    name = torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu"
    ready: TuneWorkerReady = {
        "ready": True,
        "device": name,
        "input_checksums": [checksum(t) for t in tensors_in(inputs)],
    }
    _write_json(os.path.join(spec["exchange_dir"], "ready.json"), ready)
    return {"candidate": candidate, "inputs": inputs, "sent": set()}


def serve(spec: TuneWorkerStart, ctx: dict) -> None:
    exchange = spec["exchange_dir"]
    watchdog = Watchdog(exchange)
    n = 0
    idle_since = time.monotonic()
    while True:
        path = os.path.join(exchange, f"req_{n}.json")
        if not os.path.exists(path):
            if time.monotonic() - idle_since > spec.get("idle_timeout", 900):
                return
            time.sleep(0.002)
            continue
        with open(path) as handle:
            request: TuneRequest = json.load(handle)
        out = open(os.path.join(exchange, f"res_{n}.jsonl"), "w")  # noqa: SIM115 - kept open for the request
        fatal = False
        try:
            if request["op"] == "stop":
                return
            if request["op"] == "measure":
                for item in request["items"]:
                    watchdog.arm(item["key"], spec["item_timeout"])
                    result = measure(spec, ctx, item, request["timing"], f"{n}_{item['key']}")
                    watchdog.disarm()
                    out.write(json.dumps(result) + "\n")
                    out.flush()
                    if result.get("fatal"):
                        fatal = True
                        break
            elif request["op"] == "retime":
                watchdog.arm(
                    "retime", spec["item_timeout"] * max(1, len(request["items"])) * request["rounds"]
                )
                result = retime(spec, ctx, request)
                watchdog.disarm()
                out.write(json.dumps(result) + "\n")
                fatal = bool(result.get("fatal"))
            if not fatal:  # a dead context: the host learns it from the exit, then starts a fresh worker
                done: DoneLine = {"done": True}
                out.write(json.dumps(done) + "\n")
        finally:
            out.close()
        if fatal:
            return
        n += 1
        idle_since = time.monotonic()


def _fail(exc: BaseException) -> ItemFailure:
    from referee_common import classify_error, describe_error

    kind = classify_error(exc)
    message, _ = describe_error(exc, limit=600)
    return {"status": "failed", "error": f"{kind}: {message}", "fatal": kind == "cuda_error"}


def measure(
    spec: TuneWorkerStart, ctx: dict, item: TuneItem, timing_dict: TimingSettings, tag: str
) -> MeasureLine:
    import torch
    from referee_common import checksum, clone_tree, flatten_outputs
    from timing import TimingConfig, time_calls

    device = spec["device"]
    started = time.monotonic()
    result: MeasureLine = {"key": item["key"]}
    try:
        model = ctx["candidate"].apply(item)
        inputs = clone_tree(ctx["inputs"])
        with torch.no_grad():
            out = model(*inputs)
            structure, leaves = flatten_outputs(out)
            items = [leaf.detach().clone() if type(leaf) is torch.Tensor else leaf for leaf in leaves]
            if device.startswith("cuda"):
                torch.cuda.synchronize()
        mark = "|".join(checksum(x) if type(x) is torch.Tensor else repr(x) for x in items)
        result["fingerprint"] = mark
        if item.get("full") or mark not in ctx["sent"]:
            file = os.path.join(spec["exchange_dir"], f"out_{tag}.pt")
            cpu = [x.cpu() if type(x) is torch.Tensor else x for x in items]
            torch.save({"structure": structure, "items": cpu}, file + ".tmp")
            os.replace(file + ".tmp", file)
            result["file"] = file
            ctx["sent"].add(mark)
        del out, leaves, items
        work = clone_tree(ctx["inputs"])
        with torch.no_grad():
            stats = time_calls(
                lambda args: model(*args),
                lambda _i: work,
                device=device,
                config=TimingConfig.from_dict(timing_dict),
            )
        result.update(status="ok", time_ms=stats["median_ms"], iqr_ms=stats["iqr_ms"], reps=stats["n"])
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        result.update(**_fail(exc))
        if device.startswith("cuda") and not result.get("fatal"):
            torch.cuda.empty_cache()
    result["gpu_s"] = time.monotonic() - started
    return result


def retime(spec: TuneWorkerStart, ctx: dict, request: RetimeRequest) -> RetimeLine:
    """Rounds of one timing per item, the order rotated each round, so drift hits all alike."""
    import torch
    from referee_common import clone_tree
    from timing import TimingConfig, time_calls

    device = spec["device"]
    items = request["items"]
    config = TimingConfig.from_dict(request["timing"])
    started = time.monotonic()
    table: list[list[float | None]] = []
    errors: dict[str, str] = {}
    for r in range(request["rounds"]):
        row: list[float | None] = [None] * len(items)
        order = list(range(len(items)))
        order = order[r % len(order) :] + order[: r % len(order)]
        for i in order:
            try:
                model = ctx["candidate"].apply(items[i])
                work = clone_tree(ctx["inputs"])
                with torch.no_grad():
                    stats = time_calls(
                        lambda args, m=model: m(*args), lambda _i, w=work: w, device=device, config=config
                    )
                row[i] = stats["median_ms"]
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                failure = _fail(exc)
                errors[items[i]["key"]] = failure["error"]
                if failure["fatal"]:
                    table.append(row)
                    return {
                        "times": table,
                        "errors": errors,
                        "fatal": True,
                        "gpu_s": time.monotonic() - started,
                    }
        table.append(row)
    return {"times": table, "errors": errors, "gpu_s": time.monotonic() - started}


if __name__ == "__main__":
    main()
