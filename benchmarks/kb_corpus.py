"""A corpus of KernelBench single-file solutions, one per task, correct by construction.

usage: python benchmarks/kb_corpus.py --kernelbench ../shared/kernelbench --levels 1 2 3 --out DIR
           [--style mixed|copy|grid_stride|vec4|rows2d] [--shared-source]

For every task file under KERNELBENCH/levelN it writes DIR/level_N_problem_P_sample_0_kernel.py, the
name KernelBench gives its generations and the one `agent batch --solutions DIR` pairs with a task
(level and problem id, agent/batch/layouts.py; a file named after the task is not picked up). Each
file is written the way LLMs write KernelBench solutions: `import torch`, a `cuda_source` string
(`#include <torch/extension.h>`, a real `__global__` kernel and a host launcher taking and
returning torch::Tensor), a `cpp_source` declaring the launcher, a module-level
`load_inline(...)`, and `class ModelNew(nn.Module)`.

Why it is correct under the referee's `kernelbench` policy: the task's source is copied into the
solution unchanged, and ModelNew is a copy of the task's `Model` class renamed (same constructor,
so `ModelNew(*get_init_inputs())` builds the same submodules, parameters and buffers under the
same names, and the referee's `load_state_dict(reference state, strict=False)` finds every key).
Its `forward` runs the task's forward (kept as `_forward_torch`) and passes every output tensor,
tuples and lists included, through the inline CUDA kernel: a bit-exact copy into a fresh
contiguous tensor, made in machine words of the element's size (or 16-byte float4 vectors), so
every dtype (float32, int64 of argmax, bool...) and non-contiguous outputs come out identical.

Kernel styles (--style): `grid_stride` (a grid-stride word copy), `vec4` (float4 loads and stores
with a byte tail, scalar when a pointer is not 16-byte aligned), `rows2d` (a 2D grid over rows and
columns of the last dimension); `mixed` (the default) rotates them by problem id, `copy` is
grid_stride everywhere. The task's level and problem id are in the extension, kernel and launcher
names, so every solution is a distinct build; `--shared-source` gives every solution the one same
CUDA source, launcher and extension name instead (to measure how far identical builds dedup).

Standard library only: it runs on a GPU machine that has nothing but torch installed.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

STYLES = ("grid_stride", "vec4", "rows2d")
STYLE_CHOICES = ("mixed", "copy", *STYLES)
SHARED_TAG = "kb_shared"
FORWARD_KEPT_AS = "_forward_torch"
COPY_HELPER = "_kb_copy_outputs"
REQUIRED = ("Model", "get_inputs", "get_init_inputs")
_LEVEL_DIR = re.compile(r"^level[_-]?(\d+)$", re.IGNORECASE)
_PROBLEM_ID = re.compile(r"^(\d+)[_-]")
_SUPER_MODEL = re.compile(r"\bsuper\(\s*Model\s*,")
_INIT_TENSOR = re.compile(r"self\.(\w+)\s*=\s*torch\.(?:randn|rand|randint|zeros|ones|empty|tensor|eye)\(")


class CorpusError(Exception):
    """One task the generator cannot write a solution for; the message says why."""


@dataclass
class Generated:
    task: Path
    level: int
    problem_id: int
    out: Path
    style: str
    extension: str
    notes: list[str] = field(default_factory=list)


@dataclass
class Names:
    """The identifiers one solution's CUDA source and load_inline call use."""

    extension: str
    kernel: str
    launcher: str
    module_var: str


# -- CUDA sources -----------------------------------------------------------------------------------
_PRELUDE = """#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <cstdint>
"""

_HOST_HEAD = """
torch::Tensor {launcher}(torch::Tensor x) {{
    TORCH_CHECK(x.is_cuda(), "{launcher}: x must be a CUDA tensor");
    const c10::cuda::OptionalCUDAGuard device_guard(x.device());
    torch::Tensor src = x.contiguous();
    torch::Tensor out = torch::empty(src.sizes(), src.options());
    const int64_t n = src.numel();
    if (n == 0) {{
        return out;
    }}
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    const int64_t elem_size = src.element_size();
"""

