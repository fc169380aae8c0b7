"""Static pre-screen of a solution's sources (Python AST + C++/CUDA patterns).

Triage, not a verdict: every finding is a flag the referee reports (and a reviewer reads), never
a rejection on its own; the run-time checks decide. It exists for what the run-time checks
cannot see: code that detects being observed, stack walking to the worker's frames, persisting
L2 windows, timer patches, writes to the file system. Names and strings are matched after
comments are stripped; aliasing can evade it (catalog G1), which is why it is only a flag.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass

from agent.workspace import Solution, Workspace
from sandbox.safe_files import read_text


@dataclass(frozen=True)
class Finding:
    code: str
    file: str
    line: int
    message: str


_PATCHABLE_ROOTS = {"torch", "F", "nn", "time", "os", "sys", "json", "hmac", "np", "numpy", "functional"}
_INTROSPECTION_ATTRS = {
    "_getframe",
    "f_back",
    "f_locals",
    "f_globals",
    "get_objects",
    "get_referrers",
    "currentframe",
}
_DETECTION_NAMES = {
    "_get_current_dispatch_mode",
    "_is_profiler_enabled",
    "is_current_stream_capturing",
    "_python_dispatch",
    "_is_torch_function_mode_enabled",
    "profiler",
    "argv",
}
_REFERENCE_NAMES = {"kernel_agent_reference", "reference", "get_inputs", "get_init_inputs"}
_EXIT_CALLS = {"_exit", "exit", "abort", "kill"}
_FS_CALLS = {"remove", "unlink", "rmtree", "rename", "replace", "glob", "chmod", "symlink", "makedirs"}
_FLAG_CALLS = {"set_float32_matmul_precision", "use_deterministic_algorithms", "set_flush_denormal"}
_DYNAMIC = {"exec", "eval", "compile", "__import__", "import_module"}


def _root(node: ast.AST) -> str:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else ""


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _calls_torch(nodes: Iterable[ast.AST]) -> bool:
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and _root(sub.func) in ("torch", "F", "nn"):
                return True
    return False


def scan_python(text: str, file: str) -> list[Finding]:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return [Finding("syntax", file, exc.lineno or 0, f"does not parse: {exc.msg}")]
    found: list[Finding] = []

    def add(code: str, node: ast.AST, message: str) -> None:
        found.append(Finding(code, file, getattr(node, "lineno", 0), message))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            )
            for name in names:
                top = name.split(".")[0]
                if top in ("gc", "inspect", "ctypes"):
                    add("introspection", node, f"imports {name}")
                if top in ("threading", "multiprocessing", "concurrent", "subprocess"):
                    add("threads", node, f"imports {name}")
                if top in (
                    "kernel_agent_reference",
                    "reference",
                    "model",
                    "candidate_trials",
                    "referee_common",
                    "hidden_inputs",
                    "timing",
                ):
                    add("reference_access", node, f"imports {name} (the task or the harness)")
                if name.endswith("_python_dispatch") or top == "importlib":
                    add(
                        "harness_detection" if "dispatch" in name else "dynamic_code", node, f"imports {name}"
                    )
        elif isinstance(node, ast.Attribute):
            if node.attr in _INTROSPECTION_ATTRS:
                add("introspection", node, f"uses .{node.attr} (stack or heap walking)")
            if node.attr in _DETECTION_NAMES and _root(node) in ("torch", "sys", "autograd"):
                add("harness_detection", node, f"reads {_dotted(node)} (whether it is being observed)")
            if node.attr in ("Stream", "stream", "ExternalStream") and _dotted(node).startswith("torch.cuda"):
                add("streams", node, f"uses {_dotted(node)}")
        elif isinstance(node, ast.Name) and node.id in _DETECTION_NAMES - {"profiler", "argv"}:
            add("harness_detection", node, f"uses {node.id} (whether it is being observed)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in _REFERENCE_NAMES or "@@KERNEL_AGENT" in node.value:
                add(
                    "reference_access",
                    node,
                    f"names {node.value!r} (the task module or the worker's protocol)",
                )
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                dotted = _dotted(target) if isinstance(target, ast.Attribute) else ""
                if dotted.startswith("torch.backends."):
                    add("global_flags", node, f"sets {dotted}")
                elif isinstance(target, ast.Attribute) and _root(target) in _PATCHABLE_ROOTS:
                    add("monkeypatch", node, f"rebinds {dotted or _root(target) + '...'}")
                elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Subscript | ast.Call):
                    add("monkeypatch", node, "rebinds an attribute of a module looked up at run time")
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            root = _root(node.func)
            if name == "setattr" and node.args and _root(node.args[0]) in _PATCHABLE_ROOTS | {"sys"}:
                add("monkeypatch", node, "setattr on a module")
            if name in _FLAG_CALLS:
                add("global_flags", node, f"calls {name}")
            if name in _EXIT_CALLS and root in ("os", "sys", ""):
                add("process_exit", node, f"calls {name}")
            if name in _DYNAMIC and root in ("", "importlib", "builtins"):
                add("dynamic_code", node, f"calls {name}")
            if name in _FS_CALLS and root in ("os", "shutil", "glob", "pathlib", ""):
                add("filesystem", node, f"calls {root + '.' if root else ''}{name}")
            if name == "open" and any(
                isinstance(a, ast.Constant) and isinstance(a.value, str) and set(a.value) & set("wax+")
                for a in [*node.args[1:2], *[k.value for k in node.keywords if k.arg == "mode"]]
            ):
                add("filesystem", node, "opens a file for writing")
            if name in ("Thread", "Process", "Pool", "ThreadPoolExecutor"):
                add("threads", node, f"creates a {name}")
        elif isinstance(node, ast.ClassDef) and any(_dotted(b) in ("Model",) for b in node.bases):
            add("reference_access", node, f"class {node.name} inherits Model")
        elif isinstance(node, ast.Try):
            for handler in node.handlers:
                if _calls_torch(handler.body):
                    add("except_fallback", handler, "an except branch computes with torch (fallback path)")
    return found


_CPP_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_ATEN_ALLOWED = {
    "empty",
    "empty_like",
    "empty_strided",
    "zeros",
    "zeros_like",
    "ones",
    "ones_like",
    "full",
    "full_like",
    "from_blob",
    "TensorOptions",
    "Tensor",
    "Scalar",
    "ScalarType",
    "Device",
    "IntArrayRef",
    "kCUDA",
    "kFloat",
    "kFloat32",
    "kHalf",
    "kBFloat16",
    "kInt",
    "kLong",
    "dtype",
    "device",
    "cuda",
    "indexing",
    "globalContext",
    "getCurrentCUDAStream",
    "Layout",
    "MemoryFormat",
    "Generator",
    "detail",
}
_ATEN_CALL = re.compile(r"\b(?:at|torch)::(?:native::)?(\w+)\s*\(")
_TENSOR_METHOD = re.compile(
    r"\.\s*(matmul|mm|bmm|addmm|baddbmm|linear|relu_?|gelu|softmax|log_softmax|layer_norm|conv\dd|sum|mean|"
    r"exp|tanh|sigmoid|add_?|mul_?|div_?|sub_?|clamp_?|max|min|norm|var|std|cumsum|sort|topk|where)\s*\("
)
_CPP_RULES: list[tuple[str, re.Pattern[str], str]] = [
    (
        "persisting_l2",
        re.compile(r"cudaLimitPersistingL2CacheSize|accessPolicyWindow|cudaAccessPropertyPersisting"),
        "persisting-L2 carve-out or access-policy window (survives the harness's L2 flush)",
    ),
    (
        "streams",
        re.compile(r"cudaStreamCreate\w*|cublasSetStream|at::cuda::getStreamFromPool"),
        "creates or switches streams (check they are joined back to the caller's stream)",
    ),
    ("threads", re.compile(r"std::thread|pthread_create|std::async"), "starts host threads"),
    (
        "native_side_effects",
        re.compile(
            r"__attribute__\s*\(\s*\(\s*constructor|PyRun_\w+|PyImport_\w+|dlopen|dlsym|mprotect|ptrace|/proc/self"
        ),
        "load-time or process-level side effects (constructors, Python C-API, dlopen, /proc)",
    ),
    (
        "token_paste",
        re.compile(r"##\s*\w*(?:Stream|Event|Memcpy|Limit)"),
        "builds CUDA API names by token pasting",
    ),
    (
        "low_precision",
        re.compile(r"__half\b|__nv_bfloat16|__float2half|__hadd|half2|__nv_fp8|wmma::"),
        "computes in reduced precision (fine if the error stays within the tolerance)",
    ),
]
_LAUNCH = re.compile(r"<<<")
_LAUNCH_CHECK = re.compile(
    r"cudaGetLastError|cudaPeekAtLastError|C10_CUDA_KERNEL_LAUNCH_CHECK|C10_CUDA_CHECK"
)


def scan_cpp(text: str, file: str) -> list[Finding]:
    code = _CPP_COMMENT.sub(" ", text)
    found: list[Finding] = []

    def line_of(pos: int) -> int:
        return code.count("\n", 0, pos) + 1

    for match in _ATEN_CALL.finditer(code):
        if match.group(1) not in _ATEN_ALLOWED:
            found.append(
                Finding("cpp_aten_compute", file, line_of(match.start()), f"calls {match.group(0)[:-1]}")
            )
    for match in _TENSOR_METHOD.finditer(code):
        found.append(
            Finding("cpp_aten_compute", file, line_of(match.start()), f"calls Tensor.{match.group(1)}")
        )
    for rule, pattern, message in _CPP_RULES:
        match = pattern.search(code)
        if match:
            found.append(Finding(rule, file, line_of(match.start()), f"{message}: {match.group(0)}"))
    launch = _LAUNCH.search(code)
    if launch and not _LAUNCH_CHECK.search(code):
        found.append(
            Finding(
                "unchecked_launch",
                file,
                line_of(launch.start()),
                "kernel launches never checked (cudaGetLastError)",
            )
        )
    return found


def scan_sources(files: dict[str, str]) -> list[Finding]:
    """Findings for {relative path: text}; .py by AST, C++/CUDA by pattern."""
    found: list[Finding] = []
    for name, text in sorted(files.items()):
        if name.endswith(".py"):
            found += scan_python(text, name)
        elif name.endswith((".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp")):
            found += scan_cpp(text, name)
    return found


def scan_solution(solution: Solution) -> list[Finding]:
    """The solution's own files (harness-owned files excluded)."""
    files = dict(solution.model_files())
    if isinstance(solution, Workspace):
        for path in solution.sources():
            rel = path.relative_to(solution.root).as_posix()
            if (text := read_text(solution.root, rel)) is not None:  # links are not followed
                files[rel] = text
    harness = {"binding.cpp", "binding_registry.h", "reference.py"}
    return scan_sources({k: v for k, v in files.items() if k.rsplit("/", 1)[-1] not in harness})


def codes(findings: Iterable[Finding]) -> set[str]:
    return {f.code for f in findings}
