"""Talking to the Docker daemon: connecting, GPU requests, owner labels, leftover cleanup."""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.types import DeviceRequest

from sandbox.base import SandboxError

DEFAULT_IMAGE = "kernel-agent-gpu:latest"
LABEL = "kernel-agent.sandbox"
OWNER_LABEL = "kernel-agent.owner"


def default_image() -> str:
    return os.environ.get("KERNEL_AGENT_IMAGE") or DEFAULT_IMAGE


def owner_label() -> str:
    """host:pid:start-time of this process (start time guards against pid reuse)."""
    return f"{socket.gethostname()}:{os.getpid()}:{start_time(os.getpid())}"


def gpu_device_requests(gpus: str | None) -> list[DeviceRequest]:
    """`gpus` as for `docker run --gpus`: "all", "0" or "0,1"; None for no GPU."""
    if gpus is None:
        return []
    if gpus == "all":
        return [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    ids = [part.strip() for part in gpus.split(",") if part.strip()]
    if not ids:
        raise SandboxError(f"docker sandbox: gpus={gpus!r}; use 'all', '0', '0,1' or None")
    return [DeviceRequest(device_ids=ids, capabilities=[["gpu"]])]


def remove_leftover_containers(client: Any) -> list[str]:
    """Remove labelled containers whose owner process (on this host) is gone."""
    removed: list[str] = []
    host = socket.gethostname()
    # ignore_removed: another sandbox of this process may remove its container between docker-py's
    # listing and its per-container inspect (sandboxes opened and closed from several threads).
    for container in client.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True):
        owner = container.labels.get(OWNER_LABEL, "")
        owner_host, _, rest = owner.partition(":")
        pid, _, started = rest.partition(":")
        if owner_host != host or not pid.isdigit():
            continue
        if start_time(int(pid)) != started:
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True)
                removed.append(container.name)
    return removed


def connect() -> Any:
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except docker.errors.DockerException as exc:
        raise SandboxError(
            f"docker sandbox: no Docker daemon answers ({exc}); start it (`.ci/setup-docker.sh`, "
            "`sudo systemctl start docker`) or use --sandbox local"
        ) from exc
    return client


def start_time(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def not_running(exc: docker.errors.APIError) -> bool:
    text = str(exc).lower()
    return (
        "is not running" in text
        or "no such container" in text
        or getattr(exc, "status_code", 0) in (404, 409)
    )


def host_pid(container: Any) -> int:
    with contextlib.suppress(docker.errors.APIError):
        container.reload()
        return int(container.attrs.get("State", {}).get("Pid") or 0)
    return 0
