"""Every wrong input gets one clear line, a non-zero exit and nothing overwritten.

Each case runs the real `agent` command in a fresh process without a GPU (as on CI and on a
laptop) and asserts: the exit code (2 for usage errors), no traceback, exactly one line on stderr
and that it names the input, and that no file that was there before changed (hashes before and
after). The harness is tests/cli/bad_input.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.batch.report_files import write_reports
from tests.batch.test_report import fill_store
from tests.cli.bad_input import (
    RELU_TASK,
    Case,
    both,
    broken_model_new,
    check,
    copy_solution,
    empty_dir,
    sqlite_file,
    tasks_folder,
    truncated_transcript,
    write,
)

SOLS = "{solution}/.."  # benchmarks/solutions/level1


def store_with_report(tmp: Path) -> None:
    """A real store with one finished batch, and the report.md/html beside it."""
    store = fill_store(tmp / "made")
    write_reports(store, store.parent)
    (tmp / "made" / "out").rename(tmp / "batch")


CASES = [
    # agent batch
    Case(
        "batch-missing-tasks",
        ["batch", "{tmp}/nope", "--solutions", SOLS],
        "{tmp}/nope",
        absent=["{tmp}/runs"],
    ),
    Case(
        "batch-empty-tasks",
        ["batch", "{tmp}/empty", "--solutions", SOLS],
        "{tmp}/empty",
        setup=empty_dir("empty"),
    ),
    Case(
        "batch-missing-solutions",
        ["batch", "{tmp}/tasks", "--solutions", "{tmp}/nope"],
        "--solutions",
        setup=tasks_folder("tasks"),
    ),
    Case(
        "batch-empty-solutions",
        ["batch", "{tmp}/tasks", "--solutions", "{tmp}/empty"],
        "--solutions",
        setup=both(tasks_folder("tasks"), empty_dir("empty")),
    ),
    Case(
        "batch-gpus-not-ids",
        ["batch", "{tmp}/tasks", "--solutions", SOLS, "--gpus", "abc"],
        "--gpus",
        setup=tasks_folder("tasks"),
    ),
    Case(
        "batch-budget-unreadable",
        ["batch", "{tmp}/tasks", "--model", "scripted", "--budget", "banana"],
        "--budget",
        setup=tasks_folder("tasks"),
    ),
    Case(
        "batch-corrupt-store",
        ["batch", "{tmp}/tasks", "--solutions", SOLS, "--store", "{tmp}/bad.sqlite"],
        "{tmp}/bad.sqlite",
        setup=both(tasks_folder("tasks"), write("bad.sqlite", b"\x00garbage" * 100)),
    ),
    Case(
        "batch-store-not-sqlite",
        ["batch", "{tmp}/tasks", "--solutions", SOLS, "--store", "{tmp}/notes.txt"],
        "{tmp}/notes.txt",
        setup=both(tasks_folder("tasks"), write("notes.txt", "my notes\n")),
    ),
    Case(
        "batch-unknown-sandbox",
        ["batch", "{tmp}/tasks", "--solutions", SOLS, "--sandbox", "nosuch"],
        "--sandbox",
        setup=tasks_folder("tasks"),
    ),
    # agent report
    Case(
        "report-unknown-batch",
        ["report", "{tmp}/batch/store.sqlite", "--batch", "deadbeef"],
        "deadbeef",
        setup=store_with_report,
    ),
    Case(
        "report-empty-file",
        ["report", "{tmp}/empty.sqlite"],
        "{tmp}/empty.sqlite",
        setup=write("empty.sqlite", b""),
    ),
    Case(
        "report-corrupt-file",
        ["report", "{tmp}/bad.sqlite"],
        "{tmp}/bad.sqlite",
        setup=write("bad.sqlite", b"SQLite format 3\x00" + b"\xff" * 4000),
    ),
    Case(
        "report-truncated-file",
        ["report", "{tmp}/cut.sqlite"],
        "{tmp}/cut.sqlite",
        setup=sqlite_file("cut.sqlite", truncate_to=5000),
    ),
    Case(
        "report-other-sqlite",
        ["report", "{tmp}/other.sqlite"],
        "{tmp}/other.sqlite",
        setup=sqlite_file("other.sqlite"),
    ),
    Case(
        "report-not-sqlite",
        ["report", "{tmp}/notes.txt"],
        "{tmp}/notes.txt",
        setup=write("notes.txt", "hi\n"),
    ),
    Case(
        "report-missing-store",
        ["report", "{tmp}/nope.sqlite"],
        "{tmp}/nope.sqlite",
        absent=["{tmp}/nope.sqlite"],
    ),
    Case(
        "report-out-missing-parent",
        ["report", "{tmp}/batch/store.sqlite", "--out", "{tmp}/missing/dir"],
        "--out",
        setup=store_with_report,
        absent=["{tmp}/missing"],
    ),
    # agent solve: input checks come before the GPU probe and before any model call
    Case(
        "solve-missing-task",
        ["solve", "{tmp}/nope.py", "--out", "{tmp}/o"],
        "{tmp}/nope.py",
        absent=["{tmp}/o"],
    ),
    Case(
        "solve-task-not-python",
        ["solve", "{tmp}/notes.txt", "--out", "{tmp}/o"],
        "{tmp}/notes.txt",
        setup=write("notes.txt", "hello\n"),
        absent=["{tmp}/o"],
    ),
    Case(
        "solve-task-syntax-error",
        ["solve", "{tmp}/broken.py", "--out", "{tmp}/o"],
        "{tmp}/broken.py:3",
        setup=write("broken.py", "import torch\n\nclass Model(:\n    pass\n"),
        absent=["{tmp}/o"],
    ),
    Case(
        "solve-task-is-a-folder",
        ["solve", "{tmp}/folder", "--out", "{tmp}/o"],
        "{tmp}/folder",
        setup=empty_dir("folder"),
        absent=["{tmp}/o"],
    ),
    Case(
        "solve-out-not-empty",
        ["solve", "{task}", "--out", "{tmp}/full"],
        "--out",
        setup=write("full/keep.txt", "mine\n"),
    ),
    Case(
        "solve-out-is-a-file",
        ["solve", "{task}", "--out", "{tmp}/f.txt"],
        "--out",
        setup=write("f.txt", "mine\n"),
    ),
    Case(
        "solve-prices-missing",
        [
            "solve",
            "{task}",
            "--model",
            "openai:x@http://127.0.0.1:9/v1",
            "--prices",
            "{tmp}/p.toml",
            "--out",
            "{tmp}/o",
        ],
        "--prices",
        absent=["{tmp}/o"],
    ),
    Case(
        "solve-model-url-unreadable",
        ["solve", "{task}", "--model", "openai:x@notaurl", "--out", "{tmp}/o"],
        "--model",
        absent=["{tmp}/o"],
    ),
    Case(
        "solve-unknown-provider",
        ["solve", "{task}", "--model", "nosuch:x", "--out", "{tmp}/o"],
        "--model",
        absent=["{tmp}/o"],
    ),
    Case(
        "solve-budget-unreadable",
        ["solve", "{task}", "--budget", "wall=soon", "--out", "{tmp}/o"],
        "--budget",
    ),
    Case(
        "solve-unknown-sandbox", ["solve", "{task}", "--sandbox", "nosuch", "--out", "{tmp}/o"], "--sandbox"
    ),
    Case(
        "solve-request-timeout-zero",
        ["solve", "{task}", "--request-timeout", "0", "--out", "{tmp}/o"],
        "--request-timeout",
        absent=["{tmp}/o"],
    ),
    Case(
        "solve-request-timeout-negative",
        ["solve", "{task}", "--request-timeout", "-5", "--out", "{tmp}/o"],
        "--request-timeout",
        absent=["{tmp}/o"],
    ),
    Case(
        "solve-request-timeout-nan",
        ["solve", "{task}", "--request-timeout", "nan", "--out", "{tmp}/o"],
        "--request-timeout",
        absent=["{tmp}/o"],
    ),
    Case(
        "batch-request-timeout-zero",
        ["batch", "{tmp}/tasks", "--model", "templates", "--request-timeout", "0", "--out", "{tmp}/b"],
        "--request-timeout",
        setup=tasks_folder("tasks"),
        absent=["{tmp}/b"],
    ),
    Case(
        "batch-request-timeout-negative",
        ["batch", "{tmp}/tasks", "--model", "templates", "--request-timeout", "-5", "--out", "{tmp}/b"],
        "--request-timeout",
        setup=tasks_folder("tasks"),
        absent=["{tmp}/b"],
    ),
    Case(
        "batch-request-timeout-nan",
        ["batch", "{tmp}/tasks", "--model", "templates", "--request-timeout", "nan", "--out", "{tmp}/b"],
        "--request-timeout",
        setup=tasks_folder("tasks"),
        absent=["{tmp}/b"],
    ),
    Case(
        "solve-context-tokens-word",
        ["solve", "{task}", "--context-tokens", "lots", "--out", "{tmp}/o"],
        "--context-tokens",
        absent=["{tmp}/o"],
    ),
    Case(
        "solve-context-tokens-negative",
        ["solve", "{task}", "--context-tokens", "-5", "--out", "{tmp}/o"],
        "--context-tokens",
        absent=["{tmp}/o"],
    ),
    Case(
        "solve-context-tokens-too-small",
        ["solve", "{task}", "--context-tokens", "500", "--out", "{tmp}/o"],
        "--context-tokens",
        absent=["{tmp}/o"],
    ),
    Case(
        "batch-context-tokens-word",
        ["batch", "{tmp}/tasks", "--model", "templates", "--context-tokens", "lots", "--out", "{tmp}/b"],
        "--context-tokens",
        setup=tasks_folder("tasks"),
        absent=["{tmp}/b"],
    ),
    Case(
        "batch-context-tokens-too-small",
        ["batch", "{tmp}/tasks", "--model", "templates", "--context-tokens", "500", "--out", "{tmp}/b"],
        "--context-tokens",
        setup=tasks_folder("tasks"),
        absent=["{tmp}/b"],
    ),
    # agent eval
    Case("eval-swapped-arguments", ["eval", "{solution}/model_new.py", "{task}"], "swap"),
    Case("eval-missing-solution", ["eval", "{task}", "{tmp}/nope"], "{tmp}/nope"),
    Case("eval-missing-task", ["eval", "{tmp}/nope.py", "{solution}"], "{tmp}/nope.py"),
    Case("eval-unknown-precision", ["eval", "{task}", "{solution}", "--precision", "fp8"], "--precision"),
    Case(
        "solve-unknown-precision",
        ["solve", "{task}", "--precision", "fp64", "--out", "{tmp}/o"],
        "--precision",
        absent=["{tmp}/o"],
    ),
    Case(
        "batch-unknown-precision",
        ["batch", "{tmp}/tasks", "--model", "templates", "--precision", "FP32", "--out", "{tmp}/b"],
        "--precision",
        setup=tasks_folder("tasks"),
        absent=["{tmp}/b"],
    ),
    Case("eval-unknown-policy", ["eval", "{task}", "{solution}", "--policy", "bogus"], "--policy"),
    Case("eval-zero-trials", ["eval", "{task}", "{solution}", "--trials", "0"], "--trials"),
    # agent compile
    Case(
        "compile-syntax-error",
        ["compile", "{tmp}/bad.py"],
        "{tmp}/bad.py:3",
        code=1,
        setup=write("bad.py", "import torch\n\nclass ModelNew(:\n    pass\n"),
    ),
    Case(
        "compile-model-new-does-not-parse",
        ["compile", "{tmp}/ws"],
        "model_new.py:3",
        code=1,
        setup=broken_model_new("ws"),
    ),
    Case(
        "compile-unknown-arch",
        ["compile", "{tmp}/ws", "--arch", "sm_999"],
        "sm_999",
        setup=copy_solution("ws"),
    ),
    Case("compile-missing", ["compile", "{tmp}/nope"], "{tmp}/nope"),
    # agent tasks
    Case("tasks-empty-folder", ["tasks", "{tmp}/empty"], "{tmp}/empty", setup=empty_dir("empty")),
    Case("tasks-missing", ["tasks", "{tmp}/nope"], "{tmp}/nope"),
    # agent tune
    Case("tune-no-gpu", ["tune", "{task}", "{tmp}/ws"], "GPU", setup=copy_solution("ws")),
    Case(
        "tune-budget-unreadable",
        ["tune", "{task}", "{tmp}/ws", "--budget", "banana"],
        "--budget",
        setup=copy_solution("ws"),
    ),
    Case("tune-missing-solution", ["tune", "{task}", "{tmp}/nope"], "{tmp}/nope"),
    # transcripts
    Case("replay-no-gpu", ["replay", "{transcript}"], "GPU"),
    Case("replay-final-only-no-gpu", ["replay", "{transcript}", "--final-only"], "GPU"),
    Case("replay-missing", ["replay", "{tmp}/nope.jsonl"], "{tmp}/nope.jsonl"),
    Case(
        "show-html-missing-dir",
        ["show", "{transcript}", "--html", "{tmp}/missing/x.html"],
        "--html",
        absent=["{tmp}/missing"],
    ),
    Case(
        "show-not-a-transcript",
        ["show", "{tmp}/notes.txt"],
        "{tmp}/notes.txt",
        setup=write("notes.txt", "hi\n"),
    ),
    Case(
        "export-out-missing-dir",
        ["export", "{transcript}", "--out", "{tmp}/missing/x.jsonl"],
        "--out",
        absent=["{tmp}/missing"],
    ),
    Case(
        "export-unknown-format",
        ["export", "{transcript}", "--out", "{tmp}/x.jsonl", "--format", "csv"],
        "--format",
    ),
    Case("export-missing", ["export", "{tmp}/nope.jsonl", "--out", "{tmp}/x.jsonl"], "{tmp}/nope.jsonl"),
    # counts and time limits
    Case(
        "batch-concurrency-negative",
        ["batch", "{tmp}/tasks", "--solutions", SOLS, "--concurrency", "-1", "--out", "{tmp}/b"],
        "--concurrency -1",
        setup=tasks_folder("tasks"),
        absent=["{tmp}/b"],
    ),
    Case(
        "batch-compile-workers-negative",
        ["batch", "{tmp}/tasks", "--solutions", SOLS, "--compile-workers", "-3", "--out", "{tmp}/b"],
        "--compile-workers -3",
        setup=tasks_folder("tasks"),
        absent=["{tmp}/b"],
    ),
    Case(
        "compile-timeout-nan",
        ["compile", "{tmp}/ws", "--timeout", "nan"],
        "--timeout nan",
        setup=copy_solution("ws"),
    ),
    Case(
        "compile-timeout-negative",
        ["compile", "{tmp}/ws", "--timeout", "-5"],
        "--timeout -5",
        setup=copy_solution("ws"),
    ),
    Case(
        "tasks-inspect-timeout-nan", ["tasks", "{task}", "--inspect-timeout", "nan"], "--inspect-timeout nan"
    ),
    Case("tasks-timeout-negative", ["tasks", "{task}", "--timeout", "-5"], "--inspect-timeout -5"),
    Case(
        "solve-inspect-timeout-zero",
        ["solve", "{task}", "--inspect-timeout", "0", "--out", "{tmp}/o"],
        "--inspect-timeout 0",
        absent=["{tmp}/o"],
    ),
    Case(
        "batch-inspect-timeout-negative",
        ["batch", "{tmp}/tasks", "--solutions", SOLS, "--inspect-timeout", "-1", "--out", "{tmp}/b"],
        "--inspect-timeout -1",
        setup=tasks_folder("tasks"),
        absent=["{tmp}/b"],
    ),
    Case(
        "eval-inspect-timeout-nan",
        ["eval", "{task}", "{solution}", "--inspect-timeout", "nan"],
        "--inspect-timeout",
    ),
    # output folders that cannot be made
    Case(
        "solve-out-in-proc",
        ["solve", "{task}", "--out", "/proc/kernel-agent-x"],
        "--out /proc/kernel-agent-x",
    ),
    Case(
        "batch-out-in-proc",
        ["batch", "{tmp}/tasks", "--solutions", SOLS, "--out", "/proc/kernel-agent-x"],
        "--out /proc/kernel-agent-x",
        setup=tasks_folder("tasks"),
    ),
    Case(
        "report-out-in-proc",
        ["report", "{tmp}/batch/store.sqlite", "--out", "/proc/kernel-agent-x"],
        "--out /proc/kernel-agent-x",
        setup=store_with_report,
    ),
    Case("replay-out-in-proc", ["replay", "{transcript}", "--out", "/proc/kernel-agent-x"], "--out"),
    Case("export-out-in-proc", ["export", "{transcript}", "--out", "/proc/x.jsonl"], "--out /proc/x.jsonl"),
    Case("export-tasks-out-in-proc", ["export-tasks", "{task}", "--out", "/proc/kernel-agent-x"], "--out"),
    # flags that disagree, executors and sandboxes that cannot run the work
    Case(
        "solve-max-turns-against-budget",
        ["solve", "{task}", "--max-turns", "3", "--budget", "turns=5", "--out", "{tmp}/o"],
        "--max-turns 3 and --budget turns=5",
        absent=["{tmp}/o"],
    ),
    Case(
        "solve-max-turns-zero", ["solve", "{task}", "--max-turns", "0", "--out", "{tmp}/o"], "--max-turns 0"
    ),
    Case(
        "batch-ray-without-gpu-node",
        ["batch", "{tmp}/tasks", "--model", "templates", "--executor", "ray", "--out", "{tmp}/b"],
        "--executor ray",
        setup=tasks_folder("tasks"),
        absent=["{tmp}/b"],
    ),
    Case(
        "solve-docker-refused-leaves-no-folder",
        [
            "solve",
            "{task}",
            "--sandbox",
            "docker",
            "--allow-no-gpu",
            "--model",
            "templates",
            "--out",
            "{tmp}/o",
        ],
        "docker",
        absent=["{tmp}/o"],
    ),
    # task files that run but answer wrongly (exit 1: the file is reported, the table is empty)
    Case(
        "tasks-init-inputs-not-a-list",
        ["tasks", "{tmp}/t.py"],
        "get_init_inputs() must return a list (or tuple) of constructor arguments; it returned int",
        code=1,
        setup=write(
            "t.py",
            RELU_TASK.read_text().replace(
                "def get_init_inputs():", "def get_init_inputs():\n    return 5\n\n\ndef _unused():"
            ),
        ),
    ),
    Case(
        "tasks-get-inputs-sleeps",
        ["tasks", "{tmp}/t.py", "--inspect-timeout", "3"],
        "took longer than 3s",
        code=1,
        setup=write(
            "t.py",
            RELU_TASK.read_text().replace(
                "def get_inputs():",
                "def get_inputs():\n    import time\n\n    time.sleep(10**6)\n\n\ndef _unused():",
            ),
        ),
    ),
]


# Cases whose command imports torch or starts a sandbox (seconds each, not a fraction of one): the
# slow lane runs them, the fast lane the rest.
SLOW_CASES = {
    "batch-budget-unreadable",
    "batch-compile-workers-negative",
    "batch-concurrency-negative",
    "batch-context-tokens-too-small",
    "batch-context-tokens-word",
    "batch-corrupt-store",
    "batch-empty-solutions",
    "batch-empty-tasks",
    "batch-gpus-not-ids",
    "batch-inspect-timeout-negative",
    "batch-missing-solutions",
    "batch-missing-tasks",
    "batch-out-in-proc",
    "batch-ray-without-gpu-node",
    "batch-request-timeout-nan",
    "batch-request-timeout-negative",
    "batch-request-timeout-zero",
    "batch-store-not-sqlite",
    "batch-unknown-sandbox",
    "export-tasks-out-in-proc",
    "replay-final-only-no-gpu",
    "replay-missing",
    "replay-no-gpu",
    "replay-out-in-proc",
    "report-corrupt-file",
    "report-empty-file",
    "report-missing-store",
    "report-not-sqlite",
    "report-other-sqlite",
    "report-out-in-proc",
    "report-out-missing-parent",
    "report-truncated-file",
    "report-unknown-batch",
    "solve-context-tokens-negative",
    "solve-context-tokens-too-small",
    "solve-context-tokens-word",
    "solve-docker-refused-leaves-no-folder",
    "solve-out-in-proc",
    "tasks-get-inputs-sleeps",
    "tasks-init-inputs-not-a-list",
}


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.id in SLOW_CASES else []) for c in CASES]
)
def test_bad_input(case: Case, tmp_path: Path) -> None:
    check(case, tmp_path)


def test_the_table_covers_at_least_forty_cases() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)
    assert {c.id for c in CASES} >= SLOW_CASES


def test_export_of_a_cut_off_run_says_so(tmp_path: Path) -> None:
    from tests.cli.bad_input import run_agent

    truncated_transcript("cut.jsonl")(tmp_path)
    proc = run_agent(
        ["export", str(tmp_path / "cut.jsonl"), "--out", str(tmp_path / "x.jsonl")], cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "cut off" in proc.stdout + proc.stderr
