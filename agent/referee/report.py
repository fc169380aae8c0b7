"""How an EvalResult reads: short feedback for the model, a verdict table for people."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.referee.diff_text import margin_line, render_diff
from agent.referee.roofline import WorkEstimate, speed_of_light_lines

if TYPE_CHECKING:
    from rich.table import Table

    from agent.referee.results import EvalResult, PerformanceReport, Speedup, TimingStats

MAX_DETAIL_LINES = 12


def _ms(stats: TimingStats | None) -> str:
    if stats is None:
        return "-"
    cached = ", cached" if stats.cached else ""
    return f"{stats.median_ms:.4g} ms (IQR {stats.iqr_ms:.2g}, n={stats.n}{cached})"


def _speedup(label: str, sp: Speedup | None) -> str:
    if sp is None:
        return ""
    return f"{sp.value:.2f}x vs {label} ±{100 * sp.noise:.1f}% ({sp.outcome.replace('_', ' ')})"


def _performance_lines(perf: PerformanceReport, work: WorkEstimate | None, gpu_name: str | None) -> list[str]:
    mode = f"[{perf.compile_mode}]" if perf.compile_mode else ""
    lines = [
        f"time: yours {_ms(perf.candidate)} | eager {_ms(perf.eager)} | torch.compile{mode} {_ms(perf.compile)}",
    ]
    speedups = [
        s
        for s in (
            _speedup("eager", perf.speedup_vs_eager),
            _speedup("torch.compile", perf.speedup_vs_compile),
        )
        if s
    ]
    if speedups:
        lines.append("speedup: " + "; ".join(speedups))
    for arm, error in perf.baseline_errors.items():
        lines.append(f"{arm} baseline failed: {error.splitlines()[0][:200]}")
    if perf.kernels:
        shown = ", ".join(
            f"{k.name[:48]} {100 * k.share:.1f}% ({k.origin}, {k.time_us:.1f} us x{k.calls:g})"
            for k in perf.kernels[:4]
        )
        own = (
            f"; own kernels {100 * perf.own_kernel_share:.1f}% of GPU time"
            if perf.own_kernel_share is not None
            else ""
        )
        lines.append(f"kernels: {shown}{own}")
    elif perf.profile_error:
        lines.append(f"kernels: not profiled ({perf.profile_error})")
    lines += speed_of_light_lines(perf, work, gpu_name)
    lines += [f"flag: {flag.message}" for flag in perf.flags]
    return lines


def feedback(result: EvalResult, work: WorkEstimate | None = None) -> str:
    """The verdict for the model. `work` (the task's traced FLOPs and bytes) adds the compute floor
    to the speed-of-light lines; without it they use the judge's input and output bytes."""
    head = f"VERDICT: {result.verdict} - {result.reason}"
    lines = [head]
    if result.verdict == "compile_error":
        return "\n".join([head, result.compile.feedback()])
    if result.failure is not None:
        detail = [line for line in result.failure.detail.splitlines() if line.strip()][-MAX_DETAIL_LINES:]
        return "\n".join([head, *detail])
    if result.correctness is not None and not result.correctness.passed:
        shown = 0
        for trial in [*result.correctness.trials, *result.correctness.rechecks]:
            if trial.passed or shown >= 2:
                continue
            shown += 1
            where = f"trial {trial.index}" if trial.kind == "trial" else f"timed call {trial.index}"
            if trial.inputs != "task":
                where += f" (hidden inputs: {trial.inputs.replace('_', ' ')})"
            lines += [f"{where}: {problem}" for problem in trial.problems]
            lines += [f"{where}, {render_diff(d)}" for d in trial.outputs if not d.passed][:3]
    if result.correctness is not None and result.correctness.passed:
        margin = margin_line(result.correctness)
        lines += [margin] if margin else []
    lines += precision_lines(result)
    report = result.policy_report
    if report is not None:
        lines += [f"policy ({report.policy}): {v}" for v in report.violations]
        lines += [f"note: {n}" for n in report.notes]
    if result.performance is not None and result.verdict == "correct":
        gpu_name = result.device.name if result.device is not None else None
        lines += _performance_lines(result.performance, work, gpu_name)
    return "\n".join(lines)


def precision_lines(result: EvalResult) -> list[str]:
    """The precision allowed and what the judge measured (docs/precision.md), in one line."""
    check = result.precision_check
    return [] if check is None else [f"precision ({check.policy}): {check.line}"]


def verdict_table(result: EvalResult) -> Table:
    from rich.table import Table

    color = "green" if result.verdict == "correct" else ("yellow" if result.verdict == "no_gpu" else "red")
    table = Table(
        title=f"{result.task.name}  <-  {result.solution.path}", show_header=False, title_justify="left"
    )
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    table.add_row("verdict", f"[{color}]{result.verdict}[/]: {result.reason}")
    table.add_row("policy", result.policy)
    if result.precision is not None:
        check = result.precision_check
        table.add_row("precision", result.precision + (f": {check.line}" if check is not None else ""))
    table.add_row("compile", result.compile.feedback().splitlines()[0])
    if result.device is not None:
        table.add_row("device", f"{result.device.name} (torch {result.device.torch})")
    if result.inputs_built_on == "cpu":
        table.add_row(
            "inputs",
            "made on the CPU by the task's get_inputs() and moved (it does not follow the default device)",
        )
    if result.correctness is not None:
        c = result.correctness
        worst = max(
            (d.max_abs_err or 0.0 for t in c.trials for d in t.outputs if d.max_abs_err is not None),
            default=None,
        )
        table.add_row(
            "correctness",
            f"{sum(t.passed for t in c.trials)}/{c.trials_requested} trials passed, "
            f"{sum(t.passed for t in c.rechecks)}/{len(c.rechecks)} timed calls rechecked"
            + (f"; max abs err {worst:.3g}" if worst is not None else ""),
        )
    if result.failure is not None:
        table.add_row("failure", f"{result.failure.kind} at {result.failure.stage}")
    perf = result.performance
    if perf is not None:
        table.add_row("time (yours)", _ms(perf.candidate))
        table.add_row("eager", _ms(perf.eager) + ("  " + _speedup("eager", perf.speedup_vs_eager)))
        table.add_row(
            f"torch.compile[{perf.compile_mode}]",
            _ms(perf.compile) + ("  " + _speedup("torch.compile", perf.speedup_vs_compile)),
        )
        for kernel in perf.kernels[:6]:
            table.add_row(
                f"  {kernel.origin}",
                f"{kernel.name[:90]}  {100 * kernel.share:.1f}%  {kernel.time_us:.1f} us/call",
            )
        for flag in perf.flags:
            table.add_row("[yellow]flag[/]", flag.message)
    if result.policy_report is not None:
        ops = ", ".join(f"{k} x{v}" for k, v in sorted(result.policy_report.ops.items())[:8]) or "none"
        table.add_row("torch ops", ops)
        for violation in result.policy_report.violations:
            table.add_row("[red]violation[/]", violation)
    times = result.stage_times
    table.add_row(
        "wall",
        f"{times.total_s:.1f}s (compile {times.compile_s:.1f}s, candidate {times.candidate_s:.1f}s, judge {times.judge_s:.1f}s)",
    )
    return table
