"""The trusted judge worker: reference outputs, comparison, baselines (torch + stdlib only).

usage: python -I judge.py      (one line of spec JSON on stdin; the result on stdout)

It never imports candidate code. The host starts it early so `import torch` overlaps the
candidate's run, and sends the spec only after the candidate worker has exited: until then
the judge does nothing on the GPU, and no expected output exists anywhere. It rebuilds the
reference and every input from the seeds itself, and reads the candidate's outputs with
`torch.load(weights_only=True)`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import siblings  # noqa: F401  (the workers import each other by name)

# isort: split
import torch
from compare import compare_tensors, compare_values, tolerance_for
from gpu_gate import GpuGate, open_gate
from gpu_handoff import HandedOver, HandoffReceiver
from gpu_memory import keep_one
from hidden_inputs import SCALED_TRANSFORMS, output_scale
from lifetime import die_with_parent, parent_from_argv
from precision_check import DEFAULT_POLICY, baseline_flags, baseline_model, measure, not_measured, set_tf32
from protocol import (
    BaselineError,
    DiffRecord,
    JudgeBaselines,
    JudgedRecheck,
    JudgedTrial,
    JudgeResult,
    JudgeSpec,
    PrecisionRecord,
    ReferenceOutputs,
    TimingRecord,
    Tolerances,
    WorkerDevice,
    emit,
    stdout_to_stderr,
)
from referee_common import (
    StageFailure,
    aliased_inputs,
    build_reference,
    checksum,
    classify_error,
    clone_tree,
    describe_error,
    describe_leaf,
    flatten_outputs,
    hidden_allowed,
    load_task_module,
    nbytes,
    precision_trial,
    same_bits,
    seeded_call,
    state_checksum,
    tensors_in,
    trial_inputs,
)
from timing import TimingConfig, measure_copy_bandwidth, time_calls

COMPILE_NICENESS = 10  # as the builds' (build.py BUILD_NICENESS)
WAIT_AFTER_COMPILING = "waiting for the GPU (shared, after compiling)"
Measured = TypeVar("Measured")


def main() -> None:
    parent = parent_from_argv(sys.argv[1:])
    if parent is not None:
        die_with_parent(parent)
    receiver = _receiver(sys.argv[1:])
    line = sys.stdin.readline()
    if not line.strip():
        return  # the host dropped the evaluation before sending a spec
    spec: JudgeSpec = json.loads(line)
    got_spec = time.monotonic()
    stages: dict[str, float] = {}
    result: JudgeResult = {"ok": False, "failure": None, "stages": stages}
    with stdout_to_stderr():
        try:
            with _stage(stages, "receiving the handed-over outputs"):
                received = receiver.finish() if receiver is not None else {}
            judge(spec, result, received, _memory_fds(sys.argv[1:]))
            if receiver is not None and receiver.notes:
                result["handoff_notes"] = receiver.notes
            result["ok"] = True
        except BaseException as exc:
            message, tb = describe_error(exc)
            result["failure"] = {
                "stage": "judge",
                "kind": exc.kind if isinstance(exc, StageFailure) else classify_error(exc),
                "message": message,
                "traceback": tb,
            }
    result["spec_to_result_s"] = time.monotonic() - got_spec  # the rest of the host's wait is exiting
    emit(result)


def _memory_fds(argv: list[str]) -> list[int]:
    """`--memory-fds A,B,...`: the evaluation's claim on the GPU's memory, inherited (gpu_memory)."""
    if "--memory-fds" not in argv:
        return []
    return [int(fd) for fd in argv[argv.index("--memory-fds") + 1].split(",") if fd]


def _receiver(argv: list[str]) -> HandoffReceiver | None:
    """`--handoff-fd FD --device DEV`: the listening socket the host bound in the exchange folder
    before the candidate started; outputs handed over on the GPU arrive there from now on."""
    if "--handoff-fd" not in argv:
        return None
    fd = int(argv[argv.index("--handoff-fd") + 1])
    device = argv[argv.index("--device") + 1] if "--device" in argv else "cuda"
    receiver = HandoffReceiver(device)
    receiver.serve(socket.socket(fileno=fd))
    return receiver


def judge(spec: JudgeSpec, result: JudgeResult, received: HandedOver, memory_fds: list[int]) -> None:
    gate = open_gate(spec.get("gpu_gate"))  # shared to compare, exclusive to time
    try:
        if gate is not None:
            with _stage(result["stages"], "waiting for the GPU (shared, to compare)"):
                gate.hold("shared")
        _judge(spec, result, gate, received, memory_fds)
    finally:
        if gate is not None:
            gate.close()


def _judge(
    spec: JudgeSpec, result: JudgeResult, gate: GpuGate | None, received: HandedOver, memory_fds: list[int]
) -> None:
    device = spec["device"]
    stages = result["stages"]
    result["device"] = _device_info(device)
    set_tf32(False)  # the reference is full FP32 under every policy (docs/precision.md)
    with _stage(stages, "reference"):
        namespace = load_task_module(spec["task_source"], spec["task_filename"])
        get_inputs = namespace["get_inputs"]
        init_args = seeded_call(namespace["get_init_inputs"], spec["init_seed"], device)
        model = build_reference(namespace, init_args, spec["state_seed"], device)
        result["state_checksum"] = state_checksum(model.state_dict())
    with _stage(stages, "hidden inputs' domain"):
        result["hidden_transforms"] = hidden_allowed(model, get_inputs, spec.get("hidden_probe_seed"), device)
    tolerances = spec["tolerances"]
    first_outputs: list[tuple[Any, Any]] = []
    with _stage(stages, "comparisons"):
        checked = _compare_all(spec, result, model, get_inputs, tolerances, received, first_outputs)
    if first_outputs and spec["trials"]:
        with _stage(stages, "precision"):
            result["precision"] = _measured_precision(
                spec, model, get_inputs, first_outputs, result.get("hidden_transforms") or ["task"]
            )
    del first_outputs

    received.clear()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()  # what the comparisons held goes back to other evaluations on this GPU
    keep_one(memory_fds)  # and so does the claim on it: the baselines need one input set at a time
    # no baseline is worth timing for a wrong answer, nor for one computed below the policy's precision
    worth_timing = all(d.get("passed") for d in checked) and result.get("precision", {}).get("ok", True)
    policy = spec.get("precision", DEFAULT_POLICY)
    measured = result.get("precision")
    at = measured["baseline_precision"] if measured else DEFAULT_POLICY if policy == "match" else policy
    result["baseline_precision"] = at
    result["baselines"], result["bandwidth_gbps"] = _baselines(
        baseline_model(model, at, device),
        get_inputs,
        spec,
        gate,
        stages,
        timed=worth_timing,
        measure_bandwidth=bool(spec.get("measure_bandwidth")),
        precision=at,
    )


def _compared_numerically(diff: DiffRecord) -> bool:
    """Whether the comparison got as far as the numbers (shapes and dtypes matched), with no NaN or
    infinity where the reference has none: an error such outputs have can be placed on the ladder."""
    return "max_abs_err" in diff and not diff.get("nonfinite_mismatches")


def _measured_precision(
    spec: JudgeSpec,
    model: torch.nn.Module,
    get_inputs: Callable[[], Any],
    first_outputs: list[tuple[Any, Any]],
    allowed: list[str],
) -> PrecisionRecord:
    """The effective-precision check of the precision trial's outputs (precision_check.measure). A
    failure of the check itself is said in its record and rejects nothing; a CUDA error ends the
    judge."""
    policy = spec.get("precision", DEFAULT_POLICY)
    index = precision_trial(len(spec["trials"]), allowed)
    try:
        return measure(
            model,
            lambda: trial_inputs(get_inputs, spec["trial_seeds"][index], spec["device"], index, allowed)[0],
            [want for want, _ in first_outputs],
            [got for _, got in first_outputs],
            policy,
        )
    except Exception as exc:
        if classify_error(exc) == "cuda_error":
            raise
        return not_measured(policy, f"the check failed: {type(exc).__name__}: {exc}"[:500])


def _compare_all(
    spec: JudgeSpec,
    result: JudgeResult,
    model: torch.nn.Module,
    get_inputs: Callable[[], Any],
    tolerances: Tolerances,
    received: HandedOver,
    first_outputs: list[tuple[Any, Any]],
) -> list[DiffRecord]:
    """Every trial and recheck: the reference's outputs on inputs rebuilt from their seeds, against
    the candidate's. Returns every output's diff; `first_outputs` gets the precision trial's
    (expected, candidate) pairs when each was compared number by number, passed or not: a TF32
    GEMM over a long K fails an FP32 tolerance outright, and its precision says why."""
    device = spec["device"]
    trials: list[JudgedTrial] = []
    result["trials"] = trials
    allowed = result.get("hidden_transforms") or ["task"]
    measured_on = precision_trial(len(spec["trials"]), allowed)
    for trial in spec["trials"]:
        seed = spec["trial_seeds"][trial["index"]]
        inputs, drawn = trial_inputs(get_inputs, seed, device, trial["index"], allowed)
        input_checksums = [checksum(t) for t in tensors_in(inputs)]
        if trial["index"] == 0:
            made_on: list[str] = []
            again = seeded_call(get_inputs, seed, device, made_on=made_on)
            result["inputs_reproducible"] = input_checksums == [checksum(t) for t in tensors_in(again)]
            result["inputs_built_on"] = made_on[0]
            del again
        kept: list[tuple[Any, Any]] | None = [] if trial["index"] == measured_on else None
        scaled = drawn in SCALED_TRANSFORMS
        judged: JudgedTrial = {
            "index": trial["index"],
            "input_checksums": input_checksums,
            "inputs": drawn,
            **_reference_and_diffs(model, inputs, spec, trial["file"], tolerances, received, kept, scaled),
        }
        trials.append(judged)
        del inputs
        if kept is not None and all(_compared_numerically(d) for d in judged["diffs"]):
            first_outputs.extend(kept)
        del kept

    rechecks: list[JudgedRecheck] = []
    result["rechecks"] = rechecks
    for recheck in spec.get("rechecks", []):
        inputs = seeded_call(get_inputs, recheck["seed"], device)
        rechecked: JudgedRecheck = {
            "index": recheck["index"],
            "seed": recheck["seed"],
            **_reference_and_diffs(model, inputs, spec, recheck["file"], tolerances, received),
        }
        rechecks.append(rechecked)
        del inputs
    return [d for report in [*trials, *rechecks] for d in report.get("diffs", [])]


def _reference_and_diffs(
    model: torch.nn.Module,
    inputs: list,
    spec: JudgeSpec,
    file: str,
    tolerances: Tolerances,
    received: HandedOver,
    kept: list[tuple[Any, Any]] | None = None,
    scaled: bool = False,
) -> ReferenceOutputs:
    """The expected outputs of `inputs` and the candidate's compared with them; `kept` gets each
    (expected, candidate) output pair when given; `scaled`: the absolute tolerance is scaled to each
    output's magnitude (hidden_inputs.SCALED_TRANSFORMS)."""
    device = spec["device"]
    pristine = clone_tree(inputs)
    with torch.no_grad():
        expected = model(*inputs)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    input_tensors, pristine_tensors = tensors_in(inputs), tensors_in(pristine)
    structure, leaves = flatten_outputs(expected)
    return {
        "structure": structure,
        "leaves": [describe_leaf(leaf) for leaf in leaves],
        "reference_mutates_inputs": any(
            not same_bits(a, b) for a, b in zip(input_tensors, pristine_tensors, strict=False)
        ),
        "reference_aliases_inputs": any(
            aliased_inputs(leaf, input_tensors) for leaf in leaves if type(leaf) is torch.Tensor
        ),
        "input_bytes": nbytes(pristine),
        "output_bytes": nbytes(leaves),
        "diffs": _diffs(spec, file, structure, leaves, tolerances, received, kept, scaled),
    }


