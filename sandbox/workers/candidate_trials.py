"""The candidate worker's measured part: trials, timing, profile (torch + stdlib only).

Each trial: fresh inputs from the trial's seed (a pristine copy kept), the caching allocator's
free memory filled with NaN, the call under the operator recorder and the profiler's operator
log, an immediate clone of every output on the current stream (what a stream-ordered consumer
would read), a device-wide sync, then the checks: did the outputs change after the call
returned, did the inputs change, do outputs share memory with inputs. The snapshots go to a
file for the judge; no expected value exists anywhere in this process.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from op_policy import FORWARD_LABEL, make_recorder, ops_under
from referee_common import (
    StageFailure,
    aliased_inputs,
    checksum,
    classify_error,
    describe_leaf,
    flatten_outputs,
    nbytes,
    same_bits,
    seeded_call,
    tensors_in,
)
from timing import TimingConfig, time_calls

Signature = list[tuple[list[int], str]]
POISON_BYTES = 256 * 1024 * 1024


def _signature(tensors: list[torch.Tensor]) -> Signature:
    return [(list(t.shape), str(t.dtype)) for t in tensors]


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def poison_allocator(device: str, hint_bytes: int) -> None:
    """Fill what the caching allocator will hand out next with NaN, so an output element the
    candidate never writes reads as NaN instead of whatever was there."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    free, _total = torch.cuda.mem_get_info(torch.device(device))
    size = int(min(max(POISON_BYTES, 2 * hint_bytes), free // 2)) // 4
    large = torch.empty(size, dtype=torch.float32, device=device).fill_(float("nan"))
    small = [torch.empty(1 << 18, dtype=torch.float32, device=device).fill_(float("nan")) for _ in range(32)]
    torch.cuda.synchronize()
    del large, small


def save_outputs(path: str, structure: str, leaves: list[Any], snapshots: list[Any]) -> None:
    items = []
    for leaf, snap in zip(leaves, snapshots, strict=True):
        if snap is not None:
            items.append(snap.detach().cpu())
        elif leaf is None or type(leaf) in (bool, int, float):
            items.append(leaf)
        else:
            items.append(None)
    tmp = path + ".tmp"
    torch.save({"structure": structure, "items": items}, tmp)
    os.replace(tmp, path)


def run_trials(
    spec: dict, body: dict, stage: Callable[[str], None], model: torch.nn.Module, get_inputs: Any
) -> Signature:
    from torch.profiler import ProfilerActivity, profile, record_function

    device = spec["device"]
    recorder = make_recorder()
    profiler_ops: Counter[str] = Counter()
    signature: Signature = []
    output_bytes = 0
    for index, seed in enumerate(spec["trial_seeds"]):
        stage(f"trial {index}")
        inputs = seeded_call(get_inputs, seed, device)
        input_tensors = tensors_in(inputs)
        signature = signature or _signature(input_tensors)
        before = [checksum(t) for t in input_tensors]
        pristine = [t.clone() for t in input_tensors]
        if device.startswith("cuda"):
            poison_allocator(device, nbytes(inputs) + output_bytes)
        with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()
            with record_function(FORWARD_LABEL), recorder:
                out = model(*inputs)
            structure, leaves = flatten_outputs(out)
            snapshots = [leaf.clone() if type(leaf) is torch.Tensor else None for leaf in leaves]
            _sync(device)
            call_ms = (time.perf_counter() - start) * 1e3
        profiler_ops.update(ops_under(prof.events(), FORWARD_LABEL))
        file = f"trial_{index}.pt"
        save_outputs(os.path.join(spec["exchange_dir"], file), structure, leaves, snapshots)
        body["trials"].append(
            {
                "index": index,
                "file": file,
                "call_ms": call_ms,
                "structure": structure,
                "leaves": [describe_leaf(leaf) for leaf in leaves],
                "input_checksums": before,
                "input_checksums_after": [checksum(t) for t in input_tensors],
                "mutated_inputs": [
                    i
                    for i, (t, p) in enumerate(zip(input_tensors, pristine, strict=False))
                    if not same_bits(t, p)
                ],
                "changed_after_return": [
                    i
                    for i, (leaf, snap) in enumerate(zip(leaves, snapshots, strict=False))
                    if snap is not None and not same_bits(leaf, snap)
                ],
                "aliases": [
                    [i, j]
                    for i, leaf in enumerate(leaves)
                    if type(leaf) is torch.Tensor
                    for j in aliased_inputs(leaf, input_tensors)
                ],
            }
        )
        output_bytes = nbytes([s for s in snapshots if s is not None])
        del inputs, input_tensors, pristine, out, leaves, snapshots
    body["ops"] = dict(recorder.counts)
    body["profiler_ops"] = dict(profiler_ops)
    return signature


def _fresh_seed(urandom: Any) -> int:
    return int.from_bytes(urandom(8), "little") >> 2


def time_candidate(
    spec: dict, body: dict, model: torch.nn.Module, get_inputs: Any, signature: Signature, urandom: Any
) -> None:
    """Timed calls on inputs made fresh for each call from seeds drawn here, after the candidate was
    imported; a few timed outputs, picked at random, are saved for the judge to recheck."""
    device = spec["device"]
    config = TimingConfig.from_dict(spec.get("timing"))
    picker = random.Random(_fresh_seed(urandom))
    picks = set(picker.sample(range(config.min_reps), min(spec.get("rechecks", 2), config.min_reps)))
    seeds: dict[int, int] = {}
    rechecks: list[dict] = []

    def make_inputs(index: int) -> Any:
        seed = _fresh_seed(urandom)
        inputs = seeded_call(get_inputs, seed, device)
        if _signature(tensors_in(inputs)) != signature:
            raise StageFailure(
                "timing",
                "input_tampering",
                "inputs made for a timed call differ in shape or dtype from the task's: "
                "something in the candidate process changed how inputs are generated",
            )
        seeds[index] = seed
        return inputs

    def on_output(index: int, inputs: Any, out: Any) -> None:
        if index not in picks:
            return
        structure, leaves = flatten_outputs(out)
        snapshots = [leaf if type(leaf) is torch.Tensor else None for leaf in leaves]
        file = f"recheck_{len(rechecks)}.pt"
        save_outputs(os.path.join(spec["exchange_dir"], file), structure, leaves, snapshots)
        rechecks.append(
            {
                "index": index,
                "seed": seeds[index],
                "file": file,
                "structure": structure,
                "leaves": [describe_leaf(leaf) for leaf in leaves],
            }
        )

    with torch.no_grad():
        body["timing"] = time_calls(
            lambda inputs: model(*inputs), make_inputs, device=device, config=config, on_output=on_output
        )
    body["rechecks"] = rechecks


def profile_kernels(spec: dict, body: dict, model: torch.nn.Module, get_inputs: Any, urandom: Any) -> None:
    """Which kernels ran in a few forward calls, with their device time; the profiler's operator
    log of the same calls joins the policy audit."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    device = spec["device"]
    body["kernels"], body["profile_error"] = None, None
    if not device.startswith("cuda"):
        body["profile_error"] = "no GPU: the per-kernel breakdown needs CUDA"
        return
    calls = int(spec.get("profile_calls", 5))
    batches = [seeded_call(get_inputs, _fresh_seed(urandom), device) for _ in range(calls)]
    torch.cuda.synchronize()
    try:
        with torch.no_grad(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for inputs in batches:
                with record_function(FORWARD_LABEL):
                    model(*inputs)
            torch.cuda.synchronize()
        events = prof.events()
    except Exception as exc:
        if classify_error(exc) in ("cuda_error", "oom"):
            raise
        body["profile_error"] = f"torch.profiler failed: {type(exc).__name__}: {exc}"
        return
    kernels: dict[str, list[float]] = {}
    for event in events:
        if event.device_type == DeviceType.CUDA:
            entry = kernels.setdefault(event.name, [0, 0.0])
            entry[0] += 1
            entry[1] += event.time_range.elapsed_us()
    body["kernels"] = [[name, int(c), float(us)] for name, (c, us) in kernels.items()]
    body["profiled_calls"] = calls
    body["profile_ops"] = ops_under(events, FORWARD_LABEL)
