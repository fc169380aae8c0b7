"""Candidate outputs handed to the judge on the GPU (torch + stdlib only).

KernelBench's full-size level-1 outputs are 6.4 GB each; five trials and two rechecks written to
disk and read back took minutes. Instead the candidate child copies each large output into a
CUDA virtual-memory allocation it can export as a file descriptor (`cuMemCreate` with POSIX-fd
handles), and passes that descriptor over a Unix socket in the exchange folder (`SCM_RIGHTS`).
The judge imports it, copies the bytes into memory of its own (device to device, milliseconds),
answers, and the child frees its allocation. Legacy CUDA IPC handles cannot cross PID namespaces
(the sandbox has its own); a descriptor passed over a socket can, into a container too.

Trust: the judge treats every message as untrusted. It takes only names of the exchange's own
form, validates dtype, shape and size, maps the allocation at the size the header claims (the
driver refuses to map past an allocation's end), and copies into a tensor it allocated itself.
What arrives is only ever the candidate's output as of the copy; correctness is still decided by
comparing it with outputs the judge computes after the candidate has exited. The judge listens
before the candidate starts and touches the GPU only while a message asks it to, which the child
does during its trials and after its timed window, under its supervisor's shared hold on the GPU.
Outputs the child cannot hand over (no socket, a driver without fd handles) go to files as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

SOCKET_NAME = "outputs.sock"
MIN_BYTES = 1 << 20  # smaller outputs go in the output file: a message costs more than they do
CONNECT_WAIT_S = 30.0  # the judge binds before it imports torch; the child needs longer than that
REPLY_WAIT_S = 300.0
MAX_MESSAGES = 4096
MAX_HEADER = 4096
GPU_MARGIN_BYTES = 1 << 30  # left free on the GPU for the judge's own reference work
_NAME = re.compile(r"^(trial|recheck)_\d{1,4}\.pt$")

_PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
_POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_ON_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
_READ_WRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE


class HandoffError(Exception):
    """A step of the hand-off failed; the message says which, with the driver's error name."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class _AllocationProp(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", _Location),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", _AllocFlags),
    ]


