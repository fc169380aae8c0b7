"""The GPU sandbox image, built with the Docker SDK in one of two ways:

- from sandbox/Dockerfile (`build_image`): CUDA devel base, torch, ninja, the workers; needs a
  registry for the base and network for apt and pip;
- host-stack (`build_host_stack_image`): `docker import` of a skeleton root (or a given root
  filesystem, e.g. from debootstrap), nothing fetched; the host's python with torch, its CUDA
  toolkit and (for the skeleton) its /usr are bind-mounted read-only at run time, as the image's
  labels say (`host_stack_of`), for machines where the CUDA stack lives on the host.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
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


# -- host-stack images: no registry, the CUDA stack from the host ------------------------------

HOST_STACK_KIND = "host-stack"
IMAGE_LABEL = "kernel-agent.image"
HOST_MOUNTS_LABEL = "kernel-agent.host-mounts"
PYTHON_LABEL = "kernel-agent.python"
STACK_LABEL = "kernel-agent.stack"
# Host folders the skeleton root borrows (read-only) when no --rootfs is given: the host's /usr
# (compilers, libraries, the system python) and, where /usr is not merged, the real /bin, /lib*.
# /sbin is never mounted: docker puts its init at /sbin/docker-init.
SKELETON_TOP = ("bin", "lib", "lib32", "lib64", "libx32")
SKELETON_ETC = ("etc/alternatives", "etc/ld.so.cache")
_SYSTEM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_PROBE = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
out = {"executable": sys.executable, "prefix": sys.prefix, "base_prefix": sys.base_prefix,
       "version": sys.version.split()[0]}
try:
    import torch
    out["torch"] = torch.__version__
    out["torch_site"] = os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))
    out["torch_cuda"] = torch.version.cuda or ""
except Exception as exc:
    out["torch_error"] = f"{type(exc).__name__}: {exc}"
try:
    from cuda_env import find_toolkit
    toolkit = find_toolkit()
    out["cuda_home"], out["nvcc"] = toolkit.cuda_home, toolkit.nvcc_version
except Exception as exc:
    out["cuda_error"] = str(exc)
print(json.dumps(out))
"""


@dataclass
class HostStack:
    """What a host-stack image borrows from the host, read-only, at the same paths: the python
    (with torch) the sandbox runs, the CUDA toolkit, and without a --rootfs the host's /usr."""

    python: str
    mounts: dict[str, str]  # host path -> container path
    env: dict[str, str]
    description: str
    skeleton_links: dict[str, str] = field(default_factory=dict)  # /bin -> usr/bin, ...
    notes: list[str] = field(default_factory=list)

    def labels(self) -> dict[str, str]:
        return {
            IMAGE_LABEL: HOST_STACK_KIND,
            HOST_MOUNTS_LABEL: json.dumps(self.mounts, sort_keys=True),
            PYTHON_LABEL: self.python,
            STACK_LABEL: self.description,
        }

    def changes(self) -> list[str]:
        """`docker import --change` instructions: labels, environment, the keep-alive command."""
        out = [f"LABEL {key}={_quoted(value)}" for key, value in self.labels().items()]
        out += [f"ENV {key}={_quoted(value)}" for key, value in self.env.items()]
        out += ["WORKDIR /workspace", 'CMD ["sleep", "infinity"]']
        return out


