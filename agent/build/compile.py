"""Compile a solution into an importable extension, inside a sandbox, with a timeout.

The build folder is keyed by the solution's identity (where it lives, the toolchain, the
target architecture), not its content: an edit to one `.cu` reuses the folder and ninja
rebuilds only that file. An unchanged solution is recognised from the stamp of its last
good build without starting any process.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import logging
import time
from importlib import metadata
from pathlib import Path
from typing import Literal, cast

from pydantic import BaseModel, Field

from agent.build.diagnostics import Diagnostic, parse_log
from agent.build.inline_lines import locate
from agent.build.resources import (
    KernelResources,
    inline_resources,
    parse_kept,
    without_resource_lines,
    workspace_resources,
)
from agent.build.source_scope import SourceScope, confine_log, write_model_log
from agent.build.toolkit import resolve_arch
from agent.workspace import EXTENSION_NAME, MODEL_ENTRY, SingleFileSolution, Solution, Workspace
from sandbox.base import Sandbox
from sandbox.safe_files import UnsafePathError, read_regular, write_file
from sandbox.workers.protocol import RESULT_MARKER, BuildResult, BuildSpec, BuiltStamp, WorkspaceBuildSpec
from sandbox.workers.protocol import parse as parse_worker_result

# Host C++ here is binding glue (argument checks, a launch): -O1 halves its compile time;
# kernels are device code in .cu files, compiled by nvcc at -O3.
CFLAGS = ["-O1"]
# --resource-usage: ptxas reports each kernel's registers, spills and shared memory in the log
# (agent/build/resources.py reads them; the error summaries leave them out).
CUDA_CFLAGS = ["-O3", "-lineinfo", "--resource-usage"]
BUILT_STAMP = ".kernel-agent-built.json"
INLINE_RESOURCES = ".kernel-agent-resources.json"  # a single file's kernel facts, in its build folder
LOG_FILE = ".harness/logs/compile.log"
logger = logging.getLogger(__name__)

CompileStatus = Literal["built", "up_to_date", "compile_error", "timeout", "crashed"]


class CompileResult(BaseModel):
    ok: bool
    status: CompileStatus
    solution_kind: Literal["workspace", "single_file"]
    content_hash: str
    arch: str = Field(description="TORCH_CUDA_ARCH_LIST value built for")
    arch_source: str
    build_dir: str = Field(description="path inside the sandbox")
    module_path: str | None = Field(default=None, description="the built .so inside the sandbox (workspace)")
    duration_s: float
    mode: str = Field(default="", description="up_to_date | ninja (incremental) | configure (full)")
    errors: list[Diagnostic] = Field(default_factory=list)
    warning_count: int = 0
    message: str = ""
    resources: list[KernelResources] = Field(
        default_factory=list,
        description="per kernel: registers, spills, static shared memory, theoretical occupancy (ptxas)",
    )
    log_path: str | None = Field(default=None, description="full build log on the host")
    model_log: str | None = Field(
        default=None,
        description="the same log, workspace-relative, where the model's read_file reads it",
    )
    worker_phases: dict[str, float] = Field(
        default_factory=dict,
        description="seconds inside the build worker: worker_s (all of it) and, for a single file, "
        "import_torch_s and solution_s (running the file: load_inline's build); the rest of "
        "duration_s is starting the sandbox and Python",
    )

    def feedback(self, max_errors: int = 5) -> str:
        """What the model reads: success with timing, or the first real errors."""
        if self.ok:
            what = "up to date (nothing changed)" if self.status == "up_to_date" else "compiled"
            done = f"{what} in {self.duration_s:.1f}s for sm_{self.arch.replace('.', '')}"
            return done + (f"\n{self.message}" if self.message else "")
        head = (
            f"compile failed ({self.status}): {self.message}"
            if self.message
            else f"compile failed ({self.status})"
        )
        shown = [e.render() for e in self.errors[:max_errors]]
        more = len(self.errors) - len(shown)
        tail = [f"... and {more} more errors"] if more > 0 else []
        log = [f"full log: read_file {self.model_log}"] if self.model_log else []
        return "\n".join([head, *shown, *tail, *log])


def build_dir_for(solution: Solution, sandbox: Sandbox, arch: str) -> str:
    identity = json.dumps(
        [
            sandbox.kind,
            sandbox.capabilities.runtime_identity,
            str(solution.root),
            solution.kind,
            arch,
            _torch_version(),
        ]
    )
    return f"{sandbox.cache_path}/build/{hashlib.sha256(identity.encode()).hexdigest()[:20]}"


def compile_solution(
    solution: Solution,
    sandbox: Sandbox,
    *,
    arch: str | None = None,
    timeout: float = 600,
    extra_cuda_cflags: list[str] | None = None,
) -> CompileResult:
    start = time.monotonic()
    arch_value, arch_source = resolve_arch(arch)
    if isinstance(solution, Workspace):
        try:
            solution.restore_harness_files()
        except UnsafePathError as exc:
            return CompileResult(
                ok=False,
                status="compile_error",
                solution_kind=solution.kind,
                content_hash="",
                arch=arch_value,
                arch_source=arch_source,
                build_dir="",
                duration_s=time.monotonic() - start,
                message=f"the harness files cannot be restored: {exc}",
            )
    content = solution.content_hash()
    build_dir = build_dir_for(solution, sandbox, arch_value)
    spec = _build_spec(solution, sandbox, build_dir, extra_cuda_cflags or [], content)
    spec["config_hash"] = _config_hash(spec, arch_value)
    common = {
        "solution_kind": solution.kind,
        "content_hash": content,
        "arch": arch_value,
        "arch_source": arch_source,
        "build_dir": build_dir,
        "module_path": f"{build_dir}/{EXTENSION_NAME}.so" if isinstance(solution, Workspace) else None,
    }

    if isinstance(solution, Workspace) and not solution.entry.is_file():
        return CompileResult(
            ok=False,
            status="compile_error",
            duration_s=time.monotonic() - start,
            message="the workspace has no model_new.py; write it with class ModelNew(nn.Module) "
            "calling cuda_extension",
            **common,
        )
    syntax = _syntax_error(solution)
    if syntax is not None:
        return CompileResult(
            ok=False,
            status="compile_error",
            duration_s=time.monotonic() - start,
            errors=[syntax],
            message=f"{syntax.file} does not parse",
            **common,
        )

    if _last_good_build(sandbox, build_dir) == {"content_hash": content, "config_hash": spec["config_hash"]}:
        return CompileResult(
            ok=True,
            status="up_to_date",
            mode="up_to_date",
            duration_s=time.monotonic() - start,
            resources=_resources(solution, sandbox, None, build_dir),
            **common,
        )

    outcome = sandbox.exec(
        sandbox.python_command(sandbox.worker("build/build.py"), json.dumps(spec)),
        timeout=timeout,
        env={"TORCH_CUDA_ARCH_LIST": arch_value, "TORCH_EXTENSIONS_DIR": build_dir},
    )
    record = cast("BuildResult | None", parse_worker_result(outcome.stdout))
    log = (record or {}).get("log", "") + ("\n" + outcome.stderr if outcome.stderr else "")
    scope = _source_scope(solution, sandbox, build_dir)
    # What a compiler quoted from outside the workspace never reaches a log the model can read.
    shown_log = confine_log(log, scope)
    shown_stdout = confine_log(_without_record(outcome.stdout), scope)
    log_path = _save_log(solution, shown_log, shown_stdout)
    if log_path is not None:
        common["model_log"] = _model_log(solution, shown_log, shown_stdout)
    duration = time.monotonic() - start
    if outcome.timed_out:
        return CompileResult(
            ok=False,
            status="timeout",
            duration_s=duration,
            message=f"the build took longer than {timeout:.0f}s and was killed",
            log_path=log_path,
            **common,
        )
    if record is None:
        errors, warnings = parse_log(without_resource_lines(log), scope=scope)
        return CompileResult(
            ok=False,
            status="crashed",
            duration_s=duration,
            errors=errors,
            warning_count=warnings,
            message=f"the build worker {outcome.describe_failure() or 'wrote no result'}",
            log_path=log_path,
            **common,
        )
    errors, warnings = parse_log(without_resource_lines(log), scope=scope)
    if isinstance(solution, SingleFileSolution):
        errors = locate(errors, solution.path)
    if not record["ok"]:
        return CompileResult(
            ok=False,
            status="compile_error",
            mode=record.get("mode", ""),
            duration_s=duration,
            errors=errors,
            warning_count=warnings,
            message="" if errors else "the build failed; see the log",
            log_path=log_path,
            **common,
        )
    stamp: BuiltStamp = {"content_hash": content, "config_hash": spec["config_hash"]}
    sandbox.put_file(f"{build_dir}/{BUILT_STAMP}", json.dumps(stamp).encode())
    status: CompileStatus = "up_to_date" if record.get("mode") == "up_to_date" else "built"
    return CompileResult(
        ok=True,
        status=status,
        mode=record.get("mode", ""),
        duration_s=duration,
        worker_phases=_worker_phases(record),
        resources=_resources(solution, sandbox, log, build_dir),
        warning_count=warnings,
        message=_load_notes(record),
        log_path=log_path,
        **common,
    )


def _source_scope(solution: Solution, sandbox: Sandbox, build_dir: str) -> SourceScope:
    return SourceScope(
        host_root=solution.root,
        sandbox_root=sandbox.workspace_path,
        build_dir=build_dir if isinstance(solution, SingleFileSolution) else None,
    )


def _without_record(stdout: str) -> str:
    """The worker's stdout without its result record (which repeats the unfiltered log)."""
    return "\n".join(line for line in stdout.splitlines() if not line.startswith(RESULT_MARKER))


def _model_log(solution: Solution, log: str, stdout: str) -> str | None:
    """The saved log again where the model's read_file can read it (.harness/ is the harness's)."""
    if not isinstance(solution, Workspace):
        return None
    return write_model_log(
        solution.root, log + ("\n--- worker stdout ---\n" + stdout if stdout.strip() else "")
    )


def _load_notes(record: BuildResult) -> str:
    """The load check's skipped steps, one line each (numbers and text from the sandbox)."""
    notes = record.get("notes")
    if not isinstance(notes, list):
        return ""
    return "\n".join(f"note: {note}" for note in notes if isinstance(note, str))[:2000]


def _resources(
    solution: Solution, sandbox: Sandbox, log: str | None, build_dir: str
) -> list[KernelResources]:
    """The solution's kernels as ptxas compiled them (kept for files, or a single file's load_inline
    extensions, this build did not recompile); `log` None: an unchanged build, the kept facts."""
    if isinstance(solution, Workspace):
        return workspace_resources(solution, log, sandbox.workspace_path)
    path = f"{build_dir}/{INLINE_RESOURCES}"
    try:
        kept = parse_kept(sandbox.get_file(path))
    except (OSError, KeyError):
        kept = []
    text = solution.model_files()[solution.path.name]
    found = inline_resources(log, build_dir=build_dir, solution_text=text, kept=kept)
    if log is not None:
        with contextlib.suppress(OSError):
            sandbox.put_file(path, json.dumps([k.model_dump(mode="json") for k in found]).encode())
    return found


