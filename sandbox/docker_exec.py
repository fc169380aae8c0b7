"""One command inside a running container: `docker exec` has no timeout, so it is wrapped.

Inside, a small shell script runs the command under `timeout -s KILL`, kills its process group
when it ends and SIGKILLs orphans it left behind (processes re-parented to the container's
init, except the keep-alive). Outside, the caller reads the exec's multiplexed stream with its
own deadline and a byte cap, so a hung daemon or a command that ignores everything cannot hold
the harness.
"""

from __future__ import annotations

import contextlib
import io
import socket
import struct
import tarfile
import threading
import time
from pathlib import PurePosixPath
from typing import Any

from sandbox.base import CappedBuffer

# $1 timeout seconds, $2 keep-alive pid (empty: do not reap orphans), then the command.
WRAPPER = r"""
t=$1; keep=$2; shift 2
exec 3<&0
timeout -s KILL "$t" "$@" <&3 3<&- &
p=$!
exec 3<&-
wait "$p"; rc=$?
kill -9 -"$p" 2>/dev/null
if [ -n "$keep" ]; then
  for d in /proc/[0-9]*; do
    q=${d#/proc/}
    if [ "$q" = 1 ] || [ "$q" = "$keep" ] || [ "$q" = $$ ]; then continue; fi
    while read -r k v; do
      if [ "$k" = PPid: ]; then [ "$v" = 1 ] && kill -9 "$q" 2>/dev/null; break; fi
    done < "$d/status" 2>/dev/null
  done
fi
exit $rc
"""

_HEADER = struct.Struct(">BxxxL")


class ExecStream:
    """Reads one exec's stdout/stderr frames (Docker's 8-byte-header multiplexing, tty off)."""

    def __init__(self, sock: Any, cap: int) -> None:
        # docker-py hands back a SocketIO over a unix socket, or the socket itself.
        self.sock: socket.socket = getattr(sock, "_sock", sock)
        self.handle = sock
        self.out = CappedBuffer(cap)
        self.err = CappedBuffer(cap)

    def send_stdin(self, data: bytes | None) -> threading.Thread | None:
        """Writes stdin from a thread (so a command that prints before reading cannot deadlock
        us), then half-closes the connection so the command sees end of file."""

        def write() -> None:
            try:
                if data:
                    self.sock.sendall(data)
                self.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

        if data is None:
            return None
        thread = threading.Thread(target=write, daemon=True, name="sandbox-stdin")
        thread.start()
        return thread

    def read_until(self, deadline: float) -> bool:
        """Read frames until the stream ends (True) or the deadline passes (False)."""
        pending = b""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.sock.settimeout(min(remaining, 60.0))
            try:
                chunk = self.sock.recv(1 << 16)
            except TimeoutError:
                continue
            except OSError:
                return True
            if not chunk:
                return True
            pending += chunk
            while len(pending) >= _HEADER.size:
                kind, size = _HEADER.unpack_from(pending)
                if len(pending) < _HEADER.size + size:
                    break
                payload = pending[_HEADER.size : _HEADER.size + size]
                pending = pending[_HEADER.size + size :]
                (self.err if kind == 2 else self.out).feed(payload)

    def close(self) -> None:
        for closable in (self.handle, self.sock):
            with contextlib.suppress(OSError):
                closable.close()


def tar_one_file(relative: PurePosixPath, content: bytes, uid: int, gid: int) -> bytes:
    """A tar holding `relative` (and its parent folders) owned by uid:gid, for put_archive."""
    buf = io.BytesIO()
    now = int(time.time())
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for parent in reversed(relative.parents[:-1]):
            info = tarfile.TarInfo(str(parent))
            info.type, info.mode, info.uid, info.gid, info.mtime = tarfile.DIRTYPE, 0o755, uid, gid, now
            tar.addfile(info)
        info = tarfile.TarInfo(str(relative))
        info.size, info.mode, info.uid, info.gid, info.mtime = len(content), 0o644, uid, gid, now
        tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def untar_one_file(archive: bytes) -> bytes | None:
    """The first member of a get_archive tar; None when it is not a regular file."""
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        member = tar.next()
        extracted = tar.extractfile(member) if member and member.isfile() else None
        return extracted.read() if extracted else None
