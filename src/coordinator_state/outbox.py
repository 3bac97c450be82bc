"""What a group's events decided since the last drain, for both group types: answers and offset changes."""

from __future__ import annotations

from .envelope import Response
from .offsets import OffsetChange


class Outbox:
    """A group's `out` (answers) and `offset_changes`, moved to the caller's lists by `drain_into`."""

    __slots__ = ()
    out: list[Response]
    offset_changes: list[OffsetChange]

    def drain_into(self, responses: list[Response], offset_changes: list[OffsetChange]) -> None:
        """Moves what the events decided since the last drain to the caller's lists."""
        if self.out:
            responses += self.out
            self.out.clear()
        if self.offset_changes:
            offset_changes += self.offset_changes
            self.offset_changes.clear()