class _AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class CudaDriver:
    """The few virtual-memory calls of libcuda the hand-off needs, through ctypes."""

    def __init__(self, device_index: int) -> None:
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise HandoffError(f"libcuda.so.1 cannot be loaded: {exc}") from None
        self.device = device_index
        u64, size_t, ptr = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p
        signatures: dict[str, list[Any]] = {
            "cuGetErrorName": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
            "cuMemGetAllocationGranularity": [ctypes.POINTER(size_t), ptr, ctypes.c_int],
            "cuMemCreate": [ctypes.POINTER(u64), size_t, ptr, u64],
            "cuMemAddressReserve": [ctypes.POINTER(u64), size_t, size_t, u64, u64],
            "cuMemMap": [u64, size_t, size_t, u64, u64],
            "cuMemSetAccess": [u64, size_t, ptr, size_t],
            "cuMemExportToShareableHandle": [ptr, u64, ctypes.c_int, u64],
            "cuMemImportFromShareableHandle": [ctypes.POINTER(u64), ptr, ctypes.c_int],
            "cuMemUnmap": [u64, size_t],
            "cuMemRelease": [u64],
            "cuMemAddressFree": [u64, size_t],
            "cuMemcpyDtoDAsync_v2": [u64, u64, size_t, ptr],
            "cuStreamSynchronize": [ptr],
        }
        for name, argtypes in signatures.items():
            function = getattr(self.lib, name)
            function.argtypes, function.restype = argtypes, ctypes.c_int
        self.prop = _AllocationProp(type=_PINNED, requestedHandleTypes=_POSIX_FD)
        self.prop.location = _Location(_ON_DEVICE, device_index)
        granularity = ctypes.c_size_t()
        self.check(
            self.lib.cuMemGetAllocationGranularity(ctypes.byref(granularity), ctypes.byref(self.prop), 0),
            "cuMemGetAllocationGranularity",
        )
        self.granularity = granularity.value

    def check(self, status: int, what: str) -> None:
        if status:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(status, ctypes.byref(name))
            raise HandoffError(f"{what} failed: {(name.value or b'?').decode()} ({status})")

    def padded(self, nbytes: int) -> int:
        return max(1, math.ceil(nbytes / self.granularity)) * self.granularity

    def map(self, handle: int, size: int) -> int:
        """Map `handle` at `size` bytes into a fresh address range, readable and writable here."""
        address = ctypes.c_uint64()
        self.check(
            self.lib.cuMemAddressReserve(ctypes.byref(address), size, self.granularity, 0, 0),
            "cuMemAddressReserve",
        )
        try:
            self.check(self.lib.cuMemMap(address.value, size, 0, handle, 0), "cuMemMap")
        except HandoffError:
            self.lib.cuMemAddressFree(address.value, size)
            raise
        access = _AccessDesc(location=_Location(_ON_DEVICE, self.device), flags=_READ_WRITE)
        status = self.lib.cuMemSetAccess(address.value, size, ctypes.byref(access), 1)
        if status:
            self.unmap(address.value, size)
            self.check(status, "cuMemSetAccess")
        return address.value

    def unmap(self, address: int, size: int) -> None:
        self.lib.cuMemUnmap(address, size)
        self.lib.cuMemAddressFree(address, size)

    def copy(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self.check(self.lib.cuMemcpyDtoDAsync_v2(dst, src, nbytes, ctypes.c_void_p(stream)), "cuMemcpyDtoD")
        self.check(self.lib.cuStreamSynchronize(ctypes.c_void_p(stream)), "cuStreamSynchronize")


@dataclass
class ExportedBuffer:
    """A device allocation of the child's that can leave the process as a file descriptor."""

    driver: CudaDriver
    nbytes: int
    handle: int = 0
    address: int = 0
    size: int = 0

    def __post_init__(self) -> None:
        self.size = self.driver.padded(self.nbytes)
        handle = ctypes.c_uint64()
        self.driver.check(
            self.driver.lib.cuMemCreate(ctypes.byref(handle), self.size, ctypes.byref(self.driver.prop), 0),
            "cuMemCreate",
        )
        self.handle = handle.value
        try:
            self.address = self.driver.map(self.handle, self.size)
        except HandoffError:
            self.driver.lib.cuMemRelease(self.handle)
            raise

    def export_fd(self) -> int:
        fd = ctypes.c_int(-1)
        self.driver.check(
            self.driver.lib.cuMemExportToShareableHandle(ctypes.byref(fd), self.handle, _POSIX_FD, 0),
            "cuMemExportToShareableHandle",
        )
        return fd.value

    def free(self) -> None:
        self.driver.unmap(self.address, self.size)
        self.driver.lib.cuMemRelease(self.handle)


def import_copy(driver: CudaDriver, fd: int, nbytes: int, dst: int, stream: int) -> None:
    """Copy `nbytes` from the allocation behind `fd` to `dst`; the mapping must hold that many."""
    handle = ctypes.c_uint64()
    driver.check(
        driver.lib.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd), _POSIX_FD),
        "cuMemImportFromShareableHandle",
    )
    try:
        size = driver.padded(nbytes)
        address = driver.map(handle.value, size)
        try:
            driver.copy(dst, address, nbytes, stream)
        finally:
            driver.unmap(address, size)
    finally:
        driver.lib.cuMemRelease(handle.value)


def short_path(folder: str, name: str) -> tuple[str, int]:
    """(a path to `folder/name` short enough for a Unix socket, the folder descriptor it needs
    kept open): socket paths stop at 107 bytes, exchange folders can be deeper than that."""
    fd = os.open(folder, os.O_PATH | os.O_DIRECTORY)
    return f"/proc/self/fd/{fd}/{name}", fd


