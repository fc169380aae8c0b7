"""torch's bytecode for the local sandbox's workers (sandbox/bytecode.py): made by the harness only
where torch ships none, read by the workers, and never writable by them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import sandbox.bytecode as bytecode_module
from sandbox.base import SandboxError
from sandbox.local import LocalSandbox

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/setup-docker.sh installs it)"
)

# What a worker sees: its prefix, where torch's bytecode was read from, and whether it could
# plant a file there or overwrite the bytecode torch was read from.
PROBE = """
import importlib.util, json, os, sys
import torch
pyc = importlib.util.cache_from_source(torch.__file__)
seen = {"prefix": sys.pycache_prefix, "pyc": pyc, "pyc_exists": os.path.isfile(pyc)}
for name, path in (("plant", os.path.join(sys.pycache_prefix or "/nonexistent", "planted.py")), ("overwrite", pyc)):
    try:
        with open(path, "ab"):
            pass
        seen[name] = "written"
    except OSError as exc:
        seen[name] = exc.strerror
print(json.dumps(seen))
"""


@pytest.fixture
def torch_without_bytecode(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """This machine's torch as some GPU machines have it (no `.pyc`), the cache in a fresh folder."""
    monkeypatch.setattr(bytecode_module, "has_bytecode", lambda source: False)
    root = tmp_path / "harness" / "bytecode"
    monkeypatch.setenv("KERNEL_AGENT_BYTECODE_CACHE", str(root))
    return root


@pytest.mark.slow
@needs_bwrap
def test_workers_read_the_harness_bytecode_and_cannot_write_it(
    torch_without_bytecode: Path, workspace: Path, tmp_path: Path
) -> None:
    box = LocalSandbox(workspace=workspace, cache_dir=tmp_path / "cache", gpus=None)
    try:
        assert box._bytecode is not None
        folder = box._bytecode.make()
        assert folder is not None and folder.parent == torch_without_bytecode
        made = sorted(folder.rglob("*"))
        assert any(path.name.startswith("__init__.") and path.parent.name == "torch" for path in made)
        assert box.python_flags() == ["-X", f"pycache_prefix={folder}"]
        assert "read-only" in " ".join(box.isolation().notes)

        run = box.exec(box.python_command("-c", PROBE), timeout=300)
        assert run.returncode == 0, run.stderr
        seen = json.loads(run.stdout.strip().splitlines()[-1])
        assert seen["prefix"] == str(folder)
        assert seen["pyc"].startswith(str(folder)) and seen["pyc_exists"]
        assert seen["plant"] == "Read-only file system"
        assert seen["overwrite"] == "Read-only file system"
        assert sorted(folder.rglob("*")) == made
    finally:
        box.close()


@needs_bwrap
@pytest.mark.parametrize("setting", ["inside the build cache", "off"])
def test_a_folder_the_sandbox_could_write_is_never_used(
    setting: str, torch_without_bytecode: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inside_build_cache = workspace / "cache" / "bytecode"
    monkeypatch.setenv("KERNEL_AGENT_BYTECODE_CACHE", "off" if setting == "off" else str(inside_build_cache))
    box = LocalSandbox(workspace=workspace, cache_dir=workspace / "cache", gpus=None)
    try:
        assert box._bytecode is None and box.python_flags() == []
        assert not inside_build_cache.exists()
    finally:
        box.close()


@needs_bwrap
def test_a_folder_that_cannot_be_made_is_a_clear_error(
    torch_without_bytecode: Path, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("kept")
    monkeypatch.setenv("KERNEL_AGENT_BYTECODE_CACHE", str(a_file))
    with pytest.raises(SandboxError, match="KERNEL_AGENT_BYTECODE_CACHE"):
        LocalSandbox(workspace=workspace, cache_dir=tmp_path / "cache", gpus=None)
    assert a_file.read_text() == "kept"


def test_nothing_is_made_where_torch_has_its_own_bytecode(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bytecode_module, "has_bytecode", lambda source: True)
    monkeypatch.setenv("KERNEL_AGENT_BYTECODE_CACHE", str(tmp_path / "bytecode"))
    box = LocalSandbox(workspace=workspace, cache_dir=tmp_path / "cache", gpus=None)
    try:
        assert box.python_flags() == [] and box.python_command("x.py") == [box.python, "-I", "x.py"]
        assert bytecode_module.BytecodeCache(tmp_path / "bytecode").make() is None
        assert not (tmp_path / "bytecode").exists()
    finally:
        box.close()
