"""GPUs for the docker sandbox: through the daemon's `nvidia` runtime (device requests, the
`--gpus` equivalent) or, where the daemon has none, mapped by the sandbox itself: the device
nodes of only the GPUs asked for plus the driver's control nodes as `devices`, and the driver's
user-space libraries (libcuda, libnvidia-*) bind-mounted read-only with LD_LIBRARY_PATH naming
them. `plan_gpus` makes the choice; the host's driver files are read through `NvidiaHost`, whose
paths tests replace with fake folders."""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sandbox.base import SandboxError
from sandbox.docker_host import gpu_device_requests

GpuMode = Literal["none", "nvidia-runtime", "host-devices"]
MODE_ENV = "KERNEL_AGENT_DOCKER_GPU_MODE"
MODE_CHOICES = ("auto", "runtime", "devices")
LIB_PATTERNS = ("libcuda.so*", "libcudadebugger.so*", "libnvidia-*.so*")
DEFAULT_LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/local/nvidia/lib64",
)
CONTAINER_LIB_DIR = "/opt/kernel-agent/nvidia/lib"
CONTAINER_BIN_DIR = "/opt/kernel-agent/nvidia/bin"
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
REQUIRED_NODES = ("nvidiactl",)
_GPU_NODE = re.compile(r"nvidia(\d+)$")
_LDCONFIG_LINE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$")


def _ldconfig_p() -> str:
    exe = shutil.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(p)), None
    )
    if exe is None:
        return ""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        return subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=20, check=False).stdout
    return ""


@dataclass(frozen=True)
class HostGpu:
    index: str  # as nvidia-smi and CUDA (PCI bus order) number it on the host
    minor: int  # /dev/nvidia<minor>
    uuid: str = ""
    bus_id: str = ""


@dataclass
class NvidiaHost:
    """Where this host's NVIDIA driver shows itself. Every path is injectable (tests use fake
    folders): `dev_dir` holds the device nodes, `proc_dir` is /proc/driver/nvidia (GPU index ->
    device minor, UUIDs), `lib_dirs` are searched for the driver's libraries after `ldconfig`
    (a callable returning `ldconfig -p`'s output), `bin_dirs` for nvidia-smi."""

    dev_dir: Path = Path("/dev")
    proc_dir: Path = Path("/proc/driver/nvidia")
    lib_dirs: tuple[Path, ...] = tuple(Path(p) for p in DEFAULT_LIB_DIRS)
    ldconfig: Callable[[], str] | None = _ldconfig_p
    bin_dirs: tuple[Path, ...] = (Path("/usr/bin"), Path("/usr/local/bin"))

    def gpus(self) -> list[HostGpu]:
        """The GPUs with a device node here, numbered as the host numbers them."""
        minors = sorted(
            int(m.group(1))
            for entry in _listdir(self.dev_dir)
            if (m := _GPU_NODE.match(entry)) and (self.dev_dir / entry).exists()
        )
        described = self._from_proc()
        if described:
            return [gpu for gpu in described if gpu.minor in minors]
        return [HostGpu(index=str(minor), minor=minor) for minor in minors]

    def _from_proc(self) -> list[HostGpu]:
        # /proc/driver/nvidia/gpus/<bus id>/information: "Device Minor: N", "GPU UUID: GPU-...".
        # The host's GPU index (nvidia-smi's, CUDA's default order) is the PCI bus order.
        found = []
        for bus_id in sorted(_listdir(self.proc_dir / "gpus"), key=str.lower):
            with contextlib.suppress(OSError):
                text = (self.proc_dir / "gpus" / bus_id / "information").read_text()
                fields = dict(
                    (k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in text.splitlines())
                )
                if fields.get("Device Minor", "").isdigit():
                    found.append((bus_id, int(fields["Device Minor"]), fields.get("GPU UUID", "")))
        return [HostGpu(index=str(i), minor=m, uuid=u, bus_id=b) for i, (b, m, u) in enumerate(found)]

    def control_nodes(self) -> list[str]:
        return [name for name in CONTROL_NODES if (self.dev_dir / name).exists()]

    def driver_libraries(self) -> dict[str, str]:
        """File name -> host path of the driver's user-space libraries (64-bit only): what
        `ldconfig -p` lists first, then what the usual folders hold. Symlinked names are kept
        under their own name; the mount resolves them to the file."""
        found: dict[str, str] = {}
        for line in (self.ldconfig() if self.ldconfig else "").splitlines():
            m = _LDCONFIG_LINE.match(line)
            if not m:
                continue
            name, flags, path = m.groups()
            if _matches(name) and _is_64bit(flags) and os.path.exists(path):
                found.setdefault(name, path)
        for folder in self.lib_dirs:
            for name in sorted(_listdir(folder)):
                path = folder / name
                if _matches(name) and name not in found and path.exists() and not path.is_dir():
                    found[name] = str(path)
        return found

    def tools(self) -> dict[str, str]:
        for folder in self.bin_dirs:
            if (folder / "nvidia-smi").exists():
                return {"nvidia-smi": str(folder / "nvidia-smi")}
        return {}


