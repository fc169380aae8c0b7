"""`--sandbox auto`: Docker when a daemon answers and the sandbox image is there, else local."""

from __future__ import annotations

import logging

from pydantic import BaseModel

log = logging.getLogger(__name__)


class SandboxChoice(BaseModel):
    kind: str
    reason: str

    def __str__(self) -> str:
        return f"{self.kind} ({self.reason})"


def choose_kind(image: str | None = None) -> SandboxChoice:
    """Pick the backend for `auto` and log which one and why."""
    choice = _choose(image)
    log.info("sandbox auto: chose %s", choice)
    return choice


def _choose(image: str | None) -> SandboxChoice:
    try:
        import docker
        import docker.errors

        from sandbox.docker_host import default_image
    except ImportError as exc:
        return SandboxChoice(kind="local", reason=f"the docker Python SDK is not installed ({exc})")
    image = image or default_image()
    try:
        client = docker.from_env(timeout=5)
        client.ping()
    except Exception as exc:  # any failure to reach a daemon means: no Docker here
        return SandboxChoice(kind="local", reason=f"no Docker daemon answers ({type(exc).__name__})")
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return SandboxChoice(
            kind="local",
            reason=f"Docker is up but image {image} is missing (build it: agent sandbox build --tag {image})",
        )
    except docker.errors.APIError as exc:
        return SandboxChoice(kind="local", reason=f"Docker could not look up image {image}: {exc}")
    finally:
        client.close()
    return SandboxChoice(kind="docker", reason=f"Docker daemon answers and image {image} is present")
