"""One tuning run end to end: space, build, judge, worker, search, final check, write-back, memory."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import cast

from pydantic import BaseModel, Field

from agent.build.compile import compile_solution
from agent.build.toolkit import resolve_arch
from agent.tasks import Task, instantiate_tasks
from agent.tune.apply import read_tune_header, read_tune_literal, write_tune_header, write_tune_literal
from agent.tune.cache import write_cache
from agent.tune.evaluator import GpuEvaluator
from agent.tune.experience import ExperienceLibrary, Features
from agent.tune.limits import BudgetSpec, TuneBudget
from agent.tune.results import SearchOutcome, TuneResult
from agent.tune.search import Search, SearchAborted, SearchOptions, Strategy
from agent.tune.session import (
    JudgeClient,
    TuneSessionError,
    WorkerClient,
    check_inputs_match,
    close_exchange,
    fresh_seeds,
    open_exchange,
)
from agent.tune.space import DeviceLimits, Point, Space, SpaceError, load_space_file, shape_names
from agent.tune.variants import VariantBuilder
from agent.workspace import EXTENSION_NAME, Workspace
from sandbox.base import Sandbox
from sandbox.workers.protocol import TimingSettings, TuneJudgeReady, TuneTask, TuneWorkerSpec

# Tuning compares configurations of one kernel with each other, so it can time fewer
# repetitions than the referee does; the final pick is re-timed paired to absorb the noise.
SEARCH_TIMING = {
    "warmup_ms": 2.0,
    "min_warmup": 2,
    "target_ms": 10.0,
    "min_reps": 5,
    "max_reps": 40,
    "max_seconds": 2.0,
}
RETIME_TIMING = {
    "warmup_ms": 1.0,
    "min_warmup": 1,
    "target_ms": 5.0,
    "min_reps": 5,
    "max_reps": 25,
    "max_seconds": 1.0,
}


class TuneOptions(BaseModel):
    budget: BudgetSpec
    seed: int = 0
    strategy: Strategy = "adaptive"
    use_experience: bool = True
    record_experience: bool = True
    experience_path: Path | None = None
    apply: bool = True
    device: str = "cuda"
    arch: str | None = None
    timing: dict = Field(default_factory=lambda: dict(SEARCH_TIMING))
    retime_timing: dict = Field(default_factory=lambda: dict(RETIME_TIMING))
    retime_rounds: int = 5
    finalists: int = 3
    min_gain: float = 0.0
    batch: int | None = None
    item_timeout: float = 60.0
    compile_timeout: float = 600.0
    slots: int | None = Field(default=None, description="define mode: builds at once (default: cores / 4)")
    tolerance: str = "default"
    """A name from agent.referee.policy.TOLERANCES; "default" is the precision's limits, the referee's."""
    precision: str = "fp32"
    """The run's precision policy (docs/precision.md): the default tolerance follows it."""
    cache_out: Path | None = Field(
        default=None, description="write every measured point as a Kernel Tuner cache"
    )
    cache_meta: dict = Field(default_factory=dict)


def default_point(space: Space, workspace: Workspace) -> tuple[Point | None, str]:
    """The untuned start: what the solution runs now. (point, problem)"""
    if space.file.mode == "runtime":
        current = read_tune_literal(workspace.entry)
        if current is None:
            return None, (
                "model_new.py has no module-level `TUNE = {...}` dict literal; runtime tuning sets its entries "
                "before each call (see skills/tuning/SKILL.md)"
            )
        missing = [n for n in space.names if n not in current]
        if missing:
            return (
                None,
                f"TUNE in model_new.py lacks the parameter(s) {missing} declared in kernels/tune.json",
            )
        config = {n: current[n] for n in space.names}
    else:
        header = read_tune_header(workspace.root) or {}
        config = {n: header[n] for n in space.names if n in header}
        if len(config) != len(space.names):
            config = dict(space.file.default or space.config(space.points[0]))
    problem = space.check(config)
    if problem:
        return None, f"the current values {config} are not a valid point of the space: {problem}"
    return space.point(config), ""


def has_sources(workspace: Workspace) -> bool:
    """Whether there is an extension to build (a pure-Python ModelNew has none)."""
    kernels = workspace.root / "kernels"
    return kernels.is_dir() and any(p.suffix in (".cu", ".cpp") for p in kernels.rglob("*"))


def kernel_hash(workspace: Workspace) -> str:
    files = {k: v for k, v in workspace.model_files().items() if not k.endswith("tune_config.h")}
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    return digest.hexdigest()[:16]


