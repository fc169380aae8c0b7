"""The shell scripts that drive a GPU machine: a syntax error or a lane with no function is found
on the device, after the machine's start-up has been paid for (2026-12-07: a quote inside
session_gpu.sh's `bash -c '...'` body). These checks find them here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = sorted([*REPO.glob("benchmarks/*.sh"), *REPO.glob(".ci/*"), *REPO.glob("sandbox/**/*.sh")])


@pytest.mark.parametrize(
    "script", [s for s in SCRIPTS if s.suffix == ".sh" or s.name == "run"], ids=lambda p: p.name
)
def test_every_script_parses(script: Path) -> None:
    checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_session_lanes_are_defined() -> None:
    """Every lane named in session_gpu.sh's default waves is a function of its body."""
    text = (REPO / "benchmarks" / "session_gpu.sh").read_text()
    waves = re.search(r"\$\{LANES:-([^}]*)\}", text)
    assert waves is not None, "session_gpu.sh names its default lanes as ${LANES:-...}"
    lanes = set(re.split(r"[ ,]+", waves.group(1).strip()))
    defined = set(re.findall(r"^\s*(\w+)\(\) \{", text, flags=re.M))
    assert lanes <= defined, f"lanes without a function: {sorted(lanes - defined)}"