@dataclass
class GpuPlan:
    """What the sandbox asks docker for, for the GPUs: `mode` says by which means."""

    mode: GpuMode
    gpus: str | None
    reason: str
    device_requests: list[Any] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)  # "host:container:rwm"
    mounts: dict[str, str] = field(default_factory=dict)  # host path -> container path, read-only
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if self.mode == "none":
            return f"none ({self.reason})"
        if self.mode == "nvidia-runtime":
            return f"nvidia-runtime: device request {self.gpus} ({self.reason})"
        nodes = ", ".join(d.split(":")[1] for d in self.devices)
        libs = sum(1 for inside in self.mounts.values() if inside.startswith(CONTAINER_LIB_DIR + "/"))
        return (
            f"host-devices: {nodes}; {libs} driver libraries read-only at {CONTAINER_LIB_DIR} ({self.reason})"
        )

    def summary(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "gpus": self.gpus,
            "reason": self.reason,
            "devices": [d.split(":")[1] for d in self.devices],
            "libraries": sorted(
                Path(p).name for p in self.mounts.values() if p.startswith(CONTAINER_LIB_DIR)
            ),
            "notes": self.notes,
        }


def default_host() -> NvidiaHost:
    return NvidiaHost()


def chosen_mode(mode: str | None) -> str:
    chosen = (mode or os.environ.get(MODE_ENV) or "auto").strip().lower()
    if chosen not in MODE_CHOICES:
        raise SandboxError(
            f"docker sandbox: GPU mode {chosen!r} ({MODE_ENV} or gpu_mode); use one of {', '.join(MODE_CHOICES)}"
        )
    return chosen


