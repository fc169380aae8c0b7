"""What a run records about where it ran."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

import agent
from agent.batch import environment
from tests.batch.helpers import fake_config


def test_the_version_is_recorded_when_run_from_a_source_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a GPU machine the package runs from PYTHONPATH, not installed: the report said `None`."""
    real = metadata.version

    def not_installed(package: str) -> str:
        if package == "kernel-agent":
            raise metadata.PackageNotFoundError(package)
        return real(package)

    config = fake_config(tmp_path, tmp_path / "tasks", tmp_path / "sols")
    monkeypatch.setattr(environment.metadata, "version", not_installed)
    found = environment.versions(config)
    assert found["kernel-agent"] == f"{agent.__version__} (not installed)"
    assert found["torch"] == real("torch")
