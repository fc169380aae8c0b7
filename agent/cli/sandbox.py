"""Build the GPU sandbox image and see which sandbox would be used."""

from __future__ import annotations

from pathlib import Path

import typer

from agent.cli.common import err_console, fail
from sandbox.base import SandboxError

sandbox_app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)


def _default_tag() -> str:
    from sandbox.docker_host import default_image

    return default_image()


@sandbox_app.command("build")
def build(
    tag: str | None = typer.Option(
        None,
        "--tag",
        help="Image name:tag to build [default: $KERNEL_AGENT_IMAGE or kernel-agent-gpu:latest].",
        show_default=False,
    ),
    base: str = typer.Option("nvidia/cuda:13.0.0-devel-ubuntu24.04", "--base", help="CUDA devel base image."),
    torch_spec: str = typer.Option(
        "torch", "--torch", help="pip requirement for torch, e.g. 'torch==2.9.1'."
    ),
    torch_index_url: str = typer.Option(
        "https://download.pytorch.org/whl/cu130",
        "--torch-index-url",
        help="pip index with torch's CUDA wheels.",
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="Rebuild every layer."),
) -> None:
    """Build the Docker GPU sandbox image from sandbox/Dockerfile (CUDA devel, torch, ninja, workers)."""
    from sandbox.image import build_image

    tag = tag or _default_tag()
    err_console.print(f"building [bold]{tag}[/bold] on {base}")
    try:
        image_id = build_image(
            tag,
            base,
            torch_spec=torch_spec,
            torch_index_url=torch_index_url,
            no_cache=no_cache,
            on_progress=lambda line: err_console.print(line, markup=False, highlight=False),
        )
    except SandboxError as exc:
        fail(str(exc), 1)
    err_console.print(f"built {tag} ({image_id[:19]})")
    typer.echo(tag)


@sandbox_app.command("info")
def info(
    workspace: Path = typer.Option(Path("."), "--workspace", help="Folder to open a local sandbox over."),
    image: str | None = typer.Option(
        None, "--image", help="Docker image to look for [default: as for build]."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the choice, what the local sandbox enforces and the hint as JSON."
    ),
) -> None:
    """Say what `--sandbox auto` would choose and what the local sandbox enforces here."""
    import json
    import shutil

    from sandbox.auto import choose_kind
    from sandbox.local import LocalSandbox

    if not workspace.is_dir():
        fail(f"--workspace {workspace}: not a folder")
    choice = choose_kind(image=image or _default_tag())
    try:
        with LocalSandbox(workspace=workspace) as local:
            isolation = local.isolation()
            described = local.describe()
    except SandboxError as exc:
        fail(str(exc), 1)
    hint = None
    if isolation.filesystem is None:
        hint = (
            "for filesystem isolation install bubblewrap (apt-get install bubblewrap)"
            if shutil.which("bwrap") is None
            else "bwrap is installed but cannot run here (it needs unprivileged user namespaces); "
            "without it there is no filesystem isolation"
        )
    if as_json:
        payload = {"auto": choice.model_dump(), "local": isolation.model_dump(mode="json"), "hint": hint}
        typer.echo(json.dumps(payload, indent=2))
        return
    typer.echo(f"auto: {choice}")
    typer.echo(described)
    if hint:
        typer.echo(f"hint: {hint}")


@sandbox_app.command("cleanup")
def cleanup() -> None:
    """Remove sandbox containers left behind by harness processes that are gone."""
    from sandbox.docker_host import connect, remove_leftover_containers

    try:
        removed = remove_leftover_containers(connect())
    except SandboxError as exc:
        fail(str(exc), 1)
    typer.echo(f"removed {len(removed)} container(s)" + (f": {', '.join(removed)}" if removed else ""))
