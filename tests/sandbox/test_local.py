"""What only the local sandbox does: finding what the machine allows, saying what it could not
set up, and the fallbacks (RLIMIT_NPROC, RLIMIT_AS) that apply when cgroups are not writable."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import sandbox.local as local_module
from sandbox.base import SandboxError
from sandbox.cgroups import CgroupPlan
from sandbox.local import LocalSandbox
from sandbox.paths import default_cache_dir, gpu_gate_dir, harness_state_dir
from sandbox.unsandboxed import UNSANDBOXED_ENV
from tests.sandbox.conftest import processes_with, wait_until_gone

MiB = 1 << 20
needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/setup-docker.sh installs it)"
)


@pytest.fixture
def open_local(workspace: Path, tmp_path: Path) -> Iterator:
    opened: list[LocalSandbox] = []

    def make(**options: object) -> LocalSandbox:
        box = LocalSandbox(workspace=workspace, cache_dir=tmp_path / "cache", **options)  # type: ignore[arg-type]
        opened.append(box)
        return box

    yield make
    for box in opened:
        box.close()


@pytest.fixture
def no_cgroups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_module, "_cgroup_plan", CgroupPlan(reason="switched off by the test"))


@needs_bwrap
def test_this_machine_gets_full_isolation(open_local) -> None:
    iso = open_local().isolation()
    assert iso.filesystem and "read-only system folders" in iso.filesystem
    assert iso.network and "network namespace" in iso.network
    assert iso.host_processes_hidden == "own pid namespace"
    assert iso.processes is not None


def _without_bwrap(monkeypatch: pytest.MonkeyPatch, stand_in: str | None = None) -> None:
    real_which = shutil.which
    monkeypatch.setattr(
        local_module.shutil, "which", lambda name: stand_in if name == "bwrap" else real_which(name)
    )


def test_without_bwrap_the_sandbox_refuses_to_open(open_local, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(UNSANDBOXED_ENV, raising=False)
    _without_bwrap(monkeypatch)
    for isolation in ("auto", "bwrap"):
        with pytest.raises(SandboxError) as refused:
            open_local(isolation=isolation)
        assert str(refused.value) == (
            "bubblewrap (bwrap) is not installed, so untrusted code would run unconfined; install it "
            "(apt-get install bubblewrap) or pass --unsandboxed to accept the risk"
        )


def test_unsandboxed_runs_without_bwrap_and_says_so(open_local, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(UNSANDBOXED_ENV, "1")
    _without_bwrap(monkeypatch)
    box = open_local()
    line = box.describe()
    assert box.isolation().unsandboxed and line.startswith("local sandbox (unsandboxed")
    assert "filesystem: NOT enforced" in line and "host processes: NOT enforced" in line
    assert box.exec(["sh", "-c", "echo works"], timeout=10).stdout == "works\n"


def test_a_broken_bwrap_is_refused(open_local, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(UNSANDBOXED_ENV, raising=False)
    _without_bwrap(monkeypatch, stand_in="/bin/false")
    with pytest.raises(SandboxError, match=r"bubblewrap \(bwrap\) does not work here.*--unsandboxed"):
        open_local()


@needs_bwrap
def test_home_run_and_host_tmp_are_hidden(open_local) -> None:
    secret = Path.home() / f".ka-secret-{uuid.uuid4().hex[:8]}"
    host_tmp = Path("/tmp") / f"ka-host-tmp-{uuid.uuid4().hex[:8]}"
    secret.write_text("api-key")
    host_tmp.write_text("host")
    try:
        box = open_local()
        for path in (secret, host_tmp):
            assert box.exec(["cat", str(path)], timeout=10).returncode != 0, f"{path} is visible"
        if Path("/run/docker.sock").exists():  # a root shell on the host, if it were reachable
            assert not box.exec(["test", "-e", "/run/docker.sock"], timeout=10).ok
    finally:
        secret.unlink()
        host_tmp.unlink()


@needs_bwrap
def test_private_tmp_lasts_for_the_sandbox(open_local) -> None:
    box = open_local()
    name = f"ka-{uuid.uuid4().hex[:8]}"
    assert box.exec(["sh", "-c", f"echo kept > /tmp/{name}"], timeout=10).ok
    assert box.exec(["cat", f"/tmp/{name}"], timeout=10).stdout == "kept\n"
    assert not Path("/tmp", name).exists()
    assert Path(box.tmp_path, name).read_text() == "kept\n"
    box.close()
    assert not Path(box.tmp_path).exists()


def test_put_file_refuses_paths_outside_the_writable_places(open_local) -> None:
    box = open_local()
    with pytest.raises(PermissionError, match="outside the sandbox"):
        box.put_file("/etc/ka-should-not-exist", b"x")
    box.put_file(f"{box.cache_path}/ok/file", b"x")
    assert Path(box.cache_path, "ok/file").read_bytes() == b"x"


def test_per_command_cgroups_are_removed(open_local) -> None:
    plan = local_module.cgroup_plan()
    if not plan.pids:
        pytest.skip(f"no writable pids cgroup here: {plan.reason}")
    box = open_local()
    box.exec(["sh", "-c", "sleep 600 & echo x"], timeout=10)
    leftovers = [
        p for parent in plan.parents.values() for p in Path(parent).glob(f"kernel-agent-{box._id}-*")
    ]
    assert leftovers == []


@pytest.mark.skipif(os.geteuid() != 0, reason="checks what root gets without a pids cgroup")
def test_without_a_pids_cgroup_root_gets_no_fork_bomb_limit_and_is_told(open_local, no_cgroups: None) -> None:
    box = open_local(pids_limit=64)
    assert box.isolation().processes is None
    assert "RLIMIT_NPROC never binds root" in box.describe()
    # No bomb here: unlimited, it would exhaust the machine's pids for every other process.


@pytest.mark.skipif(
    os.geteuid() == 0, reason="RLIMIT_NPROC never binds root; run as another user to check it"
)
def test_rlimit_nproc_fallback_contains_a_fork_bomb(open_local, no_cgroups: None) -> None:
    box = open_local(pids_limit=64)
    assert (box.isolation().processes or "").startswith("RLIMIT_NPROC")
    marker = f"fork-bomb-{uuid.uuid4().hex[:8]}"
    result = box.exec(["sh", "-c", "f() { f | f & }; f; sleep 30", marker], timeout=5)
    assert not result.ok and "Cannot fork" in result.stderr
    assert wait_until_gone(marker) == []
    assert box.exec(["echo", "next"], timeout=10).ok


def test_rlimit_as_fallback_limits_memory_without_a_gpu(open_local, no_cgroups: None) -> None:
    box = open_local(memory_limit=768 * MiB, gpus=None)
    assert (box.isolation().memory or "").startswith("RLIMIT_AS")
    result = box.exec([box.python, "-c", "x = bytearray(1 << 30)"], timeout=60)
    assert not result.ok and "MemoryError" in result.stderr


def test_no_memory_limit_with_a_gpu_and_no_cgroup_is_stated(open_local, no_cgroups: None) -> None:
    box = open_local(isolation="none")
    box._gpu_nodes = ["/dev/nvidia0"]  # as on a GPU machine
    iso = box.isolation()
    assert iso.memory is None
    assert any("RLIMIT_AS breaks the CUDA driver" in note for note in iso.notes)


def test_cpu_time_limit_is_reported(open_local) -> None:
    box = open_local(cpu_time_limit=1)
    result = box.exec([box.python, "-c", "while True: pass"], timeout=30)
    assert "cpu_time" in result.limits_hit, result
    assert result.duration_s < 10


def test_file_size_limit_is_reported(open_local, workspace: Path) -> None:
    box = open_local(file_size_limit=1 * MiB)
    result = box.exec(["sh", "-c", "head -c 3000000 /dev/zero > big.bin"], timeout=30)
    assert "file_size" in result.limits_hit, result
    assert (workspace / "big.bin").stat().st_size <= 1 * MiB


def test_gpus_none_hides_the_gpu(open_local) -> None:
    box = open_local(gpus=None)
    shown = box.exec(
        ["sh", "-c", 'echo "[$CUDA_VISIBLE_DEVICES]"; ls /dev | grep -c nvidia || true'], timeout=10
    )
    assert shown.stdout.splitlines()[0] == "[]"
    if box._bwrap:
        assert shown.stdout.splitlines()[1] == "0"


@pytest.mark.gpu
def test_gpu_runs_inside_the_local_sandbox(open_local) -> None:
    box = open_local()
    code = "import torch; x = torch.arange(1000, device='cuda'); print(int(x.sum()))"
    result = box.exec([box.python, "-c", code], timeout=300)
    assert result.ok, result.stderr[-2000:]
    assert result.stdout.strip() == "499500"


@pytest.mark.gpu
def test_gpu_is_invisible_with_gpus_none(open_local) -> None:
    box = open_local(gpus=None)
    result = box.exec([box.python, "-c", "import torch; print(torch.cuda.is_available())"], timeout=300)
    assert result.stdout.strip() == "False"


def test_without_prlimit_the_limits_still_apply(open_local, workspace: Path) -> None:
    box = open_local(file_size_limit=1 * MiB)
    box._prlimit = None  # as on a machine without util-linux's prlimit: a preexec_fn sets them
    assert "preexec_fn" in box.describe()
    result = box.exec(["sh", "-c", "head -c 3000000 /dev/zero > big.bin"], timeout=30)
    assert "file_size" in result.limits_hit, result
    if local_module.cgroup_plan().pids:
        bomb = box.exec(["sh", "-c", "f() { f | f & }; f; sleep 30"], timeout=3)
        assert "pids" in bomb.limits_hit


def test_private_tmp_dirs_of_dead_harnesses_are_removed(open_local, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = Path(tempfile.mkdtemp(prefix=f"kernel-agent-tmp-{dead.pid}-"))
    alive = Path(tempfile.mkdtemp(prefix=f"kernel-agent-tmp-{os.getpid()}-"))
    monkeypatch.setattr(local_module, "_stale_tmp_checked", False)
    try:
        open_local()
        assert not stale.exists() and alive.exists()
    finally:
        shutil.rmtree(stale, ignore_errors=True)
        shutil.rmtree(alive, ignore_errors=True)


@needs_bwrap
def test_the_harness_state_is_out_of_the_sandboxes_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    """Baselines, the judge's torch.compile cache and the GPU gates live beside the build cache
    sandboxes share, never in it: a sandbox sees none of the harness's state but the GPU gates
    (read-only), so a candidate can neither read nor change what the referee reads."""
    root = Path(tempfile.mkdtemp(prefix="kernel-agent-root-", dir="/var/tmp"))  # visible (not /tmp)
    try:
        monkeypatch.setenv("KERNEL_AGENT_CACHE", str(root))
        state = harness_state_dir()
        (state / "referee").mkdir(parents=True)
        (state / "referee" / "baselines.json").write_text("{}")
        workspace = root / "ws"
        workspace.mkdir()
        with LocalSandbox(workspace=workspace) as box:
            assert Path(box.cache_path) == default_cache_dir().resolve()
            assert not Path(box.cache_path).is_relative_to(state)
            write = box.exec(["sh", "-c", f"echo x > {state}/referee/baselines.json"], timeout=30)
            read = box.exec(["sh", "-c", f"cat {state}/referee/baselines.json"], timeout=30)
            plant = box.exec(
                ["sh", "-c", f"mkdir -p {state}/referee/inductor && touch {state}/x"], timeout=30
            )
            build = box.exec(
                ["sh", "-c", f"echo x > {box.cache_path}/built && cat {box.cache_path}/built"], timeout=30
            )
            gate = box.exec(["sh", "-c", f"ls {gpu_gate_dir()}"], timeout=30)
        assert write.returncode != 0, write
        assert read.returncode != 0 and "No such file" in read.stderr, read
        assert plant.returncode != 0, plant
        assert (state / "referee" / "baselines.json").read_text() == "{}"
        assert build.ok and build.stdout.strip() == "x", build
        assert gate.ok, gate  # the gates are visible (read-only) so the referee's workers can lock them
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _sleeping(marker: str) -> list[int]:
    """The command itself, not bwrap or setpriv with it on their command line: they arrange the
    parent-death signal before they start it, and a harness killed before that is not the case here."""
    found = []
    for pid in processes_with(marker):
        with contextlib.suppress(OSError):
            if (Path("/proc") / str(pid) / "cmdline").read_bytes().startswith(b"sleep\0"):
                found.append(pid)
    return found


HOST = """
import os, sys
from pathlib import Path
from sandbox.local import LocalSandbox

