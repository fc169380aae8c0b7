"""Small hand-written SVG charts for the HTML report (no plotting library needed): a histogram,
step/line curves and a scatter plot, each a self-contained <svg> element with <title> tooltips."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape

WIDTH, HEIGHT = 560, 320
LEFT, RIGHT, TOP, BOTTOM = 60, 20, 36, 48
COLORS = ("#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed")


class Axes:
    """Maps data to pixels; y may be logarithmic."""

    def __init__(
        self, x0: float, x1: float, y0: float, y1: float, *, log_x: bool = False, log_y: bool = False
    ) -> None:
        self.log_x, self.log_y = log_x, log_y
        self.x0, self.x1 = self._t(x0, log_x), self._t(x1, log_x)
        self.y0, self.y1 = self._t(y0, log_y), self._t(y1, log_y)
        if self.x1 <= self.x0:
            self.x1 = self.x0 + 1
        if self.y1 <= self.y0:
            self.y1 = self.y0 + 1

    @staticmethod
    def _t(v: float, log: bool) -> float:
        return math.log10(max(v, 1e-9)) if log else v

    def px(self, x: float) -> float:
        return LEFT + (self._t(x, self.log_x) - self.x0) / (self.x1 - self.x0) * (WIDTH - LEFT - RIGHT)

    def py(self, y: float) -> float:
        return (
            HEIGHT
            - BOTTOM
            - (self._t(y, self.log_y) - self.y0) / (self.y1 - self.y0) * (HEIGHT - TOP - BOTTOM)
        )


def _frame(kind: str, title: str, xlabel: str, ylabel: str, body: list[str]) -> str:
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" data-plot="{kind}" viewBox="0 0 {WIDTH} {HEIGHT}"'
            f' width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}">',
            f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
            f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{escape(title)}</text>',
            f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{HEIGHT - BOTTOM}" stroke="#333"/>',
            f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}" stroke="#333"/>',
            f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 10}" text-anchor="middle" font-size="12">{escape(xlabel)}</text>',
            f'<text x="14" y="{(TOP + HEIGHT - BOTTOM) / 2}" text-anchor="middle" font-size="12"'
            f' transform="rotate(-90 14 {(TOP + HEIGHT - BOTTOM) / 2})">{escape(ylabel)}</text>',
            *body,
            "</svg>",
        ]
    )


def _ticks_x(axes: Axes, values: Sequence[float], label: Callable[[float], str] = "{:g}".format) -> list[str]:
    out = []
    for v in values:
        x = axes.px(v)
        out.append(
            f'<line x1="{x:.1f}" y1="{HEIGHT - BOTTOM}" x2="{x:.1f}" y2="{HEIGHT - BOTTOM + 4}" stroke="#333"/>'
        )
        out.append(
            f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle" font-size="11">{label(v)}</text>'
        )
    return out


def _ticks_y(axes: Axes, values: Sequence[float], fmt: str = "{:g}") -> list[str]:
    out = []
    for v in values:
        y = axes.py(v)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{fmt.format(v)}</text>'
        )
    return out


def _empty(kind: str, title: str, why: str) -> str:
    body = [
        f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" font-size="13" fill="#666">{escape(why)}</text>'
    ]
    return _frame(kind, title, "", "", body)


def histogram(values: Sequence[float], *, title: str, xlabel: str, kind: str = "histogram") -> str:
    """Counts of speedups in bins of a quarter power of two, with the 1x line."""
    values = [v for v in values if v > 0]
    if not values:
        return _empty(kind, title, "no correct candidates with a measured speedup")
    logs = [math.log2(v) for v in values]
    lo, hi = math.floor(min(logs) * 4) / 4, math.floor(max(logs) * 4) / 4 + 0.25
    lo, hi = min(lo, -0.25), max(hi, 0.25)
    nbins = round((hi - lo) * 4)
    counts = [0] * nbins
    for v in logs:
        counts[min(nbins - 1, int((v - lo) * 4))] += 1
    axes = Axes(lo, hi, 0, max(counts) * 1.1)
    body = _ticks_y(axes, _nice(max(counts)), "{:g}")
    for i, count in enumerate(counts):
        x0, x1 = axes.px(lo + i / 4), axes.px(lo + (i + 1) / 4)
        y = axes.py(count)
        left, right = 2 ** (lo + i / 4), 2 ** (lo + (i + 1) / 4)
        body.append(
            f'<rect class="bar" x="{x0 + 1:.1f}" y="{y:.1f}" width="{max(x1 - x0 - 2, 1):.1f}" height="{axes.py(0) - y:.1f}"'
            f' fill="{COLORS[0]}"><title>{left:.2f}x to {right:.2f}x: {count}</title></rect>'
        )
    body += _ticks_x(axes, range(math.ceil(lo), math.floor(hi) + 1), lambda t: f"{2.0**t:g}x")
    one = axes.px(0)
    body.append(
        f'<line x1="{one:.1f}" y1="{TOP}" x2="{one:.1f}" y2="{HEIGHT - BOTTOM}" stroke="#111" stroke-dasharray="4 3"/>'
    )
    return _frame(kind, title, xlabel, "candidates", body)


def curves(
    series: dict[str, list[tuple[float, float]]], *, title: str, xlabel: str, ylabel: str, kind: str = "curve"
) -> str:
    """Step curves (one per series) over a shared x range; y in [0, 1]."""
    points = [p for pts in series.values() for p in pts]
    if not points:
        return _empty(kind, title, "nothing to plot")
    axes = Axes(min(x for x, _ in points), max(x for x, _ in points), 0, 1)
    body = _ticks_y(axes, [0, 0.25, 0.5, 0.75, 1.0], "{:.0%}")
    body += _ticks_x(axes, _nice(max(x for x, _ in points)))
    for i, (name, pts) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        path = " ".join(
            f"{'M' if j == 0 else 'L'}{axes.px(x):.1f},{axes.py(y):.1f}" for j, (x, y) in enumerate(pts)
        )
        body.append(
            f'<path class="series" d="{path}" fill="none" stroke="{color}" stroke-width="2"><title>{escape(name)}</title></path>'
        )
        body.append(
            f'<text x="{WIDTH - RIGHT - 4}" y="{TOP + 14 + 16 * i}" text-anchor="end" font-size="12" fill="{color}">{escape(name)}</text>'
        )
    return _frame(kind, title, xlabel, ylabel, body)


def scatter(
    points: list[tuple[float, float, str]], *, title: str, xlabel: str, ylabel: str, kind: str = "scatter"
) -> str:
    """Points (x, y, label) with a log y axis and the y = 1 line."""
    points = [(x, y, label) for x, y, label in points if y > 0]
    if not points:
        return _empty(kind, title, "no correct candidates with a measured speedup")
    ys = [y for _, y, _ in points]
    lo, hi = min(min(ys), 0.5), max(max(ys), 2.0)
    xmax = max(x for x, _, _ in points) or 1.0
    axes = Axes(0, xmax * 1.05, lo, hi, log_y=True)
    body = _ticks_y(axes, [v for v in (0.125, 0.25, 0.5, 1, 2, 4, 8, 16, 32) if lo <= v <= hi], "{:g}x")
    body += _ticks_x(axes, _nice(xmax))
    one = axes.py(1)
    body.append(
        f'<line x1="{LEFT}" y1="{one:.1f}" x2="{WIDTH - RIGHT}" y2="{one:.1f}" stroke="#111" stroke-dasharray="4 3"/>'
    )
    for x, y, label in points:
        color = COLORS[0] if y >= 1 else COLORS[1]
        body.append(
            f'<circle class="point" cx="{axes.px(x):.1f}" cy="{axes.py(y):.1f}" r="4" fill="{color}" fill-opacity="0.7">'
            f"<title>{escape(label)}: {y:.2f}x at {x:g}</title></circle>"
        )
    return _frame(kind, title, xlabel, ylabel, body)


def _nice(top: float) -> list[float]:
    """About five round tick values from 0 to `top`."""
    if top <= 0:
        return [0]
    step = 10 ** math.floor(math.log10(top / 5)) if top >= 5 else (1 if top >= 2 else 0.25)
    for mult in (1, 2, 5, 10):
        if top / (step * mult) <= 6:
            step *= mult
            break
    return [round(i * step, 6) for i in range(int(top / step) + 1)]
