"""Candidate outputs handed to the judge on the GPU (sandbox/workers/gpu/gpu_handoff.py).

Without a GPU: the socket in an exchange folder of any depth, and the judge's end refusing what
an untrusted child sends (malformed, unknown outputs, twice the same one, floods) before it
touches the GPU. On a GPU (`pytest -m gpu`): outputs made in the local sandbox (its own PID
namespace) arrive bit for bit, and a header that claims more than its buffer holds, or a
descriptor that is no GPU buffer, is refused without harming the judge."""

from __future__ import annotations

import json
import socket
import textwrap
from pathlib import Path

import pytest

import sandbox.workers.siblings  # noqa: F401  (the workers import each other by name)
from sandbox.base import WORKERS_DIR, open_sandbox
from sandbox.workers.gpu import gpu_handoff
from sandbox.workers.gpu.gpu_handoff import HandoffReceiver, listen


def deep_folder(root: Path) -> Path:
    folder = root.joinpath(*["a-rather-long-folder-name"] * 6)
    folder.mkdir(parents=True)
    assert len(str(folder / gpu_handoff.SOCKET_NAME)) > 108  # past what a socket path may be
    return folder


def test_the_socket_works_in_a_folder_deeper_than_a_socket_path(tmp_path: Path) -> None:
    folder = deep_folder(tmp_path)
    listener = listen(str(folder))
    path, fd = gpu_handoff.short_path(str(folder), gpu_handoff.SOCKET_NAME)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        client.connect(path)
        conn, _ = listener.accept()
        client.send(b"hello")
        assert conn.recv(16) == b"hello"
        conn.close()
    finally:
        client.close()
        listener.close()
        import os

        os.close(fd)


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        (b"not json", "malformed message"),
        (json.dumps({"name": "trial_0.pt"}).encode(), "malformed message"),
        (
            json.dumps({"name": "../../etc/passwd", "leaf": 0, "shape": [4], "dtype": "float32"}).encode(),
            "unknown output",
        ),
        (
            json.dumps({"name": "trial_0.pt", "leaf": -1, "shape": [4], "dtype": "float32"}).encode(),
            "unknown output",
        ),
        (
            json.dumps({"name": "trial_0.pt", "leaf": True, "shape": [4], "dtype": "float32"}).encode(),
            "unknown output",
        ),
    ],
)
def test_the_judge_refuses_malformed_messages_before_any_gpu_work(message: bytes, problem: str) -> None:
    receiver = HandoffReceiver("cuda")
    answer = receiver._take(message, [])
    assert answer == {"ok": False, "problem": problem}
    assert receiver.outputs == {}


def test_an_output_handed_over_twice_is_a_problem_not_a_replacement(monkeypatch: pytest.MonkeyPatch) -> None:
    receiver = HandoffReceiver("cuda")
    monkeypatch.setattr(receiver, "_copy", lambda *_: gpu_handoff.Received(tensor="first"))
    header = json.dumps({"name": "trial_0.pt", "leaf": 0, "shape": [4], "dtype": "float32"}).encode()
    assert receiver._take(header, [])["ok"] is True
    assert receiver._take(header, [])["ok"] is False
    entry = receiver.outputs[("trial_0.pt", 0)]
    assert entry.tensor is None and "twice" in entry.problem


def test_a_flood_of_messages_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    receiver = HandoffReceiver("cuda")
    monkeypatch.setattr(receiver, "_copy", lambda *_: gpu_handoff.Received(tensor="x"))
    monkeypatch.setattr(gpu_handoff, "MAX_MESSAGES", 3)
    answers = [
        receiver._take(
            json.dumps({"name": f"trial_{i}.pt", "leaf": 0, "shape": [1], "dtype": "float32"}).encode(), []
        )
        for i in range(5)
    ]
    assert [a["ok"] for a in answers] == [True, True, True, False, False]


def test_the_judge_serves_a_connection_and_stops_on_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = HandoffReceiver("cuda")
    monkeypatch.setattr(
        receiver, "_copy", lambda shape, dtype, fds: gpu_handoff.Received(tensor=(shape, len(fds)))
    )
    receiver.serve(listen(str(tmp_path)))
    client = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    client.connect(str(tmp_path / gpu_handoff.SOCKET_NAME))
    with open(tmp_path / "payload", "wb") as payload:
        header = {"name": "recheck_1.pt", "leaf": 2, "shape": [3, 5], "dtype": "float32"}
        socket.send_fds(client, [json.dumps(header).encode()], [payload.fileno()])
    assert json.loads(client.recv(4096)) == {"ok": True, "problem": ""}
    client.close()
    outputs = receiver.finish(timeout=5)
    assert outputs[("recheck_1.pt", 2)].tensor == ([3, 5], 1)


def test_without_a_socket_the_child_keeps_to_files() -> None:
    sender = gpu_handoff.HandoffSender(None, "cuda")
    assert sender.problem
    assert sender._connect() is None


# -- on a GPU ------------------------------------------------------------------------------------

CHILD = """
import json, socket, sys
sys.path.insert(0, {workers!r})
import siblings
import torch
import gpu_handoff

socket_path, mode = sys.argv[1], sys.argv[2]
sender = gpu_handoff.HandoffSender(socket_path, "cuda")
torch.manual_seed(1234)
if mode == "outputs":
    outputs = [
        torch.rand(3000, 700, device="cuda"),
        torch.randint(-(2**40), 2**40, (1 << 18,), device="cuda"),
        torch.rand(1024, 2048, device="cuda") > 0.5,
        torch.rand(2048, 1024, device="cuda").t(),  # not contiguous: arrives in logical order
    ]
    sent = [sender.send("trial_0.pt", i, t) for i, t in enumerate(outputs)]
    print(json.dumps({{"sent": sent, "problem": sender.problem}}))
else:
    sender._connect()
    if mode == "lying_header":
        buffer = gpu_handoff.ExportedBuffer(sender._driver, 2 << 20)
        fd = buffer.export_fd()
        header = {{"name": "trial_0.pt", "leaf": 0, "shape": [64 << 20], "dtype": "uint8"}}
    else:  # a descriptor that is no GPU buffer
        status = open("/proc/self/status", "rb")
        fd = status.fileno()
        header = {{"name": "trial_0.pt", "leaf": 0, "shape": [1 << 20], "dtype": "uint8"}}
    socket.send_fds(sender._sock, [json.dumps(header).encode()], [fd])
    print(sender._sock.recv(4096).decode())
    ok = sender.send("trial_1.pt", 0, torch.ones(1 << 20, device="cuda"))  # the judge is still fine
    print(json.dumps({{"after": ok}}))
"""


def run_child(tmp_path: Path, mode: str) -> tuple[dict, list[str]]:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD.format(workers=str(WORKERS_DIR))))
    receiver = HandoffReceiver("cuda")
    receiver.serve(listen(str(exchange)))
    box = open_sandbox("local", workspace=tmp_path)
    try:
        result = box.exec(
            [box.python, str(script), str(exchange / gpu_handoff.SOCKET_NAME), mode], timeout=120
        )
    finally:
        box.close()
    outputs = receiver.finish(timeout=10)
    assert result.ok, result.stderr[-3000:]
    return outputs, result.stdout.splitlines()


@pytest.mark.gpu
def test_outputs_made_in_the_sandbox_arrive_bit_for_bit(tmp_path: Path) -> None:
    import torch

    outputs, lines = run_child(tmp_path, "outputs")
    assert json.loads(lines[-1])["sent"] == [True] * 4
    torch.manual_seed(1234)
    expected = [
        torch.rand(3000, 700, device="cuda"),
        torch.randint(-(2**40), 2**40, (1 << 18,), device="cuda"),
        torch.rand(1024, 2048, device="cuda") > 0.5,
        torch.rand(2048, 1024, device="cuda").t(),
    ]
    for index, want in enumerate(expected):
        got = outputs[("trial_0.pt", index)].tensor
        assert got is not None, outputs[("trial_0.pt", index)].problem
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["lying_header", "not_a_gpu_buffer"])
def test_a_buffer_that_is_not_what_it_claims_is_refused(tmp_path: Path, mode: str) -> None:
    outputs, lines = run_child(tmp_path, mode)
    assert json.loads(lines[0])["ok"] is False
    refused = outputs[("trial_0.pt", 0)]
    assert refused.tensor is None and "could not take the output" in refused.problem
    assert json.loads(lines[-1]) == {"after": True}
    assert outputs[("trial_1.pt", 0)].tensor is not None
