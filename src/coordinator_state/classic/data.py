"""The classic group's data (SEMANTICS.md 1.1, docs/OFFSETS_AND_LISTING.md 1.1), declared once, and its undo journal.

Every field is declared (declared.py) as identity, stored, derived or attached; the undo journal's before-image,
the state codec (codec.py) and the snapshot (snapshot.py) are derived from that declaration. The procedures
live by concern in the modules beside this one; what lives here is how the data changes: every change to a
container's contents or to a member goes through `put`, `pop`, `clear` and `changing`, which record its
before-image while an event runs (journal.py), so that an event that fails leaves the group as it was.
"""

from __future__ import annotations

from typing import Any

from ..config import EngineConfig
from ..declared import Declaration, attached, declared, derived, identity, stored
from ..envelope import Response
from ..journal import CLEARED, MISSING, Journal
from ..offsets import ExpiryCondition, OffsetChange, OffsetStore
from ..outbox import Outbox
from ..timers import Timers
from .model import EMPTY, MEMBER, ClassicGroupState, Member

GROUP_TYPE = "classic"  # the group type's name (group_types.py)


def _optional_state(value: str | None) -> ClassicGroupState | None:
    return None if value is None else ClassicGroupState(value)


def _state_value(state: ClassicGroupState | None, _: object = None) -> str | None:
    return None if state is None else state.value


def _members_to_json(members: dict[str, Member]) -> list[dict[str, Any]]:
    return [MEMBER.encode(m) for m in members.values()]


def _members_from_json(data: list[dict[str, Any]]) -> dict[str, Member]:
    """The members in join order; their ranks are given by `codec.decode`, with the other derived fields."""
    return {m.member_id: m for m in map(MEMBER.load, data)}


def _members_snapshot(members: dict[str, Member], group: ClassicGroup) -> list[dict[str, Any]]:
    return [MEMBER.snapshot(m, group) for m in members.values()]


def _ids_from_json(data: list[str]) -> dict[str, int]:
    """An ordered set of member ids (id -> rank, the rank given by `codec.decode`)."""
    return dict.fromkeys(data, 0)


def _ids_snapshot(ids: dict[str, int], _: ClassicGroup) -> list[str]:
    return list(ids)


def _topics_to_json(topics: frozenset[str] | None) -> list[str] | None:
    return None if topics is None else sorted(topics)


def _topics_from_json(data: list[str] | None) -> frozenset[str] | None:
    return None if data is None else frozenset(data)


