"""Effective-precision detection on a labelled set (issue 45, docs/precision.md): candidates whose
arithmetic is known by construction, judged by the referee, each checked against its label.

The set (KernelBench level 1 and 2 at their own sizes, and the corpus's tasks):
- template GEMMs and convolutions (`--model templates`' own kernels, cuBLAS/cuDNN from the
  extension's C++) rendered once with MATH = 0 (full FP32, label fp32) and once with MATH = 1 (TF32
  tensor cores, label tf32);
- the same tasks' reference under torch.autocast to FP16 and to BF16 (labels fp16, bf16);
- the corpus's correct CUDA solutions (label fp32) and their reference cast whole to FP16 and BF16
  (parameters, buffers and inputs in the format; labels fp16, bf16);
- fast-math rewrites of corpus kernels (`__fdividef`; the corpus softmax and sigmoid call `__expf`: FP32
  arithmetic within a few ulp, label fp32);
- the corpus's `reduced_precision` mutants (benchmarks/mutants): a libm call made the fast
  intrinsic (`expf` -> `__expf`: FP32 arithmetic within a few ulp, label fp32) and a float
  accumulator rounded to half each step (label "below fp32": any class without FP32).

Each candidate is judged twice without timing: under `--precision match` (the measured class is
read) and under `--precision fp32` (the default: label fp32 must be `correct`, the others must not).
A candidate is classified right when its label is a member of the measured class (TF32 and FP16
share a 10-bit mantissa: where eager's errors at the two sit within 3x, they are one class, "TF32
or FP16", and either label is right). Needs a GPU.

usage: python benchmarks/precision_set.py [--jobs 4] [--only TEXT] [--list]
       [--out benchmarks/results/precision/set.md] [--resume-from EARLIER.json]
Rows are written as they come in; `--resume-from` an earlier run's set.json keeps its rows and judges
only the candidates it lacks (a 30-minute device session does not hold the whole set).
Exit status 0 when every candidate is classified right and no fp32 candidate is rejected.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.batch.agent_runs import INFRA_VERDICTS  # noqa: E402
from agent.referee import EvalOptions, evaluate  # noqa: E402
from agent.referee.policy import PolicyName  # noqa: E402
from agent.tasks import load_task  # noqa: E402
from agent.templates import NotCovered, plan_task, visible_device_limits  # noqa: E402
from agent.templates.instantiate import instantiate  # noqa: E402
from agent.templates.slots import Observation, SlotSpace, default_makers, initial_config  # noqa: E402
from agent.tune.space import DeviceLimits  # noqa: E402
from benchmarks.mutants.generate import corpus_mutants, correct_solutions  # noqa: E402

KERNELBENCH = REPO.parent / "shared" / "kernelbench"
LOCAL_KERNELBENCH = REPO / ".kb"  # a carried copy on the GPU machine
CORPUS_TASKS = REPO / "benchmarks" / "tasks"
BELOW_FP32 = "below_fp32"
TEMPLATE_TASKS = (
    "level1/1_Square_matrix_multiplication_.py",
    "level1/2_Standard_matrix_multiplication_.py",
    "level1/3_Batched_matrix_multiplication.py",
    "level1/6_Matmul_with_large_K_dimension_.py",
    "level1/8_Matmul_with_irregular_shapes_.py",
    "level1/17_Matmul_with_transposed_B.py",
    "level1/63_conv_standard_2D__square_input__square_kernel.py",
    "level2/12_Gemm_Multiply_LeakyReLU.py",
    "level2/76_Gemm_Add_ReLU.py",
    "level2/40_Matmul_Scaling_ResidualAdd.py",
    "level2/1_Conv2D_ReLU_BiasAdd.py",
)
# Corpus tasks whose reference is cast whole to FP16/BF16 (elementwise, reductions, norms).
CAST_CORPUS = ("23_Softmax", "26_GELU", "40_LayerNorm", "47_Sum_reduction_over_a_dim", "3_LayerNorm_GELU")

AUTOCAST_MODEL = '''

class ModelNew(Model):
    """The reference under torch.autocast to {dtype} (matmuls and convolutions in the format,
    FP32 accumulation), its outputs returned as float32."""

    def forward(self, *inputs):
        with torch.autocast(device_type="cuda", dtype=torch.{dtype}):
            out = super().forward(*inputs)
        return out.float()
'''

CAST_MODEL = '''

import itertools as _itertools


class ModelNew(Model):
    """The reference computed wholly in {dtype}: parameters, buffers and inputs cast to the format,
    the outputs returned as float32."""

    _inside = False  # the cast call below enters forward again

    def forward(self, *inputs):
        if self._inside:
            return super().forward(*inputs)
        named = _itertools.chain(self.named_parameters(), self.named_buffers())
        state = {{n: t.to(torch.{dtype}) if t.is_floating_point() else t for n, t in named}}
        cast = tuple(x.to(torch.{dtype}) if torch.is_tensor(x) and x.is_floating_point() else x for x in inputs)
        self._inside = True
        try:
            out = torch.func.functional_call(self, state, cast)
        finally:
            self._inside = False
        return out.float()
'''


@dataclass(frozen=True)
class Candidate:
    name: str
    task: Path
    label: str  # fp32, tf32, fp16, bf16 or BELOW_FP32
    source: str  # template, autocast, cast, corpus, fast_math, mutant
    policy: PolicyName  # the op policy: strict for CUDA candidates, kernelbench for torch-level ones
    write: Callable[[Path], None]  # fills an empty solution folder
    note: str = ""


def kernelbench_task(relative: str) -> Path:
    for root in (LOCAL_KERNELBENCH, KERNELBENCH):
        if (root / relative).is_file():
            return root / relative
    raise FileNotFoundError(
        f"KernelBench task {relative} not found under {LOCAL_KERNELBENCH} or {KERNELBENCH}"
    )


def write_files(files: dict[str, str]) -> Callable[[Path], None]:
    def write(folder: Path) -> None:
        for name, text in files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)

    return write


def copy_folder(source: Path, changes: dict[str, str] | None = None) -> Callable[[Path], None]:
    def write(folder: Path) -> None:
        shutil.copytree(source, folder, dirs_exist_ok=True)
        for name, text in (changes or {}).items():
            (folder / name).write_text(text)

    return write


def reference_variant(task: Path, template: str, dtype: str) -> dict[str, str]:
    source = task.read_text()
    if "import torch\n" not in source:
        source = "import torch\n" + source
    return {"model_new.py": source + template.format(dtype=dtype)}


def template_candidates(relative: str, gpu: DeviceLimits) -> list[Candidate]:
    task = kernelbench_task(relative)
    plan = plan_task(task)
    if isinstance(plan, NotCovered):
        raise SystemExit(
            f"{relative}: the template library does not cover it ({plan.reason}); pick another task"
        )
    space = SlotSpace(plan, gpu, allow_tf32=True)
    config = initial_config(space, default_makers(), Observation(plan=plan, gpu=gpu))
    math_slots = [name for name in space.slots if space.slots[name].local == "MATH"]
    if not math_slots:
        raise SystemExit(f"{relative}: its plan has no MATH slot (no GEMM or convolution stage)")
    stem = task.stem
    found: list[Candidate] = []
    for value, label in ((0, "fp32"), (1, "tf32")):
        wanted = {**config, **dict.fromkeys(math_slots, value)}
        fixed = space.repair(wanted, pinned=set(math_slots))
        if fixed is None:
            raise SystemExit(f"{relative}: no valid configuration with MATH={value}")
        files = instantiate(plan, fixed, sm_count=gpu.sm_count, allow_tf32=True)
        found.append(
            Candidate(f"{stem}/template_{label}", task, label, "template", "strict", write_files(files))
        )
    for dtype, label in (("float16", "fp16"), ("bfloat16", "bf16")):
        files = reference_variant(task, AUTOCAST_MODEL, dtype)
        found.append(
            Candidate(f"{stem}/autocast_{label}", task, label, "autocast", "kernelbench", write_files(files))
        )
    return found


def corpus_candidates() -> list[Candidate]:
    found: list[Candidate] = []
    for folder in correct_solutions():
        task = CORPUS_TASKS / folder.parent.name / f"{folder.name}.py"
        fast = any("__expf" in p.read_text() for p in folder.rglob("*.cu"))
        note = "calls __expf" if fast else ""
        found.append(
            Candidate(f"{folder.name}/corpus", task, "fp32", "corpus", "strict", copy_folder(folder), note)
        )
        if folder.name in CAST_CORPUS:
            for dtype, label in (("float16", "fp16"), ("bfloat16", "bf16")):
                files = reference_variant(task, CAST_MODEL, dtype)
                name = f"{folder.name}/cast_{label}"
                found.append(Candidate(name, task, label, "cast", "kernelbench", write_files(files)))
    return found


def mutant_candidates() -> list[Candidate]:
    found: list[Candidate] = []
    counts: dict[str, int] = {}
    for mutant in corpus_mutants(correct_solutions(), ["reduced_precision"]):
        source = REPO / mutant.file
        solution = next(p for p in source.parents if p.parent.name.startswith("level"))
        task = CORPUS_TASKS / solution.parent.name / f"{solution.name}.py"
        half = "__float2half" in mutant.after
        kind = "half_accumulator" if half else "fast_math"
        counts[solution.name + kind] = counts.get(solution.name + kind, 0) + 1
        name = f"{solution.name}/{kind}_{counts[solution.name + kind]}"
        changes = {str(source.relative_to(solution)): mutant.text}
        found.append(
            Candidate(
                name,
                task,
                BELOW_FP32 if half else "fp32",
                "mutant",
                "strict",
                copy_folder(solution, changes),
                note=f"line {mutant.line}: {mutant.after.strip()}",
            )
        )
    return found


# Fast-math rewrites of corpus kernels (FP32 arithmetic with approximate intrinsics, label fp32);
# the corpus's softmax and sigmoid already call __expf.
FAST_MATH = (
    ("level1/23_Softmax", "kernels/softmax.cu", "inv = 1.f / tot.s;", "inv = __fdividef(1.f, tot.s);"),
    (
        "level2/2_Scale_Bias_Sigmoid_Residual",
        "kernels/scale_bias_sigmoid.cu",
        "1.f / (1.f + __expf(-t))",
        "__fdividef(1.f, 1.f + __expf(-t))",
    ),
    (
        "level1/40_LayerNorm",
        "kernels/layernorm.cu",
        "rsqrtf(block_sum(sq, sh) / cols + eps)",
        "rsqrtf(__fdividef(block_sum(sq, sh), (float)cols) + eps)",
    ),
)


def fast_math_candidates() -> list[Candidate]:
    found: list[Candidate] = []
    for solution, file, before, after in FAST_MATH:
        folder = REPO / "benchmarks" / "solutions" / solution
        text = (folder / file).read_text()
        if before not in text:
            raise SystemExit(f"{folder / file}: {before!r} is not there any more; update FAST_MATH")
        task = CORPUS_TASKS / f"{solution}.py"
        changes = {file: text.replace(before, after)}
        name = f"{folder.name}/fast_math"
        found.append(
            Candidate(name, task, "fp32", "fast_math", "strict", copy_folder(folder, changes), note=after)
        )
    return found


def labelled_set(gpu: DeviceLimits) -> list[Candidate]:
    with ThreadPoolExecutor(max_workers=4) as pool:  # each plan traces its task in a sandbox
        planned = list(pool.map(lambda relative: template_candidates(relative, gpu), TEMPLATE_TASKS))
    found = [c for group in planned for c in group]
    return found + corpus_candidates() + fast_math_candidates() + mutant_candidates()


def classified_right(label: str, measured: str | None, ladder: dict[str, float]) -> bool:
    if measured is None:
        return False
    members = next((key.split("/") for key in ladder if key.split("/")[0] == measured), [measured])
    if label == BELOW_FP32:
        return "fp32" not in members
    return label in members


def judge(candidate: Candidate, trials: int) -> dict:
    started = time.monotonic()
    task = load_task(candidate.task)
    row: dict = {
        "name": candidate.name,
        "source": candidate.source,
        "label": candidate.label,
        "policy": candidate.policy,
        "note": candidate.note,
    }
    with tempfile.TemporaryDirectory(prefix="precision-set-") as folder:
        solution = Path(folder) / "solution"
        solution.mkdir()
        candidate.write(solution)
        for precision in ("match", "fp32"):
            options = EvalOptions(trials=trials, profile=False, policy=candidate.policy, precision=precision)
            result = evaluate(task, solution, options)
            check = result.precision_check
            row[precision] = {
                "verdict": result.verdict,
                "measured": check.measured if check else None,
                "error": check.error if check else None,
                "ladder": check.ladder if check else {},
                "line": check.line if check else "",
                "message": result.reason[:300],
            }
    match = row["match"]
    row["right"] = classified_right(candidate.label, match["measured"], match["ladder"])
    accepted = row["fp32"]["verdict"] == "correct"
    row["fp32_right"] = accepted if candidate.label == "fp32" else not accepted
    row["seconds"] = round(time.monotonic() - started, 1)
    return row


def error_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2e}"


def table(rows: list[dict], command: str, seconds: float) -> str:
    right = sum(r["right"] for r in rows)
    honest = [r for r in rows if r["label"] == "fp32"]
    rejected = [r for r in honest if r["fp32"]["verdict"] != "correct"]
    fp32_right = sum(r["fp32_right"] for r in rows)
    lines = [
        "# Effective precision on a labelled set",
        "",
        f"Command: `{command}` on {platform.node()} ({gpu_name()}), {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, "
        f"{seconds:.0f} s.",
        f"Rows judged in: {'; '.join(sorted({r.get('run', 'an earlier run') for r in rows}))}.",
        "",
        f"- Candidates: {len(rows)} ({', '.join(f'{k} {v}' for k, v in counts(rows, 'label').items())}).",
        f"- Classified right (label within the measured class, under `--precision match`): **{right}/{len(rows)}**.",
        f"- Under the default `--precision fp32`: honest FP32 candidates rejected **{len(rejected)}/{len(honest)}**; "
        f"verdict as the label requires {fp32_right}/{len(rows)}.",
        "",
        "| candidate | source | label | measured (match) | error vs float64 | eager's ladder | right | fp32 verdict | note |",
        "|---|---|---|---|---:|---|---|---|---|",
    ]
    for r in rows:
        match = r["match"]
        ladder = ", ".join(f"{k} {v:.1e}" for k, v in match["ladder"].items())
        measured = match["measured"] or f"not measured ({match['verdict']})"
        mark = "yes" if r["right"] else "**no**"
        verdict = r["fp32"]["verdict"] + ("" if r["fp32_right"] else " **(wrong)**")
        note = r["note"] or (
            "" if r["right"] else match["message"][:120].replace("|", "/").replace("\n", " ")
        )
        lines.append(
            f"| {r['name']} | {r['source']} | {r['label']} | {measured} | {error_text(match['error'])} | {ladder} "
            f"| {mark} | {verdict} | {note.replace('|', '/')} |"
        )
    return "\n".join(lines) + "\n"


def counts(rows: list[dict], key: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for r in rows:
        found[r[key]] = found.get(r[key], 0) + 1
    return found


def gpu_name() -> str:
    try:
        import torch

        return torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    except Exception:
        return "unknown GPU"


def earlier_rows(path: Path | None) -> list[dict]:
    if path is None:
        return []
    if not path.is_file():
        raise SystemExit(f"--resume-from {path}: no such file (an earlier run's set.json)")
    return json.loads(path.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--jobs", type=int, default=4, help="candidates judged at once (the GPU gate orders them)"
    )
    parser.add_argument(
        "--trials", type=int, default=3, help="correctness trials (trial 1 is the precision trial)"
    )
    parser.add_argument("--only", default="", help="judge only candidates whose name contains this")
    parser.add_argument("--list", action="store_true", help="list the set and its labels, judge nothing")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/precision/set.md")
    parser.add_argument(
        "--resume-from", type=Path, default=None, help="an earlier run's set.json: judge the rest"
    )
    args = parser.parse_args()
    gpu = visible_device_limits() or DeviceLimits()
    candidates = [c for c in labelled_set(gpu) if args.only in c.name]
    if args.list:
        for c in candidates:
            print(f"{c.name:55} {c.source:9} {c.label:11} {c.policy:11} {c.note}")
        print(f"{len(candidates)} candidates: {counts([c.__dict__ for c in candidates], 'label')}")
        return 0
    started = time.monotonic()
    names = {c.name for c in candidates}
    rows: list[dict] = [r for r in earlier_rows(args.resume_from) if r["name"] in names]
    todo = [c for c in candidates if c.name not in {r["name"] for r in rows}]
    run = f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC on {platform.node()} ({gpu_name()})"
    command = ("python benchmarks/precision_set.py " + " ".join(sys.argv[1:])).strip()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    unjudged: list[str] = []
    print(f"{len(candidates)} candidates, {len(rows)} judged earlier, {len(todo)} to judge", flush=True)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for future in as_completed([pool.submit(judge, c, args.trials) for c in todo]):
            row: dict = {**future.result(), "run": run}
            print(
                f"{row['name']:55} label {row['label']:11} measured {row['match']['measured']} "
                f"fp32 {row['fp32']['verdict']:16} right {row['right']} ({row['seconds']} s)",
                flush=True,
            )
            if {row["match"]["verdict"], row["fp32"]["verdict"]} & INFRA_VERDICTS:
                unjudged.append(row["name"])  # no verdict (no GPU, the referee's own error): not a row
                continue
            rows.append(row)
            # written as rows come in: a run cut short keeps what it judged
            partial = "" if len(rows) == len(candidates) else f" (partial: {len(rows)} of {len(candidates)})"
            args.out.write_text(table(rows, command + partial, time.monotonic() - started))
            args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    rows.sort(key=lambda r: [c.name for c in candidates].index(r["name"]))
    text = table(rows, command, time.monotonic() - started)
    if unjudged:
        text += f"\nNo verdict (left out, judged again on resume): {', '.join(sorted(unjudged))}.\n"
    args.out.write_text(text)
    print(text)
    fine = all(r["right"] for r in rows) and all(r["fp32_right"] for r in rows if r["label"] == "fp32")
    return 0 if fine and not unjudged else 1


if __name__ == "__main__":
    raise SystemExit(main())
