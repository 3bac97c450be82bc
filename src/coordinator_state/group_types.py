"""Group types behind one small interface, and the registry that chooses one (Kafka's `Group.GroupType`).

A group type is a module (classic/ is the classic group's) that provides `GroupType`: what to answer for a
group of its type that does not exist (or to create one), a request's event, its timers' events, when it
must be woken next, its snapshot, and its stored state. `group_step` and `LocalCoordinator` talk to groups
only through it, so another type (the Streams group of PROTOCOL.md section 10) is one more module in
`GROUP_TYPES`, not a branch in every handler.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from . import classic, streams
from .config import EngineConfig
from .envelope import Response
from .offsets import OffsetChange, OffsetStore
from .records import Request


class Group(Protocol):
    """What the shells read of a group of any type; everything else goes through its `GroupType`."""

    @property
    def group_type(self) -> str: ...  # its type's NAME, the registry's key
    @property
    def group_id(self) -> str: ...
    @property
    def clock(self) -> int: ...  # the time of its last event: never goes back
    @property
    def version(self) -> int: ...  # its snapshot's version (PROTOCOL.md section 4)
    @property
    def removed(self) -> bool: ...  # gone (a tombstone): its last event removed it
    @property
    def offsets(self) -> OffsetStore: ...  # its committed offsets, whatever its type (a conversion keeps them)

    def is_empty(self) -> bool:
        """No members (Kafka's `Group.isEmpty`): a group another type's join may convert."""

    def drain_into(self, responses: list[Response], offset_changes: list[OffsetChange]) -> None:
        """Appends the responses its events decided and the committed offsets they set or removed since the last
        drain, in order."""


class GroupType(Protocol):
    """A group type's module. `handle` and each timer's event are atomic: one that raises leaves the group as it
    was (a timer's raises `timers.TimerFailed`, its timer dropped)."""

    NAME: str
    APIS: frozenset[str]  # the APIs whose requests for an absent group it answers (or creates the group for)
    HANDLES: frozenset[str]  # the APIs `handle` takes for a group of this type (the others: `from_other_group`)

    def absent_group(self, request: Any, t: int) -> Response | None:
        """The answer for a group that does not exist, or None: the request creates a group of this type."""

    def create(self, group_id: str, t: int, config: EngineConfig) -> Group: ...

    def from_other_group(self, group: Any, request: Any, t: int, config: EngineConfig) -> Response | Group:
        """A request of one of this type's `APIS` for a group of another type (PROTOCOL.md section 10, group
        types): its answer (the group unchanged), or a new group of this type replacing it, with its committed
        offsets, which `handle` then takes the request on."""

    def handle(self, group: Any, request: Request, t: int) -> None:
        """A request's event at `t` (>= the group's clock, after `fire_due(group, t, before_request=True)`)."""

    def fire_due(self, group: Any, now: int, before_request: bool = False) -> None:
        """Fires the group's timers due at or before `now`. `before_request`: a request of the group at `now`
        follows, so the group's clock moves to `now` (timers deferred to its next event fire, SEMANTICS.md T3a);
        otherwise `now` is a time the coordinator reached (a tick, a watermark), no event of the group."""

    def next_deadline(self, group: Any) -> int | None:
        """When the group must be woken next if no request comes; None: never."""

    def deadline_lower_bound(self, group: Any) -> int | None:
        """At no cost, a time at or before `next_deadline` (None when it has no timer)."""

    def snapshot(self, group: Any) -> dict[str, Any]: ...

    def encode(self, group: Any) -> dict[str, Any]:
        """The group's stored state, as JSON values (codec.py adds the format and the type)."""

    def decode(self, data: Mapping[str, Any], config: EngineConfig) -> Group: ...


GROUP_TYPES: dict[str, GroupType] = {classic.NAME: classic, streams.NAME: streams}
# A group that does not exist: the type that answers a request of each API.
_BY_API: dict[str, GroupType] = {api: kind for kind in GROUP_TYPES.values() for api in kind.APIS}


def type_of(group: Group) -> GroupType:
    return GROUP_TYPES[group.group_type]


def snapshot_of(group: Group) -> dict[str, Any]:
    return type_of(group).snapshot(group)


def type_for_absent_group(request: Request) -> GroupType:
    return _BY_API[request.reply.api]
