"""benchmarks/batch_bench.py runs end to end (fake compile and judge) and writes its table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks import batch_bench


@pytest.mark.slow
def test_batch_bench_fake_run_writes_the_table(tmp_path: Path) -> None:
    out = tmp_path / "bench.md"
    args = ["--fake", "--count", "9", "--gpus", "0", "--gpus", "0,1", "--compile-workers", "2"]
    assert batch_bench.main([*args, "--arch", "9.0", "--out", str(out)]) == 0
    text = out.read_text()
    assert re.search(r"^\| 0 \| 9 \| [\d.]+ \| [\d.]+ \| \d+% \| \d+% \| correct 9 \| 9/9 \|$", text, re.M)
    assert re.search(r"^\| 0,1 \| 9 \|", text, re.M)
    assert "Wall-time ratio 0 vs 0,1:" in text and "FAKE" in text
