"""The Sandbox contract, run against every backend (local, and docker against the real daemon):
commands, files, and the fault list (fork bomb, stdout flood, writes outside the workspace, the
host's keys, the network, SIGTERM ignored, a hang), each contained and reported, after which the
next command works."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sandbox.base import OUTPUT_CAP_BYTES, Sandbox, SandboxError
from tests.sandbox.conftest import wait_until_gone

# How long past its timeout a killed command may take to come back (docker: exec round trips).
SLACK = {"local": 2.0, "docker": 12.0}


def needs_isolation(box: Sandbox) -> None:
    """Skip, saying why, where the local sandbox runs without bubblewrap: it then enforces no
    filesystem isolation and hides no host process, and says so itself (`agent sandbox info`)."""
    if getattr(box, "_bwrap", True) is False:
        pytest.skip(
            "bubblewrap is not installed (apt-get install bubblewrap): the local sandbox runs without isolation"
        )


def assert_still_works(box: Sandbox) -> None:
    again = box.exec(["sh", "-c", "echo still-here"], timeout=30)
    assert again.ok, again
    assert again.stdout.strip() == "still-here"


# -- the basic contract ---------------------------------------------------------------------------


def test_runs_a_command_and_captures_both_streams(sandbox: Sandbox) -> None:
    result = sandbox.exec(["sh", "-c", "echo out; echo err >&2"], timeout=30)
    assert (result.returncode, result.stdout, result.stderr) == (0, "out\n", "err\n")
    assert result.ok and not result.timed_out and not result.truncated


def test_a_failing_command_is_reported_not_raised(sandbox: Sandbox) -> None:
    result = sandbox.exec(["sh", "-c", "exit 7"], timeout=30)
    assert result.returncode == 7 and not result.ok
    assert result.describe_failure() == "exited with status 7"
    missing = sandbox.exec(["no-such-command-here"], timeout=30)
    assert missing.returncode != 0 and not missing.ok


def test_stdin_cwd_and_env(sandbox: Sandbox) -> None:
    assert sandbox.exec(["cat"], timeout=30, stdin=b"fed through stdin").stdout == "fed through stdin"
    assert sandbox.exec(["pwd"], timeout=30).stdout.strip() == sandbox.workspace_path
    sandbox.exec(["mkdir", "-p", "sub"], timeout=30)
    assert (
        sandbox.exec(["pwd"], timeout=30, cwd=f"{sandbox.workspace_path}/sub").stdout.strip().endswith("/sub")
    )
    shown = sandbox.exec(["sh", "-c", 'echo "$KA_VALUE"'], timeout=30, env={"KA_VALUE": "passed"})
    assert shown.stdout.strip() == "passed"


def test_put_and_get_files(sandbox: Sandbox, workspace: Path) -> None:
    path = f"{sandbox.workspace_path}/a/b/data.bin"
    payload = bytes(range(256)) * 10
    sandbox.put_file(path, payload)
    assert sandbox.get_file(path) == payload
    assert (workspace / "a/b/data.bin").read_bytes() == payload  # the workspace is the host folder
    assert sandbox.exec(["wc", "-c", path], timeout=30).stdout.split()[0] == str(len(payload))
    sandbox.exec(["sh", "-c", "printf made-inside > /tmp/inside.txt"], timeout=30)
    assert sandbox.get_file("/tmp/inside.txt") == b"made-inside"
    with pytest.raises(FileNotFoundError):
        sandbox.get_file(f"{sandbox.workspace_path}/missing.txt")


def test_cache_is_writable_and_workers_are_readonly(sandbox: Sandbox) -> None:
    needs_isolation(sandbox)
    wrote = sandbox.exec(
        ["sh", "-c", f"echo x > {sandbox.cache_path}/probe && cat {sandbox.cache_path}/probe"], timeout=30
    )
    assert wrote.ok, wrote
    assert sandbox.exec(["ls", sandbox.workers_path], timeout=30).ok
    assert not sandbox.exec(["sh", "-c", f"echo x > {sandbox.worker('injected.py')}"], timeout=30).ok


@pytest.mark.slow
def test_python_with_torch_runs(sandbox: Sandbox) -> None:
    result = sandbox.exec([sandbox.python, "-c", "import torch; print(torch.__version__)"], timeout=120)
    assert result.ok, result
    assert result.stdout.strip() == __import__("torch").__version__


def test_close_is_idempotent_and_exec_after_close_says_so(make_sandbox: Callable[..., Sandbox]) -> None:
    box = make_sandbox()
    box.close()
    box.close()
    with pytest.raises(SandboxError, match="after close"):
        box.exec(["true"], timeout=10)


def test_describe_states_the_isolation(sandbox: Sandbox) -> None:
    line = sandbox.describe()
    assert line.startswith(f"{sandbox.kind} sandbox")
    for topic in ("filesystem:", "network:", "fork bombs:", "memory:", "env:", "output cap:"):
        assert topic in line


# -- faults -----------------------------------------------------------------------------------------


def test_fork_bomb_is_contained(sandbox: Sandbox, kind: str) -> None:
    marker = f"fork-bomb-{uuid.uuid4().hex[:8]}"
    result = sandbox.exec(["sh", "-c", "f() { f | f & }; f; sleep 30", marker], timeout=5)
    assert result.duration_s < 5 + SLACK[kind]
    assert "pids" in result.limits_hit, result
    assert not result.ok
    assert wait_until_gone(marker) == [], "fork bomb processes outlived the command"
    assert_still_works(sandbox)


def test_stdout_flood_is_capped(sandbox: Sandbox, kind: str) -> None:
    result = sandbox.exec(["yes", "flood"], timeout=3)
    assert result.timed_out and result.truncated
    assert "output" in result.limits_hit
    assert OUTPUT_CAP_BYTES <= len(result.stdout) < OUTPUT_CAP_BYTES + 200
    assert "more bytes dropped" in result.stdout[-200:]
    assert result.duration_s < 3 + SLACK[kind]
    assert_still_works(sandbox)


def test_a_finite_flood_keeps_the_head(sandbox: Sandbox) -> None:
    result = sandbox.exec(["sh", "-c", "echo first; head -c 20000000 /dev/zero | tr '\\0' a"], timeout=60)
    assert result.ok and result.truncated and result.stdout.startswith("first\naaaa")


def test_writes_outside_the_workspace_fail(sandbox: Sandbox, tmp_path: Path) -> None:
    needs_isolation(sandbox)
    tag = uuid.uuid4().hex[:8]
    refused = [f"/etc/ka-probe-{tag}", f"/usr/ka-probe-{tag}", f"/var/tmp/ka-probe-{tag}"]
    elsewhere = [str(tmp_path / f"outside-{tag}"), str(Path.home() / f"ka-probe-{tag}")]
    script = 'for p; do if echo x > "$p" 2>/dev/null; then echo "WROTE $p"; fi; done; echo done'
    result = sandbox.exec(["sh", "-c", script, "sh", *refused, *elsewhere], timeout=30)
    assert result.stdout.strip().endswith("done"), result
    for path in refused:
        assert f"WROTE {path}" not in result.stdout
    for path in refused + elsewhere:
        assert not Path(path).exists(), f"{path} was written on the host"
    assert sandbox.exec(["sh", "-c", "echo ok > inside.txt"], timeout=30).ok  # the workspace is writable
    assert_still_works(sandbox)


def test_host_files_outside_the_view_are_not_there(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """What the sandbox needs is visible; the machine's secrets, the user's folders and the
    harness's own state are not (sandbox/README.md: what untrusted code can read)."""
    needs_isolation(sandbox)
    tag = uuid.uuid4().hex
    state = tmp_path_factory.mktemp("harness-state", numbered=True)
    (state / "baselines.json").write_text(f"state-{tag}")
    home_secret = Path.home() / f".ka-secret-{tag}"
    var_secret = Path(f"/var/tmp/ka-secret-{tag}")
    try:
        for path in (home_secret, var_secret):
            path.write_text(f"secret-{tag}")
        probes = [
            str(home_secret),
            str(var_secret),
            str(state / "baselines.json"),
            "/etc/shadow",
            "/etc/gshadow",
        ]
        script = 'for p; do cat "$p" 2>/dev/null; done; ls /root /home 2>/dev/null; echo done'
        result = sandbox.exec(["sh", "-c", script, "sh", *probes], timeout=30)
        assert result.stdout.strip().endswith("done"), result
        assert tag not in result.stdout
        shadow = Path("/etc/shadow")  # the host's; a container may show its image's own
        if shadow.is_file() and shadow.read_text(errors="replace").strip():
            assert shadow.read_text(errors="replace").strip() not in result.stdout
        assert sandbox.exec(["python", "-c", "import torch"], timeout=120).ok  # what it needs is there
    finally:
        for path in (home_secret, var_secret):
            path.unlink(missing_ok=True)


