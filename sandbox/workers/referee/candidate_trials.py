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
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from gpu_handoff import HandoffSender
from op_policy import FORWARD_LABEL, make_recorder, ops_under
from protocol import derive_seed
from referee_common import (
    OOM_ERRORS,
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
    trial_inputs,
)
from timing import TimedSession, TimingConfig, time_calls

if TYPE_CHECKING:
    from protocol import CandidateRecord, CandidateSpec, RecheckRecord

Signature = list[tuple[list[int], str]]
POISON_RESERVE_BYTES = 256 * 1024 * 1024
POISON_HEADROOM = 512 * 1024 * 1024  # left free for the candidate's own first allocations
PART_BYTES = 1 << 30  # outputs larger than this cross to the judge in parts (save_outputs)
DISK_MARGIN_BYTES = 1 << 30
PROFILE_INPUT_BYTES = 2 << 30  # the profile's inputs for all its calls together, at most
POISON_BYTE = 0xFF  # all-ones: NaN in every floating dtype (a float32 NaN read as float16 is half zeros)
GRAPH_LAUNCHES = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})  # runtime and driver API


def _signature(tensors: list[torch.Tensor]) -> Signature:
    return [(list(t.shape), str(t.dtype)) for t in tensors]


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def poison_tensor(tensor: torch.Tensor) -> None:
    """Fill every byte of the tensor's storage, whatever its strides, with POISON_BYTE."""
    if tensor.device.type == "meta" or tensor.untyped_storage().nbytes() == 0:
        return
    raw = torch.empty(0, dtype=torch.uint8, device=tensor.device)
    raw.set_(tensor.untyped_storage())
    raw.fill_(1 if tensor.dtype is torch.bool else POISON_BYTE)


def poison_allocator(device: str, hint_bytes: int) -> tuple[int, int]:
    """Fill what the caching allocator will hand out next with POISON_BYTE, so an element the candidate never writes reads NaN instead of whatever was
    there. That is every free block it still caches (the free parts of segments partly in use,
    which `empty_cache` cannot release and best-fit prefers) plus a fresh reserve for new
    segments. Returns (bytes of the fresh reserve, bytes the call's outputs and inputs need):
    less than needed means the GPU was too full to be sure. Allocations the dispatch mode sees
    are filled as they are made (`poison_tensor`); this covers the ones it cannot see."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    index = torch.device(device).index
    index = torch.cuda.current_device() if index is None else index
    stream = torch.cuda.current_stream(index).cuda_stream
    remnants = sorted(
        block["size"]
        for segment in torch.cuda.memory_snapshot()
        if segment["device"] == index and segment["stream"] == stream
        for block in segment["blocks"]
        if block["state"] == "inactive"
    )
    # Smallest first: best fit then hands out each remnant itself, unsplit.
    held = [torch.empty(size, dtype=torch.uint8, device=device) for size in remnants]
    free, _total = torch.cuda.mem_get_info(torch.device(device))
    reserve = int(max(0, min(max(POISON_RESERVE_BYTES, 2 * hint_bytes), free - POISON_HEADROOM)))
    held.append(torch.empty(reserve, dtype=torch.uint8, device=device))
    held += [torch.empty(1 << 20, dtype=torch.uint8, device=device) for _ in range(32)]
    for tensor in held:
        tensor.fill_(POISON_BYTE)
    torch.cuda.synchronize()
    del held
    return reserve, hint_bytes


def save_outputs(
    path: str, structure: str, leaves: list[Any], snapshots: list[Any], sender: HandoffSender
) -> None:
    """The outputs for the judge. A large CUDA tensor goes to it on the GPU (gpu_handoff); the
    rest to the file at `path`, and a tensor over PART_BYTES that could not go on the GPU to files
    of its own, `PATH.L.K` for leaf L, part K (the judge derives the names): KernelBench's
    full-size outputs are 6-8 GB, past what the sandbox lets one file grow to."""
    name = os.path.basename(path)
    handed = {i for i, snap in enumerate(snapshots) if snap is not None and sender.send(name, i, snap)}
    _check_room(
        path,
        sum(
            s.numel() * s.element_size() for i, s in enumerate(snapshots) if s is not None and i not in handed
        ),
    )
    items: list[Any] = []
    for index, (leaf, snap) in enumerate(zip(leaves, snapshots, strict=True)):
        if index in handed:
            items.append({"gpu": True, "shape": list(snap.shape)})
        elif snap is not None and snap.numel() * snap.element_size() > PART_BYTES:
            flat = snap.detach().reshape(-1)
            pieces = flat.split(max(1, PART_BYTES // flat.element_size()))
            for part, piece in enumerate(pieces):
                torch.save(piece.cpu(), f"{path}.{index}.{part}")
            items.append({"parts": len(pieces), "shape": list(snap.shape)})
        elif snap is not None:
            items.append(snap.detach().cpu())
        elif leaf is None or type(leaf) in (bool, int, float):
            items.append(leaf)
        else:
            items.append(None)
    tmp = path + ".tmp"
    torch.save({"structure": structure, "items": items}, tmp)
    os.replace(tmp, path)


def _check_room(path: str, needed: int) -> None:
    """The referee's own limit, said as one: outputs that cannot be handed to the judge."""
    import shutil

    free = shutil.disk_usage(os.path.dirname(path)).free
    if needed + DISK_MARGIN_BYTES > free:
        raise StageFailure(
            "save outputs",
            "referee_capacity",
            f"the outputs of one call ({needed / 1e9:.2f} GB) do not fit in the {free / 1e9:.2f} GB free "
            f"on the disk of {os.path.dirname(os.path.dirname(path))}, where the candidate hands its "
            "outputs to the judge: free space there or judge on a machine with more",
        )