class HandoffSender:
    """The child's end: hands outputs to the judge, one message and one descriptor per tensor."""

    def __init__(self, socket_path: str | None, device: str) -> None:
        self.problem = ""  # why outputs go to files instead, when they do
        self.sent = 0
        self._sock: socket.socket | None = None
        self._driver: CudaDriver | None = None
        self._closed = False
        if not socket_path or not device.startswith("cuda"):
            self.problem = "no GPU hand-off for this evaluation"
            return
        self._socket_path = socket_path
        self._device = device

    def _connect(self) -> socket.socket | None:
        if self._sock is not None or self.problem or self._closed:
            return self._sock
        import torch

        folder, name = os.path.split(self._socket_path)
        deadline = time.monotonic() + CONNECT_WAIT_S
        path, folder_fd = short_path(folder, name)
        try:
            while True:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                try:
                    sock.connect(path)
                    break
                except OSError as exc:
                    sock.close()
                    if time.monotonic() > deadline:
                        self.problem = f"the judge's socket did not answer: {exc}"
                        return None
                    time.sleep(0.05)
        finally:
            os.close(folder_fd)
        try:
            index = torch.device(self._device).index
            self._driver = CudaDriver(torch.cuda.current_device() if index is None else index)
        except HandoffError as exc:
            sock.close()
            self.problem = str(exc)
            return None
        sock.settimeout(REPLY_WAIT_S)
        self._sock = sock
        return sock

    def send(self, name: str, leaf: int, tensor: Any) -> bool:
        """Hand `tensor` over as leaf `leaf` of output file `name`; False when it must go to a file."""
        import torch

        if type(tensor) is not torch.Tensor or not tensor.is_cuda:
            return False
        nbytes = tensor.numel() * tensor.element_size()
        if nbytes < MIN_BYTES:
            return False
        sock = self._connect()
        if sock is None or self._driver is None:
            return False
        source = tensor.detach().contiguous()
        try:
            buffer = ExportedBuffer(self._driver, nbytes)
        except HandoffError as exc:
            self.problem = str(exc)
            return False
        try:
            stream = torch.cuda.current_stream(source.device).cuda_stream
            self._driver.copy(buffer.address, source.data_ptr(), nbytes, stream)
            header = {"name": name, "leaf": leaf, "shape": list(source.shape), "dtype": str(source.dtype)}
            fd = buffer.export_fd()
            try:
                socket.send_fds(sock, [json.dumps(header).encode()], [fd])
            finally:
                os.close(fd)
            reply = sock.recv(MAX_HEADER)  # the judge has its copy (or its reason) before we free ours
            if not reply:
                raise HandoffError("the judge closed the hand-off socket")
        except (HandoffError, OSError) as exc:
            self.problem = f"hand-off of {name} leaf {leaf}: {exc}"
            self.close()
            return False
        finally:
            buffer.free()
        self.sent += 1
        return True

    def close(self) -> None:
        """No more hand-offs: what is saved from now on goes to files."""
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        self._sock = None
        self._closed = True


@dataclass
class Received:
    """What the judge holds for one handed-over output: the tensor, or why it has none."""

    tensor: Any = None
    problem: str = ""
    capacity: bool = False  # the judge had no room: the referee's limit, not the candidate's fault


HandedOver = dict[tuple[str, int], Received]  # (output file name, leaf) -> what arrived


def listen(folder: str) -> socket.socket:
    """The listening socket in the exchange folder, bound by the host before the candidate starts
    (so the child never races the judge) and passed to the judge as an inherited descriptor."""
    path, folder_fd = short_path(folder, SOCKET_NAME)
    try:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(path)
        os.chmod(path, 0o777)  # a container's user may not be ours; the folder itself is private
    finally:
        os.close(folder_fd)
    listener.listen(4)
    return listener