def _worker_phases(record: BuildResult) -> dict[str, float]:
    """The worker's own timings, numbers only (the record comes from the sandbox)."""
    reported = record.get("phases")
    phases = {"worker_s": record.get("duration_s"), **(reported if isinstance(reported, dict) else {})}
    return {
        str(name): float(value)
        for name, value in phases.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }


def _syntax_error(solution: Solution) -> Diagnostic | None:
    """The entry file's (model_new.py's, or the single file's) SyntaxError, found before building:
    a file that does not parse never imports, whatever the build says."""
    entry = solution.entry
    source = read_regular(solution.root, entry.relative_to(solution.root).as_posix())
    if source is None:  # missing, or a link the harness does not follow
        return None
    try:
        ast.parse(source, filename=str(entry))
    except SyntaxError as exc:
        return Diagnostic(
            file=entry.relative_to(solution.root).as_posix(),
            line=exc.lineno,
            column=exc.offset,
            message=f"SyntaxError: {exc.msg}",
        )
    except ValueError as exc:  # null bytes
        return Diagnostic(file=entry.name, message=f"SyntaxError: {exc}")
    return None


def _build_spec(
    solution: Solution, sandbox: Sandbox, build_dir: str, extra_cuda_cflags: list[str], content_hash: str
) -> BuildSpec:
    """The build worker's spec; its `config_hash` is filled in from the rest (`_config_hash`)."""
    if isinstance(solution, SingleFileSolution):
        return {
            "kind": "single_file",
            "solution": _in_sandbox(solution.path, solution, sandbox),
            "build_dir": build_dir,
            "cache_dir": sandbox.cache_path,
            "config_hash": "",
            "content_hash": content_hash,
        }
    spec: WorkspaceBuildSpec = {
        "kind": "workspace",
        "name": EXTENSION_NAME,
        "sources": [_in_sandbox(p, solution, sandbox) for p in solution.sources()],
        "build_dir": build_dir,
        "cache_dir": sandbox.cache_path,
        "cflags": CFLAGS,
        "cuda_cflags": CUDA_CFLAGS + extra_cuda_cflags,
        "link_vendor_libraries": True,
        "entry": f"{sandbox.workspace_path}/{MODEL_ENTRY}",
        "config_hash": "",
        "content_hash": content_hash,
    }
    if (solution.root / "reference.py").is_file():
        spec["reference"] = f"{sandbox.workspace_path}/reference.py"
    return spec


def _config_hash(spec: BuildSpec, arch: str) -> str:
    """What build.ninja depends on: the spec without its two hashes, and the target arch."""
    options = {k: v for k, v in spec.items() if k not in ("config_hash", "content_hash")}
    return hashlib.sha256(json.dumps([options, arch]).encode()).hexdigest()


def _in_sandbox(path: Path, solution: Solution, sandbox: Sandbox) -> str:
    return f"{sandbox.workspace_path}/{path.resolve().relative_to(solution.root).as_posix()}"


def _last_good_build(sandbox: Sandbox, build_dir: str) -> BuiltStamp | None:
    try:
        return json.loads(sandbox.get_file(f"{build_dir}/{BUILT_STAMP}"))
    except (OSError, ValueError, KeyError):
        return None


def _save_log(solution: Solution, log: str, stdout: str) -> str | None:
    """The build log at .harness/logs/compile.log, written without following links (the sandbox
    can write there); None when it was not written."""
    if not isinstance(solution, Workspace):
        return None
    text = log + ("\n--- worker stdout ---\n" + stdout if stdout.strip() else "")
    try:
        write_file(solution.root, LOG_FILE, text.encode("utf-8", errors="replace"))
    except UnsafePathError as exc:
        logger.warning("compile log not written: %s", exc)
        return None
    return str(solution.root / LOG_FILE)


def _torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "unknown"
