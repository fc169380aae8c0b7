"""`--sandbox auto`: docker when a daemon answers and the image is there, else local; always
saying which and why."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from sandbox.auto import choose_kind
from sandbox.base import open_sandbox
from sandbox.local import LocalSandbox


@pytest.fixture
def no_daemon(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")


def test_no_daemon_means_local_and_it_is_logged(no_daemon: None, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="sandbox.auto"):
        choice = choose_kind()
    assert choice.kind == "local" and "no Docker daemon answers" in choice.reason
    assert "sandbox auto: chose local (no Docker daemon answers" in caplog.text


def test_open_sandbox_auto_opens_the_chosen_backend(no_daemon: None, tmp_path: Path) -> None:
    with open_sandbox("auto", workspace=tmp_path, cache_dir=tmp_path / "cache") as box:
        assert isinstance(box, LocalSandbox)


@pytest.mark.docker
def test_daemon_and_image_mean_docker(test_image: str) -> None:
    choice = choose_kind(image=test_image)
    assert choice.kind == "docker" and test_image in choice.reason


@pytest.mark.docker
def test_daemon_without_the_image_means_local(docker_client: Any) -> None:
    choice = choose_kind(image="kernel-agent-missing:0")
    assert choice.kind == "local"
    assert "image kernel-agent-missing:0 is missing" in choice.reason
    assert "agent sandbox build --tag kernel-agent-missing:0" in choice.reason