def _diffs(
    spec: JudgeSpec,
    file: str,
    structure: str,
    leaves: list,
    tolerances: Tolerances,
    received: HandedOver,
    kept: list[tuple[Any, Any]] | None = None,
    scaled: bool = False,
) -> list[DiffRecord]:
    """The candidate's outputs in `file` against the expected `leaves`, one record per leaf (and
    the pairs compared in `kept`, when given); `scaled`: atol times each output's scale."""
    try:
        candidate = torch.load(
            os.path.join(spec["exchange_dir"], file), map_location="cpu", weights_only=True, mmap=True
        )
    except Exception as exc:  # the file is the candidate process's to write: its fault, not ours
        return [{"passed": False, "problems": [f"the candidate's output file is unreadable: {exc}"]}]
    if not isinstance(candidate, dict) or not isinstance(candidate.get("items"), list):
        return [{"passed": False, "problems": ["the candidate's output file is malformed"]}]
    if candidate.get("structure") != structure or len(candidate["items"]) != len(leaves):
        problem = f"the output is {candidate.get('structure')} where {structure} is expected"
        return [{"passed": False, "problems": [problem]}]
    diffs: list[DiffRecord] = []
    for index, (want, got) in enumerate(zip(leaves, candidate["items"], strict=True)):
        if type(want) is torch.Tensor and isinstance(got, dict) and got.get("gpu") is True:
            got = _handed_over(received, file, index)
            if isinstance(got, str):
                diffs.append({"passed": False, "problems": [got]})
                continue
        elif type(want) is torch.Tensor and isinstance(got, dict):
            got = _joined_parts(os.path.join(spec["exchange_dir"], file), index, got, want.device)
            if isinstance(got, str):
                diffs.append({"passed": False, "problems": [got]})
                continue
        if type(want) is torch.Tensor:
            if type(got) is not torch.Tensor:
                diffs.append({"passed": False, "problems": ["not a plain torch.Tensor"]})
                continue
            atol, rtol, norm_rtol = tolerance_for(want.dtype, tolerances)
            if scaled:
                atol *= output_scale(want)
            got = got.to(want.device)
            diffs.append(compare_tensors(want, got, atol=atol, rtol=rtol, norm_rtol=norm_rtol))
            if kept is not None:
                kept.append((want, got))
        else:
            if kept is not None:
                kept.append((want, None))
            atol, rtol, _ = tolerance_for(torch.float32, tolerances)
            diffs.append(compare_values(want, got, atol=atol, rtol=rtol))
    return diffs