_GRID_STRIDE = """
// Grid-stride copy, one machine word of the element's size per element: bit-exact for every dtype.
template <typename word_t>
__global__ void {kernel}(const word_t* __restrict__ src, word_t* __restrict__ dst, int64_t n) {{
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {{
        dst[i] = src[i];
    }}
}}

template <typename word_t>
static void {kernel}_launch(const void* src, void* dst, int64_t n, cudaStream_t stream) {{
    const int threads = 256;
    const int64_t wanted = (n + threads - 1) / threads;
    const unsigned int blocks = (unsigned int)(wanted < 65535 ? wanted : 65535);
    {kernel}<word_t><<<blocks, threads, 0, stream>>>(
        static_cast<const word_t*>(src), static_cast<word_t*>(dst), n);
}}
{host_head}
    const void* in_ptr = src.data_ptr();
    void* out_ptr = out.data_ptr();
    switch (elem_size) {{
        case 1: {kernel}_launch<uint8_t>(in_ptr, out_ptr, n, stream); break;
        case 2: {kernel}_launch<uint16_t>(in_ptr, out_ptr, n, stream); break;
        case 4: {kernel}_launch<uint32_t>(in_ptr, out_ptr, n, stream); break;
        case 8: {kernel}_launch<uint64_t>(in_ptr, out_ptr, n, stream); break;
        default: {kernel}_launch<uint8_t>(in_ptr, out_ptr, n * elem_size, stream); break;
    }}
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}}
"""

_VEC4 = """
// Vectorized copy: 16 bytes per float4 load and store, then the tail byte by byte.
__global__ void {kernel}(
    const float4* __restrict__ src4, float4* __restrict__ dst4, int64_t n4,
    const uint8_t* __restrict__ src_tail, uint8_t* __restrict__ dst_tail, int64_t n_tail) {{
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    const int64_t start = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (int64_t i = start; i < n4; i += stride) {{
        dst4[i] = src4[i];
    }}
    for (int64_t i = start; i < n_tail; i += stride) {{
        dst_tail[i] = src_tail[i];
    }}
}}
{host_head}
    const int64_t nbytes = n * elem_size;
    const uint8_t* in_bytes = static_cast<const uint8_t*>(src.data_ptr());
    uint8_t* out_bytes = static_cast<uint8_t*>(out.data_ptr());
    // float4 needs 16-byte aligned pointers (a contiguous view can start anywhere): else all bytes.
    const bool aligned = reinterpret_cast<uintptr_t>(in_bytes) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(out_bytes) % 16 == 0;
    const int64_t n4 = aligned ? nbytes / 16 : 0;
    const int64_t n_tail = nbytes - n4 * 16;
    const int threads = 256;
    const int64_t work = n4 > n_tail ? n4 : n_tail;
    const int64_t wanted = (work + threads - 1) / threads;
    const unsigned int blocks = (unsigned int)(wanted < 65535 ? wanted : 65535);
    {kernel}<<<blocks, threads, 0, stream>>>(
        reinterpret_cast<const float4*>(in_bytes), reinterpret_cast<float4*>(out_bytes), n4,
        in_bytes + n4 * 16, out_bytes + n4 * 16, n_tail);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}}
"""

_ROWS2D = """
// 2D-indexed copy: blockIdx.y walks the rows, the x threads the columns (the last dimension).
template <typename word_t>
__global__ void {kernel}(
    const word_t* __restrict__ src, word_t* __restrict__ dst, int64_t rows, int64_t cols) {{
    const int64_t col_stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {{
        const word_t* src_row = src + r * cols;
        word_t* dst_row = dst + r * cols;
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += col_stride) {{
            dst_row[c] = src_row[c];
        }}
    }}
}}

template <typename word_t>
static void {kernel}_launch(
    const void* src, void* dst, int64_t rows, int64_t cols, cudaStream_t stream) {{
    const int threads = 256;
    const int64_t grid_x = (cols + threads - 1) / threads;
    const dim3 grid((unsigned int)(grid_x < 1024 ? grid_x : 1024),
                    (unsigned int)(rows < 65535 ? rows : 65535));
    {kernel}<word_t><<<grid, threads, 0, stream>>>(
        static_cast<const word_t*>(src), static_cast<word_t*>(dst), rows, cols);
}}
{host_head}
    int64_t cols = src.dim() > 0 ? src.size(src.dim() - 1) : 1;
    int64_t rows = n / cols;
    if (cols < 32) {{  // short rows would leave most of each block idle: one long row instead
        cols = n;
        rows = 1;
    }}
    const void* in_ptr = src.data_ptr();
    void* out_ptr = out.data_ptr();
    switch (elem_size) {{
        case 1: {kernel}_launch<uint8_t>(in_ptr, out_ptr, rows, cols, stream); break;
        case 2: {kernel}_launch<uint16_t>(in_ptr, out_ptr, rows, cols, stream); break;
        case 4: {kernel}_launch<uint32_t>(in_ptr, out_ptr, rows, cols, stream); break;
        case 8: {kernel}_launch<uint64_t>(in_ptr, out_ptr, rows, cols, stream); break;
        default: {kernel}_launch<uint8_t>(in_ptr, out_ptr, rows, cols * elem_size, stream); break;
    }}
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}}
"""