@declared(kw_only=True, eq=False)
class ClassicGroup(Outbox):
    """A classic group. Insertion order of `members` is join order (SEMANTICS.md 14.2); `pending_members` and
    `pending_sync` are ordered sets (id -> rank, the order they were added in, for the undo journal)."""

    group_type: str = attached(default=GROUP_TYPE, init=False)  # a slot: read for every request, as fast as can be
    group_id: str = identity("group_id", shown="group_id")
    created_ms: int = identity("created_ms")
    config: EngineConfig = attached()
    state: ClassicGroupState = stored("state", default=EMPTY, encode=_state_value, decode=ClassicGroupState,
                                      shown="state", view=_state_value)
    previous_state: ClassicGroupState | None = stored("previous_state", default=None, encode=_state_value,
                                                      decode=_optional_state)
    generation_id: int = stored("generation_id", default=0, shown="generation_id")
    protocol_type: str | None = stored("protocol_type", default=None, shown="protocol_type")
    protocol_name: str | None = stored("protocol_name", default=None, shown="protocol_name")
    leader: str | None = stored("leader", default=None, shown="leader")
    members: dict[str, Member] = stored("members", factory=dict, encode=_members_to_json, decode=_members_from_json,
                                        shown="members", view=_members_snapshot)
    pending_members: dict[str, int] = stored("pending_members", factory=dict, encode=list, decode=_ids_from_json,
                                             shown="pending_members", view=_ids_snapshot)
    pending_sync: dict[str, int] = stored("pending_sync", factory=dict, encode=list, decode=_ids_from_json)
    new_member_added: bool = stored("new_member_added", default=False)
    timers: Timers = stored("timers", factory=Timers, encode=Timers.to_json, decode=Timers.from_json)
    clock: int = stored("clock")
    next_id_seq: int = stored("next_id_seq", default=0)
    changed_at: int = stored("changed_at", shown="timestamp_ms")
    version: int = stored("version", default=0, shown="version")
    # Format 2: committed offsets, the time of the last transition, the members' subscribed topics (codec.py).
    offsets: OffsetStore = stored("offsets", factory=OffsetStore, encode=OffsetStore.to_json,
                                  decode=OffsetStore.from_json, missing=lambda data: OffsetStore())
    state_since_ms: int = stored("state_since_ms", missing=lambda data: data["changed_at"])
    subscribed_topics: frozenset[str] | None = stored("subscribed_topics", default=None, encode=_topics_to_json,
                                                      decode=_topics_from_json, missing=lambda data: None)

    # Derived from the stored fields, kept up to date rather than recomputed by scanning the members.
    static_members: dict[str, str] = derived(factory=dict)  # group_instance_id -> member id
    awaiting_join: int = derived(default=0)  # members with a parked JoinGroup
    protocol_counts: dict[str, int] = derived(factory=dict)  # protocol name -> members offering it
    next_rank: int = derived(default=0)  # the next member's or pending id's rank
    # One event's bookkeeping.
    out: list[Response] = derived(factory=list)  # answers decided, in order; the caller drains them
    offset_changes: list[OffsetChange] = derived(factory=list)  # for the offsets topic, in order
    removed: bool = derived(default=False)
    dirty: bool = derived(default=False)  # a change visible in the snapshot (snapshot.py)
    expiry_moved: bool = derived(default=False)  # the offsets' expiry condition may have changed (expiry.py)
    new_deadline: int | None = derived(default=None)  # the earliest expiry among offsets committed in the event
    condition: tuple[ExpiryCondition | None] | None = derived(default=None)  # the expiry condition, once computed
    journal: Journal | None = attached(default=None, init=False)  # while an event runs

    @classmethod
    def new(cls, group_id: str, t: int, config: EngineConfig) -> ClassicGroup:
        return cls(group_id=group_id, created_ms=t, config=config, clock=t, changed_at=t, state_since_ms=t)

    # ------------------------------------------------------------------ the undo journal (journal.py)

    def begin(self) -> None:
        """Starts recording before-images: an event is about to change the group."""
        self.journal = self.timers.journal = Journal(_group_image(self), len(self.out), self.timers.next_seq,
                                                     len(self.offset_changes))

    def commit(self) -> None:
        """The event is done: its changes stay."""
        self.journal = self.timers.journal = None

    def undo(self) -> None:
        """Puts the group back as it was at `begin`."""
        journal = self.journal
        assert journal is not None
        self.commit()
        journal.undo_entries()
        for member, fields in reversed(journal.members):
            MEMBER.restore(member, fields)
        # Every field back to the value (for containers: the object) it had; their contents were restored above.
        GROUP.restore(self, journal.attributes)
        del self.out[journal.out_length:]
        del self.offset_changes[journal.changes_length:]
        self.timers.next_seq = journal.timer_seq
        self.timers.rebuild_heap()

    def put(self, container: dict[Any, Any], key: Any, value: Any) -> None:
        if self.journal is not None:
            self.journal.entries.append((container, key, container.get(key, MISSING)))
        container[key] = value

    def pop(self, container: dict[Any, Any], key: Any) -> Any:
        """Removes `key` if present; returns its value, or MISSING."""
        value = container.pop(key, MISSING)
        if value is not MISSING and self.journal is not None:
            self.journal.entries.append((container, key, value))
            if container is self.members or container is self.pending_members or container is self.pending_sync:
                self.journal.reorder[id(container)] = (container, _rank)  # ordered: sorted by rank after an undo
        return value

    def clear(self, container: dict[Any, Any]) -> None:
        if container and self.journal is not None:
            self.journal.entries.append((container, CLEARED, dict(container)))
        container.clear()

    def changing(self, member: Member) -> None:
        """Records `member`'s fields before an event changes them."""
        if self.journal is not None:
            self.journal.members.append((member, _member_image(member)))

    def take_rank(self) -> int:
        rank = self.next_rank
        self.next_rank += 1
        return rank

    def touch(self) -> None:
        """Marks a change visible in the snapshot (PROTOCOL.md section 4; counted at the end of the event)."""
        self.dirty = True

    def is_empty(self) -> bool:
        return self.state is EMPTY

    def take_offsets_of(self, other: Any) -> None:
        """A group converted from `other` (a group of another type, PROTOCOL.md section 10) keeps its committed
        offsets and the snapshot's version line: the offsets' expiry is reconsidered at the end of the event."""
        self.offsets = other.offsets
        self.version = other.version + 1
        self.expiry_moved = True


GROUP = Declaration(ClassicGroup)
# Taken at every event: plain functions, looked up as fast as a name can be.
_group_image = GROUP.before_image
_member_image = MEMBER.before_image


def _rank(item: tuple[str, Any]) -> int:
    """The order of an entry of an ordered dict of the group: a member's rank, or a pending id's."""
    value = item[1]
    return value if isinstance(value, int) else int(value.rank)