def _handed_over(received: HandedOver, file: str, index: int) -> torch.Tensor | str:
    """The output the candidate handed over on the GPU (gpu_handoff), taken out of `received` so
    its memory goes as soon as it is compared; or what is wrong with it. The judge having no room
    for it is the referee's limit: the evaluation ends as a referee error that names the sizes."""
    entry = received.pop((file, index), None)
    if entry is None:
        return "the candidate's output was not handed over on the GPU although its file says so"
    if entry.capacity:
        raise StageFailure("judge", "referee_capacity", entry.problem)
    return entry.tensor if entry.tensor is not None else entry.problem


def _joined_parts(path: str, index: int, entry: dict, device: torch.device) -> torch.Tensor | str:
    """A large output saved in parts (candidate_trials.save_outputs), joined on `device`; or what is
    wrong with it. The part files' names are ours to derive, never read from the candidate's file."""
    parts, shape = entry.get("parts"), entry.get("shape")
    if type(parts) is not int or not 0 < parts <= 1 << 16 or not isinstance(shape, list):
        return "the candidate's output file is malformed"
    if not all(type(d) is int and d >= 0 for d in shape):
        return "the candidate's output file is malformed"
    pieces = []
    for part in range(parts):
        try:
            piece = torch.load(f"{path}.{index}.{part}", map_location="cpu", weights_only=True, mmap=True)
        except Exception as exc:
            return f"part {part} of the candidate's output is unreadable: {exc}"
        if type(piece) is not torch.Tensor or piece.dim() != 1:
            return f"part {part} of the candidate's output is malformed"
        pieces.append(piece.to(device))
    if len({p.dtype for p in pieces}) != 1:
        return "the parts of the candidate's output differ in dtype"
    joined = torch.cat(pieces)
    del pieces
    if joined.numel() != math.prod(shape):
        return f"the candidate's output has {joined.numel()} elements where its shape {shape} needs {math.prod(shape)}"
    return joined.reshape(shape)