_STYLE_BODIES = {"grid_stride": _GRID_STRIDE, "vec4": _VEC4, "rows2d": _ROWS2D}


def names_for(level: int, problem_id: int, style: str, *, shared: bool) -> Names:
    tag = SHARED_TAG if shared else f"kb_l{level}_p{problem_id}"
    return Names(
        extension=f"{tag}_{style}",
        kernel=f"{tag}_{style}_copy_kernel",
        launcher=f"{tag}_copy_cuda",
        module_var=f"{tag}_copy",
    )


def cuda_source(style: str, names: Names) -> str:
    host_head = _HOST_HEAD.format(launcher=names.launcher)
    body = _STYLE_BODIES[style].format(kernel=names.kernel, host_head=host_head.rstrip("\n"))
    return _PRELUDE + body


def cpp_source(names: Names) -> str:
    return f"torch::Tensor {names.launcher}(torch::Tensor x);"


def style_for(choice: str, problem_id: int) -> str:
    if choice == "mixed":
        return STYLES[problem_id % len(STYLES)]
    if choice == "copy":
        return "grid_stride"
    return choice


# -- the task -------------------------------------------------------------------------------------
def level_and_id(path: Path) -> tuple[int | None, int | None]:
    level = next((int(m.group(1)) for p in reversed(path.parent.parts) if (m := _LEVEL_DIR.match(p))), None)
    match = _PROBLEM_ID.match(path.stem)
    return level, int(match.group(1)) if match else None


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _is_main_guard(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
    )


def _notes(tree: ast.Module, model: ast.ClassDef) -> list[str]:
    """What a reader of the corpus should know about a task (never a reason to skip it)."""
    notes = []
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    extra = sorted(imported - {"torch"} - set(sys.stdlib_module_names))
    if extra:
        notes.append(f"imports {', '.join(extra)}: the solution needs it installed as the task does")
    plain = (
        ast.Import,
        ast.ImportFrom,
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.ClassDef,
        ast.Assign,
        ast.AnnAssign,
    )
    side_effects = [
        n.lineno
        for n in tree.body
        if not isinstance(n, plain)
        and not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
        and not _is_main_guard(n)
    ]
    if side_effects:
        notes.append(f"module-level statements at lines {side_effects} run when the solution is imported")
    init = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is not None:
        held = sorted(set(_INIT_TENSOR.findall(ast.unparse(init))))
        if held:
            notes.append(
                f"Model.__init__ keeps tensor(s) outside its state_dict ({', '.join('self.' + h for h in held)}): "
                "ModelNew draws its own, so it matches only where forward overwrites or ignores them"
            )
    return notes


