"""The harness's own reads and writes in folders that untrusted code can write (a workspace, the
build cache, a sandbox's /tmp, an exchange folder).

Whatever ran in the sandbox may have left links, hard links, FIFOs or device nodes there. Every
path is walked one component at a time from a directory fd, each opened with O_NOFOLLOW (folders
with O_DIRECTORY too), so a link is never followed out of the folder, even one swapped in between a
check and the use. Reads take regular files only, opened non-blocking (a FIFO never hangs the
harness) and only with one link (a hard link may be another file's name). Writes go to a fresh file
renamed over the final name, so a link or hard link there is replaced, never written through.
What is refused or skipped is a `SkippedEntry`, one line for the user, never a traceback.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Collection, Iterator
from pathlib import Path, PurePosixPath

from pydantic import BaseModel

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CHUNK = 1 << 20


class SkippedEntry(BaseModel):
    """A path the harness refused to follow, read or write, and why."""

    path: str
    reason: str

    def line(self) -> str:
        return f"{self.path}: skipped ({self.reason})"


class UnsafePathError(PermissionError):
    """A write or a required read was refused; the message is one line naming the path."""


def _parts(rel: str | PurePosixPath) -> tuple[str, ...]:
    path = PurePosixPath(rel)
    if path.is_absolute() or ".." in path.parts:
        raise UnsafePathError(f"{rel}: not a plain relative path (absolute or with '..')")
    return tuple(part for part in path.parts if part != ".")


def _describe(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    return "not a regular file"


def _entry_mode(dir_fd: int, name: str) -> int | None:
    """The entry's own mode (links not followed); None when it does not exist."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None