@pytest.fixture
def host_process_with_key() -> Iterator[str]:
    """A host process whose environment holds a secret, as the harness's own would."""
    secret = f"sk-test-{uuid.uuid4().hex}"
    proc = subprocess.Popen(["sleep", "60"], env={"OPENAI_API_KEY": secret, "PATH": "/usr/bin:/bin"})
    yield secret
    proc.kill()
    proc.wait()


def test_host_keys_do_not_leak(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, host_process_with_key: str
) -> None:
    needs_isolation(sandbox)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-from-the-harness")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-test")
    script = 'env; for f in /proc/[0-9]*/environ; do tr "\\0" "\\n" < "$f"; done 2>/dev/null; true'
    result = sandbox.exec(["sh", "-c", script], timeout=30, env={"KA_CONTROL": "seen"})
    assert result.ok, result
    assert "KA_CONTROL=seen" in result.stdout  # the scan did read environments
    for leaked in ("sk-test-from-the-harness", "sk-ant-test", "hf_test", "aws-test", host_process_with_key):
        assert leaked not in result.stdout


@pytest.fixture
def listener() -> Iterator[tuple[int, list[str]]]:
    server = socket.socket()
    server.bind(("0.0.0.0", 0))
    server.listen()
    server.settimeout(0.2)
    accepted: list[str] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, peer = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted.append(str(peer))
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()