box = LocalSandbox(workspace=Path(sys.argv[1]), cache_dir=Path(sys.argv[2]), isolation=sys.argv[3], gpus=None)
box.exec(["sleep", os.environ["SLEEP_FOR"]], timeout=300)  # not in our own command line
"""


@pytest.mark.parametrize("isolation", ["none", pytest.param("bwrap", marks=needs_bwrap)])
def test_a_command_dies_with_the_harness_that_started_it(
    workspace: Path, tmp_path: Path, isolation: str
) -> None:
    """A killed batch must not leave candidates working on the GPU: each command has a session of
    its own, out of reach of the batch's process group (bwrap --die-with-parent, or setpriv's
    parent-death signal without bwrap)."""
    if isolation == "none" and shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    marker = f"{200 + uuid.uuid4().int % 10**6 / 10**6:.6f}"  # sleep's argument, unique to this test
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(workspace), str(tmp_path / "cache"), isolation],
        cwd=Path(__file__).parents[2],
        env={**os.environ, "SLEEP_FOR": marker},
    )
    try:
        deadline = time.monotonic() + 60
        while not _sleeping(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _sleeping(marker), "the command never started"
    finally:
        host.kill()
        host.wait()
    assert wait_until_gone(marker, within=10) == [], "the command outlived the harness that started it"
