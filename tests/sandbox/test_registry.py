"""Backends are found by name and imported only when asked for; each declares its capabilities."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import sandbox.base
from sandbox import BACKENDS, Capabilities, Sandbox, SandboxError, open_sandbox, register_sandbox
from sandbox.base import pinned_gpu_ids
from sandbox.docker import DockerSandbox
from sandbox.local import LocalSandbox
from tests.sandbox.test_docker import FakeClient


def test_the_interface_imports_no_backend() -> None:
    probe = f"import sys, sandbox.base; print(sorted(set(sys.modules) & {set(BACKENDS.values())!r}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_an_unknown_kind_names_the_ones_there_are(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match=r"unknown sandbox 'nope'; choose one of: .*local.*, auto$"):
        open_sandbox("nope", workspace=tmp_path)


def test_a_registered_backend_opens_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox.base, "_REGISTRY", dict(sandbox.base._REGISTRY))

    @register_sandbox("plain")
    class Plain(Sandbox):
        kind = "plain"

        def __init__(self, *, workspace: Path, **_: object) -> None:
            self.workspace_path = str(workspace)

        def exec(self, cmd, *, timeout, cwd=None, env=None, stdin=None):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def put_file(self, path: str, content: bytes) -> None: ...

        def get_file(self, path: str) -> bytes:
            return b""

    box = open_sandbox("plain", workspace=tmp_path)
    assert isinstance(box, Plain) and "plain" in sandbox.base.sandbox_kinds()
    assert box.capabilities == Capabilities()  # promises nothing it did not declare


def test_gpus_options_as_pinned_ids() -> None:
    assert pinned_gpu_ids(None) == ()
    assert pinned_gpu_ids("3") == ("3",)
    assert pinned_gpu_ids("0,1") == ("0", "1")
    assert pinned_gpu_ids("all") is None


def test_local_capabilities(tmp_path: Path) -> None:
    with LocalSandbox(workspace=tmp_path, cache_dir=tmp_path / "cache", isolation="none", gpus="2") as box:
        assert box.capabilities == Capabilities(
            shares_host_user=True, sees_gpu_gates=True, pinned_gpus=("2",)
        )


def test_docker_capabilities(tmp_path: Path) -> None:
    box = DockerSandbox(
        workspace=tmp_path, image="some/image:1", client=FakeClient(), gpus="0,1", gpu_mode="runtime"
    )
    try:
        assert box.capabilities == Capabilities(
            sees_gpu_gates=True, pinned_gpus=("0", "1"), runtime_identity="some/image:1"
        )
    finally:
        box.close()
