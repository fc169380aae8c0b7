"""The GPU image: its build context and Dockerfile, the build request, and the errors a user sees.
No CUDA base image can be pulled here, so the full build is not run (see sandbox/README.md)."""

from __future__ import annotations

import io
import tarfile
from typing import Any

import pytest

from sandbox.base import SandboxError
from sandbox.image import DEFAULT_BASE, DOCKERFILE, build_context, build_image


def test_build_context_has_the_dockerfile_and_the_workers() -> None:
    with tarfile.open(fileobj=io.BytesIO(build_context())) as tar:
        names = tar.getnames()
        dockerfile = tar.extractfile("Dockerfile")
        assert dockerfile is not None and dockerfile.read() == DOCKERFILE.read_bytes()
    assert any(n.startswith("workers/") and n.endswith(".py") for n in names)
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)


def test_dockerfile_installs_what_the_sandbox_needs() -> None:
    text = DOCKERFILE.read_text()
    assert "ARG BASE_IMAGE=" + DEFAULT_BASE in text and "FROM ${BASE_IMAGE}" in text
    for needed in (
        "python3-dev",
        "ninja-build",
        "g++",
        '"${TORCH_SPEC}"',
        "COPY workers/ /opt/kernel-agent/workers/",
    ):
        assert needed in text
    assert "CUDA_HOME=/usr/local/cuda" in text


class FakeApi:
    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events
        self.kwargs: dict[str, Any] = {}

    def build(self, **kwargs: Any) -> Any:
        self.kwargs = kwargs
        return iter(self.events)


class FakeClient:
    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.api = FakeApi(events)


def test_build_request_shape_and_progress() -> None:
    client = FakeClient(
        [
            {"stream": "Step 1/13 : ARG BASE_IMAGE\n"},
            {"status": "Downloading", "id": "abc", "progress": "[==>  ]"},
            {"aux": {"ID": "sha256:feedface"}},
            {"stream": "Successfully built feedface\n"},
        ]
    )
    lines: list[str] = []
    image_id = build_image(
        "me/gpu:1", "my/cuda:13", torch_spec="torch==2.9.1", client=client, on_progress=lines.append
    )
    assert image_id == "sha256:feedface"
    kw = client.api.kwargs
    assert kw["tag"] == "me/gpu:1" and kw["custom_context"] is True and kw["decode"] is True
    assert kw["buildargs"]["BASE_IMAGE"] == "my/cuda:13" and kw["buildargs"]["TORCH_SPEC"] == "torch==2.9.1"
    assert kw["rm"] is True and kw["nocache"] is False
    assert kw["fileobj"].read() == build_context()
    assert lines == ["Step 1/13 : ARG BASE_IMAGE", "abc Downloading [==>  ]", "Successfully built feedface"]


def test_a_missing_base_image_is_explained() -> None:
    client = FakeClient([{"error": "pull access denied for my/cuda, repository does not exist"}])
    with pytest.raises(SandboxError) as caught:
        build_image("me/gpu:1", "my/cuda:13", client=client)
    message = str(caught.value)
    assert "base image my/cuda:13 is not on this machine" in message
    assert "docker pull my/cuda:13" in message and "--base" in message


def test_a_failing_step_is_not_blamed_on_the_base() -> None:
    error = "The command '/bin/sh -c apt-get install nothere' returned a non-zero code: 100"
    with pytest.raises(SandboxError) as caught:
        build_image("me/gpu:1", "my/cuda:13", client=FakeClient([{"error": error}]))
    assert "base image" not in str(caught.value) and "returned a non-zero code" in str(caught.value)


@pytest.mark.docker
def test_real_daemon_missing_base(docker_client: Any) -> None:
    with pytest.raises(SandboxError, match="kernel-agent-test/no-such-base:0 is not on this machine"):
        build_image(
            "kernel-agent-test/never-built:0", "kernel-agent-test/no-such-base:0", client=docker_client
        )