def _baselines(
    model: torch.nn.Module,
    get_inputs: object,
    spec: JudgeSpec,
    gate: GpuGate | None,
    stages: dict[str, float],
    *,
    timed: bool,
    measure_bandwidth: bool,
    precision: str = DEFAULT_POLICY,
) -> tuple[JudgeBaselines, float | None]:
    """Eager and torch.compile timed (when `timed`) and the copy bandwidth measured, all in one
    exclusive hold of the GPU's gate, under the numeric flags of the precision they are timed at
    (`model` is already autocast for FP16 and BF16).

    torch.compile compiles first (seconds to minutes of CPU) holding no gate at all
    (`_gate_free_while_compiling`), and its first run, where Inductor autotunes, happens under
    the shared hold. Then one wait for the GPU to oneself, not one per timing: each such wait
    lasts until every other evaluation's correctness work on the GPU has drained. Timed one
    after the other around the compile, eager, torch.compile (and, once per batch, the bandwidth)
    each waited, and the judges of a full-size KernelBench batch on the H200 (2026-12-03) spent
    1326 s in exclusive waits and 592 s waiting for the shared hold after compiling, for 112 s
    of baseline timing (`benchmarks/results/h200-2026-12-03b/`)."""
    wanted = (spec.get("baselines") or {}) if timed else {}
    device = spec["device"]
    config = TimingConfig.from_dict(spec.get("timing"))
    out: JudgeBaselines = {}
    bandwidth: float | None = None
    if not (wanted.get("eager") or wanted.get("compile_mode") or measure_bandwidth):
        return out, bandwidth

    def make_inputs(_index: int) -> list:
        return seeded_call(get_inputs, int.from_bytes(os.urandom(8), "little") >> 2, device)  # type: ignore[arg-type]

    def time_it(name: str, call: Callable[[list], object]) -> TimingRecord:
        before = torch.cuda.memory_allocated(device) if device.startswith("cuda") else 0
        try:
            with _stage(stages, f"{name} timing"):
                return time_calls(call, make_inputs, device=device, config=config)
        except torch.OutOfMemoryError as exc:  # says whether the timing itself grew the judge
            raise torch.OutOfMemoryError(
                f"{exc} [the judge held {before / 2**30:.2f} GiB of tensors when its {name} timing began]"
            ) from exc

    with torch.no_grad(), baseline_flags(precision):
        mode = wanted.get("compile_mode")
        compiled: Callable[..., object] | BaselineError | None = None
        if mode:
            compiled = _guarded(lambda: _compiled(model, mode, make_inputs(0), gate, stages))
        if gate is not None:
            with _stage(stages, "waiting for the GPU (exclusive, to time)"):
                gate.hold("exclusive")
        try:
            if wanted.get("eager"):
                out["eager"] = _guarded(lambda: time_it("eager", lambda x: model(*x)))
            if callable(compiled):
                compiled_model = compiled
                out["compile"] = _guarded(lambda: time_it("torch.compile", lambda x: compiled_model(*x)))
            elif compiled is not None:  # it did not compile
                out["compile"] = compiled
            if measure_bandwidth:
                with _stage(stages, "bandwidth"):
                    bandwidth = measure_copy_bandwidth(device)
        finally:
            if gate is not None:
                gate.hold("shared")
    return out, bandwidth