def _forward_call(fn: ast.FunctionDef) -> tuple[str, str]:
    """(the parameter list as written, the call that passes every parameter on)."""
    args = fn.args
    positional = [a.arg for a in [*args.posonlyargs, *args.args]]
    if not positional:
        raise CorpusError("Model.forward takes no `self`")
    call = positional[1:]
    if args.vararg is not None:
        call.append(f"*{args.vararg.arg}")
    call += [f"{a.arg}={a.arg}" for a in args.kwonlyargs]
    if args.kwarg is not None:
        call.append(f"**{args.kwarg.arg}")
    return ast.unparse(args), ", ".join(call)


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def model_new_source(source: str, tree: ast.Module, model: ast.ClassDef) -> str:
    """The task's Model class, renamed ModelNew, its forward kept as `_forward_torch` and a new
    forward that sends its outputs through the CUDA copy."""
    lines = source.splitlines()
    forward = next(
        (n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward"),
        None,
    )
    if forward is None:
        raise CorpusError("Model defines no `forward` of its own")
    if FORWARD_KEPT_AS in source:
        raise CorpusError(f"the task already uses the name {FORWARD_KEPT_AS}")
    assert model.end_lineno is not None
    first = min([model.lineno, *(d.lineno for d in model.decorator_list)])
    segment = lines[first - 1 : model.end_lineno]

    def edit(lineno: int, col: int, old: str, new: str) -> None:
        line = segment[lineno - first]
        if not line[col:].startswith(old):
            raise CorpusError(f"line {lineno}: expected {old!r} (the parser and the text disagree)")
        segment[lineno - first] = line[:col] + new + line[col + len(old) :]

    edit(model.lineno, model.col_offset, "class Model", "class ModelNew")
    edit(forward.lineno, forward.col_offset, "def forward", f"def {FORWARD_KEPT_AS}")
    text = "\n".join(segment)
    text = _SUPER_MODEL.sub("super(ModelNew,", text)

    indent = _indent_of(lines[forward.lineno - 1])
    body0 = forward.body[0]
    body_indent = indent + "    " if body0.lineno == forward.lineno else _indent_of(lines[body0.lineno - 1])
    params, call = _forward_call(forward)
    returns = f" -> {ast.unparse(forward.returns)}" if forward.returns is not None else ""
    wrapper = [
        "",
        f"{indent}def forward({params}){returns}:",
        f"{body_indent}# the reference computation, then every output tensor through the inline CUDA kernel",
        f"{body_indent}return {COPY_HELPER}(self.{FORWARD_KEPT_AS}({call}))",
    ]
    return text.rstrip() + "\n" + "\n".join(wrapper) + "\n"


def _split_future(source: str, tree: ast.Module) -> tuple[list[str], str]:
    """`from __future__` imports must come first in the solution: hoisted out of the task's copy."""
    futures = [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__"]
    if not futures:
        return [], source
    lines = source.splitlines()
    hoisted = []
    for node in futures:
        assert node.end_lineno is not None
        hoisted.append("\n".join(lines[node.lineno - 1 : node.end_lineno]))
        for i in range(node.lineno - 1, node.end_lineno):
            lines[i] = ""
    return hoisted, "\n".join(lines) + "\n"


_HELPER = f'''
def {COPY_HELPER}(value):
    """Every tensor of the output (a tuple or list of them too) through the CUDA copy kernel."""
    if isinstance(value, torch.Tensor):
        return {{module_var}}.{{launcher}}(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
        return type(value)(*({COPY_HELPER}(v) for v in value))
    if isinstance(value, (tuple, list)):  # torch.return_types too
        return type(value)([{COPY_HELPER}(v) for v in value])
    return value
'''


def solution_source(task: Path, style: str, *, shared: bool) -> tuple[str, Names, list[str]]:
    """The solution file's text for one task, the names it uses and the notes on it."""
    try:
        source = task.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"cannot read it: {exc}") from None
    try:
        tree = ast.parse(source, filename=str(task))
    except SyntaxError as exc:
        raise CorpusError(f"SyntaxError at line {exc.lineno}: {exc.msg}") from None
    defined = _top_level_names(tree)
    missing = [n for n in REQUIRED if n not in defined]
    if missing:
        raise CorpusError(f"defines no {', '.join(missing)}")
    models = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"]
    if len(models) != 1:
        raise CorpusError("Model is not one top-level class")
    level, problem_id = level_and_id(task)
    assert level is not None and problem_id is not None
    names = names_for(level, problem_id, style, shared=shared)
    ours = {"ModelNew", "cuda_source", "cpp_source", names.module_var, COPY_HELPER}
    clash = sorted(ours & defined)
    if clash:
        raise CorpusError(f"the task itself defines {', '.join(clash)}, names the solution needs")
    model_new = model_new_source(source, tree, models[0])
    futures, task_copy = _split_future(source, tree)
    what = "one CUDA source shared by every solution" if shared else f"style {style}"
    parts = [
        *futures,
        f"# KernelBench level {level} problem {problem_id} ({task.name}): written by benchmarks/kb_corpus.py, {what}.",
        "# ModelNew is the task's Model (same constructor, parameters and buffers); every output it",
        "# returns goes through the inline CUDA kernel below, a bit-exact copy.",
        "import torch",
        "import torch.nn as nn",
        "from torch.utils.cpp_extension import load_inline",
        "",
        f'cuda_source = """{cuda_source(style, names)}"""',
        "",
        f'cpp_source = "{cpp_source(names)}"',
        "",
        f"{names.module_var} = load_inline(",
        f'    name="{names.extension}",',
        "    cpp_sources=cpp_source,",
        "    cuda_sources=cuda_source,",
        f'    functions=["{names.launcher}"],',
        "    verbose=False,",
        '    extra_cuda_cflags=["-O3"],',
        ")",
        "",
        f"# ---- the task's code ({task.parent.name}/{task.name}), unchanged ----",
        task_copy.rstrip(),
        "",
        "",
        "# ---- ModelNew ----",
        _HELPER.format(module_var=names.module_var, launcher=names.launcher).strip("\n"),
        "",
        "",
        model_new.rstrip(),
        "",
    ]
    text = "\n".join(parts)
    try:
        ast.parse(text)
    except SyntaxError as exc:  # a bug here, not in the task: say so rather than write it
        raise CorpusError(f"the generated file does not parse (line {exc.lineno}: {exc.msg})") from None
    return text, names, _notes(tree, models[0])


# -- the corpus -----------------------------------------------------------------------------------
def task_files(kernelbench: Path, level: int) -> list[Path]:
    folder = kernelbench / f"level{level}"
    files = [p for p in folder.glob("*.py") if not p.name.startswith(("_", "."))]

    def order(p: Path) -> tuple[int, str]:
        _, problem_id = level_and_id(p)
        return (problem_id if problem_id is not None else 10**9, p.name)

    return sorted(files, key=order)


def output_name(level: int, problem_id: int, sample: int = 0) -> str:
    """KernelBench's generation file name, which agent/batch/layouts.py pairs by level and id."""
    return f"level_{level}_problem_{problem_id}_sample_{sample}_kernel.py"


def generate(
    kernelbench: Path, levels: list[int], out: Path, *, style: str = "mixed", shared: bool = False
) -> tuple[list[Generated], list[tuple[Path, str]]]:
    """Write the corpus; returns what was written and every task left out with the reason."""
    done: list[Generated] = []
    failed: list[tuple[Path, str]] = []
    out.mkdir(parents=True, exist_ok=True)
    seen: dict[str, Path] = {}
    for level in levels:
        folder = kernelbench / f"level{level}"
        if not folder.is_dir():
            failed.append((folder, "no such folder"))
            continue
        for task in task_files(kernelbench, level):
            _, problem_id = level_and_id(task)
            if problem_id is None:
                failed.append((task, "no problem id at the start of the file name (NN_Name.py)"))
                continue
            name = output_name(level, problem_id)
            if name in seen:
                failed.append((task, f"problem id {problem_id} is also {seen[name].name}"))
                continue
            seen[name] = task
            chosen = "grid_stride" if shared else style_for(style, problem_id)
            try:
                text, names, notes = solution_source(task, chosen, shared=shared)
            except CorpusError as exc:
                failed.append((task, str(exc)))
                continue
            target = out / name
            target.write_text(text, encoding="utf-8")
            done.append(Generated(task, level, problem_id, target, chosen, names.extension, notes))
    manifest = {
        "style": "shared" if shared else style,
        "solutions": [
            {
                "task": f"level{g.level}/{g.task.name}",
                "file": g.out.name,
                "style": g.style,
                "extension": g.extension,
                "notes": g.notes,
            }
            for g in done
        ],
        "not_generated": [{"task": str(p), "why": why} for p, why in failed],
    }
    (out / "kb_corpus.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return done, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernelbench", type=Path, required=True, help="folder holding level1, level2, ...")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--style", choices=STYLE_CHOICES, default="mixed")
    parser.add_argument(
        "--shared-source", action="store_true", help="one identical CUDA source and extension name for all"
    )
    args = parser.parse_args(argv)
    done, failed = generate(
        args.kernelbench, args.levels, args.out, style=args.style, shared=args.shared_source
    )
    for level in args.levels:
        mine = [g for g in done if g.level == level]
        styles = {s: sum(g.style == s for g in mine) for s in STYLES if any(g.style == s for g in mine)}
        total = (
            len(task_files(args.kernelbench, level)) if (args.kernelbench / f"level{level}").is_dir() else 0
        )
        print(
            f"level{level}: {len(mine)}/{total} solutions ({', '.join(f'{k} {v}' for k, v in styles.items())})"
        )
    print(
        f"{len(done)} solutions in {args.out}, {len(failed)} tasks left out; manifest {args.out / 'kb_corpus.json'}"
    )
    for g in done:
        for note in g.notes:
            print(f"  note level{g.level}/{g.task.name}: {note}")
    for path, why in failed:
        print(f"  NOT GENERATED {path}: {why}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
