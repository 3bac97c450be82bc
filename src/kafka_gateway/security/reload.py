"""A file the gateway re-reads when it changes (the users file, the ACL file).

`check()` is called every `coordinator.gateway.reload.interval.ms`: when the file's modification time, size or
inode differ from the last read, it is read again; a file that no longer reads (bad line, unreadable) keeps the
last good content and logs why, so a half-edited file never locks everyone out or lets everyone in.
"""

from __future__ import annotations

import logging
import os
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
