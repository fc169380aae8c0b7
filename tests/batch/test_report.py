"""`agent report`: metrics read back from a store, markdown, and the HTML page rendered in a real
headless Chromium (no console errors, the three plots drawn)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from agent.batch.config import EvalJob, JudgingOptions, WorkItem
from agent.batch.fakes import fake_compile, fake_result
from agent.batch.records import AttemptRecord
from agent.batch.report import build_reports, render_markdown
from agent.batch.report_files import write_reports
from agent.batch.store import Store
from agent.tasks import load_folder
from tests.batch.helpers import fake_config, make_tasks

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed (.ci/setup-chromium.sh installs it); HTML not rendered",
)


def fill_store(tmp_path: Path) -> Path:
    """Level 1: A correct 2.0x/0.8x ($1), B incorrect ($2); level 2: C correct 1.2x/1.3x ($3),
    C's second candidate correct 1.5x/1.1x ($1), D an error."""
    root = make_tasks(tmp_path / "tasks", {1: ["1_A", "2_B"], 2: ["1_C", "2_D"]})
    tasks = {t.name: t for t in load_folder(root, instantiate=False)[0]}
    config = fake_config(tmp_path, root, tmp_path / "sols")
    plan: list[tuple[str, str, dict[str, Any] | None, float]] = [
        ("1_A", "base", {"speedup_eager": 2.0, "speedup_compile": 0.8}, 1.0),
        ("2_B", "base", {"verdict": "incorrect"}, 2.0),
        ("1_C", "base", {"speedup_eager": 1.2, "speedup_compile": 1.3}, 3.0),
        ("1_C", "v2", {"speedup_eager": 1.5, "speedup_compile": 1.1}, 1.0),
        ("2_D", "base", None, 0.0),
    ]
    with Store(config.store) as store:
        run = store.start_run(config, versions={"torch": "x"}, gpus=[{"id": "0", "name": "NVIDIA H200"}])
        store.add_tasks(list(tasks.values()))
        for name, candidate, spec, usd in plan:
            item = WorkItem(task=tasks[name], candidate=candidate)
            claim = store.claim(run, config.batch_key(), item)
            assert claim is not None
            if spec is None:
                outcome = AttemptRecord(status="error", error="Traceback...\nRuntimeError: worker died")
            else:
                job = EvalJob(task=item.task, solution=item.task.path, options=JudgingOptions())
                outcome = AttemptRecord(
                    status="done",
                    result=fake_result(job, fake_compile(job), spec),
                    usd=usd,
                    tokens=1000,
                    gpu_s=10,
                )
            store.finish_attempt(claim.attempt_id, outcome)
        store.finish_run(run, "finished")
    return config.store


def test_report_metrics_per_task_and_level(tmp_path: Path) -> None:
    (report,) = build_reports(fill_store(tmp_path))
    overall = report.metrics["all"]
    assert overall.n == 4 and overall.correct == 2 and overall.errors == 1
    assert overall.fast_p["eager"]["fast_1.05"] == 0.5  # A (2.0) and C (best 1.5)
    assert overall.fast_p["eager"]["fast_2"] == 0.0
    assert overall.fast_p["compile"]["fast_1"] == 0.25  # C's best vs compile is 1.3; A is 0.8
    assert overall.geomean["eager"] == pytest.approx((2.0 * 1.5) ** 0.5)
    assert overall.total.usd == pytest.approx(7.0)
    assert overall.per_solved is not None and overall.per_solved.usd == pytest.approx(3.5)
    assert report.metrics["level2"].fast_p["eager"]["fast_1.5"] == 0.0  # 1.5 is not > 1.5
    assert report.per_candidate.n == 5 and report.per_candidate.correct == 3
    assert report.gpus == ["NVIDIA H200"]


def test_markdown_report(tmp_path: Path) -> None:
    text = render_markdown(build_reports(fill_store(tmp_path)))
    assert "| scope | tasks | compiled | correct | fast_1 eager |" in text
    assert re.search(r"\| all \| 4 \| 75% \| 50% \| 50% \| 50% \| 25% \| 0% \|", text)
    assert "RuntimeError: worker died" in text


