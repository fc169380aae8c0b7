"""`agent show --html`: the same view as the terminal, as one self-contained page (inline CSS, no
scripts, nothing fetched). Diff lines are highlighted with pygments, which rich already depends on."""

from __future__ import annotations

from html import escape
from pathlib import PurePosixPath

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import CppLexer, CudaLexer, PythonLexer
from pygments.lexers.special import TextLexer

from agent.transcripts.view import RunView, ToolStepView, TurnView

_FORMATTER = HtmlFormatter(nowrap=True, noclasses=True, style="default")
_LEXERS: dict[str, type[Lexer]] = {
    ".cu": CudaLexer,
    ".cuh": CudaLexer,
    ".cpp": CppLexer,
    ".h": CppLexer,
    ".hpp": CppLexer,
    ".py": PythonLexer,
}
_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:70em;color:#222;background:#fafafa}
h1{font-size:1.4em} h2{font-size:1.1em;margin:0 0 .5em}
section.turn{background:#fff;border:1px solid #ddd;border-radius:6px;padding:1em;margin:1em 0}
.meta{color:#666;font-size:.85em} table.facts td{padding:.1em 1em .1em 0;vertical-align:top}
pre{background:#f4f4f4;padding:.6em;overflow-x:auto;font-size:.85em;margin:.3em 0;white-space:pre-wrap}
.role{font-weight:bold;color:#804} .assistant{white-space:pre-wrap;margin:.5em 0}
.call{margin:.8em 0;border-left:3px solid #cc9;padding-left:.6em} .tool{font-weight:bold;color:#750}
.error{color:#b00} .ok{color:#070} .diff{background:#fff;border:1px solid #eee}
.diff .add{background:#e6ffec;display:block} .diff .del{background:#ffebe9;display:block}
.diff .hunk{color:#0550ae;display:block} .diff .ctx{display:block}
.verdict{font-weight:bold} .verdict.correct{color:#070} .verdict.failed{color:#b00}
"""


def render_html(view: RunView) -> str:
    facts = "".join(f"<tr><td><b>{escape(k)}</b></td><td>{escape(v)}</td></tr>" for k, v in view.facts)
    warning = (
        '<p class="error">The last line was cut off mid-write (a killed run); shown up to the cut.</p>'
        if view.truncated
        else ""
    )
    turns = "".join(_turn(turn) for turn in view.turns)
    end = (
        f'<section class="turn" id="run-end"><h2>Run end</h2><table class="facts">'
        f"<tr><td><b>status</b></td><td>{escape(view.status)}</td></tr>"
        f"<tr><td><b>message</b></td><td>{escape(view.end_message)}</td></tr>"
        f"<tr><td><b>best</b></td><td>{escape(view.best or 'no verified solution')}</td></tr>"
        f"<tr><td><b>cost</b></td><td>{escape(view.cost)}</td></tr></table></section>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(view.title)}</title><style>{_CSS}</style></head><body>"
        f'<h1>{escape(view.title)}</h1><table class="facts">{facts}</table>{warning}{turns}{end}</body></html>\n'
    )


def _turn(turn: TurnView) -> str:
    parts = [f'<section class="turn" id="turn-{turn.turn}"><h2>Turn {turn.turn}</h2>']
    for role, text in turn.prompts:
        parts.append(
            f'<details><summary><span class="role">{escape(role)}</span> prompt '
            f"({len(text.splitlines())} lines)</summary><pre>{escape(text)}</pre></details>"
        )
    if turn.text:
        parts.append(f'<div class="assistant"><span class="role">assistant:</span> {escape(turn.text)}</div>')
    parts.extend(_step(step) for step in turn.steps)
    for v in turn.verdicts:
        speed = f" {v.speedup:.2f}x vs {escape(v.baseline)}" if v.speedup is not None else ""
        best = " (best so far)" if v.became_best else ""
        kind = "correct" if v.verdict == "correct" else "failed"
        parts.append(
            f'<p><span class="verdict {kind}">verdict ({escape(v.source)}): {escape(v.verdict)}{speed}{best}</span>'
            f' <span class="meta">{escape(v.reason)} · content {escape(v.content_hash[:10])}</span></p>'
        )
    cost = f"${turn.cost_usd:.4f}" if turn.cost_usd is not None else "unpriced"
    meta = f"{turn.tokens_in:,} in / {turn.tokens_out:,} out tokens, {cost}, stop {turn.stop_reason or '-'}"
    if turn.budget:
        meta += f" · budget: {turn.budget}"
    parts.append(f'<p class="meta">{escape(meta)}</p></section>')
    return "".join(parts)


def _step(step: ToolStepView) -> str:
    head = f'<div class="call"><span class="tool">{escape(step.name)}</span>'
    if step.arguments:
        head += f" <code>{escape(step.arguments)}</code>"
    parts = [head]
    if step.diff is not None and step.path is not None:
        parts.append(f'<pre class="diff">{highlight_diff(step.diff, step.path)}</pre>')
    if step.answered:
        failed = step.is_error and not step.compile_only  # a dry run's verify or profile is neutral
        kind = "error" if failed else "ok"
        mark = "•" if step.compile_only else "✗" if failed else "✓"
        body = escape(step.result)
        if len(step.result.splitlines()) > 30:
            parts.append(
                f'<details><summary class="{kind}">{mark} result</summary><pre>{body}</pre></details>'
            )
        else:
            parts.append(f'<pre class="{kind}">{mark} {body}</pre>')
    else:
        parts.append('<p class="error">(no result recorded)</p>')
    parts.append("</div>")
    return "".join(parts)


def highlight_code(code: str, path: str) -> str:
    lexer = _LEXERS.get(PurePosixPath(path).suffix, TextLexer)()
    return highlight(code, lexer, _FORMATTER).rstrip("\n")


def highlight_diff(diff: str, path: str) -> str:
    lines = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---", "@@", "\\")):
            lines.append(f'<span class="hunk">{escape(line)}</span>')
        else:
            kind = {"+": "add", "-": "del"}.get(line[:1], "ctx")
            lines.append(f'<span class="{kind}">{escape(line[:1])}{highlight_code(line[1:], path)}</span>')
    return "".join(lines)