def _compiled(
    model: torch.nn.Module, mode: str, inputs: list, gate: GpuGate | None, stages: dict[str, float]
) -> Callable[..., object]:
    """`model` under torch.compile, compiled and run once on `inputs` (the timing's own warm-up
    follows). Autotuning modes time kernels while they compile: they take the GPU to themselves
    for it, and keep it for the timings that follow."""
    torch._dynamo.reset()
    compiled = torch.compile(model, mode=mode, dynamic=False)
    if gate is not None and "autotune" in mode:
        with _stage(stages, "waiting for the GPU (exclusive, to autotune and time)"):
            gate.hold("exclusive")
        with _stage(stages, "torch.compile compiling"):
            _compile_aside(compiled, inputs)
        return compiled
    waited = stages.get(WAIT_AFTER_COMPILING, 0.0)
    with _stage(stages, "torch.compile compiling"), _gate_free_while_compiling(gate, stages):
        _compile_aside(compiled, inputs)
    stages["torch.compile compiling"] -= stages.get(WAIT_AFTER_COMPILING, 0.0) - waited
    return compiled


@contextlib.contextmanager
def _stage(stages: dict[str, float], name: str) -> Iterator[None]:
    """Adds the seconds spent inside to `stages[name]` (the judge's part of EvalResult.stage_times)."""
    started = time.monotonic()
    try:
        yield
    finally:
        stages[name] = stages.get(name, 0.0) + time.monotonic() - started


