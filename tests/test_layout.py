"""The code's shape stays what agent/README.md says: the layers hold, the types check, every package
has a README, the top level keeps only the shared vocabulary, and README.md's tree matches."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
MAX_TOP_LEVEL_MODULES = 10


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    exe = BIN / tool
    assert exe.exists(), f"{exe} is missing: install the dev extras (pip install -e '.[dev]')"
    return subprocess.run([str(exe), *args], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_import_layers_hold() -> None:
    """pyproject.toml [tool.importlinter]: agent/'s layers, sandbox/ imports nothing from agent/, and
    no package's modules import each other in a cycle."""
    proc = _run("lint-imports", "--no-cache")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


@pytest.mark.slow
def test_pyright_basic_is_clean_on_agent_and_sandbox() -> None:
    """Against the interpreter running the tests, so an unactivated venv checks the same packages."""
    proc = _run("pyright", "--pythonpath", sys.executable)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


def test_ruff_lint_is_clean() -> None:
    proc = _run("ruff", "check", "--no-cache", ".")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


def test_ruff_format_is_applied() -> None:
    proc = _run("ruff", "format", "--check", "--no-cache", ".")
    assert proc.returncode == 0, "run `ruff format .`:\n" + proc.stdout[-4000:] + proc.stderr[-2000:]


def test_every_package_has_a_readme() -> None:
    packages = [p.parent for root in ("agent", "sandbox") for p in (REPO / root).rglob("__init__.py")]
    missing = [str(p.relative_to(REPO)) for p in packages if not (p / "README.md").is_file()]
    assert not missing, f"packages without a README.md: {missing}"


def test_agent_top_level_holds_only_the_shared_vocabulary() -> None:
    modules = sorted(p.name for p in (REPO / "agent").glob("*.py") if p.name != "__init__.py")
    assert len(modules) <= MAX_TOP_LEVEL_MODULES, modules


def test_readme_tree_names_every_package() -> None:
    """README.md's "How it is organised" block lists agent/'s packages and no package that is gone."""
    text = (REPO / "README.md").read_text()
    tree = re.search(r"## How it is organised\n\n```\n(.*?)```", text, re.S)
    assert tree is not None, "README.md lost its folder tree"
    listed = set(re.findall(r"^\s+(\w+)/\s", tree.group(1), re.M))
    actual = {p.parent.name for p in (REPO / "agent").glob("*/__init__.py")}
    assert actual <= listed, f"packages missing from README.md's tree: {sorted(actual - listed)}"
    stale = {name for name in listed if not (REPO / "agent" / name).is_dir()} - {"workers"}
    assert not stale, f"README.md's tree lists packages that are gone: {sorted(stale)}"
