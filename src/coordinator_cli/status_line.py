"""A live status line on stderr, for the long-running commands (`run`, `chaos --engine spark`)."""

from __future__ import annotations

import sys
import time


class StatusLine:
    """One line on stderr, rewritten in place at most once a second, led by the seconds since it started."""

    def __init__(self, min_interval_s: float = 1.0) -> None:
        self._started = self._shown = time.monotonic()
        self._min_interval_s = min_interval_s
        self._any = False

    def show(self, text: str) -> None:
        """Shows `text` unless the line was rewritten less than the interval ago."""
        now = time.monotonic()
        if self._any and now - self._shown < self._min_interval_s:
            return
        self._shown, self._any = now, True
        print(f"\r[{now - self._started:5.0f} s] {text}\033[K", end="", file=sys.stderr, flush=True)

    def end(self) -> None:
        """Ends the line (once something was shown)."""
        if self._any:
            print(file=sys.stderr)