def host_addresses() -> list[str]:
    shown = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False).stdout.split()
    return ["127.0.0.1", *(a for a in shown if ":" not in a)]


def test_network_connections_fail(sandbox: Sandbox, listener: tuple[int, list[str]]) -> None:
    port, accepted = listener
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass  # the listener works from the host
    deadline = time.monotonic() + 5
    while len(accepted) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(accepted) == 1
    probe = (
        "import socket, sys\n"
        "for host in sys.argv[2:]:\n"
        "    try:\n"
        "        socket.create_connection((host, int(sys.argv[1])), timeout=3).close()\n"
        "        print('CONNECTED', host)\n"
        "    except OSError as exc:\n"
        "        print('refused', host, type(exc).__name__)\n"
    )
    hosts = host_addresses()
    result = sandbox.exec([sandbox.python, "-c", probe, str(port), *hosts], timeout=60)
    assert result.ok, result
    assert result.stdout.count("refused") == len(hosts), result.stdout
    assert "CONNECTED" not in result.stdout
    time.sleep(0.3)
    assert len(accepted) == 1, f"the sandbox reached the host listener: {accepted}"


def test_a_process_ignoring_sigterm_is_killed(sandbox: Sandbox, kind: str) -> None:
    marker = f"no-term-{uuid.uuid4().hex[:8]}"
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('armed', flush=True); time.sleep(60)"
    result = sandbox.exec([sandbox.python, "-c", code, marker], timeout=3)
    assert result.timed_out and result.stdout.strip() == "armed"
    assert result.duration_s < 3 + SLACK[kind]
    assert result.describe_failure().startswith("timed out")
    assert wait_until_gone(marker) == []
    assert_still_works(sandbox)


def test_a_hang_times_out(sandbox: Sandbox, kind: str) -> None:
    start = time.monotonic()
    result = sandbox.exec(["sleep", "600"], timeout=1)
    assert result.timed_out and not result.ok and result.returncode < 0
    assert time.monotonic() - start < 1 + SLACK[kind]
    assert_still_works(sandbox)


def test_stragglers_die_with_the_command(sandbox: Sandbox, workspace: Path) -> None:
    script = (
        "(sleep 1; touch late-child) >/dev/null 2>&1 &\n"
        "setsid sh -c 'sleep 1; touch late-session' >/dev/null 2>&1 &\n"
        "echo started"
    )
    result = sandbox.exec(["sh", "-c", script], timeout=30)
    assert result.ok and result.stdout.strip() == "started"
    time.sleep(2.0)
    assert not (workspace / "late-child").exists(), "a background child outlived the command"
    assert not (workspace / "late-session").exists(), "a setsid daemon outlived the command"


def test_a_straggler_holding_the_pipes_does_not_hold_the_harness(sandbox: Sandbox, kind: str) -> None:
    result = sandbox.exec(["sh", "-c", "sleep 600 & echo parent-done"], timeout=60)
    assert result.ok and result.stdout.strip() == "parent-done"
    assert result.duration_s < 1 + SLACK[kind]


def test_memory_limit_kills_a_hog(make_sandbox: Callable[..., Sandbox], kind: str) -> None:
    box = make_sandbox(**({"mem_limit": "512m"} if kind == "docker" else {"memory_limit": 512 << 20}))
    hog = "x = b'\\x01' * (1024 << 20); print('allocated', len(x))"
    result = box.exec([box.python, "-c", hog], timeout=120)
    assert not result.ok and "allocated" not in result.stdout
    assert "memory" in result.limits_hit or "MemoryError" in result.stderr, result
    assert_still_works(box)


@pytest.mark.slow
def test_real_cuda_extension_compiles(sandbox: Sandbox, workspace: Path) -> None:
    """nvcc, g++ and ninja through torch.utils.cpp_extension.load, writing only where allowed."""
    (workspace / "kernel.cu").write_text(
        "#include <cuda_runtime.h>\n"
        "__global__ void fill(int* out, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = i; }\n"
        "int launch_fill(int n) {\n"
        "  int* d; if (cudaMalloc(&d, n * sizeof(int)) != cudaSuccess) return -1;\n"
        "  fill<<<(n + 255) / 256, 256>>>(d, n); int last = -1;\n"
        "  cudaMemcpy(&last, d + n - 1, sizeof(int), cudaMemcpyDeviceToHost); cudaFree(d); return last; }\n"
    )
    (workspace / "bind.cpp").write_text(
        "#include <pybind11/pybind11.h>\n"
        "int launch_fill(int n);\n"
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
        '  m.def("launch_fill", &launch_fill); m.def("answer", [] { return 42; }); }\n'
    )
    ws = sandbox.workspace_path
    script = (
        "import os, torch\n"
        "from torch.utils.cpp_extension import load\n"
        f"os.makedirs('{ws}/build', exist_ok=True)\n"
        f"m = load('ka_probe', ['{ws}/bind.cpp', '{ws}/kernel.cu'], build_directory='{ws}/build')\n"
        "print('answer', m.answer())\n"
        "print('gpu', m.launch_fill(1000) if torch.cuda.is_available() else 'none')\n"
    )
    env = {"CUDA_HOME": "/usr/local/cuda", "TORCH_CUDA_ARCH_LIST": "9.0", "MAX_JOBS": "2"}
    result = sandbox.exec([sandbox.python, "-c", script], timeout=600, env=env)
    assert result.ok, result.stderr[-3000:]
    assert "answer 42" in result.stdout
    assert (workspace / "build" / "ka_probe.so").exists()
    if "gpu none" not in result.stdout:
        assert "gpu 999" in result.stdout


def test_a_command_that_closes_its_output_still_runs_to_the_end(sandbox: Sandbox, workspace: Path) -> None:
    result = sandbox.exec(["sh", "-c", "exec >/dev/null 2>&1; sleep 1; touch finished"], timeout=30)
    assert result.ok and (workspace / "finished").exists()
    hung = sandbox.exec(["sh", "-c", "exec >/dev/null 2>&1; sleep 600"], timeout=1)
    assert hung.timed_out