@dataclass
class HandoffReceiver:
    """The judge's end: `serve()` takes connections on a thread from the judge's start; `finish()`
    stops it once the candidate has exited and returns what arrived."""

    device: str
    outputs: HandedOver = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    _listener: socket.socket | None = None
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _driver: CudaDriver | None = None
    _messages: int = 0
    _held_bytes: int = 0

    def serve(self, listener: socket.socket) -> None:
        listener.settimeout(0.2)
        self._listener = listener
        self._thread = threading.Thread(target=self._serve, name="gpu-handoff", daemon=True)
        self._thread.start()

    def finish(self, timeout: float = 30.0) -> HandedOver:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                self.notes.append(f"the hand-off thread was still busy after {timeout:.0f}s")
        if self._listener is not None:
            self._listener.close()
        return self.outputs

    def _serve(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(0.2)
                self._converse(conn)

    def _converse(self, conn: socket.socket) -> None:
        while True:
            try:
                data, fds, _flags, _addr = socket.recv_fds(conn, MAX_HEADER, 1)
            except TimeoutError:
                if self._stop.is_set():
                    return
                continue
            except OSError:
                return
            if not data:
                for fd in fds:
                    os.close(fd)
                return
            try:
                answer = self._take(data, fds)
            finally:
                for fd in fds:
                    os.close(fd)
            try:
                conn.sendall(json.dumps(answer).encode())
            except OSError:
                return

    def _take(self, data: bytes, fds: list[int]) -> dict[str, Any]:
        self._messages += 1
        if self._messages > MAX_MESSAGES:
            return {"ok": False, "problem": "too many outputs handed over"}
        try:
            header = json.loads(data)
            name, leaf, shape, dtype_name = header["name"], header["leaf"], header["shape"], header["dtype"]
        except (ValueError, KeyError, TypeError):
            self.notes.append("a malformed hand-off message was dropped")
            return {"ok": False, "problem": "malformed message"}
        if not (isinstance(name, str) and _NAME.match(name) and type(leaf) is int and 0 <= leaf < 1 << 16):
            self.notes.append("a hand-off message for an unknown output was dropped")
            return {"ok": False, "problem": "unknown output"}
        key = (name, leaf)
        if key in self.outputs:
            self.outputs[key] = Received(problem="the output was handed over twice")
            return {"ok": False, "problem": "handed over twice"}
        try:
            received = self._copy(shape, dtype_name, fds)
        except Exception as exc:  # an allocation that failed despite the room it saw, a driver error
            import torch

            capacity = isinstance(exc, torch.OutOfMemoryError)
            received = Received(
                problem=f"the judge could not hold the output: {type(exc).__name__}: {exc}"[:2000]
            )
            received.capacity = capacity
        self.outputs[key] = received
        return {"ok": not received.problem, "problem": received.problem}

    def _copy(self, shape: Any, dtype_name: Any, fds: list[int]) -> Received:
        import torch

        dtype = getattr(torch, str(dtype_name).removeprefix("torch."), None)
        if not isinstance(dtype, torch.dtype) or len(fds) != 1:
            return Received(problem=f"the hand-off names no tensor dtype ({dtype_name!r}) or no buffer")
        if not isinstance(shape, list) or not all(type(d) is int and 0 <= d < 1 << 40 for d in shape):
            return Received(problem="the hand-off's shape is malformed")
        nbytes = math.prod(shape) * torch.empty(0, dtype=dtype).element_size()
        device = torch.device(self.device)
        free, total = torch.cuda.mem_get_info(device)
        if nbytes + GPU_MARGIN_BYTES > free:
            return Received(
                problem=f"the judge has no room on the GPU for a {nbytes / 1e9:.2f} GB output ({free / 1e9:.2f} "
                f"GB free of {total / 1e9:.2f} GB, {self._held_bytes / 1e9:.2f} GB of outputs already held): "
                "the task is too large to judge on this GPU beside what else runs there",
                capacity=True,
            )
        try:
            with torch.cuda.device(device):
                if self._driver is None:
                    self._driver = CudaDriver(torch.cuda.current_device())
                raw = torch.empty(nbytes, dtype=torch.uint8, device=device)
                if nbytes:
                    stream = torch.cuda.current_stream(device).cuda_stream
                    import_copy(self._driver, fds[0], nbytes, raw.data_ptr(), stream)
        except HandoffError as exc:
            return Received(problem=f"the judge could not take the output from the GPU: {exc}")
        self._held_bytes += nbytes
        return Received(tensor=raw.view(dtype).reshape(shape))
