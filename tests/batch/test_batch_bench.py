"""benchmarks/batch_bench.py runs end to end (fake compile and judge) and writes its table."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from benchmarks import batch_bench


@pytest.mark.slow
def test_batch_bench_fake_run_writes_the_table(tmp_path: Path) -> None:
    out = tmp_path / "bench.md"
    args = ["--fake", "--arm", "0:1:7", "--arm", "0,1:2:9", "--compile-workers", "2"]
    assert batch_bench.main([*args, "--arch", "9.0", "--out", str(out)]) == 0
    text = out.read_text()
    row = r"\| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| \d+% \| correct {n} \| {n}/{n} \|$"
    assert re.search(r"^\| 0 \| 1 \| 7 " + row.format(n=7), text, re.M), text
    assert re.search(r"^\| 0,1 \| 2 \| 9 " + row.format(n=9), text, re.M), text
    assert "Per-solution time, GPUs 0,1, 2/GPU, 9 candidates vs GPUs 0, 1/GPU, 7 candidates:" in text
    assert "FAKE" in text and "Not run" not in text


def test_the_table_of_a_run_cut_short_names_what_is_missing_and_lists_speedups() -> None:
    arms = [batch_bench.Arm.parse("0:4:100"), batch_bench.Arm.parse("0:1:14")]
    assert arms[1] == batch_bench.Arm(["0"], 1, 14) and arms[0].slug == "gpus0-n4-c100"
    run = {
        "arm": arms[0],
        "wall_s": 250.0,
        "n": 4,
        "counts": {"correct": 4},
        "compile_s": 20.0,
        "gpu_s": 60.0,
        "verdicts": {f"k{i}": "correct" for i in range(4)},
        "candidates": {f"k{i}": f"copy{i}" for i in range(4)},
        "speedups": {"level1/19_ReLU": [0.95, 0.93, 0.97]},
        "steady_s": 2.0,
    }
    args = argparse.Namespace(
        argv=["--arm", "0:4:100"], levels=[1], include_broken=False, sandbox="local", policy="strict",
        compile_workers=16, fake=False,
    )  # fmt: skip
    text = batch_bench.render(args, arms, [run], {f"copy{i}": "correct" for i in range(4)}, 30.0)
    assert re.search(
        r"^\| 0 \| 4 \| 4 \| 250\.0 \| 62\.50 \| 2\.00 \| 15\.00 \| 0\.2 \| 25% \| correct 4 \| 4/4 \|$",
        text,
        re.M,
    ), text
    assert "| level1/19_ReLU | 0.950 (0.930-0.970, 3) |" in text
    assert "Not run (yet): GPUs 0, 1/GPU, 14 candidates." in text
    assert "warm-up first (30.0 s" in text