def render(html: Path) -> tuple[str, str]:
    """(DOM after scripts ran, Chromium's log) from a headless Chromium."""
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--enable-logging=stderr",
                "--v=0",
                "--virtual-time-budget=5000",
                "--dump-dom",
                html.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


def console_messages(log: str) -> list[str]:
    return [line for line in log.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


@needs_chromium
def test_html_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    store = fill_store(tmp_path)
    _, html = write_reports(build_reports(store), tmp_path / "report")
    dom, log = render(html)
    assert console_messages(log) == []
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None
    assert 'data-rendered="ok"' in body.group(0), "the page's script did not run to the end"
    assert 'data-plots="3"' in body.group(0) and 'data-plots-drawn="3"' in body.group(0)
    for kind in ("speedup_histogram", "fast_p", "cost"):
        assert f'data-plot="{kind}"' in dom
    assert dom.count('class="bar"') >= 2 and dom.count('class="point"') == 3
    assert "NVIDIA H200" in dom


@needs_chromium
def test_the_browser_check_sees_a_broken_page(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>notDefined();</script></body></html>")
    dom, log = render(page)
    assert any("notDefined" in line for line in console_messages(log))
    assert 'data-rendered="ok"' not in dom


def test_report_opens_the_store_read_only_and_refuses_an_empty_selection(tmp_path: Path) -> None:
    from agent.batch.report import NothingToReport

    store = fill_store(tmp_path)
    before = {p.name: p.read_bytes() for p in store.parent.iterdir() if p.is_file()}
    build_reports(store)
    assert {p.name: p.read_bytes() for p in store.parent.iterdir() if p.is_file()} == before
    with pytest.raises(NothingToReport, match="deadbeef"):
        build_reports(store, "deadbeef")
    with pytest.raises(NothingToReport):
        write_reports([], tmp_path / "nothing")
    assert not (tmp_path / "nothing").exists()


@pytest.mark.parametrize(
    "content",
    [b"", b"not sqlite\n", b"SQLite format 3\x00" + b"\xff" * 4000],
    ids=["empty", "text", "corrupt"],
)
def test_a_file_that_is_not_a_store_is_refused_and_left_alone(tmp_path: Path, content: bytes) -> None:
    from agent.batch.store import StoreError, check_store_file

    path = tmp_path / "x.sqlite"
    path.write_bytes(content)
    opens = [lambda: check_store_file(path), lambda: Store(path, readonly=True), lambda: build_reports(path)]
    if content:  # an empty file may be a store that another batch is creating
        opens.append(lambda: Store(path))
    for open_it in opens:
        with pytest.raises(StoreError, match=str(path)):
            open_it()
    assert path.read_bytes() == content


def test_attempts_in_flight_are_named_longest_running_first(tmp_path: Path) -> None:
    """A batch with slots held by stuck evaluations (a starved GPU-memory claim, say) says which,
    and for how long, in its live report: finished evaluations' stage times cannot show it."""
    store_path = fill_store(tmp_path)
    root = make_tasks(tmp_path / "more", {1: ["3_Norm", "4_Other"]})
    tasks = {t.name: t for t in load_folder(root, instantiate=False)[0]}
    config = fake_config(tmp_path, tmp_path / "tasks", tmp_path / "sols")
    with Store(store_path) as store:
        run = store.start_run(config, versions={}, gpus=[])
        store.add_tasks(list(tasks.values()))
        for name in ("3_Norm", "4_Other"):  # claimed in this order, never finished
            assert store.claim(run, config.batch_key(), WorkItem(task=tasks[name], candidate="base"))
            time.sleep(0.05)
    (report,) = build_reports(store_path)
    assert report.in_flight == 2
    assert [a.task for a in report.oldest_running] == ["3_Norm", "4_Other"]
    assert report.oldest_running[0].running_s >= report.oldest_running[1].running_s > 0
    assert "in flight longest, since their claim: L1 3_Norm 0.0 min, L1 4_Other 0.0 min" in render_markdown(
        [report]
    )
