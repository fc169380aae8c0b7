"""The pipeline tools: compile, verify, profile, submit.

verify, profile and submit go through the referee; every verdict is recorded with a snapshot of the
workspace it judged, and the best correct one is kept (agent.tools.candidates.CandidateBook). Failures the
model can fix come back as ToolError text; a missing GPU or a referee failure ends the run.
"""

from __future__ import annotations

from typing import Any

from agent.build.compile import CompileResult, compile_solution
from agent.build.resources import render_resources
from agent.build.toolkit import ToolkitError
from agent.referee.report import feedback
from agent.stops import RunAborted, Submitted
from agent.tools.candidates import Candidate

from .base import ToolError, ToolReply, tool
from .context import ToolContext
from .ncu import find_cuda_tool

DRY_RUN_NOTE = (
    "this is a compile-only dry run (--allow-no-gpu): there is no GPU, so nothing can be verified or "
    "timed. The workspace compiled; call submit when you are done."
)


def _compile_data(result: CompileResult) -> dict[str, Any]:
    return {
        "ok": result.ok,
        "status": result.status,
        "content_hash": result.content_hash,
        "duration_s": round(result.duration_s, 3),
        "errors": [e.render() for e in result.errors[:5]],
        "log": result.model_log,
    }


def _verdict_data(candidate: Candidate, became_best: bool) -> dict[str, Any]:
    return {
        "verdict": candidate.result.verdict,
        "content_hash": candidate.content_hash,
        "speedup": candidate.speedup,
        "became_best": became_best,
    }


def is_dry_run_pass(ctx: ToolContext, candidate: Candidate) -> bool:
    """A compile-only dry run's verdict on a workspace that built (no GPU to judge it)."""
    return ctx.settings.allow_no_gpu and candidate.result.verdict == "no_gpu" and candidate.result.compile.ok


def verdict_reply(ctx: ToolContext, candidate: Candidate, became_best: bool, *, head: str = "") -> ToolReply:
    """The model's reply to a verdict (ToolError when it failed); `head` is a line put first."""
    data = _verdict_data(candidate, became_best)
    lead = f"{head}\n" if head else ""
    if is_dry_run_pass(ctx, candidate):
        raise ToolError(f"{lead}{candidate.result.compile.feedback()}\n{DRY_RUN_NOTE}", data=data)
    text = lead + feedback(candidate.result, work=ctx.settings.work)
    text += _sanitizer_offer(candidate)
    if not candidate.correct:
        raise ToolError(
            f"{text}\n{ctx.candidates.best_line()} (kept; fix the workspace and try again)", data=data
        )
    standing = "this is the best verified candidate so far" if became_best else ctx.candidates.best_line()
    return ToolReply(f"{text}\n{standing}", data=data)


def _sanitizer_offer(candidate: Candidate) -> str:
    """After a CUDA error in the candidate: where to find which kernel, block and thread did it."""
    failure = candidate.result.failure
    if failure is None or failure.kind != "cuda_error" or find_cuda_tool("compute-sanitizer") is None:
        return ""
    return (
        "\nnext: call sanitize (memcheck) to rerun the forward under compute-sanitizer; it names the "
        "kernel, source line, block, thread and address of the bad access"
    )


@tool(name="compile")
def compile_workspace(ctx: ToolContext) -> ToolReply:
    """Build your CUDA extension (binding.cpp plus kernels/*.cu and *.cpp) in the sandbox, then load it:
    import the module (an undefined symbol fails here) and make ModelNew from model_new.py on the meta
    device, checking its parameters against the reference Model's. Incremental: only changed files are
    rebuilt. Returns the first real errors with file:line, each quoted from your file; the full log is
    compile.log in the workspace (read_file compile.log)."""
    try:
        options = ctx.settings.referee
        result = compile_solution(
            ctx.workspace, ctx.sandbox, arch=options.arch, timeout=options.compile_timeout_s
        )
    except ToolkitError as exc:
        raise RunAborted("config_error", f"the CUDA toolkit cannot be used: {exc}") from exc
    if not result.ok:
        raise ToolError(result.feedback(), data=_compile_data(result))
    resources = render_resources(result.resources)
    return ToolReply(result.feedback() + (f"\n{resources}" if resources else ""), data=_compile_data(result))


@tool
def verify(ctx: ToolContext) -> ToolReply:
    """Check correctness: compile, then run ModelNew against the reference on fresh random inputs
    (several trials) under the active policy. Returns the verdict and, when wrong, where and by how much."""
    return verdict_reply(ctx, *ctx.judge("verify", profile=False))


@tool
def profile(ctx: ToolContext) -> ToolReply:
    """Verify, then time ModelNew against eager PyTorch and torch.compile (median, noise), list which
    kernels took the GPU time, and show the speed of light: the memory and compute floors and how close
    yours and both baselines come to them. Use it to decide what to optimize next."""
    return verdict_reply(ctx, *ctx.judge("profile", profile=True))


@tool
def submit(ctx: ToolContext, summary: str = "") -> str:
    """Submit the workspace as it is now as your final solution. It is re-verified and timed first; a
    workspace that fails is refused and you can keep working. Submitting ends the run.

    Args:
        summary: One or two sentences on what your kernels do and why they are fast.
    """
    if ctx.region is not None:
        raise ToolError(
            f"region r{ctx.region:02d} is open: a region is not the task. Call compose_regions to put the "
            "regions into the whole model (or open_whole_model), verify it, then submit."
        )
    candidate, became_best = ctx.judge("submit", profile=True)
    book = ctx.candidates
    if candidate.correct:
        book.submitted = candidate
        best = book.best
        note = (
            ""
            if best is None or best is candidate or best.content_hash == candidate.content_hash
            else f"; it is not the best verified candidate ({best.describe(book.baseline)}), which is returned"
        )
        raise Submitted(f"submission accepted: {candidate.result.reason}{note}", summary=summary)
    if is_dry_run_pass(ctx, candidate):
        book.submitted = candidate
        raise Submitted(
            "accepted without verification (compile-only dry run)", summary=summary, verified=False
        )
    raise ToolError(
        f"submission refused: the workspace fails re-verification.\n{candidate.result.feedback()}\n"
        f"{book.best_line()}: it is what the run returns if no submission is accepted. "
        "Fix the workspace and submit again.",
        data=_verdict_data(candidate, became_best),
    )