def probe_python(python: str) -> dict[str, Any]:
    """What `python -I` (as the sandbox runs it) has: its prefixes, torch, the CUDA toolkit."""
    exe = shutil.which(python) or python
    try:
        proc = subprocess.run(
            [exe, "-I", "-c", _PROBE, str(WORKERS_DIR / "build")],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except OSError as exc:
        raise SandboxError(f"cannot run {python}: {exc}") from exc
    if proc.returncode != 0:
        raise SandboxError(f"cannot probe {python}: {proc.stderr.strip()[-2000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def host_stack(probe: Mapping[str, Any], *, rootfs: bool = False, host_root: Path = Path("/")) -> HostStack:
    """The mounts and environment of a host-stack image for a probed python (`probe_python`).
    With `rootfs` the image brings its own /usr (a debootstrap root, say) and the python must
    live outside the system folders; without it the host's /usr is borrowed."""
    if "torch" not in probe:
        raise SandboxError(
            f"a host-stack image runs the host's python with torch, but {probe['executable']} -I cannot "
            f"import torch ({probe.get('torch_error', 'unknown error')})"
        )
    mounts: dict[str, str] = {}
    links: dict[str, str] = {}
    notes: list[str] = []
    if not rootfs:
        mounts[str(host_root / "usr")] = "/usr"
        for name in SKELETON_TOP:
            path = host_root / name
            if path.is_symlink():
                links[f"/{name}"] = os.readlink(path)
            elif path.is_dir():
                mounts[str(path)] = f"/{name}"
        for name in SKELETON_ETC:
            if (host_root / name).exists():
                mounts[str(host_root / name)] = f"/{name}"
    wanted = [
        ("python", str(probe["prefix"])),
        ("python", str(probe["base_prefix"])),
        ("torch", str(probe["torch_site"])),
    ]
    if probe.get("cuda_home"):
        wanted.append(("CUDA toolkit", str(probe["cuda_home"])))
    else:
        notes.append(f"no CUDA toolkit found for the image ({probe.get('cuda_error', '')}): builds will fail")
    for what, path in wanted:
        real = os.path.realpath(path)
        if _covered(path, mounts, host_root):
            if _covered(real, mounts, host_root):
                continue
            path = real  # a link inside a borrowed folder to a place outside it
        if rootfs and what != "CUDA toolkit" and _under_system_tree(real):
            raise SandboxError(
                f"the host's {what} lives in {real}, inside the system folders that --rootfs replaces; "
                "build without --rootfs (the host's /usr is then mounted read-only)"
            )
        mounts[real] = path  # the content at the path python (or CUDA_HOME) names
    python = str(probe["executable"])
    cuda_home = str(probe.get("cuda_home") or "/usr/local/cuda")
    env = {
        "PATH": f"{os.path.dirname(python)}:{cuda_home}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "CUDA_HOME": cuda_home,
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
    }
    description = (
        f"python {probe['version']} ({python}), torch {probe['torch']}"
        + (f" (CUDA {probe['torch_cuda']})" if probe.get("torch_cuda") else "")
        + (f", toolkit {cuda_home} ({probe.get('nvcc') or 'nvcc'})" if probe.get("cuda_home") else "")
        + ("; own root filesystem" if rootfs else "; host /usr")
    )
    return HostStack(
        python=python, mounts=mounts, env=env, description=description, skeleton_links=links, notes=notes
    )


def skeleton_rootfs(stack: HostStack, *, uid: int | None = None, gid: int | None = None) -> bytes:
    """A tar of the smallest root the sandbox needs when /usr comes from the host: mount points,
    /tmp, /etc/passwd and /etc/group (root, nobody and the building user), merged-/usr links."""
    uid = os.getuid() if uid is None else uid
    gid = os.getgid() if gid is None else gid
    passwd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    group = "root:x:0:\nnogroup:x:65534:\n"
    if uid not in (0, 65534):
        passwd += f"sandbox:x:{uid}:{gid}:sandbox:/tmp:/bin/sh\n"
    if gid not in (0, 65534):
        group += f"sandbox:x:{gid}:\n"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        dirs: dict[str, int] = dict.fromkeys(
            ("dev", "etc", "run", "sbin", "usr", "home", "mnt", "opt", "var"), 0o755
        )
        dirs.update({"proc": 0o555, "sys": 0o555, "root": 0o700, "opt/kernel-agent": 0o755})
        dirs.update(dict.fromkeys(("tmp", "var/tmp", "workspace", "cache"), 0o1777))
        for inside in stack.mounts.values():  # parents of the mount points, e.g. /root/.pyenv
            for parent in PurePosixPath(inside).parents:
                dirs.setdefault(str(parent).lstrip("/"), 0o755)
        linked = {link.strip("/") for link in stack.skeleton_links}
        for name, mode in sorted(dirs.items()):
            if name and name.partition("/")[0] not in linked:
                _add(tar, name, tarfile.DIRTYPE, mode)
        for link, target in sorted(stack.skeleton_links.items()):
            _add(tar, link.lstrip("/"), tarfile.SYMTYPE, 0o777, linkname=target)
        files = {
            "etc/passwd": passwd,
            "etc/group": group,
            "etc/hosts": "",
            "etc/resolv.conf": "",
            "etc/hostname": "",
        }
        for name, text in files.items():
            _add(tar, name, tarfile.REGTYPE, 0o644, data=text.encode())
    return buf.getvalue()


def build_host_stack_image(
    tag: str,
    *,
    rootfs: Path | None = None,
    python: str | None = None,
    client: Any = None,
    on_progress: Callable[[str], None] = lambda line: None,
) -> tuple[str, HostStack]:
    """Import `tag` with `docker import` from nothing fetched: a skeleton root (the host's /usr
    mounted read-only at run time) or `rootfs` (a folder or a tarball, e.g. from debootstrap);
    the host's python, torch and CUDA toolkit are mounted read-only at run time (the image's
    labels name them). Returns the image id and what it borrows."""
    if client is None:
        from sandbox.docker_host import connect

        client = connect()
    on_progress(f"probing {python or sys.executable} -I (torch, CUDA toolkit)")
    stack = host_stack(probe_python(python or sys.executable), rootfs=rootfs is not None)
    for note in stack.notes:
        on_progress(f"note: {note}")
    repository, _, version = _split_tag(tag)
    with contextlib.ExitStack() as cleanup:
        if rootfs is None:
            src: Any = skeleton_rootfs(stack)
            on_progress(
                f"importing a skeleton root ({len(src)} bytes); host /usr is mounted read-only at run time"
            )
        elif rootfs.is_dir():
            handle = cleanup.enter_context(
                tempfile.NamedTemporaryFile(prefix="kernel-agent-rootfs-", suffix=".tar")
            )
            on_progress(f"packing {rootfs} into {handle.name}")
            with tarfile.open(fileobj=handle, mode="w") as tar:
                tar.add(str(rootfs), arcname=".", filter=_rootfs_member)
            handle.flush()
            src = handle.name
        elif rootfs.is_file():
            src = str(rootfs)
            on_progress(f"importing {rootfs} ({rootfs.stat().st_size} bytes)")
        else:
            raise SandboxError(f"--rootfs {rootfs}: neither a folder nor a tarball")
        try:
            answer = client.api.import_image(
                src=src, repository=repository, tag=version, changes=stack.changes()
            )
        except Exception as exc:  # docker.errors.APIError and connection errors alike
            raise SandboxError(f"cannot import {tag}: {exc}") from exc
    for line in str(answer).splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict) and event.get("error"):
                raise SandboxError(f"cannot import {tag}: {event['error']}")
    image_id = str(client.images.get(tag).id)
    return image_id, stack


def host_stack_of(labels: Mapping[str, str] | None) -> HostStack | None:
    """The HostStack an image's labels describe (None for an image with its own stack)."""
    labels = labels or {}
    if labels.get(IMAGE_LABEL) != HOST_STACK_KIND:
        return None
    try:
        mounts = json.loads(labels.get(HOST_MOUNTS_LABEL, "{}"))
    except ValueError as exc:
        raise SandboxError(f"image label {HOST_MOUNTS_LABEL} is not JSON: {exc}") from None
    return HostStack(
        python=labels.get(PYTHON_LABEL, "python3"),
        mounts={str(k): str(v) for k, v in mounts.items()},
        env={},
        description=labels.get(STACK_LABEL, ""),
    )


def _inside(path: str, host_root: Path) -> str:
    """The container path of a host path: the same path (under a fake `host_root` in tests, the
    path below it)."""
    p, root = PurePosixPath(path), PurePosixPath(host_root)
    if str(root) != "/" and (p == root or root in p.parents):
        return "/" + str(p.relative_to(root))
    return str(p)


def _covered(path: str, mounts: Mapping[str, str], host_root: Path) -> bool:
    """`path` is visible at the same path through one of `mounts` already."""
    p = PurePosixPath(path)
    return any(
        (p == PurePosixPath(host) or PurePosixPath(host) in p.parents) and inside == _inside(host, host_root)
        for host, inside in mounts.items()
    )


def _under_system_tree(path: str) -> bool:
    return any(path == tree or path.startswith(tree + "/") for tree in _SYSTEM_TREES)


def _split_tag(tag: str) -> tuple[str, str, str]:
    name, _, last = tag.rpartition(":")
    if name and "/" not in last:
        return name, ":", last
    return tag, ":", "latest"


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _add(
    tar: tarfile.TarFile, name: str, kind: bytes, mode: int, *, linkname: str = "", data: bytes = b""
) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname, info.size = kind, mode, linkname, len(data)
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data) if data else None)


def _rootfs_member(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    # A debootstrap root keeps apt's downloads; the image does not need them.
    return None if info.name.startswith("./var/cache/apt/archives/") and info.isfile() else info