def plan_gpus(
    gpus: str | None,
    *,
    runtimes: Mapping[str, Any],
    host: NvidiaHost | None = None,
    mode: str | None = None,
) -> GpuPlan:
    """How the sandbox gets `gpus` ("auto", "all", "0,1", a GPU UUID, or None).

    `mode` (else $KERNEL_AGENT_DOCKER_GPU_MODE, else "auto"): "runtime" uses device requests
    (the daemon's nvidia runtime), "devices" maps the host's device nodes and driver libraries,
    "auto" the runtime when the daemon has one, else the host's devices. `gpus="auto"` means
    every GPU the chosen means can reach, none when there is none."""
    chosen = chosen_mode(mode)
    has_runtime = "nvidia" in runtimes
    if gpus is None:
        return GpuPlan(mode="none", gpus=None, reason="no GPU asked for")
    if chosen == "runtime" or (chosen == "auto" and has_runtime):
        if gpus == "auto" and not has_runtime:
            return GpuPlan(
                mode="none", gpus=None, reason="GPU mode runtime, and the daemon has no nvidia runtime"
            )
        asked = "all" if gpus == "auto" else gpus
        why = "the daemon has the nvidia runtime" if has_runtime else "GPU mode runtime was asked for"
        return GpuPlan(
            mode="nvidia-runtime", gpus=asked, reason=why, device_requests=gpu_device_requests(asked)
        )
    host = host or default_host()
    why = "GPU mode devices was asked for" if chosen == "devices" else "the daemon has no nvidia runtime"
    present = host.gpus()
    if not present or not all((host.dev_dir / n).exists() for n in REQUIRED_NODES):
        missing = f"no {host.dev_dir}/nvidia<N> GPU nodes" if not present else f"no {host.dev_dir}/nvidiactl"
        if gpus == "auto":
            return GpuPlan(mode="none", gpus=None, reason=f"{why} and this host has {missing}")
        raise SandboxError(
            f"docker sandbox: gpus={gpus!r} asked for, but {why} and this host has {missing}; "
            "install the NVIDIA driver (or the NVIDIA Container Toolkit on the Docker host), or pass gpus=None"
        )
    selected = _select(gpus, present)
    libraries = host.driver_libraries()
    if not any(name.startswith("libcuda.so") for name in libraries):
        raise SandboxError(
            f"docker sandbox: {why}, so it maps the GPUs itself, but no libcuda.so was found "
            f"(ldconfig -p, {', '.join(str(d) for d in host.lib_dirs)}); pass gpus=None or install the driver"
        )
    nodes = [f"nvidia{gpu.minor}" for gpu in selected] + host.control_nodes()
    notes = []
    if "nvidia-uvm" not in nodes:
        notes.append(
            f"{host.dev_dir}/nvidia-uvm is missing: CUDA cannot start in the container until the host "
            "creates it (load nvidia-uvm; `nvidia-modprobe -u -c=0`, or run any CUDA program on the host once)"
        )
    mounts = {path: f"{CONTAINER_LIB_DIR}/{name}" for name, path in libraries.items()}
    mounts.update({path: f"{CONTAINER_BIN_DIR}/{name}" for name, path in host.tools().items()})
    asked = ",".join(gpu.index for gpu in selected)
    return GpuPlan(
        mode="host-devices",
        gpus="all" if gpus in ("all", "auto") else asked,
        reason=f"{why}; host GPU(s) {asked}",
        devices=[f"{host.dev_dir / name}:/dev/{name}:rwm" for name in nodes],
        mounts=mounts,
        env={"LD_LIBRARY_PATH": CONTAINER_LIB_DIR},
        notes=notes,
    )


def _select(gpus: str, present: list[HostGpu]) -> list[HostGpu]:
    if gpus in ("all", "auto"):
        return present
    wanted = [part.strip() for part in gpus.split(",") if part.strip()]
    if not wanted:
        raise SandboxError(f"docker sandbox: gpus={gpus!r}; use 'all', '0', '0,1' or None")
    chosen = []
    for want in wanted:
        gpu = next((g for g in present if want in (g.index, g.uuid)), None)
        if gpu is None:
            have = ", ".join(g.index + (f" ({g.uuid})" if g.uuid else "") for g in present)
            raise SandboxError(f"docker sandbox: gpus={gpus!r}: no GPU {want!r} on this host (it has {have})")
        if gpu not in chosen:
            chosen.append(gpu)
    return chosen


def docker_gpu_plan(client: Any, gpus: str | None = "auto", *, mode: str | None = None) -> GpuPlan:
    """The plan a docker sandbox opened now with `gpus` would use (no container is created)."""
    runtimes = client.info().get("Runtimes") or {}
    return plan_gpus(gpus, runtimes=runtimes, mode=mode)


def _matches(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in LIB_PATTERNS)


def _is_64bit(flags: str) -> bool:
    # ldconfig -p: "(libc6,x86-64)", "(libc6,AArch64)"; 32-bit entries say just "(libc6)".
    return any(tag in flags for tag in ("x86-64", "AArch64", "64bit", "IA-64"))


def _listdir(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []
