"""An undo journal: what one request changes in its group, so that a handler that raises changes nothing.

Theory of operation (Kafka's coordinator does the same with its timeline data structures). While a
request is applied, the group has a `Journal`: the group's attributes are saved when it starts (scalars
by value, containers by reference), and every change to a container's contents or to a member records
its before-image as it happens (`ClassicGroup.put`, `pop`, `clear`, `changing`; the timers
record their own). A container a later change adds to the group must go through those too. Committing
drops the journal; undoing replays the before-images backwards. Both cost O(what the request changed),
so a request does no work proportional to its group's size and keeps nothing alive after it (no
garbage-collector pressure).

Dicts whose order is part of the group (members: join order; pending ids; members expected to sync) give
every entry a rank that only grows; a key removed and put back by an undo goes to the end, so those
dicts are sorted by rank again after an undo. Undoing is rare: it is allowed to cost O(n log n).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MISSING: Any = object()  # "the key was absent": the before-image of a key a request added
CLEARED: Any = object()  # "the whole dict was cleared": its before-image is a copy
RESCHEDULED: Any = object()  # "the timer was moved in place": its before-image is (deadline, seq, payload)


class Journal:
    """The before-images of one request's changes, newest last."""

    __slots__ = ("attributes", "changes_length", "entries", "members", "out_length", "reorder", "timer_seq")

    def __init__(self, attributes: tuple[Any, ...], out_length: int, timer_seq: int, changes_length: int = 0) -> None:
        self.attributes = attributes  # the group's fields at the start (declared.Declaration.before_image)
        self.out_length = out_length  # the answers and the offset changes the request appended go
        self.changes_length = changes_length
        self.timer_seq = timer_seq
        # (dict, key or CLEARED, old value or copy), or (timer, RESCHEDULED, its old fields)
        self.entries: list[tuple[Any, Any, Any]] = []
        self.members: list[tuple[Any, tuple[Any, ...]]] = []  # (member, its mutable fields before)
        self.reorder: dict[int, tuple[dict[Any, Any], Callable[[Any], Any]]] = {}

    def undo_entries(self) -> None:
        """Puts every recorded dict back, newest change first, then restores each dict's order."""
        for container, key, old in reversed(self.entries):
            if key is CLEARED:
                container.clear()
                container.update(old)
            elif key is RESCHEDULED:
                container.deadline, container.seq, container.payload = old
            elif old is MISSING:
                container.pop(key, None)
            else:
                container[key] = old
        for container, rank in self.reorder.values():
            items = sorted(container.items(), key=rank)
            container.clear()
            container.update(items)