def _referee_copy(what: str, values: list[torch.Tensor], device: str) -> list[torch.Tensor]:
    """Clones the referee keeps beside the candidate's; an OOM here is the referee's capacity, not
    the candidate's fault, and is said with the sizes."""
    try:
        return [t.clone() for t in values]
    except OOM_ERRORS:
        free, total = torch.cuda.mem_get_info(torch.device(device)) if device.startswith("cuda") else (0, 0)
        raise StageFailure(
            "trial",
            "referee_capacity",
            f"the referee's copy of the {what} ({nbytes(values) / 1e9:.2f} GB) does not fit on the GPU "
            f"({free / 1e9:.2f} GB free of {total / 1e9:.2f} GB): the task is too large to judge on this GPU",
        ) from None


def run_trials(
    spec: CandidateSpec,
    body: CandidateRecord,
    stage: Callable[[str], None],
    model: torch.nn.Module,
    get_inputs: Any,
    sender: HandoffSender,
    hidden: list[str] | None = None,
) -> Signature:
    """The correctness trials; trials after the first draw their inputs' hidden transform among
    `hidden` (referee_common.trial_inputs), as the judge does for the same seeds."""
    from torch.profiler import ProfilerActivity, profile, record_function

    device = spec["device"]
    recorder = make_recorder(on_uninitialized=poison_tensor)
    profiler_ops: Counter[str] = Counter()
    signature: Signature = []
    output_bytes = 0
    for index, seed in enumerate(spec["trial_seeds"]):
        stage(f"trial {index}")
        inputs, _drawn = trial_inputs(get_inputs, seed, device, index, hidden or ["task"])
        input_tensors = tensors_in(inputs)
        signature = signature or _signature(input_tensors)
        before = [checksum(t) for t in input_tensors]
        pristine = _referee_copy("inputs", input_tensors, device)
        poisoned = needed = 0
        if device.startswith("cuda"):
            poisoned, needed = poison_allocator(device, nbytes(inputs) + output_bytes)
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
        save_outputs(os.path.join(spec["exchange_dir"], file), structure, leaves, snapshots, sender)
        body["trials"].append(
            {
                "index": index,
                "file": file,
                "call_ms": call_ms,
                "poisoned_bytes": poisoned,
                "poison_needed_bytes": needed,
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
                    (i, j)
                    for i, leaf in enumerate(leaves)
                    if type(leaf) is torch.Tensor
                    for j in aliased_inputs(leaf, input_tensors)
                ],
            }
        )
        output_bytes = nbytes([s for s in snapshots if s is not None])
        del inputs, input_tensors, pristine, out, leaves, snapshots
    body["ops"] = dict(recorder.counts)
    body["captured_ops"] = dict(recorder.captured)
    body["profiler_ops"] = dict(profiler_ops)
    return signature


def _fresh_seed(urandom: Any) -> int:
    return int.from_bytes(urandom(8), "little") >> 2


