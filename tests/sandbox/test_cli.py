"""`agent sandbox build|info|cleanup` (the sub-app the lead mounts as `agent sandbox`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import sandbox.image
from agent.cli.sandbox import sandbox_app
from sandbox.base import SandboxError

runner = CliRunner()


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def fake_build(tag: str, base: str, **kwargs: Any) -> str:
        calls.append({"tag": tag, "base": base, **kwargs})
        kwargs["on_progress"]("Step 1/13 : ARG BASE_IMAGE")
        return "sha256:0123456789abcdef0123"

    monkeypatch.setattr(sandbox.image, "build_image", fake_build)
    return calls


def test_build_passes_tag_base_and_torch(builds: list[dict[str, Any]]) -> None:
    result = runner.invoke(
        sandbox_app,
        ["build", "--tag", "me/gpu:2", "--base", "my/cuda:13", "--torch", "torch==2.9.1", "--no-cache"],
    )
    assert result.exit_code == 0, result.output
    assert builds[0]["tag"] == "me/gpu:2" and builds[0]["base"] == "my/cuda:13"
    assert builds[0]["torch_spec"] == "torch==2.9.1" and builds[0]["no_cache"] is True
    assert "Step 1/13" in result.output and "built me/gpu:2" in result.output


def test_build_defaults(builds: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KERNEL_AGENT_IMAGE", raising=False)
    assert runner.invoke(sandbox_app, ["build"]).exit_code == 0
    assert builds[-1]["tag"] == "kernel-agent-gpu:latest"
    assert builds[-1]["base"] == "nvidia/cuda:13.0.0-devel-ubuntu24.04"
    monkeypatch.setenv("KERNEL_AGENT_IMAGE", "from-env/gpu:3")
    assert runner.invoke(sandbox_app, ["build"]).exit_code == 0
    assert builds[-1]["tag"] == "from-env/gpu:3"


def test_build_errors_exit_1_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(*_: Any, **__: Any) -> str:
        raise SandboxError("cannot build x: the base image y is not on this machine")

    monkeypatch.setattr(sandbox.image, "build_image", failing)
    result = runner.invoke(sandbox_app, ["build", "--tag", "x"])
    assert result.exit_code == 1
    assert "the base image y is not on this machine" in result.output


def test_info_says_what_auto_picks_and_what_local_enforces(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/none.sock")
    monkeypatch.setenv("KERNEL_AGENT_CACHE", str(tmp_path / "cache"))
    result = runner.invoke(sandbox_app, ["info", "--workspace", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "auto: local (no Docker daemon answers" in result.output
    assert "local sandbox; filesystem:" in result.output


def test_info_json_and_the_bubblewrap_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import json
    import shutil

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/none.sock")
    monkeypatch.setenv("KERNEL_AGENT_CACHE", str(tmp_path / "cache"))
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "bwrap" else real_which(name))
    result = runner.invoke(sandbox_app, ["info", "--workspace", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["auto"]["kind"] == "local" and info["local"]["backend"] == "local"
    assert info["local"]["filesystem"] is None
    assert "apt-get install bubblewrap" in info["hint"]
    text = runner.invoke(sandbox_app, ["info", "--workspace", str(tmp_path)])
    assert text.exit_code == 0 and "hint: for filesystem isolation install bubblewrap" in text.output


def test_info_refuses_a_missing_workspace(tmp_path: Path) -> None:
    result = runner.invoke(sandbox_app, ["info", "--workspace", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "--workspace" in result.output
    assert not (tmp_path / "nope").exists()
