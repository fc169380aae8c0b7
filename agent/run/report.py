"""report.md: the short human report of one solve run."""

from __future__ import annotations

from agent.budget import BUDGET_KINDS, format_amount
from agent.referee.results import EvalResult
from agent.run.result import SolveResult
from agent.tasks import Task
from agent.tools.candidates import Candidate, CandidateBook

STATUS_MEANING = {
    "submitted": "the model submitted and the submission passed re-verification",
    "submitted_unverified": "compile-only dry run: the submission compiled; nothing was verified",
    "model_stopped": "the model stopped calling tools",
    "model_error": "the model provider failed",
    "sandbox_error": "the sandbox failed",
    "no_gpu": "the referee found no GPU",
    "referee_error": "the referee failed",
    "config_error": "the configuration (toolkit, arch) is unusable",
    "interrupted": "interrupted by the user",
    "error": "an internal error (traceback in run.json and the transcript)",
}


def _speed(result: EvalResult) -> str:
    perf = result.performance
    if perf is None:
        return "speed not measured"
    parts = []
    for label, sp in (("eager", perf.speedup_vs_eager), ("torch.compile", perf.speedup_vs_compile)):
        if sp is not None:
            parts.append(
                f"{sp.value:.2f}x vs {label} (±{100 * sp.noise:.1f}%, {sp.outcome.replace('_', ' ')})"
            )
    return "; ".join(parts) or "speed not measured"


def _precision(result: EvalResult) -> str:
    """The policy judged under and what the judge measured, e.g. `; precision fp32 (measured FP32, ...)`."""
    if result.precision is None:
        return ""
    check = result.precision_check
    measured = (
        f" (measured {check.words}, baselines at {check.baseline_precision.upper()})"
        if check and check.words
        else ""
    )
    return f"; precision {result.precision}{measured}"


def _cell(candidate: Candidate, baseline: str) -> str:
    perf = candidate.result.performance
    sp = None if perf is None else (perf.speedup_vs_eager if baseline == "eager" else perf.speedup_vs_compile)
    return "-" if sp is None else f"{sp.value:.2f}x ±{100 * sp.noise:.0f}%"


def best_line(result: SolveResult, *, label: str = "Best verified solution:") -> str:
    """The line that names the best verified solution and its speed ("" when there is none)."""
    best, verdict = result.best, result.evaluation
    if best is None or verdict is None:
        return ""
    return (
        f"{label} {_speed(verdict)}{_precision(verdict)}; verified by {best.source} at turn "
        f"{best.turn} (content `{best.content_hash[:12]}`). It is in `solution/` and `model_new.py`."
    )


def render_report(result: SolveResult, book: CandidateBook, task: Task) -> str:
    kind = result.status.split(":")[0]
    meaning = (
        f"the {result.status.split(':', 1)[1]} budget ran out"
        if kind == "budget_exhausted"
        else STATUS_MEANING.get(result.status, "")
    )
    lines = [f"# kernel-agent: {task.name}", "", f"**Status:** `{result.status}` ({meaning})."]
    if result.message:
        lines.append(f"{result.message}")
    if result.unsandboxed:
        lines.append(
            "**Sandbox:** `unsandboxed` (--unsandboxed): the model's code and the task ran with no "
            "filesystem or network isolation."
        )
    lines.append("")
    best = book.best
    if best is not None:
        lines.append(best_line(result, label="**Best verified solution:**"))
    elif result.status == "submitted_unverified" and book.submitted is not None:
        lines.append(
            "**Solution:** the submitted workspace compiled but was never run (no GPU): it is unverified."
        )
    else:
        lines.append("**No verified solution**: no candidate passed the referee.")
    submitted = book.submitted
    if submitted is not None and best is not None and submitted.content_hash != best.content_hash:
        lines.append(
            f"**Submitted** at turn {submitted.turn}: {_speed(submitted.result)}. It is NOT the best "
            "verified candidate; the best is returned."
        )
    if result.summary:
        lines += ["", f"Model's summary: {result.summary}"]
    usage = result.usage
    spent = []
    for budget_kind in BUDGET_KINDS:
        limit = getattr(result.limits, budget_kind)
        used = getattr(usage, budget_kind)
        limit_text = f"/{format_amount(budget_kind, limit)}" if limit is not None else ""
        spent.append(f"{budget_kind} {format_amount(budget_kind, used)}{limit_text}")
    unpriced = " (some calls had no known price)" if usage.usd_unknown else ""
    lines += ["", f"**Spent:** {', '.join(spent)}{unpriced}.", ""]
    if book.history:
        lines += [
            "## Candidates judged",
            "",
            f"| turn | by | verdict | vs {book.baseline} | content | |",
            "|---|---|---|---|---|---|",
        ]
        for c in book.history:
            mark = "best" if best is not None and c is best else ""
            lines.append(
                f"| {c.turn} | {c.source} | {c.result.verdict} | {_cell(c, book.baseline)} | `{c.content_hash[:10]}` | {mark} |"
            )
        lines.append("")
    lines += [
        "## Files",
        "",
        "- `solution/`: the best solution's workspace (`agent eval TASK solution/` judges it again)",
        "- `model_new.py`: the same solution as one file; torch alone builds and runs it",
        "- `result.json`: the referee's verdict of the best (else of the last candidate judged)",
        "- `workspace/`: the workspace as the model left it",
        "- `transcript.jsonl`: every model call, tool call and verdict (docs/transcript-format.md)",
        "",
    ]
    return "\n".join(lines)
