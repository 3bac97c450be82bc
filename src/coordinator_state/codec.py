"""A group's state as bytes for Spark's state store: JSON, versioned by `format`, add-only, no pickle.

Each format only adds fields to the one before, and this reader takes every format up to its own,
defaulting what an older one lacks; a format it does not know (a newer release's) is refused loudly,
so an older release never silently drops what it cannot read. A change of what is written is a new
format: its fields are declared with what an older state loads with (declared.py's `missing`).

- format 1: membership (SEMANTICS.md);
- format 2: + committed offsets, the time of the last state transition, the members' subscribed
  topics (docs/OFFSETS_AND_LISTING.md). A format-1 group loads with no offsets, its subscriptions
  unknown, and its last change time standing in for its last transition (never earlier than the real
  one, so no offset expires early);
- format 3: + the group's type (group_types.py; formats 1 and 2 were all classic groups), + the timers
  deferred to the group's next event (SEMANTICS.md T3a; none in formats 1 and 2).
"""

from __future__ import annotations

from typing import Any

from . import classic
from .config import EngineConfig
from .group_types import GROUP_TYPES, Group, GroupType, type_of
from .output import declared_to_json, from_json

FORMAT = 3
READABLE_FORMATS = (1, 2, 3)


class StateFormatError(ValueError):
    """Stored state this version cannot read (written by a newer, incompatible release)."""


def stored_value(group: Group) -> dict[str, Any]:
    """The JSON value of a group's stored state."""
    kind: GroupType = type_of(group)
    return {"format": FORMAT, "group_type": kind.NAME, **kind.encode(group)}


def encode_group(group: Group) -> bytes:
    return declared_to_json(stored_value(group)).encode("utf-8")


def decode_group(raw: bytes, config: EngineConfig) -> Group:
    data = from_json(raw)
    if data.get("format") not in READABLE_FORMATS:
        raise StateFormatError(f"group state format {data.get('format')!r} is not readable by this release "
                               f"(reads formats {READABLE_FORMATS}); run the release that wrote the checkpoint")
    kind = GROUP_TYPES.get(data.get("group_type", classic.NAME))  # formats 1 and 2: every group was classic
    if kind is None:
        raise StateFormatError(f"group type {data.get('group_type')!r} is not known to this release "
                               f"(knows {sorted(GROUP_TYPES)}); run the release that wrote the checkpoint")
    return kind.decode(data, config)
