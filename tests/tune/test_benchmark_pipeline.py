"""benchmarks/tuning end to end on the CPU: brute force of a pure-Python toy kernel, then the replay."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.tune.cache import load_cache

REPO = Path(__file__).resolve().parents[2]

MODEL = """import time

import torch
import torch.nn as nn

TUNE = {"DELAY": 4, "SPLIT": 1}


class ModelNew(nn.Module):
    def forward(self, x):
        time.sleep((TUNE["DELAY"] + abs(TUNE["SPLIT"] - 2)) * 1e-3)
        return torch.cat([c * 2 for c in x.chunk(TUNE["SPLIT"], dim=1)], dim=1)
"""

TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(8, {cols})]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_brute_force_then_replay(tmp_path):
    root = tmp_path / "bench"
    (root / "kernels" / "toy" / "kernels").mkdir(parents=True)
    (root / "tasks").mkdir()
    (root / "kernels" / "toy" / "model_new.py").write_text(MODEL)
    (root / "kernels" / "toy" / "kernels" / "tune.json").write_text(
        json.dumps(
            {"params": {"DELAY": [1, 2, 4], "SPLIT": [1, 2, 4]}, "constraints": ["in0_1 % SPLIT == 0"]}
        )
    )
    (root / "tasks" / "toy_a.py").write_text(TASK.format(cols=16))
    (root / "tasks" / "toy_b.py").write_text(TASK.format(cols=6))  # SPLIT=4 is invalid here
    out = tmp_path / "out"
    run = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks/tuning/brute_force.py"),
            "--root",
            str(root),
            "--out-dir",
            str(out),
            "--work-dir",
            str(tmp_path / "work"),
            "--device",
            "cpu",
            "--e2e-task",
            "toy_a",
            "--e2e-budget",
            "20",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tasks"]["toy_a"]["measured"] == 9 and summary["tasks"]["toy_b"]["measured"] == 6
    assert summary["e2e"]["ok"]
    assert "best " in (out / "e2e_toy_a.txt").read_text()
    cache = load_cache(out / "toy_a.json")
    assert len(cache.cache) == 9 and cache.kernel_agent["default"] == "4,1"
    assert min(cache.times(), key=lambda k: cache.times()[k] or 1e9) == "1,2"

    replay = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks/tuning/replay.py"),
            "--cache-dir",
            str(out),
            "--no-kt",
            "--seeds",
            "2",
            "--out",
            str(tmp_path / "r.md"),
            "--json",
            str(tmp_path / "r.json"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert replay.returncode == 0, replay.stdout + replay.stderr
    rows = json.loads((tmp_path / "r.json").read_text())
    assert {(r["task"], r["fraction"]) for r in rows} == {
        (t, f) for t in ("toy_a", "toy_b") for f in (0.1, 0.25, 0.5)
    }
    assert all("ours_warm" in r for r in rows)
    text = (tmp_path / "r.md").read_text()
    assert "SYNTHETIC" not in text and "--no-kt: Kernel Tuner's strategies were not run" in text
    assert "## Warm start" in text and "## Adaptive `agent tune` run: toy_a" in text
    assert "the brute force timed it at" in text and "of the optimum" in text


@pytest.mark.slow
def test_build_only_checks_the_spaces_and_measures_nothing(tmp_path):
    root = tmp_path / "bench"
    (root / "kernels" / "toy" / "kernels").mkdir(parents=True)
    (root / "tasks").mkdir()
    (root / "kernels" / "toy" / "model_new.py").write_text(MODEL)
    (root / "kernels" / "toy" / "kernels" / "tune.json").write_text(
        json.dumps(
            {"params": {"DELAY": [1, 2, 4], "SPLIT": [1, 2, 4]}, "constraints": ["in0_1 % SPLIT == 0"]}
        )
    )
    (root / "tasks" / "toy_a.py").write_text(TASK.format(cols=16))
    (root / "tasks" / "toy_b.py").write_text(TASK.format(cols=6))
    out = tmp_path / "out"
    args = [sys.executable, str(REPO / "benchmarks/tuning/brute_force.py"), "--root", str(root)]
    args += ["--out-dir", str(out), "--work-dir", str(tmp_path / "work"), "--device", "cpu", "--build-only"]
    run = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads((out / "build.json").read_text())
    assert [b["status"] for b in report["builds"]] == ["none"]
    assert {n: s["valid_points"] for n, s in report["spaces"].items()} == {"toy_a": 9, "toy_b": 6}
    assert report["spaces"]["toy_b"]["default"] == "4,1"
    assert sorted(p.name for p in out.iterdir()) == ["build.json"]

    (root / "kernels" / "toy" / "model_new.py").write_text(MODEL.replace('"SPLIT": 1', '"SPLIT": 3'))
    run = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert run.returncode == 1 and "space toy_a: PROBLEM" in run.stdout, run.stdout + run.stderr