def task_features(task: Task, space: Space, workspace: Workspace, judge_ready: TuneJudgeReady) -> Features:
    spec = task.spec
    tensors = [a for a in (spec.inputs if spec else []) if a.kind == "tensor"]
    found = judge_ready.get("features", {})
    return Features(
        task_name=task.name,
        task_key=task.key,
        ops=sorted(set(found.get("ops", [])) | {f"module:{m}" for m in found.get("modules", [])}),
        shapes=[list(a.shape or []) for a in tensors],
        dtypes=[a.dtype or "" for a in tensors],
        gpu=judge_ready.get("device", ""),
        kernel_hash=kernel_hash(workspace),
        params=list(space.names),
        space_sig=space.signature(),
    )


def run_tuning(
    task: Task,
    workspace: Workspace,
    sandbox: Sandbox,
    options: TuneOptions,
    *,
    sandbox_kind: str = "local",
    log: Callable[[str], None] | None = None,
) -> TuneResult:
    log = log or (lambda _m: None)
    result = TuneResult(
        ok=False, message="", task=task.name, solution=str(workspace.root), budget=options.budget
    )
    if task.spec is None:
        task = instantiate_tasks([task], sandbox_kind=sandbox_kind)[0]
    assert task.spec is not None
    try:
        limits = DeviceLimits.detect() if options.device.startswith("cuda") else DeviceLimits()
        space = Space(load_space_file(workspace.root), limits=limits, shapes=shape_names(task.spec.inputs))
    except SpaceError as exc:
        result.message = str(exc)
        return result
    result.mode, result.space_signature, result.params = space.file.mode, space.signature(), list(space.names)
    result.space_points, result.space_total = len(space), space.total
    result.space_rejected = space.rejection_summary()
    start, problem = default_point(space, workspace)
    if start is None:
        result.message = problem
        return result
    budget = TuneBudget(options.budget)
    module_path: str | None = None
    if space.file.mode == "runtime" and has_sources(workspace):
        compiled = compile_solution(workspace, sandbox, arch=options.arch, timeout=options.compile_timeout)
        budget.charge(compile_seconds=compiled.duration_s)
        result.compile_s = compiled.duration_s
        if not compiled.ok:
            result.message = compiled.feedback()
            return result
        module_path = compiled.module_path
    host_dir, box_dir = open_exchange(workspace.root, sandbox)
    judge: JudgeClient | None = None
    worker: WorkerClient | None = None
    library: ExperienceLibrary | None = None
    builder: VariantBuilder | None = None
    try:
        from agent.referee.policy import PRECISION_TOLERANCES, tolerance_policy

        tolerances = (
            PRECISION_TOLERANCES[options.precision]
            if options.tolerance == "default" and options.precision in PRECISION_TOLERANCES
            else tolerance_policy(options.tolerance)
        )
        seeds = fresh_seeds()
        common: TuneTask = {
            "task_source": task.source,
            "task_filename": str(task.path),
            "device": options.device,
            **seeds,
        }
        judge = JudgeClient({**common, "tolerances": tolerances.for_worker()}, exchange=host_dir)
        worker_spec: TuneWorkerSpec = {
            **common,
            "mode": space.file.mode,
            "params": list(space.names),
            "box_base": box_dir,
            "item_timeout": options.item_timeout,
            "solution": {
                "extension": EXTENSION_NAME,
                "module_path": module_path,
                "entry": f"{sandbox.workspace_path}/model_new.py",
                "module_name": "model_new",
            },
        }
        timeout = (options.budget.wall_seconds or 3000) + 600
        env = {"TORCH_CUDA_ARCH_LIST": resolve_arch(options.arch)[0]}
        worker = WorkerClient(sandbox, worker_spec, host_dir, env=env, exec_timeout=timeout)
        worker_ready = worker.start()
        check_inputs_match(judge.wait_ready(), worker_ready)
        result.device = judge.ready.get("device", "")
        features = task_features(task, space, workspace, judge.ready)
        result.features = features.model_dump()
        library = (
            ExperienceLibrary(options.experience_path)
            if options.use_experience or options.record_experience
            else None
        )
        warm: list[Point] = []
        if library is not None and options.use_experience:
            warm, result.warm_start = library.warm_start(features, space, start)
        batch = options.batch or 1
        if space.file.mode == "define":
            slots = options.slots or max(1, min(8, (os.cpu_count() or 4) // 4))
            builder = VariantBuilder(
                workspace,
                space,
                sandbox_kind=sandbox_kind,
                arch=options.arch,
                slots=slots,
                timeout=options.compile_timeout,
                on_compile=lambda s: budget.charge(compile_seconds=s),
            )
            batch = options.batch or slots
        evaluator = GpuEvaluator(
            space,
            worker,
            judge,
            timing=cast(TimingSettings, options.timing),  # TuneOptions keeps them as plain dicts
            retime_timing=cast(TimingSettings, options.retime_timing),
            item_timeout=options.item_timeout,
            builder=builder.build if builder else None,
            log=log,
        )
        search = Search(
            space,
            budget,
            evaluator,
            SearchOptions(
                strategy=options.strategy,
                seed=options.seed,
                finalists=options.finalists,
                retime_rounds=options.retime_rounds,
                min_gain=options.min_gain,
                batch=batch,
            ),
            default=start,
            warm=warm,
        )
        outcome = search.run()
        _confirm_winner(outcome, space, evaluator, start, log)
        result.outcome = outcome
        result.ok = outcome.best_key is not None
        result.message = _summary(outcome, result.compile_s)
        if result.ok and options.apply and outcome.best_config is not None:
            result.applied = _apply(space, workspace, outcome.best_config)
        if library is not None and options.record_experience:
            result.experience_run_id = library.record(
                features,
                space,
                outcome.history,
                default_key=outcome.default_key,
                default_ms=outcome.default_ms,
                best_key=outcome.best_key,
                best_ms=outcome.best_ms,
            )
        if options.cache_out is not None:
            write_cache(
                options.cache_out,
                space=space,
                measurements=outcome.history,
                kernel_name=task.name,
                device_name=result.device,
                meta={
                    "features": features.model_dump(),
                    "timing": options.timing,
                    "default": outcome.default_key,
                    **options.cache_meta,
                },
                problem_size=[d for s in features.shapes for d in s],
            )
    except TuneSessionError as exc:
        result.message = str(exc)
    finally:
        if library is not None:
            library.close()
        if worker is not None:
            worker.stop()
        if judge is not None:
            judge.close()
        if builder is not None:
            builder.close()
        close_exchange(host_dir)
    return result


def _confirm_winner(
    outcome: SearchOutcome, space: Space, evaluator: GpuEvaluator, start: Point, log: Callable[[str], None]
) -> None:
    """The winner's whole output goes to the judge once more, with no fingerprint shortcut."""
    if outcome.best_config is None or outcome.best_key == outcome.default_key:
        return
    try:
        status, error = evaluator.verify_full(space.point(outcome.best_config))
    except (SearchAborted, TuneSessionError) as exc:
        status, error = "failed", f"could not be re-checked: {exc}"
    if status == "ok":
        return
    log(f"the winner failed its final check ({error}); keeping the default")
    outcome.stop_reason += f"; winner {outcome.best_key} failed its final check: {error}"
    default = next((m for m in outcome.history if m.key == outcome.default_key and m.ok), None)
    outcome.best_key = default.key if default else None
    outcome.best_config = dict(default.config) if default else None
    outcome.best_ms = outcome.default_ms if default else None


def _apply(space: Space, workspace: Workspace, config: dict[str, int]) -> str:
    if space.file.mode == "runtime":
        current = read_tune_literal(workspace.entry) or {}
        if all(current.get(k) == v for k, v in config.items()):
            return "model_new.py TUNE unchanged (the default won)"
        write_tune_literal(workspace.entry, config)
        return "model_new.py TUNE = " + ", ".join(f"{k}={v}" for k, v in config.items())
    write_tune_header(workspace.root, config, note="the tuned winner")
    return "kernels/tune_config.h: " + ", ".join(f"{k}={v}" for k, v in config.items())


def _summary(outcome: SearchOutcome, compile_s: float = 0.0) -> str:
    if not outcome.history:
        spent = f"; the build took {compile_s:.1f} s of it" if compile_s >= 1 else ""
        return f"nothing was measured: {outcome.stop_reason} before the first point{spent}"
    if outcome.best_key is None:
        return "no configuration produced a correct output; " + outcome.stop_reason
    if outcome.speedup is not None:
        return f"best {outcome.best_ms:.4f} ms, {outcome.speedup:.3f}x the default ({outcome.stop_reason})"
    return f"best {outcome.best_ms:.4f} ms; the default failed ({outcome.stop_reason})"
