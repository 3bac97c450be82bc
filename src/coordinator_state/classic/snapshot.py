"""A classic group's snapshot (PROTOCOL.md section 4, SEMANTICS.md 16), derived from its declaration (data.py).
Its version grows by one at the end of every event that changed what it shows (events.end_event)."""

from __future__ import annotations

from typing import Any

from .data import GROUP, ClassicGroup


def snapshot(group: ClassicGroup) -> dict[str, Any]:
    return GROUP.snapshot(group, group)
