"""One writer per output: a lock beside every file a command writes (a log, a table, a page).

The lock is an advisory `flock` on `.NAME.lock` in the output's folder, which holds the
holder's pid. It stays put while the output itself is replaced (a whole-file write renames
a new file onto the path), so a second writer is refused whether it writes in place or
through a temporary file: `OutputBusy` names the holder's pid. The kernel releases the
lock of a process that dies, so a killed writer never blocks the next one; the holder
removes the lock file when it is done. One process may take the same lock again (a sweep
holds its table's lock and saves it whole many times).
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rolloutlog.events.errors import LogError

_HELD: dict[Path, int] = {}  # lock path -> how many times this process holds it


class OutputBusy(LogError):
    """Another process writes this output now; `pid` is its process id (None if unknown)."""

    def __init__(self, path: Path, pid: int | None) -> None:
        super().__init__(busy(path, _holder(pid)))
        self.path = path
        self.pid = pid
        self.reason = busy_reason(_holder(pid))  # the line without the path, for a caller
        # that names the path already (`--plot PATH: ...`)


def busy(path: str | os.PathLike[str], holder: str) -> str:
    """The one line that refuses a second writer of `path`, naming its `holder`."""
    return f"{os.fspath(path)}: {busy_reason(holder)}"


def busy_reason(holder: str) -> str:
    """Why a second writer is refused, naming the `holder` (`process 1234`)."""
    return (
        f"{holder} is writing it (one writer per output); wait for it to end or choose another path"
    )


def lock_path(path: Path) -> Path:
    """The lock file of the output `path`."""
    return path.with_name(f".{path.name}.lock")


@contextmanager
def holding(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the output `path`'s lock for the block, or raise `OutputBusy` at once."""
    lock = lock_path(Path(os.path.abspath(path)))
    if lock in _HELD:
        _HELD[lock] += 1
        try:
            yield
        finally:
            _HELD[lock] -= 1
        return
    fd = _acquire(lock, Path(path))
    _HELD[lock] = 1
    try:
        yield
    finally:
        del _HELD[lock]
        lock.unlink(missing_ok=True)  # before the unlock: a waiter then retries a new file
        os.close(fd)


def writer_of(path: str | os.PathLike[str]) -> str | None:
    """Which other process writes `path` now (`process 1234`), or None when none does: a
    reader's question, whether the log it reads is still being written. This process's
    own hold is not such a writer (it reads what it wrote, as `train` reports its run)."""
    lock = lock_path(Path(os.path.abspath(path)))
    if lock in _HELD:
        return None
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _holder(_pid_in(fd))
    finally:
        os.close(fd)
    return None


def _holder(pid: int | None) -> str:
    return "another process" if pid is None else f"process {pid}"


def _acquire(lock: Path, path: Path) -> int:
    """Open and lock `lock`, write our pid in it; retried while a releasing holder removes
    the file under us (the lock must be on the file that the path names)."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            pid = _pid_in(fd)
            os.close(fd)
            if error.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                raise
            raise OutputBusy(path, pid) from None
        try:
            current = os.stat(lock).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(fd).st_ino:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
    except OSError:
        lock.unlink(missing_ok=True)
        os.close(fd)
        raise
    return fd


def _pid_in(fd: int) -> int | None:
    """The pid a lock file holds (None while its holder has not written it yet)."""
    try:
        text = os.pread(fd, 32, 0).decode().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None