def _open_dir(root: Path, parts: tuple[str, ...], *, create: bool) -> int:
    """An fd of root/parts..., every component below root opened with O_NOFOLLOW."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    walked = []
    try:
        for part in parts:
            walked.append(part)
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                raise
            except OSError:  # ELOOP (a link) or ENOTDIR (a file)
                mode = _entry_mode(fd, part)
                what = _describe(mode) if mode is not None else "missing"
                raise UnsafePathError(
                    f"{'/'.join(walked)}: {what}, not a folder; the harness does not follow it"
                ) from None
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_regular(dir_fd: int, name: str, rel: str) -> int | SkippedEntry | None:
    """A read fd of a regular file with one link, else why not (None: it does not exist)."""
    mode = _entry_mode(dir_fd, name)
    if mode is None:
        return None
    if not stat.S_ISREG(mode):  # checked before opening: opening a device can act on it
        return SkippedEntry(path=rel, reason=_describe(mode))
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError:  # ELOOP: replaced by a link since the check
        return SkippedEntry(path=rel, reason="replaced by a link while being opened")
    info = os.fstat(fd)
    reason = None
    if not stat.S_ISREG(info.st_mode):
        reason = f"{_describe(info.st_mode)} (replaced while being opened)"
    elif info.st_nlink > 1:
        reason = f"a hard link ({info.st_nlink} names for one file)"
    if reason is not None:
        os.close(fd)
        return SkippedEntry(path=rel, reason=reason)
    return fd


def _read_fd(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, _CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def read_regular(
    root: Path, rel: str | PurePosixPath, skipped: list[SkippedEntry] | None = None
) -> bytes | None:
    """The bytes of root/rel if it is a regular file reached without links; else None, with the
    reason appended to `skipped` (nothing is appended when the file does not exist)."""
    parts = _parts(rel)
    shown = "/".join(parts)
    if not parts:
        raise UnsafePathError(f"{rel}: names the folder itself, not a file")
    try:
        dir_fd = _open_dir(Path(root), parts[:-1], create=False)
    except FileNotFoundError:
        return None
    except UnsafePathError as exc:
        _note(skipped, shown, str(exc).split(": ", 1)[1])
        return None
    try:
        opened = _open_regular(dir_fd, parts[-1], shown)
    finally:
        os.close(dir_fd)
    if not isinstance(opened, int):
        if opened is not None and skipped is not None:
            skipped.append(opened)
        return None
    try:
        return _read_fd(opened)
    finally:
        os.close(opened)


def read_text(root: Path, rel: str | PurePosixPath, skipped: list[SkippedEntry] | None = None) -> str | None:
    data = read_regular(root, rel, skipped)
    return None if data is None else data.decode("utf-8", errors="replace")


def _note(skipped: list[SkippedEntry] | None, path: str, reason: str) -> None:
    if skipped is not None:
        skipped.append(SkippedEntry(path=path, reason=reason))


def iter_regular_files(
    root: Path,
    subdir: str | PurePosixPath = ".",
    suffixes: Collection[str] | None = None,
    skipped: list[SkippedEntry] | None = None,
    exclude: Collection[str] = (),
) -> Iterator[str]:
    """Relative paths (posix, from root) of the regular files under root/subdir, sorted, never
    descending into a linked folder. `suffixes` filters by ending; `exclude` names relative paths
    and bare names (e.g. "__pycache__") left out without a note. Links, FIFOs, sockets and devices
    go to `skipped`."""
    start = _parts(subdir)
    try:
        fd = _open_dir(Path(root), start, create=False)
    except FileNotFoundError:
        return
    except UnsafePathError as exc:
        _note(skipped, "/".join(start), str(exc).split(": ", 1)[1])
        return
    yield from _walk(fd, start, suffixes, skipped, exclude)


def _walk(
    fd: int,
    prefix: tuple[str, ...],
    suffixes: Collection[str] | None,
    skipped: list[SkippedEntry] | None,
    exclude: Collection[str],
) -> Iterator[str]:
    try:
        names = sorted(os.listdir(fd))
        for name in names:
            rel = "/".join((*prefix, name))
            if name in exclude or rel in exclude:
                continue
            mode = _entry_mode(fd, name)
            if mode is None:
                continue
            if stat.S_ISDIR(mode):
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    _note(skipped, rel, "replaced by a link while being opened")
                    continue
                yield from _walk(child, (*prefix, name), suffixes, skipped, exclude)
            elif not stat.S_ISREG(mode):
                _note(skipped, rel, _describe(mode))
            elif suffixes is None or any(name.endswith(suffix) for suffix in suffixes):
                yield rel
    finally:
        os.close(fd)


def write_file(root: Path, rel: str | PurePosixPath, data: bytes, mode: int = 0o644) -> None:
    """Write root/rel, creating its folders; a link, hard link, FIFO or device at rel is replaced by
    a fresh regular file (written aside, then renamed over it). Raises UnsafePathError when a folder
    on the way is a link or rel is a folder."""
    parts = _parts(rel)
    if not parts:
        raise UnsafePathError(f"{rel}: names the folder itself, not a file")
    dir_fd = _open_dir(Path(root), parts[:-1], create=True)
    name = parts[-1]
    scratch = f".{name}.kernel-agent-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        current = _entry_mode(dir_fd, name)
        if current is not None and stat.S_ISDIR(current):
            raise UnsafePathError(f"{'/'.join(parts)}: a folder is where a file is to be written; remove it")
        fd = os.open(
            scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd
        )
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.rename(scratch, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(scratch, dir_fd=dir_fd)
        raise
    finally:
        os.close(dir_fd)


def remove_file(root: Path, rel: str | PurePosixPath) -> None:
    """Remove the entry root/rel (a link itself, never its target); folders on the way are not
    followed when they are links. Missing is fine."""
    parts = _parts(rel)
    try:
        dir_fd = _open_dir(Path(root), parts[:-1], create=False)
    except FileNotFoundError:
        return
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(parts[-1], dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def copy_tree_regular(src_root: Path, dest: Path, exclude: Collection[str] = ()) -> list[SkippedEntry]:
    """Copy the regular files under src_root into dest (made if missing), keeping their permission
    bits (without set-id bits); links, hard links, FIFOs, sockets and devices are skipped and
    returned. `exclude` as in iter_regular_files."""
    skipped: list[SkippedEntry] = []
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for rel in iter_regular_files(src_root, ".", None, skipped, exclude):
        parts = _parts(rel)
        try:
            dir_fd = _open_dir(Path(src_root), parts[:-1], create=False)
        except (FileNotFoundError, UnsafePathError):
            skipped.append(SkippedEntry(path=rel, reason="its folder changed while being copied"))
            continue
        try:
            opened = _open_regular(dir_fd, parts[-1], rel)
        finally:
            os.close(dir_fd)
        if not isinstance(opened, int):
            if opened is not None:
                skipped.append(opened)
            continue
        try:
            data, bits = _read_fd(opened), stat.S_IMODE(os.fstat(opened).st_mode) & 0o777
        finally:
            os.close(opened)
        write_file(dest, rel, data, bits)
    return skipped
