"""Build the GPU sandbox image from sandbox/Dockerfile with the Docker SDK."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox.base import WORKERS_DIR, SandboxError

DOCKERFILE = Path(__file__).resolve().parent / "Dockerfile"
DEFAULT_BASE = "nvidia/cuda:13.0.0-devel-ubuntu24.04"
DEFAULT_TORCH_INDEX = "https://download.pytorch.org/whl/cu130"
_PULL_FAILURES = (
    "pull access denied",
    "manifest unknown",
    "not found",
    "no such host",
    "dial tcp",
    "i/o timeout",
)


def build_context() -> bytes:
    """The build context as a tar: the Dockerfile and the worker scripts under workers/."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(DOCKERFILE, arcname="Dockerfile")
        tar.add(WORKERS_DIR, arcname="workers", filter=_skip_caches)
    return buf.getvalue()


def build_image(
    tag: str,
    base: str = DEFAULT_BASE,
    *,
    torch_spec: str = "torch",
    torch_index_url: str = DEFAULT_TORCH_INDEX,
    no_cache: bool = False,
    client: Any = None,
    on_progress: Callable[[str], None] = lambda line: None,
) -> str:
    """Build `tag` on `base`; returns the image id. Progress lines go to `on_progress`."""
    if client is None:
        from sandbox.docker_host import connect

        client = connect()
    stream = client.api.build(
        fileobj=io.BytesIO(build_context()),
        custom_context=True,
        tag=tag,
        buildargs={"BASE_IMAGE": base, "TORCH_SPEC": torch_spec, "TORCH_INDEX_URL": torch_index_url},
        rm=True,
        forcerm=True,
        nocache=no_cache,
        decode=True,
    )
    image_id = ""
    for event in stream:
        if "error" in event:
            raise SandboxError(_explain_failure(str(event["error"]).strip(), base, tag))
        if "stream" in event:
            text = str(event["stream"]).rstrip()
            if text:
                on_progress(text)
        elif "status" in event:
            on_progress(" ".join(str(event[k]) for k in ("id", "status", "progress") if event.get(k)))
        if "aux" in event and isinstance(event["aux"], dict) and "ID" in event["aux"]:
            image_id = str(event["aux"]["ID"])
    if not image_id:
        image_id = str(client.images.get(tag).id)
    return image_id


def _explain_failure(error: str, base: str, tag: str) -> str:
    if any(marker in error.lower() for marker in _PULL_FAILURES) and not _has_image_error(error):
        return (
            f"cannot build {tag}: the base image {base} is not on this machine and could not be "
            f"pulled ({error}). Pull it where a registry is reachable (`docker pull {base}`, or "
            f"`docker save`/`docker load` it over), or pass --base with a CUDA devel image you have."
        )
    return f"cannot build {tag}: {error}"


def _has_image_error(error: str) -> bool:
    # "not found" also appears in failing RUN steps (a missing apt package, say): those name a
    # step's command rather than a registry.
    return "returned a non-zero code" in error


def _skip_caches(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    name = Path(info.name).name
    return None if name == "__pycache__" or name.endswith(".pyc") else info
