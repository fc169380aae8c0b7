"""The tuner's trusted judge: the reference output and per-configuration verdicts (torch + stdlib only).

usage: python -I tune_judge.py      (a host process; JSON lines on stdin, JSON lines on stdout)

It never imports candidate code. The first line is the spec (task source, seeds, device,
tolerances): it rebuilds the reference model and inputs from the seeds, computes the expected
outputs once (recording which aten operators ran: the task's features for the experience
library), keeps them and answers `ready`. Then each line is a request:

  {"op": "verify", "id": .., "file": path}   a candidate output file (torch.load weights_only);
                                             the file is deleted once read
  {"op": "known", "id": .., "fingerprint": f} a verdict already given for identical bits, if any
  {"op": "stop"}

Verdicts are cached by the fingerprint of the bits the judge itself read, so identical outputs
of different configurations are compared once. Comparisons run on the task's device: the host
asks only while the worker is idle, so they never overlap a timing.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import TYPE_CHECKING

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import siblings  # noqa: F401  (the workers import each other by name)

_out = os.fdopen(os.dup(1), "w")  # the protocol channel; fd 1 itself is pointed at stderr
os.dup2(2, 1)

import torch  # noqa: E402
from compare import compare_tensors, compare_values, tolerance_for  # noqa: E402
from referee_common import (  # noqa: E402
    build_reference,
    checksum,
    describe_error,
    describe_leaf,
    flatten_outputs,
    load_task_module,
    seeded_call,
    state_checksum,
    tensors_in,
)
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

if TYPE_CHECKING:
    from protocol import (
        KnownRequest,
        Tolerances,
        TuneJudgeAnswer,
        TuneJudgeReady,
        TuneJudgeSpec,
        TuneVerdict,
        VerifyRequest,
    )


def reply(body: TuneJudgeReady | TuneJudgeAnswer) -> None:
    _out.write(json.dumps(body) + "\n")
    _out.flush()


class _OpRecorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.ops.add(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def fingerprint(items: list) -> str:
    parts = []
    for item in items:
        parts.append(checksum(item) if type(item) is torch.Tensor else repr(item))
    return "|".join(parts)


def setup(spec: TuneJudgeSpec) -> tuple[list, str]:
    device = spec["device"]
    namespace = load_task_module(spec["task_source"], spec["task_filename"])
    init_args = seeded_call(namespace["get_init_inputs"], spec["init_seed"], device)
    model = build_reference(namespace, init_args, spec["state_seed"], device)
    inputs = seeded_call(namespace["get_inputs"], spec["input_seed"], device)
    input_sums = [checksum(t) for t in tensors_in(inputs)]
    recorder = _OpRecorder()
    with torch.no_grad():
        with recorder:
            model(*[t.clone() if type(t) is torch.Tensor else t for t in inputs])
        expected = model(*inputs)
    structure, leaves = flatten_outputs(expected)
    kept = [leaf.detach().clone() if type(leaf) is torch.Tensor else leaf for leaf in leaves]
    del inputs, expected
    name = torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu"
    modules = sorted({type(m).__name__ for m in model.modules()} - {"Model"})
    reply(
        {
            "ready": True,
            "device": name,
            "state_checksum": state_checksum(model.state_dict()),
            "input_checksums": input_sums,
            "structure": structure,
            "outputs": [describe_leaf(leaf) for leaf in kept],
            "features": {"ops": sorted(recorder.ops), "modules": modules},
        }
    )
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    return kept, structure


def verify(
    path: str,
    expected: list,
    structure: str,
    tolerances: Tolerances,
    verdicts: dict[str, TuneVerdict],
    device: str,
) -> TuneVerdict:
    try:
        got = torch.load(path, map_location=device, weights_only=True)
    except Exception as exc:
        return {"passed": False, "problem": f"the output file is unreadable: {type(exc).__name__}: {exc}"}
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    if not isinstance(got, dict) or not isinstance(got.get("items"), list):
        return {"passed": False, "problem": "the output file is malformed"}
    items = got["items"]
    if got.get("structure") != structure or len(items) != len(expected):
        return {
            "passed": False,
            "problem": f"the output is {got.get('structure')} where {structure} is expected",
        }
    mark = fingerprint(items)
    if mark in verdicts:
        return {**verdicts[mark], "fingerprint": mark, "cached": True}
    problem = ""
    for index, (want, have) in enumerate(zip(expected, items, strict=True)):
        if type(want) is torch.Tensor:
            if type(have) is not torch.Tensor:
                problem = f"output {index} is not a plain tensor"
                break
            atol, rtol, norm_rtol = tolerance_for(want.dtype, tolerances)
            diff = compare_tensors(want, have, atol=atol, rtol=rtol, norm_rtol=norm_rtol)
        else:
            atol, rtol, _ = tolerance_for(torch.float32, tolerances)
            diff = compare_values(want, have, atol=atol, rtol=rtol)
        if not diff["passed"]:
            where = f" (worst at {diff.get('worst_index')}: {diff.get('worst_actual')} vs {diff.get('worst_expected')})"
            problem = f"output {index}: {'; '.join(diff['problems'])}" + (
                where if "worst_index" in diff else ""
            )
            break
    verdict: TuneVerdict = {"passed": not problem, "problem": problem}
    verdicts[mark] = verdict
    return {**verdict, "fingerprint": mark, "cached": False}


def main() -> None:
    line = sys.stdin.readline()
    if not line.strip():
        return
    spec: TuneJudgeSpec = json.loads(line)
    try:
        expected, structure = setup(spec)
    except BaseException as exc:
        message, tb = describe_error(exc)
        reply({"ready": False, "message": message, "traceback": tb})
        return
    verdicts: dict[str, TuneVerdict] = {}
    for raw in sys.stdin:
        if not raw.strip():
            continue
        request = json.loads(raw)  # a TuneJudgeRequest, read by its op
        op = request.get("op")
        if op == "stop":
            break
        ident = request.get("id")
        answer: TuneJudgeAnswer
        if op == "verify":
            asked: VerifyRequest = request
            verdict = verify(asked["file"], expected, structure, spec["tolerances"], verdicts, spec["device"])
            answer = {"id": ident, **verdict}
        elif op == "known":
            query: KnownRequest = request
            known = verdicts.get(query["fingerprint"])
            answer = {"id": ident, "known": False} if known is None else {"id": ident, "known": True, **known}
        else:
            answer = {"id": ident, "error": f"unknown op {op!r}"}
        reply(answer)


if __name__ == "__main__":
    main()
