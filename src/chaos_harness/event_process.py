"""A child process that reports what it does as JSON events, a line each on stdout (the real consumers, the Kafka
Streams instances): the parent's view of its events as they come, and a wait for one."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any


class EventProcess:
    """Subclasses start their process and hand it to `_follow`."""

    _process: subprocess.Popen[str]

    def _follow(self, process: subprocess.Popen[str], name: str) -> None:
        """Read `process`'s events from its stdout, in a thread of this name, as they come."""
        self.stop_requested: float | None = None  # wall clock, seconds
        self.events: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self._process = process
        self._reader = threading.Thread(target=self._read, name=name, daemon=True)
        self._reader.start()
        self._readers = [self._reader]

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                with self._changed:
                    self.events.append(event)
                    self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[list[dict[str, Any]]], bool], timeout_s: float) -> bool:
        """Waits until `predicate(events)` holds (True) or the time is up or the process ended (False)."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not predicate(self.events):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (self._process.poll() is not None and not self._reader.is_alive()):
                    return predicate(self.events)
                self._changed.wait(min(remaining, 0.5))
            return True

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM (the process finishes what it does and closes); its exit code, -9 if it had to be killed."""
        self.stop_requested = self.stop_requested or time.time()
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
        try:
            code = self._process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return -9
        self._join_readers()
        return code

    def kill(self) -> None:
        """SIGKILL: a crash, nothing committed or closed."""
        self.stop_requested = self.stop_requested or time.time()
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait(30)
        self._join_readers()

    def _join_readers(self) -> None:
        for reader in self._readers:
            reader.join(5)
