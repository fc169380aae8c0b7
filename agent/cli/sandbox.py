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
    host_stack: bool = typer.Option(
        False,
        "--host-stack",
        help="No registry, nothing fetched: `docker import` a skeleton root (or --rootfs) and mount the "
        "host's python with torch, CUDA toolkit and /usr read-only at run time.",
    ),
    rootfs: Path | None = typer.Option(
        None,
        "--rootfs",
        help="With --host-stack: a root filesystem folder or tarball (e.g. from debootstrap) to import "
        "instead of the skeleton; the host's /usr is then not mounted.",
    ),
    python: str | None = typer.Option(
        None, "--python", help="With --host-stack: the host python the sandbox runs [default: this one]."
    ),
) -> None:
    """Build the Docker GPU sandbox image: from sandbox/Dockerfile (CUDA devel, torch, ninja, workers),
    or with --host-stack from the host's own CUDA stack (for machines without a registry)."""
    from sandbox.image import build_host_stack_image, build_image

    tag = tag or _default_tag()
    if rootfs is not None and not host_stack:
        fail("--rootfs needs --host-stack")
    if python is not None and not host_stack:
        fail("--python needs --host-stack")
    if host_stack:
        err_console.print(f"importing [bold]{tag}[/bold] (host stack{f', root {rootfs}' if rootfs else ''})")
        try:
            image_id, stack = build_host_stack_image(
                tag,
                rootfs=rootfs,
                python=python,
                on_progress=lambda line: err_console.print(line, markup=False, highlight=False),
            )
        except SandboxError as exc:
            fail(str(exc), 1)
        err_console.print(f"imported {tag} ({image_id[:19]}): {stack.description}", markup=False)
        err_console.print(
            "read-only from the host at run time: " + ", ".join(sorted(stack.mounts)), markup=False
        )
        typer.echo(tag)
        return
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
        False, "--json", help="Print the choice, what the sandbox enforces and the hint as JSON."
    ),
    sandbox: str = typer.Option(
        "local",
        "--sandbox",
        help="Which sandbox to open and describe: local, docker (starts a container) or auto.",
    ),
) -> None:
    """Say what `--sandbox auto` would choose, which GPU mode the docker sandbox would use, and what
    the chosen sandbox (default: the local one) enforces here."""
    import json
    import shutil

    from sandbox.auto import choose_kind
    from sandbox.base import open_sandbox
    from sandbox.unsandboxed import confinement_problem

    if not workspace.is_dir():
        fail(f"--workspace {workspace}: not a folder")
    if sandbox not in ("local", "docker", "auto"):
        fail(f"--sandbox {sandbox!r}: choose local, docker or auto")
    tag = image or _default_tag()
    choice = choose_kind(image=tag)
    docker_gpus = _docker_gpus()
    kind = choice.kind if sandbox == "auto" else sandbox
    options: dict[str, object] = {"image": tag} if kind == "docker" else {}
    if kind == "local" and confinement_problem() is not None:
        # Describe what is left without bwrap (what --unsandboxed gives); the commands that run
        # untrusted code refuse here, and the hint below says how to fix it.
        options["isolation"] = "none"
    try:
        with open_sandbox(kind, workspace=workspace, **options) as opened:
            isolation = opened.isolation()
            described = opened.describe()
    except SandboxError as exc:
        fail(str(exc), 1)
    hint = None
    if kind == "local" and isolation.filesystem is None:
        hint = (
            "for filesystem isolation install bubblewrap (apt-get install bubblewrap)"
            if shutil.which("bwrap") is None
            else "bwrap is installed but cannot run here (it needs unprivileged user namespaces); "
            "without it there is no filesystem isolation"
        )
    if as_json:
        payload = {
            "auto": choice.model_dump(),
            kind: isolation.model_dump(mode="json"),
            "docker_gpus": docker_gpus,
            "hint": hint,
        }
        typer.echo(json.dumps(payload, indent=2))
        return
    typer.echo(f"auto: {choice}")
    typer.echo(f"docker gpus: {docker_gpus['line']}")
    typer.echo(described)
    if hint:
        typer.echo(f"hint: {hint}")


def _docker_gpus() -> dict[str, object]:
    """Which GPU mode a docker sandbox opened now with gpus="auto" would use, without a container."""
    try:
        import docker

        from sandbox.docker_gpu import docker_gpu_plan

        client = docker.from_env(timeout=5)
        client.ping()
    except Exception as exc:  # no SDK, no daemon: say so
        return {"mode": None, "line": f"unknown (no Docker daemon answers: {type(exc).__name__})"}
    try:
        plan = docker_gpu_plan(client)
    except SandboxError as exc:
        return {"mode": None, "line": f"error: {exc}"}
    finally:
        client.close()
    return {**plan.summary(), "line": plan.describe()}


@sandbox_app.command("cleanup")
def cleanup() -> None:
    """Remove sandbox containers left behind by harness processes that are gone."""
    from sandbox.docker_host import connect, remove_leftover_containers

    try:
        removed = remove_leftover_containers(connect())
    except SandboxError as exc:
        fail(str(exc), 1)
    typer.echo(f"removed {len(removed)} container(s)" + (f": {', '.join(removed)}" if removed else ""))
