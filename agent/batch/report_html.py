"""The HTML report: one self-contained page (inline CSS, inline SVG plots, a few lines of script
that check the page and sort tables), readable offline and attachable anywhere."""

from __future__ import annotations

from html import escape

from agent.batch import svg
from agent.batch.metrics import BASELINES, Sample, fast_p
from agent.batch.report import BatchReport, candidate_rows, cost_rows, header_lines, summary_rows

CSS = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #111; max-width: 1200px; }
table { border-collapse: collapse; margin: 8px 0 24px; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: right; }
th { background: #f3f4f6; cursor: pointer; }
td:first-child, th:first-child, td:nth-child(2), td:nth-child(3) { text-align: left; }
.plots { display: flex; flex-wrap: wrap; gap: 16px; }
.meta { color: #444; font-size: 13px; }
"""

# Sorting by a header click; and a self-check the browser test reads from the DOM.
SCRIPT = """
document.querySelectorAll("table.sortable th").forEach(function (th, index) {
  th.addEventListener("click", function () {
    var body = th.closest("table").tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var asc = th.dataset.asc !== "1";
    th.dataset.asc = asc ? "1" : "0";
    rows.sort(function (a, b) {
      var x = a.cells[index].textContent, y = b.cells[index].textContent;
      var nx = parseFloat(x.replace(/[$x%,]/g, "")), ny = parseFloat(y.replace(/[$x%,]/g, ""));
      var cmp = isNaN(nx) || isNaN(ny) ? x.localeCompare(y) : nx - ny;
      return asc ? cmp : -cmp;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
var plots = document.querySelectorAll("svg.plot");
var drawn = Array.prototype.filter.call(plots, function (p) { return p.getBBox().width > 0; });
document.body.dataset.plots = String(plots.length);
document.body.dataset.plotsDrawn = String(drawn.length);
document.body.dataset.rendered = "ok";
"""


def _table(head: list[str], rows: list[list[str]], *, sortable: bool = False) -> str:
    cls = ' class="sortable"' if sortable else ""
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table{cls}><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def fast_p_curve(tasks: list[Sample]) -> str:
    """fast_p as a function of p, against eager and torch.compile."""
    top = max([3.0, *[v for s in tasks for b in BASELINES if (v := s.speedup(b)) is not None]])
    grid = [round(i * top / 120, 4) for i in range(121)]
    series = {
        f"vs {'eager' if b == 'eager' else 'torch.compile'}": [(p, fast_p(tasks, p, b)) for p in grid]
        for b in BASELINES
    }
    return svg.curves(
        series,
        title="fast_p against p",
        xlabel="p (speedup threshold)",
        ylabel="fraction of tasks",
        kind="fast_p",
    )


def cost_scatter(report: BatchReport) -> str:
    use_usd = any(c.usd > 0 for c in report.candidates)
    points = [
        (c.usd if use_usd else c.gpu_s, c.speedup_eager, f"{c.task} [{c.candidate}]")
        for c in report.candidates
        if c.verdict == "correct" and c.speedup_eager is not None
    ]
    xlabel = "dollars per candidate" if use_usd else "GPU-seconds per candidate"
    return svg.scatter(
        points, title="cost against speedup (vs eager)", xlabel=xlabel, ylabel="speedup", kind="cost"
    )


def _batch_section(report: BatchReport) -> str:
    speedups = [c.speedup_eager for c in report.candidates if c.verdict == "correct" and c.speedup_eager]
    plots = [
        svg.histogram(
            [v for v in speedups if v is not None],
            title="speedup vs eager (correct candidates)",
            xlabel="speedup (log scale)",
            kind="speedup_histogram",
        ),
        fast_p_curve(report.tasks),
        cost_scatter(report),
    ]
    meta = "".join(f"<li>{escape(line)}</li>" for line in header_lines(report))
    errors = "".join(f"<li>{escape(e)}</li>" for e in report.load_errors)
    return "\n".join(
        [
            f'<section class="batch" id="batch-{escape(report.batch_key)}">',
            f"<h2>Batch {escape(report.batch_key)}</h2>",
            f'<ul class="meta">{meta}</ul>',
            "<h3>KernelBench metrics (per task)</h3>",
            _table(*summary_rows(report)),
            '<div class="plots">',
            *plots,
            "</div>",
            "<h3>Cost</h3>",
            _table(*cost_rows(report)),
            "<h3>Candidates</h3>",
            _table(*candidate_rows(report), sortable=True),
            f"<h3>Tasks that did not load</h3><ul>{errors}</ul>" if errors else "",
            "</section>",
        ]
    )


def render_html(reports: list[BatchReport]) -> str:
    body = "\n".join(_batch_section(r) for r in reports) or "<p>No batches in this store yet.</p>"
    store = escape(reports[0].store) if reports else ""
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            "<title>kernel-agent batch report</title>",
            f"<style>{CSS}</style></head><body>",
            f'<h1>Batch report</h1><p class="meta">{store}</p>',
            body,
            f"<script>{SCRIPT}</script>",
            "</body></html>",
        ]
    )