class SupervisedTiming(TimedSession):
    """The candidate's timed window, bracketed by its supervisor: the timed inputs' seed arrives
    when the window opens and the outputs to recheck are named when it closes, so nothing in this
    process can know either in advance. Outputs of the named calls are saved for the judge."""

    def __init__(self, link: Any, spec: CandidateSpec, urandom: Any, sender: HandoffSender) -> None:
        super().__init__()
        self.link = link
        self.sender = sender
        self.exchange_dir = spec["exchange_dir"]
        self._urandom = urandom
        self.base_seed: int | None = None
        self.picks: list[int] = []
        self.rechecks: list[RecheckRecord] = []

    def begin(self, reps: int, hold_all: bool) -> None:
        super().begin(reps, hold_all)
        answer = self.link.request("window_open", reps=reps, hold=hold_all)
        self.base_seed = int(answer["seed"])
        self.picks = list(answer.get("picks") or [])

    def seed(self, index: int) -> int:
        if index < 0 or self.base_seed is None:
            return _fresh_seed(self._urandom)
        return derive_seed(self.base_seed, index)

    def keep(self, index: int) -> bool:
        return self.hold_all or index in self.picks

    def end(self, reps_run: int, kept: dict[int, Any]) -> None:
        answer = self.link.request("window_close", reps=reps_run)
        picks = list(answer.get("picks") or []) if self.hold_all else self.picks
        for index in picks:
            if index not in kept:
                continue
            structure, leaves = flatten_outputs(kept[index])
            snapshots = [leaf if type(leaf) is torch.Tensor else None for leaf in leaves]
            file = f"recheck_{len(self.rechecks)}.pt"
            save_outputs(os.path.join(self.exchange_dir, file), structure, leaves, snapshots, self.sender)
            self.rechecks.append(
                {
                    "index": index,
                    "file": file,
                    "structure": structure,
                    "leaves": [describe_leaf(leaf) for leaf in leaves],
                }
            )


def time_candidate(
    spec: CandidateSpec,
    body: CandidateRecord,
    model: torch.nn.Module,
    get_inputs: Any,
    signature: Signature,
    session: SupervisedTiming,
) -> None:
    """Timed calls on inputs made fresh for each call from the seeds the supervisor hands out when
    the window opens; the outputs it names when the window closes are saved for the judge."""
    device = spec["device"]
    config = TimingConfig.from_dict(spec.get("timing"))

    def make_inputs(index: int) -> Any:
        inputs = seeded_call(get_inputs, session.seed(index), device)
        if _signature(tensors_in(inputs)) != signature:
            raise StageFailure(
                "timing",
                "input_tampering",
                "inputs made for a timed call differ in shape or dtype from the task's: "
                "something in the candidate process changed how inputs are generated",
            )
        return inputs

    with torch.no_grad():
        body["timing"] = time_calls(
            lambda inputs: model(*inputs), make_inputs, device=device, config=config, session=session
        )
    body["rechecks"] = session.rechecks


def profile_kernels(
    spec: CandidateSpec, body: CandidateRecord, model: torch.nn.Module, get_inputs: Any, urandom: Any
) -> None:
    """Which kernels ran in a few forward calls, with their device time; the profiler's operator
    log of the same calls joins the policy audit."""
    from torch.autograd import DeviceType  # pyright: ignore[reportPrivateImportUsage]
    from torch.profiler import ProfilerActivity, profile, record_function

    device = spec["device"]
    body["kernels"], body["profile_error"] = None, None
    if not device.startswith("cuda"):
        body["profile_error"] = "no GPU: the per-kernel breakdown needs CUDA"
        return
    calls = int(spec.get("profile_calls", 5))
    first = seeded_call(get_inputs, _fresh_seed(urandom), device)
    # Fresh inputs per call keep caches honest; past L2's size they cannot help, and KernelBench's
    # full-size inputs (6-17 GB) would need five times the memory: then one set serves every call.
    distinct = calls if nbytes(first) * calls <= PROFILE_INPUT_BYTES else 1
    batches = [first] + [seeded_call(get_inputs, _fresh_seed(urandom), device) for _ in range(distinct - 1)]
    torch.cuda.synchronize()
    try:
        with torch.no_grad(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for call in range(calls):
                with record_function(FORWARD_LABEL):
                    model(*batches[call % distinct])
            torch.cuda.synchronize()
        events = prof.events() or []
    except Exception as exc:
        if classify_error(exc) in ("cuda_error", "oom"):
            raise
        body["profile_error"] = f"torch.profiler failed: {type(exc).__name__}: {exc}"
        return
    kernels: dict[str, list[float]] = {}
    body["graph_launches"] = sum(event.name in GRAPH_LAUNCHES for event in events) / calls
    for event in events:
        # The forward's own record_function label shows up on the GPU timeline too (a user
        # annotation spanning the kernels): it is not a kernel.
        if event.device_type == DeviceType.CUDA and event.name != FORWARD_LABEL:
            entry = kernels.setdefault(event.name, [0, 0.0])
            entry[0] += 1
            entry[1] += event.time_range.elapsed_us()
    body["kernels"] = [(name, int(c), float(us)) for name, (c, us) in kernels.items()]
    body["profiled_calls"] = calls
    body["profile_ops"] = ops_under(events, FORWARD_LABEL)
