"""One consumer group: its data and the procedures every API shares (SEMANTICS.md sections 1, 2 and 4).

Theory of operation. A `Group` takes events one at a time, each at an event time `t`: a request (handled
by its API's module in `handlers/`, through `handlers.apply_request`) or one of its own timers
(`fire_due`). An event mutates the group and appends the responses it decides to `self.out`, in the
order decided; the caller drains them. Timers are data (timers.py), so the group can be serialised
between any two events (codec.py) and a Spark micro-batch boundary can fall anywhere without changing
what is answered.

The procedures keep SEMANTICS.md's names (AddMember, PrepareRebalance, CompleteJoin...). Every state
change goes through `transition_to`, which checks the table in model.py. Counters that Kafka recomputes
by scanning the members (members awaiting a join, how many members offer each protocol) are kept up to
date instead, so no request costs time proportional to the group's size.

Committed offsets (docs/OFFSETS_AND_LISTING.md) live here too: they are not in the snapshot, so a commit
or an expiry is no change there, and every change to them is recorded in `offset_changes` for the
offsets topic (and in the undo journal, like every other change). One `offsets` timer sits at the next
expiry deadline under the group's current expiry condition; whatever can move that deadline (a commit,
a transition, new subscriptions) marks it for rescheduling at the end of the event.
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

from .config import EngineConfig
from .envelope import Response, response_envelope
from .errors import NO_ERROR, Error
from .journal import CLEARED, MISSING, Journal
from .model import (
    COMPLETING,
    EMPTY,
    PREPARING,
    STABLE,
    VALID_PREVIOUS_STATES,
    ClassicGroupState,
    IllegalTransition,
    Member,
)
from .offsets import (
    CONSUMER_PROTOCOL_TYPE,
    CommittedOffset,
    ExpiryCondition,
    OffsetChange,
    OffsetStore,
    expiry_condition,
)
from .records import JoinGroup, Reply, new_record
from .responses import join_body, sync_body
from .subscriptions import subscribed_topics
from .timers import (
    HEARTBEAT_TIMER,
    JOIN_TIMER,
    OFFSETS_TIMER,
    RETENTION_TIMER,
    SYNC_TIMER,
    Timer,
    Timers,
)

# Kafka's fixed timeout for a new member to complete its first join (NEW_MEMBER_JOIN_TIMEOUT_MS).
NEW_MEMBER_JOIN_TIMEOUT_MS = 300000

MemberListEntry = tuple[str, str | None, str]  # (member_id, group_instance_id, metadata)


class Group:
    """A consumer group's data (SEMANTICS.md 1.1) and the procedures of its section 4."""

    # Slots, not a __dict__: attribute reads and method calls on a group are the engine's most frequent
    # operations, and CPython specialises them for slots (a __dict__ that was ever read, as a journal copying
    # it would, turns every method call on the group generic).
    __slots__ = ("_condition", "_dirty", "_expiry_moved", "_new_deadline", "awaiting_join", "changed_at", "clock",
                 "config", "created_ms", "generation_id", "group_id", "journal", "leader", "members",
                 "new_member_added", "next_id_seq", "next_rank", "offset_changes", "offsets", "out", "pending_members",
                 "pending_sync", "previous_state", "protocol_counts", "protocol_name", "protocol_type", "removed",
                 "state", "state_since_ms", "static_members", "subscribed_topics", "timers", "version")
    # Set once, at creation: the undo journal does not save them.
    CONSTANT_ATTRIBUTES: ClassVar[frozenset[str]] = frozenset({"group_id", "config", "created_ms", "journal"})

    def __init__(self, group_id: str, created_ms: int, config: EngineConfig) -> None:
        self.group_id = group_id
        self.config = config
        self.created_ms = created_ms
        self.state = EMPTY
        self.previous_state: ClassicGroupState | None = None
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader: str | None = None
        self.members: dict[str, Member] = {}  # insertion order is join order (SEMANTICS.md 14.2)
        self.static_members: dict[str, str] = {}
        # Ordered sets: id -> rank (the order they were added in, for the undo journal).
        self.pending_members: dict[str, int] = {}
        self.pending_sync: dict[str, int] = {}
        self.new_member_added = False
        self.timers = Timers()
        self.clock = created_ms
        self.next_id_seq = 0
        self.version = 0
        self.changed_at = created_ms
        self.removed = False
        self.out: list[Response] = []
        # Derived, kept up to date rather than recomputed by scanning the members.
        self.awaiting_join = 0
        self.protocol_counts: dict[str, int] = {}
        self._dirty = False
        self.next_rank = 0  # the next member's or pending id's rank; not part of the state
        self.journal: Journal | None = None  # while a request is applied (journal.py)
        # Offsets (docs/OFFSETS_AND_LISTING.md 1.1).
        self.offsets = OffsetStore()
        self.offset_changes: list[OffsetChange] = []
        self.state_since_ms = created_ms
        self.subscribed_topics: frozenset[str] | None = None
        self._expiry_moved = False  # the expiry condition may have changed: recompute the next deadline
        self._new_deadline: int | None = None  # the earliest expiry among offsets committed in this event
        self._condition: tuple[ExpiryCondition | None] | None = None  # the current condition, once computed

    @classmethod
    def create(cls, group_id: str, t: int, config: EngineConfig) -> Group:
        """A new Empty group (SEMANTICS.md 5.2 row 4), with its retention timer running."""
        group = cls(group_id, t, config)
        group.timers.schedule(RETENTION_TIMER, "", t + config.empty_group_retention_ms)
        group.version = 1
        return group

    # ------------------------------------------------------------------ the undo journal (journal.py)

    def begin(self) -> None:
        """Starts recording before-images: a request is about to be applied."""
        self.journal = self.timers.journal = Journal(self.saved_attributes(), len(self.out), self.timers.next_seq,
                                                     len(self.offset_changes))

    def saved_attributes(self) -> tuple[Any, ...]:
        """Every attribute but the constant ones, as `restore_attributes` takes them: containers by reference
        (their contents are journaled entry by entry), except `protocol_counts`, small, copied."""
        return (self._condition, self._dirty, self._expiry_moved, self._new_deadline, self.awaiting_join,
                self.changed_at, self.clock, self.generation_id, self.leader, self.members, self.new_member_added,
                self.next_id_seq, self.next_rank, self.offset_changes, self.offsets, self.out, self.pending_members,
                self.pending_sync, self.previous_state, dict(self.protocol_counts), self.protocol_name,
                self.protocol_type, self.removed, self.state, self.state_since_ms, self.static_members,
                self.subscribed_topics, self.timers, self.version)

    def restore_attributes(self, saved: tuple[Any, ...]) -> None:
        (self._condition, self._dirty, self._expiry_moved, self._new_deadline, self.awaiting_join,
         self.changed_at, self.clock, self.generation_id, self.leader, self.members, self.new_member_added,
         self.next_id_seq, self.next_rank, self.offset_changes, self.offsets, self.out, self.pending_members,
         self.pending_sync, self.previous_state, self.protocol_counts, self.protocol_name,
         self.protocol_type, self.removed, self.state, self.state_since_ms, self.static_members,
         self.subscribed_topics, self.timers, self.version) = saved

    def commit(self) -> None:
        """The request is applied: its changes stay."""
        self.journal = self.timers.journal = None

    def undo(self) -> None:
        """Puts the group back as it was at `begin`."""
        journal = self.journal
        assert journal is not None
        self.commit()
        journal.undo_entries()
        for member, fields in reversed(journal.members):
            member.restore(fields)
        # Every attribute back to the value (for containers: the object) it had; the containers' contents
        # were restored above, except these that are not journaled entry by entry.
        self.restore_attributes(journal.attributes)
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
            if container is not self.static_members and container is not self.offsets.entries:
                # an ordered one: sorted by rank again after an undo
                self.journal.reorder[id(container)] = (container, _rank)
        return value

    def clear(self, container: dict[Any, Any]) -> None:
        if container and self.journal is not None:
            self.journal.entries.append((container, CLEARED, dict(container)))
        container.clear()

    def changing(self, member: Member) -> None:
        """Records `member`'s fields before a request changes them."""
        if self.journal is not None:
            self.journal.members.append((member, member.mutable_fields()))

    def take_rank(self) -> int:
        rank = self.next_rank
        self.next_rank += 1
        return rank

    # ------------------------------------------------------------------ events

    def fire_due(self, now: int) -> None:
        """Fires, in (deadline, scheduling) order, every timer due at or before `now`."""
        heap = self.timers.heap
        if not heap or heap[0][0] > now:  # the common case: the heap's top is a lower bound of every deadline
            return
        while not self.removed:
            timer = self.timers.pop_due(now)
            if timer is None:
                return
            t = timer.deadline if timer.deadline > self.clock else self.clock
            self.clock = t
            self._fire(timer, t)
            self.end_event(t)

    def next_deadline(self) -> int | None:
        return None if self.removed else self.timers.next_deadline()

    def drain(self) -> list[Response]:
        out, self.out = self.out, []
        return out

    def end_event(self, t: int) -> None:
        """Closes an event: a change visible in the snapshot counts once, at `t` (PROTOCOL.md section 4)."""
        if self._expiry_moved:
            self._expiry_moved = False
            self._new_deadline = None
            self._reschedule_offset_expiry()
        elif self._new_deadline is not None:
            # A commit can only bring the next expiry earlier through its own offset: a timer left too early
            # by an offset it replaced fires, finds nothing expired and moves on.
            timer = self.timers.get(OFFSETS_TIMER)
            if timer is None or self._new_deadline < timer.deadline:
                self.timers.schedule(OFFSETS_TIMER, "", self._new_deadline)
            self._new_deadline = None
        if self._dirty:
            self._dirty = False
            self.version += 1
            self.changed_at = t

    def touch(self) -> None:
        """Marks a change visible in the snapshot (PROTOCOL.md section 4)."""
        self._dirty = True

    def _fire(self, timer: Timer, t: int) -> None:
        kind = timer.kind
        if kind is HEARTBEAT_TIMER:
            if timer.target in self.pending_members:
                self._pending_expiry(timer.target, t)
            else:
                self._session_expiry(timer.target, t)
        elif kind is JOIN_TIMER:
            if timer.payload:
                self._initial_delay_fire(timer.payload[0], timer.payload[1], t)
            else:
                self.complete_join(t)
        elif kind is SYNC_TIMER:
            self._pending_sync_expiry(timer.payload[0], t)
        elif kind is OFFSETS_TIMER:
            self._expire_offsets(t)
        elif self.state is EMPTY and not self.offsets:  # RETENTION; a group with offsets goes with its last one
            self.removed = True
            self.touch()

    # ------------------------------------------------------------------ members (4.1, 4.5, 4.6, 4.9)

    def validate_member(self, member_id: str, instance_id: str | None) -> Error:
        """ValidateMember (4.1)."""
        if instance_id is not None:
            mapped = self.static_members.get(instance_id)
            if mapped is None:
                return Error.UNKNOWN_MEMBER_ID
            if mapped != member_id:
                return Error.FENCED_INSTANCE_ID
        return NO_ERROR if member_id in self.members else Error.UNKNOWN_MEMBER_ID

    def add_member(self, member_id: str, req: JoinGroup, t: int) -> None:
        """AddMember (4.5): the new member's JoinGroup stays parked until the join phase completes."""
        if self.state is PREPARING and self.previous_state is EMPTY:
            self.new_member_added = True
        member = Member(member_id, req.group_instance_id, req.reply.client_id, req.client_host,
                        req.session_timeout_ms, req.rebalance_timeout_ms, req.protocol_type, req.protocols,
                        join_waiter=req.reply, rank=self.take_rank())
        if not self.members:
            self.protocol_type = req.protocol_type
        if self.leader is None:
            self.leader = member_id
        self.put(self.members, member_id, member)
        self.awaiting_join += 1
        self.count_protocols(member, +1)
        if member.group_instance_id is not None:
            self.put(self.static_members, member.group_instance_id, member_id)
        self.pop(self.pending_members, member_id)
        self.timers.cancel(RETENTION_TIMER)
        self.timers.schedule(HEARTBEAT_TIMER, member_id, t + NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.touch()
        self.maybe_prepare_rebalance_or_complete_join(t)

    def update_member(self, member: Member, req: JoinGroup, t: int) -> None:
        """UpdateMember (4.6): store the rejoin's protocols and timeouts; park its JoinGroup."""
        self.changing(member)
        if member.protocols != req.protocols:
            subscription = member.metadata_for(self.protocol_name)  # what the snapshot shows of them
            self.count_protocols(member, -1)
            member.protocols = req.protocols
            self.count_protocols(member, +1)
            if member.metadata_for(self.protocol_name) != subscription:
                self.touch()
        if (member.session_timeout_ms, member.rebalance_timeout_ms) != (
                req.session_timeout_ms, req.rebalance_timeout_ms):
            member.session_timeout_ms = req.session_timeout_ms
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
            self.touch()
        if member.join_waiter is not None:  # SEMANTICS.md 14.4: the older one is answered, not dropped
            self.answer_join(member.join_waiter, t, Error.REBALANCE_IN_PROGRESS, member_id=member.member_id)
        else:
            self.awaiting_join += 1
        member.join_waiter = req.reply

    def remove(self, member_id: str) -> None:
        """Plain removal of a member or a pending id (4.9); the leader passes to the first member left."""
        member = self.pop(self.members, member_id)
        if member is not MISSING:
            self.count_protocols(member, -1)
            if member.join_waiter is not None:
                self.awaiting_join -= 1
            if member.group_instance_id is not None:
                self.pop(self.static_members, member.group_instance_id)
            self.touch()
        if self.pop(self.pending_members, member_id) is not MISSING:
            self.touch()
        self.pop(self.pending_sync, member_id)
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)

    def count_protocols(self, member: Member, delta: int) -> None:
        """Adds (+1) or takes away (-1) `member`'s protocols from the per-protocol member counts.

        Not journaled entry by entry: `begin` copies this small dict (one entry per protocol name)."""
        counts = self.protocol_counts
        for name in {p.name for p in member.protocols}:
            left = counts.get(name, 0) + delta
            if left:
                counts[name] = left
            else:
                del counts[name]

    def new_member_id(self, prefix: str) -> str:
        """`prefix-uuid`, the uuid derived from the group's identity and a counter (PROTOCOL.md 5)."""
        seq = self.next_id_seq
        self.next_id_seq += 1
        h = hashlib.sha256(f"{self.group_id}\x00{self.created_ms}\x00{seq}".encode()).hexdigest()
        return f"{prefix}-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

    def synced(self, member_id: str) -> None:
        """`member_id` sent its SyncGroup: the pending-sync timer stops when nobody is left to sync."""
        if self.pop(self.pending_sync, member_id) is not MISSING and not self.pending_sync:
            self.timers.cancel(SYNC_TIMER)

    def schedule_session(self, member: Member, t: int) -> None:
        self.timers.schedule(HEARTBEAT_TIMER, member.member_id, t + member.session_timeout_ms)

    # ------------------------------------------------------------------ rebalance (4.7, 4.8, 12)

    def maybe_prepare_rebalance_or_complete_join(self, t: int) -> None:
        if self.state in (EMPTY, STABLE, COMPLETING):
            self.prepare_rebalance(t)
        else:
            self.maybe_complete_join_phase(t)

    def maybe_complete_join_phase(self, t: int) -> None:
        """Completes the join phase early when everyone has joined, except during an initial rebalance."""
        if self.state is PREPARING and self.previous_state is not EMPTY and self.all_joined():
            self.complete_join(t)

    def all_joined(self) -> bool:
        return self.awaiting_join == len(self.members) and not self.pending_members

    def group_rebalance_timeout(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def prepare_rebalance(self, t: int) -> None:
        """PrepareRebalance (4.7)."""
        if self.state is COMPLETING:
            for member in self.members.values():
                self.changing(member)
                if member.assignment:
                    member.assignment = ""
                    self.touch()
                if member.sync_waiter is not None:
                    self.answer_sync(member.sync_waiter, t, Error.REBALANCE_IN_PROGRESS)
                    member.sync_waiter = None
                    self.schedule_session(member, t)
        self.clear(self.pending_sync)
        self.timers.cancel(SYNC_TIMER)
        initial = self.state is EMPTY
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(self.group_rebalance_timeout() - delay, 0)
            self.timers.schedule(JOIN_TIMER, "", t + delay, (delay, remaining))
        self.transition_to(PREPARING)
        if not initial:
            if self.all_joined():
                self.complete_join(t)
            else:
                self.timers.schedule(JOIN_TIMER, "", t + self.group_rebalance_timeout())

    def _initial_delay_fire(self, delay: int, remaining: int, t: int) -> None:
        """KIP-134: extend the initial delay while new members keep arriving, up to the rebalance timeout."""
        if self.new_member_added and remaining != 0:
            self.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self.timers.schedule(JOIN_TIMER, "", t + new_delay, (new_delay, new_remaining))
        else:
            self.complete_join(t)

    def complete_join(self, t: int) -> None:
        """CompleteJoin (4.8)."""
        self.timers.cancel(JOIN_TIMER)
        for member in [m for m in self.members.values() if m.join_waiter is None and m.group_instance_id is None]:
            self.remove(member.member_id)
            self.timers.cancel(HEARTBEAT_TIMER, member.member_id)
        if not self._elect_joined_leader() and self.members:
            # Only static members that did not rejoin are left: wait for them, or for their sessions.
            self.timers.schedule(JOIN_TIMER, "", t + self.group_rebalance_timeout())
            return
        self.generation_id += 1
        self.clear(self.pending_sync)
        self.touch()
        if not self.members:
            self.protocol_name = None
            self._compute_subscribed_topics()
            self.transition_to(EMPTY)
            self.timers.schedule(RETENTION_TIMER, "", t + self.config.empty_group_retention_ms)
            return
        self.protocol_name = self.select_protocol()
        self._compute_subscribed_topics()
        self.transition_to(COMPLETING)
        leader = self.leader or ""
        for member in self.members.values():
            self.changing(member)
            if member.join_waiter is not None:
                members = self.member_list() if member.member_id == leader else []
                self.answer_join(member.join_waiter, t, NO_ERROR, member_id=member.member_id,
                                 generation_id=self.generation_id, protocol_type=self.protocol_type,
                                 protocol_name=self.protocol_name, leader=leader, members=members)
                member.join_waiter = None
            self.schedule_session(member, t)
            member.is_new = False
            self.put(self.pending_sync, member.member_id, member.rank)
        self.awaiting_join = 0
        self.timers.schedule(SYNC_TIMER, "", t + self.group_rebalance_timeout(), (self.generation_id,))

    def _elect_joined_leader(self) -> bool:
        if self.leader is None:
            return False
        if self.members[self.leader].join_waiter is not None:
            return True
        for member in self.members.values():
            if member.join_waiter is not None:
                self.leader = member.member_id
                self.touch()
                return True
        return False

    def select_protocol(self) -> str | None:
        """SelectProtocol (4.4): the candidate most members prefer; ties go to the smallest name (14.3)."""
        count = len(self.members)
        candidates = {name for name, n in self.protocol_counts.items() if n == count}
        votes: dict[str, int] = {}
        for member in self.members.values():
            for protocol in member.protocols:
                if protocol.name in candidates:
                    votes[protocol.name] = votes.get(protocol.name, 0) + 1
                    break
        return min(votes, key=lambda name: (-votes[name], name), default=None)

    def member_list(self) -> list[MemberListEntry]:
        """The leader's member list (9.2): every member's metadata for the selected protocol."""
        name = self.protocol_name
        return [(m.member_id, m.group_instance_id, m.metadata_for(name) or "") for m in self.members.values()]

    def transition_to(self, state: ClassicGroupState) -> None:
        """The one way the state changes: refused unless model.VALID_PREVIOUS_STATES allows it."""
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransition(f"group {self.group_id!r}: {self.state.value} -> {state.value}")
        self.previous_state = self.state
        self.state = state
        self.state_since_ms = self.clock
        self._expiry_moved = True
        self.touch()

    # ------------------------------------------------------------------ offsets (OFFSETS_AND_LISTING.md 9)

    def commit_offset(self, topic: str, partition: int, value: CommittedOffset) -> None:
        """Stores one committed offset and records the change for the offsets topic."""
        self.put(self.offsets.entries, (topic, partition), value)
        self.offset_changes.append(new_record(OffsetChange, (self.group_id, topic, partition, value)))
        condition = self.expiry_condition()
        deadline = None if condition is None else condition.deadline(topic, value)
        if deadline is not None and (self._new_deadline is None or deadline < self._new_deadline):
            self._new_deadline = deadline

    def drain_offset_changes(self) -> list[OffsetChange]:
        changes, self.offset_changes = self.offset_changes, []
        return changes

    def expiry_condition(self) -> ExpiryCondition | None:
        """The group's offset expiry condition now (kept until a transition or new subscriptions change it)."""
        if self._condition is None:
            self._condition = (expiry_condition(self.state, self.protocol_type, self.state_since_ms,
                                                self.subscribed_topics, self.config.offsets_retention_ms),)
        return self._condition[0]

    def _reschedule_offset_expiry(self) -> None:
        self._condition = None
        deadline = self.offsets.next_deadline(self.expiry_condition())
        timer = self.timers.get(OFFSETS_TIMER)
        if deadline is None:
            self.timers.cancel(OFFSETS_TIMER)
        elif timer is None or timer.deadline != deadline:
            self.timers.schedule(OFFSETS_TIMER, "", deadline)

    def _expire_offsets(self, t: int) -> None:
        """OffsetExpiry (9.3): drop what expired by `t`; an Empty group whose last offset went is removed."""
        for topic, partition in self.offsets.expired(self.expiry_condition(), t):
            self.pop(self.offsets.entries, (topic, partition))
            self.offset_changes.append(OffsetChange(self.group_id, topic, partition, None))
        self._expiry_moved = True
        if self.state is EMPTY and not self.offsets:
            self.removed = True
            self.touch()

    def _compute_subscribed_topics(self) -> None:
        """ClassicGroup.computeSubscribedTopics, at the end of every join phase (9.2)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            self.subscribed_topics = None
        else:
            name = self.protocol_name
            self.subscribed_topics = subscribed_topics(m.metadata_for(name) for m in self.members.values())

    # ------------------------------------------------------------------ timers (section 2)

    def _session_expiry(self, member_id: str, t: int) -> None:
        member = self.members.get(member_id)
        if member is None:
            return
        if not member.is_new and (member.join_waiter is not None or member.sync_waiter is not None):
            return  # a member waiting in a rebalance satisfies its heartbeats
        if member.join_waiter is not None:
            self.answer_join(member.join_waiter, t, Error.UNKNOWN_MEMBER_ID)
        self.remove(member_id)
        if self.state in (STABLE, COMPLETING):
            self.maybe_prepare_rebalance_or_complete_join(t)
        elif self.state is PREPARING and self.all_joined():
            self.complete_join(t)

    def _pending_expiry(self, member_id: str, t: int) -> None:
        self.remove(member_id)
        if self.state is PREPARING and self.all_joined():
            self.complete_join(t)

    def _pending_sync_expiry(self, generation_id: int, t: int) -> None:
        if generation_id != self.generation_id or self.state not in (COMPLETING, STABLE) or not self.pending_sync:
            return
        for member_id in list(self.pending_sync):
            self.remove(member_id)
            self.timers.cancel(HEARTBEAT_TIMER, member_id)
        self.prepare_rebalance(t)

    # ------------------------------------------------------------------ answers

    def answer(self, reply: Reply, t: int, body: dict[str, Any]) -> None:
        self.out.append(response_envelope(reply, self.group_id, t, body))

    def answer_join(self, reply: Reply, t: int, error: Error, **fields: Any) -> None:
        if reply.api != "JoinGroup":
            raise IllegalTransition(f"a {reply.api} parked as a JoinGroup")
        self.answer(reply, t, join_body(reply.version, error, **fields))

    def answer_sync(self, reply: Reply, t: int, error: Error, assignment: str = "") -> None:
        body = (sync_body(reply.version, error, assignment=assignment, protocol_type=self.protocol_type,
                          protocol_name=self.protocol_name)
                if error is NO_ERROR else sync_body(reply.version, error))
        self.answer(reply, t, body)

    # ------------------------------------------------------------------ snapshot (PROTOCOL.md 4)

    def snapshot(self) -> dict[str, Any]:
        name = self.protocol_name
        return {
            "group_id": self.group_id,
            "state": self.state.value,
            "generation_id": self.generation_id,
            "protocol_type": self.protocol_type,
            "protocol_name": name,
            "leader": self.leader,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "session_timeout_ms": m.session_timeout_ms,
                    "rebalance_timeout_ms": m.rebalance_timeout_ms,
                    "subscription": m.metadata_for(name),
                    "assignment": m.assignment,
                }
                for m in self.members.values()
            ],
            "pending_members": list(self.pending_members),
            "timestamp_ms": self.changed_at,
            "version": self.version,
        }


def _rank(item: tuple[str, Any]) -> int:
    """The order of an entry of an ordered dict of the group: a member's rank, or a pending id's."""
    value = item[1]
    return value if isinstance(value, int) else int(value.rank)
