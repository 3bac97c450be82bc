"""A file the gateway re-reads when it changes (the users file, the ACL file), and how such a file is written.

`check()` is called every `coordinator.gateway.reload.interval.ms`: when the file's modification time, size or
inode differ from the last read, it is read again; a file that no longer reads (bad line, unreadable) keeps the
last good content and logs why, so a half-edited file never locks everyone out or lets everyone in. The commands
that change these files write them atomically, so a gateway never reads half of one.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return None
    return status.st_mtime_ns, status.st_size, status.st_ino


class WatchedFile(Generic[T]):
    """The content of `path` as `load` reads it, re-read by `check` when the file changes. The first read happens
    at construction and its errors propagate (a gateway must not start with a bad file)."""

    def __init__(self, path: Path, load: Callable[[Path], T]) -> None:
        self.path = path
        self._load = load
        self._signature = _signature(path)
        self.value: T = load(path)

    def check(self) -> bool:
        """Re-reads the file if it changed; True when the content was replaced."""
        signature = _signature(self.path)
        if signature == self._signature:
            return False
        self._signature = signature
        try:
            self.value = self._load(self.path)
        except (OSError, ValueError) as exc:
            log.error("%s changed but cannot be read, keeping the previous content: %s", self.path, exc)
            return False
        log.info("%s re-read", self.path)
        return True


def write_atomically(path: Path, text: str) -> None:
    """Writes `path` as a temporary file (readable by its owner only) renamed over it, so that a reader sees the
    old content or the new, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