@contextlib.contextmanager
def _gate_free_while_compiling(gate: GpuGate | None, stages: dict[str, float]) -> Iterator[None]:
    """No hold on the GPU's gate while Dynamo and Inductor compile, the hold back before the
    compiled code runs.

    A shared hold makes every exclusive one wait (timing queues behind the readers that hold the
    gate, and later readers queue behind it), so a judge that held it through minutes of CPU-only
    compiling stalled every other evaluation's timing on the GPU and the batch's evaluations ended
    in lockstep waves (level 3 on the H200, 2026-12-03: every judge 145-196 s, eight at a time).
    Dynamo runs its compile-start callbacks before it traces a frame and the end ones after the
    backend returned, before the frame's compiled code first runs (which is where default-mode
    Inductor autotunes its kernels: under the hold again). Only Dynamo's own compiles let go:
    CUDA-graph recording also runs these callbacks, and it runs kernels. A torch without
    the callbacks keeps the hold throughout, as before."""
    try:
        from torch._dynamo.callback import CallbackTrigger, callback_handler
    except ImportError:
        callback_handler = None
    if gate is None or callback_handler is None:
        yield
        return
    held: list[str] = []

    def compile_starts(args: object = None) -> None:
        if getattr(args, "callback_trigger", None) != CallbackTrigger.DYNAMO:
            return
        held.append(gate.mode)
        gate.hold("none")

    def compile_ends(args: object = None) -> None:
        if getattr(args, "callback_trigger", None) != CallbackTrigger.DYNAMO or not held:
            return
        with _stage(stages, WAIT_AFTER_COMPILING):
            gate.hold(held.pop())  # type: ignore[arg-type]

    callback_handler.register_start_callback(compile_starts)
    callback_handler.register_end_callback(compile_ends)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            callback_handler.remove_start_callback(compile_starts)
        with contextlib.suppress(ValueError):
            callback_handler.remove_end_callback(compile_ends)
        if held:  # a compile that never reached its end callback
            gate.hold(held.pop())  # type: ignore[arg-type]


def _compile_aside(compiled: Callable[..., object], inputs: list) -> None:
    """torch.compile compiles on the first call. That call runs on a thread of its own at the
    builds' lower CPU priority (Linux keeps a nice value per thread, and inductor's compile workers
    inherit it), so seconds of compiling beside other evaluations' timing loops slow them less; the
    timing itself stays on this thread, at normal priority."""
    failure: list[BaseException] = []

    def first_call() -> None:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, COMPILE_NICENESS)
        try:
            with torch.no_grad():
                compiled(*inputs)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=first_call, name="torch.compile")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


def _guarded(measure: Callable[[], Measured]) -> Measured | BaselineError:
    """What `measure` returns, or the error that kept the baseline from being measured; a CUDA
    error is the GPU's state, not the baseline's, and ends the judge."""
    try:
        return measure()
    except Exception as exc:
        if classify_error(exc) == "cuda_error":
            raise
        return {"error": f"{type(exc).__name__}: {exc}"[:2000]}


def _device_info(device: str) -> WorkerDevice:
    info: WorkerDevice = {"device": device, "torch": torch.__version__, "python": sys.version.split()[0]}
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        info.update(name=props.name, capability=f"{props.major}.{props.minor}")
    else:
        info.update(name="cpu", capability="")
    return info


if __name__ == "__main__":
    main()
