"""The table a tuning run comes back as: what the model (the `tune` tool) and `agent tune` print."""

from __future__ import annotations

from agent.tune.results import TuneResult


def render(result: TuneResult, top: int = 8) -> str:
    """What the model reads: the space, the budget spent, default vs best, the top points, failures."""
    if result.outcome is None:
        head = f"tuning did not run: {result.message}"
        if result.space_points:
            head += f"\n(space: {result.space_points} valid points of {result.space_total}; {result.space_rejected})"
        return head
    outcome = result.outcome
    usage = outcome.usage
    lines = [
        f"tuned {result.task} ({result.mode} mode) on {result.device or 'unknown device'}: "
        f"{result.space_points} valid points of {result.space_total} ({result.space_rejected})",
        f"spent {usage.evaluations} evaluations, {usage.gpu_seconds:.1f} GPU-s, {usage.wall_seconds:.1f} s wall "
        f"(compile {usage.compile_seconds:.1f} s); budget {result.budget.describe() if result.budget else '-'}; "
        f"stopped: {outcome.stop_reason}",
    ]
    if result.warm_start:
        sources = "; ".join(
            f"run {w.run_id} {w.task_name} (similarity {w.similarity}, {w.reason})" for w in result.warm_start
        )
        lines.append(f"warm start from {sources}")
    phases = ", ".join(f"{k} {v}" for k, v in outcome.phases.items())
    lines.append(f"evaluations by phase: {phases}")
    measured = bool(outcome.history)
    default_ms = (
        f"{outcome.default_ms:.4f} ms" if outcome.default_ms else ("FAILED" if measured else "not measured")
    )
    lines.append(f"default  {outcome.default_key:<24} {default_ms}")
    if outcome.best_key is None:
        why = "no configuration produced a correct output" if measured else "nothing was measured"
        lines.append(f"best     none: {why}")
    else:
        speed = f"  {outcome.speedup:.3f}x the default" if outcome.speedup else ""
        lines.append(f"best     {outcome.best_key:<24} {outcome.best_ms:.4f} ms{speed}")
    if outcome.finalists:
        lines.append(
            "final paired re-timing (median over rounds; ratio = time / default's in the same round):"
        )
        for f in outcome.finalists:
            ratio = f"{f.ratio_to_default:.3f}" if f.ratio_to_default is not None else "-"
            spread = f"±{f.spread / 2:.1%}" if f.spread is not None else ""
            paired = f"{f.paired_ms:.4f}" if f.paired_ms is not None else "-"
            mark = " (default)" if f.is_default else ""
            lines.append(f"  {f.key:<24} paired {paired} ms  ratio {ratio} {spread}{mark}")
    names = list(outcome.history[0].config) if outcome.history else []
    ok = sorted((m for m in outcome.history if m.ok), key=lambda m: m.time_ms or 0.0)
    if ok:
        lines.append(f"top {min(top, len(ok))} of {len(ok)} correct points ({', '.join(names)}):")
        lines.append("  rank  " + "  ".join(f"{n:>8}" for n in names) + "   median_ms   vs default")
        for rank, m in enumerate(ok[:top], 1):
            vs = f"{outcome.default_ms / m.time_ms:.3f}x" if outcome.default_ms and m.time_ms else "-"
            values = "  ".join(f"{m.config[n]:>8}" for n in names)
            lines.append(f"  {rank:>4}  {values}   {m.time_ms:>9.4f}   {vs}")
    failed = [m for m in outcome.history if not m.ok]
    if failed:
        lines.append(f"{len(failed)} point(s) failed:")
        for m in failed[:5]:
            lines.append(f"  {m.key:<24} {m.status}: {m.error[:160]}")
    if result.applied:
        lines.append(f"applied: {result.applied}. Run verify again to confirm the tuned solution.")
    return "\n".join(lines)
