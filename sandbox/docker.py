"""Docker sandbox: one long-lived container per workspace, a command per `docker exec`.

The container runs `sleep infinity` under an init, with no network, a read-only root, the
workspace bind-mounted read-write at /workspace, a tmpfs /tmp, a named volume for the compile
cache, the worker scripts mounted read-only, memory and pids limits, no capabilities and
no-new-privileges. GPUs come through device requests (the `--gpus` equivalent) when the daemon
has the nvidia runtime, else the sandbox maps them itself (sandbox/docker_gpu.py: the device
nodes of the GPUs asked for, the driver's libraries read-only). An image built in host-stack mode
(sandbox/image.py) names the host folders it borrows; they are mounted read-only. With GPUs, the
referee's GPU gate folder (sandbox.paths.gpu_gate_dir) is mounted read-only at its host path, so
the referee's processes in the container take the same gates as every other evaluation on the
machine (flock works across the bind mount; it needs no write). Containers
carry labels naming their owner process; leftovers of dead owners are removed when a sandbox
opens, and open sandboxes are removed on close and at interpreter exit.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import docker
import docker.errors

from sandbox.base import (
    ENV_DEFAULTS,
    OUTPUT_CAP_BYTES,
    WORKERS_DIR,
    Capabilities,
    ExecResult,
    Isolation,
    Sandbox,
    SandboxError,
    pinned_gpu_ids,
    register_sandbox,
    returncode_from_wait_status,
)
from sandbox.cgroups import process_limit_counters
from sandbox.docker_exec import WRAPPER, ExecStream, tar_one_file, untar_one_file
from sandbox.docker_gpu import GpuPlan, NvidiaHost, plan_gpus
from sandbox.docker_host import (
    LABEL,
    OWNER_LABEL,
    connect,
    default_image,
    host_pid,
    not_running,
    owner_label,
    remove_leftover_containers,
)
from sandbox.image import HostStack, host_stack_of
from sandbox.paths import gpu_gate_dir

CACHE_VOLUME = "kernel-agent-cache"
PASSED_ENV = ("LANG", "LC_ALL", "TERM", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS")
_FILE_CAP = 256 * 1024 * 1024
_CLIENT_GRACE_S = 10.0  # the in-container `timeout` fires first; this catches a stuck exec
_open: weakref.WeakSet[DockerSandbox] = weakref.WeakSet()


@register_sandbox("docker")
class DockerSandbox(Sandbox):
    """Options: `image`; `gpus` "auto" (every GPU the GPU mode reaches, none when none), "all",
    "0,1" (host indices or GPU UUIDs) or None; `gpu_mode` "auto" (the nvidia runtime when the
    daemon has it, else the host's device nodes), "runtime" or "devices" (default:
    $KERNEL_AGENT_DOCKER_GPU_MODE or auto); `gpu_host` (where the driver's nodes and libraries
    are: sandbox.docker_gpu.NvidiaHost, replaced in tests); `mem_limit`; `pids_limit`; `cpus`;
    `shm_size`; `tmpfs_size`; `cache_volume`; `ro_mounts` {host path: container path} mounted
    read-only (e.g. a host python or /usr/local/cuda; added to a host-stack image's own);
    `python` (default: the host-stack image's, else python3); `env`; `user` (default: the
    harness's uid:gid so workspace files keep their owner); `output_cap`; `client` (a
    docker.DockerClient)."""

    kind = "docker"
    workspace_path = "/workspace"
    workers_path = "/opt/kernel-agent/workers"
    cache_path = "/cache"

    def __init__(
        self,
        *,
        workspace: Path,
        image: str | None = None,
        gpus: str | None = "auto",
        gpu_mode: str | None = None,
        gpu_host: NvidiaHost | None = None,
        mem_limit: str | int | None = "16g",
        pids_limit: int = 1024,
        cpus: float | None = None,
        shm_size: str = "2g",
        tmpfs_size: str = "4g",
        cache_volume: str = CACHE_VOLUME,
        ro_mounts: Mapping[str, str] | None = None,
        python: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        output_cap: int = OUTPUT_CAP_BYTES,
        client: Any = None,
        **_: object,
    ) -> None:
        self.host_workspace = str(Path(workspace).resolve())
        self.image = image or default_image()
        self.output_cap = output_cap
        self.user = user or f"{os.getuid()}:{os.getgid()}"
        self.client = client or connect()
        try:
            found = self.client.images.get(self.image)
        except docker.errors.ImageNotFound:
            raise SandboxError(
                f"docker sandbox: image {self.image!r} is not on this machine; build it with "
                f"`agent sandbox build --tag {self.image}` (or `--host-stack` where no registry "
                "can be reached) or set KERNEL_AGENT_IMAGE"
            ) from None
        self.host_stack: HostStack | None = host_stack_of(getattr(found, "labels", None))
        self.python = python or (self.host_stack.python if self.host_stack else "python3")
        runtimes = (self.client.info().get("Runtimes") or {}) if gpus is not None else {}
        self.gpu_plan: GpuPlan = plan_gpus(gpus, runtimes=runtimes, host=gpu_host, mode=gpu_mode)
        self.gpus = self.gpu_plan.gpus
        self.gate_dir = gpu_gate_dir() if self.gpus is not None else None
        if self.gate_dir is not None:
            self.gate_dir.mkdir(parents=True, exist_ok=True)  # else docker would make it, as root
        self.limits = {"mem_limit": mem_limit, "pids_limit": pids_limit, "cpus": cpus}
        self.shm_size, self.tmpfs_size = shm_size, tmpfs_size
        self.cache_volume = cache_volume
        self.ro_mounts = {**self._stack_mounts(), **dict(ro_mounts or {})}
        self.env = {k: v for k, v in os.environ.items() if k in PASSED_ENV}
        self.env.update(ENV_DEFAULTS)
        self.env.update(
            HOME="/tmp",
            TMPDIR="/tmp",
            XDG_CACHE_HOME=self.cache_path,
            TORCH_EXTENSIONS_DIR=f"{self.cache_path}/torch_extensions",
            PYTHONDONTWRITEBYTECODE="1",
            NVIDIA_DRIVER_CAPABILITIES="compute,utility",
        )
        self.env.update(self.gpu_plan.env)
        self.env.update(env or {})
        self.container: Any = None
        self._keepalive = ""
        self._closed = False
        remove_leftover_containers(self.client)
        self._ensure_cache_volume()
        self._start()
        _open.add(self)

    def _stack_mounts(self) -> dict[str, str]:
        """The host folders a host-stack image borrows; each must exist here."""
        if self.host_stack is None:
            return {}
        missing = [host for host in self.host_stack.mounts if not os.path.exists(host)]
        if missing:
            raise SandboxError(
                f"docker sandbox: image {self.image} borrows host folders this machine lacks "
                f"({', '.join(missing)}); rebuild it here: agent sandbox build --host-stack --tag {self.image}"
            )
        return dict(self.host_stack.mounts)

    # -- container lifecycle --------------------------------------------------------------

    def container_config(self) -> dict[str, Any]:
        """Keyword arguments for `client.containers.create` (kept pure so tests can read it)."""
        volumes = {
            self.host_workspace: {"bind": self.workspace_path, "mode": "rw"},
            str(WORKERS_DIR): {"bind": self.workers_path, "mode": "ro"},
            self.cache_volume: {"bind": self.cache_path, "mode": "rw"},
        }
        for host, inside in {**self.ro_mounts, **self.gpu_plan.mounts}.items():
            volumes[str(host)] = {"bind": inside, "mode": "ro"}
        if self.gate_dir is not None:  # the same path inside: the referee passes gate paths as-is
            volumes[str(self.gate_dir)] = {"bind": str(self.gate_dir), "mode": "ro"}
        config: dict[str, Any] = {
            "image": self.image,
            "command": ["sleep", "infinity"],
            "init": True,
            "user": self.user,
            "working_dir": self.workspace_path,
            "network_mode": "none",
            "read_only": True,
            "tmpfs": {"/tmp": f"rw,exec,nosuid,size={self.tmpfs_size}"},
            "shm_size": self.shm_size,
            "volumes": volumes,
            "environment": self.env,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "pids_limit": self.limits["pids_limit"],
            "labels": {LABEL: "1", OWNER_LABEL: owner_label(), "kernel-agent.workspace": self.host_workspace},
            "device_requests": self.gpu_plan.device_requests,
        }
        if self.gpu_plan.devices:
            config["devices"] = list(self.gpu_plan.devices)
        if self.limits["mem_limit"] is not None:
            config["mem_limit"] = self.limits["mem_limit"]
            config["memswap_limit"] = self.limits["mem_limit"]  # equal: no swap
        if self.limits["cpus"]:
            config["nano_cpus"] = int(float(self.limits["cpus"]) * 1e9)
        return config

    def _started(self) -> Any:
        """The container, created and started on first use."""
        if self.container is None:
            self._start()
        return self.container

    def _start(self) -> None:
        container = None
        try:
            container = self.client.containers.create(**self.container_config())
            container.start()
            self.container = container
        except docker.errors.APIError as exc:
            if container is not None:  # created but not started (a GPU request refused, say)
                with contextlib.suppress(docker.errors.APIError):
                    container.remove(force=True)
            hint = ""
            if self.gpu_plan.mode == "nvidia-runtime" and "device driver" in str(exc):
                hint = (
                    "; install the NVIDIA Container Toolkit on the Docker host, or pass gpus=None "
                    "(or gpu_mode='devices' / KERNEL_AGENT_DOCKER_GPU_MODE=devices: map the host's GPU nodes)"
                )
            raise SandboxError(
                f"docker sandbox: cannot start a container of {self.image}: {exc}{hint}"
            ) from exc
        self._keepalive = ""  # no reaping until this container's keep-alive is known
        probe = self._raw_exec(["cat", "/proc/1/task/1/children"], timeout=30)
        children = probe.stdout.split()
        # The keep-alive is the init's first child; orphans get reaped, it must not.
        self._keepalive = min(children, key=int) if probe.ok and children else ""
        self._host_pid = host_pid(self.container)

    def _restart(self) -> None:
        self._remove_container()
        self._start()

    def _remove_container(self) -> None:
        if self.container is None:
            return
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            self.container.remove(force=True)
        self.container = None

    def _ensure_cache_volume(self) -> None:
        try:
            self.client.volumes.get(self.cache_volume)
            return
        except docker.errors.NotFound:
            self.client.volumes.create(self.cache_volume, labels={LABEL: "cache"})
        if self.user.split(":")[0] != "0":
            # A new volume belongs to root; hand it to the sandbox user once (a helper container
            # that keeps CAP_CHOWN, since the sandbox itself has no capabilities).
            volumes = {host: {"bind": inside, "mode": "ro"} for host, inside in self._stack_mounts().items()}
            volumes[self.cache_volume] = {"bind": self.cache_path, "mode": "rw"}
            self.client.containers.run(
                self.image,
                ["chown", self.user, self.cache_path],
                volumes=volumes,
                network_mode="none",
                remove=True,
            )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._remove_container()
        _open.discard(self)

    # -- commands -------------------------------------------------------------------------

    def exec(
        self,
        cmd: Sequence[str],
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        if self._closed:
            raise SandboxError("docker sandbox: exec after close(); open a new sandbox")
        before = process_limit_counters(self._host_pid) if self._host_pid else {}
        result = self._raw_exec(cmd, timeout=timeout, cwd=cwd, env=env, stdin=stdin)
        if result.returncode == 126 and "stopped state" in result.stdout:
            # The container died between creating the exec and starting it: once more, fresh.
            self._restart()
            before = process_limit_counters(self._host_pid) if self._host_pid else {}
            result = self._raw_exec(cmd, timeout=timeout, cwd=cwd, env=env, stdin=stdin)
        after = process_limit_counters(self._host_pid) if self._host_pid else {}
        result.limits_hit += [k for k, v in after.items() if v > before.get(k, 0)]
        if result.timed_out:
            # A timed-out command may have left anything behind: start clean (the workspace and
            # the cache volume persist; /tmp does not).
            self._restart()
        return result

    def _raw_exec(
        self,
        cmd: Sequence[str],
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        cap: int | None = None,
    ) -> ExecResult:
        argv = ["sh", "-c", WRAPPER, "sh", f"{max(timeout, 0.001):.3f}", self._keepalive, *cmd]
        start = time.monotonic()
        exec_id = self._create_exec(argv, cwd, env, stdin is not None)
        stream = ExecStream(self.client.api.exec_start(exec_id, socket=True), cap or self.output_cap)
        try:
            stream.send_stdin(stdin)
            finished = stream.read_until(start + timeout + _CLIENT_GRACE_S)
        finally:
            stream.close()
        duration = time.monotonic() - start
        if not finished:
            self._remove_container()
            returncode, timed_out = -9, True
        else:
            code = self._exit_code(exec_id)
            returncode = returncode_from_wait_status(code)
            timed_out = code == 137 and duration >= timeout
        truncated = stream.out.truncated or stream.err.truncated
        return ExecResult(
            returncode=returncode,
            stdout=stream.out.text(),
            stderr=stream.err.text(),
            duration_s=duration,
            timed_out=timed_out,
            truncated=truncated,
            limits_hit=["output"] if truncated else [],
        )

    def _create_exec(
        self, argv: list[str], cwd: str | None, env: Mapping[str, str] | None, stdin: bool
    ) -> str:
        for attempt in (1, 2):
            try:
                created = self.client.api.exec_create(
                    self._started().id,  # after a restart, the new container
                    argv,
                    stdin=stdin,
                    user=self.user,
                    environment={**self.env, **(env or {})},
                    workdir=cwd or self.workspace_path,
                )
                return str(created["Id"])
            except docker.errors.APIError as exc:
                # The container died (its keep-alive was killed, say): start a fresh one once.
                if attempt == 2 or not not_running(exc):
                    raise SandboxError(
                        f"docker sandbox: cannot run a command in {self.image}: {exc}"
                    ) from exc
                self._restart()
        raise AssertionError("unreachable")

    def _exit_code(self, exec_id: str) -> int:
        for _ in range(200):
            info = self.client.api.exec_inspect(exec_id)
            if not info.get("Running"):
                return int(info.get("ExitCode") or 0)
            time.sleep(0.01)
        return int(self.client.api.exec_inspect(exec_id).get("ExitCode") or -1)

    # -- files ----------------------------------------------------------------------------

    def _mount_root(self, path: str) -> str | None:
        p = PurePosixPath(path)
        for root in (self.workspace_path, self.cache_path):
            if p == PurePosixPath(root) or PurePosixPath(root) in p.parents:
                return root
        return None

    def put_file(self, path: str, content: bytes) -> None:
        root = self._mount_root(path)
        if root is None:  # tmpfs and the rest are not reachable through the archive API
            r = self._raw_exec(
                ["sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1"', "sh", path],
                timeout=60,
                stdin=content,
            )
            if not r.ok:
                raise OSError(
                    f"docker sandbox: cannot write {path}: {r.stderr.strip() or r.describe_failure()}"
                )
            return
        relative = PurePosixPath(path).relative_to(root)
        uid, _, gid = self.user.partition(":")
        archive = tar_one_file(relative, content, int(uid), int(gid or uid))
        if not self._started().put_archive(root, archive):
            raise OSError(f"docker sandbox: cannot write {path}")

    def get_file(self, path: str) -> bytes:
        if self._mount_root(path) is None and not path.startswith(self.workers_path):
            r = self._raw_exec(["base64", "-w0", path], timeout=60, cap=_FILE_CAP)
            if not r.ok:
                raise FileNotFoundError(f"docker sandbox: cannot read {path}: {r.stderr.strip()}")
            return base64.b64decode(r.stdout)
        container = self._started()
        try:
            chunks, _ = container.get_archive(path)
        except docker.errors.NotFound:
            raise FileNotFoundError(f"docker sandbox: no file {path} in the container") from None
        content = untar_one_file(b"".join(chunks))
        if content is None:
            raise IsADirectoryError(f"docker sandbox: {path} is not a regular file")
        return content

    # -- what is enforced -----------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        # The container's user may not be the host's (`user`), and what a build depends on is the image.
        identity = self.image if self.host_stack is None else f"{self.image} ({self.host_stack.description})"
        return Capabilities(
            sees_gpu_gates=self.gate_dir is not None,
            pinned_gpus=pinned_gpu_ids(self.gpus),
            runtime_identity=identity,
        )

    def isolation(self) -> Isolation:
        notes = [
            f"image {self.image}; container {self.container.short_id if self.container else '(none)'}",
            "stragglers killed after each command; the container is recreated after a timeout",
        ]
        if not self._keepalive:
            notes.append("orphan reaping off: the init's children could not be read")
        if self.host_stack is not None:
            notes.append(
                f"host-stack image: {self.host_stack.description}; read-only from the host: "
                + ", ".join(sorted(self.host_stack.mounts.values()))
            )
        notes.append(f"GPU mode {self.gpu_plan.mode}: {self.gpu_plan.reason}")
        notes += self.gpu_plan.notes
        mem = self.limits["mem_limit"]
        return Isolation(
            backend="docker",
            filesystem="read-only root; writable: /workspace (bind), /cache (volume), tmpfs /tmp",
            network="network_mode=none",
            processes=f"pids_limit={self.limits['pids_limit']}",
            memory=f"mem_limit={mem} (no swap)" if mem is not None else None,
            host_processes_hidden="container pid namespace",
            gpus=self._gpu_line(),
            env="only the sandbox's own variables and " + ", ".join(PASSED_ENV),
            output_cap_bytes=self.output_cap,
            notes=[*notes, "cap_drop=ALL, no-new-privileges"],
        )

    def _gpu_line(self) -> str | None:
        plan = self.gpu_plan
        if plan.mode == "nvidia-runtime":
            return f"device request {plan.gpus} (nvidia runtime)"
        if plan.mode == "host-devices":
            nodes = ", ".join(device.split(":")[1] for device in plan.devices)
            return f"host devices {nodes} (GPUs {plan.gpus}; no nvidia runtime), driver libraries read-only"
        return None


@atexit.register
def _close_all() -> None:
    for sandbox in list(_open):
        with contextlib.suppress(Exception):
            sandbox.close()
