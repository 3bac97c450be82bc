"""One consumer group's state machine: Kafka's classic group protocol with KIP-345 and KIP-394.

Theory of operation. A `Group` takes events one at a time, each at an event time `t`: a request
(`handle`) or one of its own timers (`fire_due`). An event mutates the group and appends the
responses it decides to `self.out`, in the order decided; the caller drains them. Timers are data
(timers.py), so the group can be serialised between any two events (codec.py) and a Spark
micro-batch boundary can fall anywhere without changing what is answered.

The procedures below follow SEMANTICS.md section by section and keep its names (AddMember,
PrepareRebalance, CompleteJoin...). Counters that Kafka recomputes by scanning the members
(members awaiting a join, how many members offer each protocol) are kept up to date instead, so
no request costs time proportional to the group's size: a 1,000-member join round stays linear.

Checks that need no group (empty group id, session timeout bounds, SyncGroup v5 protocol fields)
and answers for a group that does not exist live in engine.py; the handlers here run only for a
group that exists.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, ClassVar

from .config import EngineConfig
from .errors import Error
from .model import VALID_PREVIOUS_STATES, GroupState, IllegalTransition, Member
from .offsets import CommittedOffset, ExpiryCondition, OffsetChange, OffsetStore, expiry_condition
from .requests import Heartbeat, JoinGroup, LeaveGroup, Reply, Request, SyncGroup
from .responses import Response, envelope, error_body, join_body, leave_body, sync_body
from .subscriptions import subscribed_topics
from .timers import Timer, TimerKind, Timers

# Kafka's fixed timeout for a new member to complete its first join (GroupCoordinator's
# NEW_MEMBER_JOIN_TIMEOUT_MS).
NEW_MEMBER_JOIN_TIMEOUT_MS = 300000

EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE


class Group:
    """A consumer group and every rule that changes it."""

    def __init__(self, group_id: str, created_ms: int, config: EngineConfig) -> None:
        self.group_id = group_id
        self.config = config
        self.created_ms = created_ms
        self.state = EMPTY
        self.previous_state: GroupState | None = None
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader: str | None = None
        self.members: dict[str, Member] = {}  # insertion order is join order (SEMANTICS.md 14.2)
        self.static_members: dict[str, str] = {}
        self.pending_members: dict[str, None] = {}  # an ordered set
        self.pending_sync: dict[str, None] = {}
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
        # Offsets (docs/OFFSETS_AND_LISTING.md): not in the snapshot, so they never mark it dirty.
        self.offsets = OffsetStore()
        self.offset_changes: list[OffsetChange] = []
        self.state_since_ms = created_ms
        self.subscribed_topics: frozenset[str] | None = None
        self._expiry_moved = False

    @classmethod
    def create(cls, group_id: str, t: int, config: EngineConfig) -> Group:
        """A new Empty group (SEMANTICS.md 5.2 row 4), with its retention timer running."""
        group = cls(group_id, t, config)
        group.timers.schedule(TimerKind.RETENTION, "", t + config.empty_group_retention_ms)
        group.version = 1
        return group

    # ------------------------------------------------------------------ events

    def handle(self, request: Request, t: int) -> None:
        """Processes one request at `t` (already >= the group's clock; due timers already fired)."""
        self.clock = t
        self._HANDLERS[type(request)](self, request, t)
        self._end_event(t)
        self.fire_due(t)  # timers the request scheduled with a zero delay (SEMANTICS.md T3)

    def fire_due(self, now: int) -> None:
        """Fires, in (deadline, scheduling) order, every timer due at or before `now`."""
        while not self.removed:
            timer = self.timers.pop_due(now)
            if timer is None:
                return
            t = max(timer.deadline, self.clock)
            self.clock = t
            self._fire(timer, t)
            self._end_event(t)

    def next_deadline(self) -> int | None:
        return None if self.removed else self.timers.next_deadline()

    def drain(self) -> list[Response]:
        out, self.out = self.out, []
        return out

    def _end_event(self, t: int) -> None:
        if self._expiry_moved:
            self._expiry_moved = False
            self._reschedule_offset_expiry()
        if self._dirty:
            self._dirty = False
            self.version += 1
            self.changed_at = t

    def _touch(self) -> None:
        """Marks a change visible in the snapshot (PROTOCOL.md section 4)."""
        self._dirty = True

    def _fire(self, timer: Timer, t: int) -> None:
        kind = timer.kind
        if kind is TimerKind.HEARTBEAT:
            if timer.target in self.pending_members:
                self._pending_expiry(timer.target, t)
            else:
                self._session_expiry(timer.target, t)
        elif kind is TimerKind.JOIN:
            if timer.payload:
                self._initial_delay_fire(timer.payload[0], timer.payload[1], t)
            else:
                self._complete_join(t)
        elif kind is TimerKind.SYNC:
            self._pending_sync_expiry(timer.payload[0], t)
        elif kind is TimerKind.OFFSETS:
            self._expire_offsets(t)
        elif self.state is EMPTY and not self.offsets:  # RETENTION: a group with offsets goes with its last one
            self.removed = True
            self._touch()

    # ------------------------------------------------------------------ JoinGroup (section 5)

    def _join(self, req: JoinGroup, t: int) -> None:
        if not self._accept_join(req.member_id):
            self._remove(req.member_id)
            self.timers.cancel(TimerKind.HEARTBEAT, req.member_id)
            self._answer_join(req.reply, t, Error.GROUP_MAX_SIZE_REACHED)
        elif req.member_id == "":
            self._join_new_member(req, t)
        else:
            self._join_known_member(req, t)

    def _accept_join(self, member_id: str) -> bool:
        """AcceptJoin (4.2): group.max.size (KIP-389)."""
        max_size = self.config.max_size
        if self.state is PREPARING:
            member = self.members.get(member_id)
            return (member is not None and member.join_waiter is not None) or self.awaiting_join < max_size
        if self.state in (COMPLETING, STABLE):
            return member_id in self.members or len(self.members) < max_size
        return True

    def _join_new_member(self, req: JoinGroup, t: int) -> None:
        if not self._supports_protocols(req):
            self._answer_join(req.reply, t, Error.INCONSISTENT_GROUP_PROTOCOL)
            return
        instance = req.group_instance_id
        new_id = self._new_member_id(req.reply.client_id if instance is None else instance)
        if instance is not None and instance in self.static_members:
            self._replace_static_member(req, new_id, t)
        elif instance is not None or req.reply.version <= 3:
            self._add_member(new_id, req, t)
        else:  # KIP-394: a dynamic member must rejoin with the id it is given
            self.pending_members[new_id] = None
            self._touch()
            self.timers.schedule(TimerKind.HEARTBEAT, new_id, t + req.session_timeout_ms)
            self._answer_join(req.reply, t, Error.MEMBER_ID_REQUIRED, member_id=new_id)

    def _join_known_member(self, req: JoinGroup, t: int) -> None:
        member_id = req.member_id
        if not self._supports_protocols(req):
            self._answer_join(req.reply, t, Error.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
            return
        if member_id in self.pending_members:
            if req.group_instance_id is not None:
                # Kafka raises an internal error here (SEMANTICS.md 15 row 11); nothing changes.
                self._answer_join(req.reply, t, Error.UNKNOWN_SERVER_ERROR)
            else:
                self._add_member(member_id, req, t)
            return
        error = self._validate_member(member_id, req.group_instance_id)
        if error is not Error.NONE:
            self._answer_join(req.reply, t, error, member_id=member_id)
            return
        member = self.members[member_id]
        state = self.state
        if state is PREPARING:
            self._update_member(member, req, t)
            self._maybe_complete_join_phase(t)
        elif state is COMPLETING or state is STABLE:
            if member.matches(req.protocols) and (state is COMPLETING or member_id != self.leader):
                members = self._member_list() if member_id == self.leader else []
                self._answer_join(req.reply, t, Error.NONE, member_id=member_id, generation_id=self.generation_id,
                                  protocol_type=self.protocol_type, protocol_name=self.protocol_name,
                                  leader=self.leader or "", members=members)
            else:
                self._update_member(member, req, t)
                self._prepare_rebalance(t)
        else:
            self._answer_join(req.reply, t, Error.UNKNOWN_MEMBER_ID, member_id=member_id)

    def _supports_protocols(self, req: JoinGroup) -> bool:
        """SupportsProtocols (4.3)."""
        if self.state is EMPTY:
            return req.protocol_type != "" and len(req.protocols) > 0
        count = len(self.members)
        counts = self.protocol_counts
        return req.protocol_type == self.protocol_type and any(
            counts.get(p.name, 0) == count for p in req.protocols)

    def _add_member(self, member_id: str, req: JoinGroup, t: int) -> None:
        """AddMember (4.5): the new member's JoinGroup stays parked until the join phase completes."""
        if self.state is PREPARING and self.previous_state is EMPTY:
            self.new_member_added = True
        member = Member(member_id, req.group_instance_id, req.reply.client_id, req.client_host,
                        req.session_timeout_ms, req.rebalance_timeout_ms, req.protocol_type, req.protocols,
                        join_waiter=req.reply)
        if not self.members:
            self.protocol_type = req.protocol_type
        if self.leader is None:
            self.leader = member_id
        self.members[member_id] = member
        self.awaiting_join += 1
        self._count_protocols(member, +1)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member_id
        self.pending_members.pop(member_id, None)
        self.timers.cancel(TimerKind.RETENTION)
        self.timers.schedule(TimerKind.HEARTBEAT, member_id, t + NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._touch()
        self._maybe_prepare_rebalance_or_complete_join(t)

    def _update_member(self, member: Member, req: JoinGroup, t: int) -> None:
        """UpdateMember (4.6): store the rejoin's protocols and timeouts; park its JoinGroup."""
        if member.protocols != req.protocols:
            self._count_protocols(member, -1)
            member.protocols = req.protocols
            self._count_protocols(member, +1)
            self._touch()
        if (member.session_timeout_ms, member.rebalance_timeout_ms) != (
                req.session_timeout_ms, req.rebalance_timeout_ms):
            member.session_timeout_ms = req.session_timeout_ms
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
            self._touch()
        if member.join_waiter is not None:  # SEMANTICS.md 14.4: the older one is answered, not dropped
            self._answer_join(member.join_waiter, t, Error.REBALANCE_IN_PROGRESS, member_id=member.member_id)
        else:
            self.awaiting_join += 1
        member.join_waiter = req.reply

    def _replace_static_member(self, req: JoinGroup, new_id: str, t: int) -> None:
        """A known group.instance.id rejoining with an empty member id (5.5, ReplaceStaticMember 4.10)."""
        instance = req.group_instance_id
        assert instance is not None
        old_id = self.static_members[instance]
        old = self.members[old_id]
        current_leader = self.leader
        if old.join_waiter is not None:
            self._answer_join(old.join_waiter, t, Error.FENCED_INSTANCE_ID, member_id=old_id)
            self.awaiting_join -= 1
        if old.sync_waiter is not None:
            self._answer_sync(old.sync_waiter, t, Error.FENCED_INSTANCE_ID)
        new = Member(new_id, instance, old.client_id, old.client_host, old.session_timeout_ms,
                     old.rebalance_timeout_ms, old.protocol_type, old.protocols, old.assignment, is_new=False)
        self.members = {(new_id if key == old_id else key): (new if key == old_id else value)
                        for key, value in self.members.items()}
        self.static_members[instance] = new_id
        if self.leader == old_id:
            self.leader = new_id
        self.timers.cancel(TimerKind.HEARTBEAT, old_id)
        self.timers.schedule(TimerKind.HEARTBEAT, new_id, t + old.session_timeout_ms)
        self._touch()
        self._update_member(new, req, t)

        if self.state is PREPARING:
            self._maybe_complete_join_phase(t)
        elif self.state is COMPLETING:
            self._prepare_rebalance(t)
        elif self._select_protocol() != self.protocol_name:
            self._maybe_prepare_rebalance_or_complete_join(t)
        else:  # Stable and the selected protocol stays: the member gets its old assignment back
            new.join_waiter = None
            self.awaiting_join -= 1
            version = req.reply.version
            if version >= 9 and self.leader == new_id:
                leader, members, skip = new_id, self._member_list(), True
            else:
                # Below v9 a replaced leader is told the old leader id so that it does not assign.
                leader, members, skip = current_leader or "", [], False
            self._answer_join(req.reply, t, Error.NONE, member_id=new_id, generation_id=self.generation_id,
                              protocol_type=self.protocol_type, protocol_name=self.protocol_name,
                              leader=leader, members=members, skip_assignment=skip)

    # ------------------------------------------------------------------ rebalance (4.7, 4.8, 12)

    def _maybe_prepare_rebalance_or_complete_join(self, t: int) -> None:
        if self.state in (EMPTY, STABLE, COMPLETING):
            self._prepare_rebalance(t)
        else:
            self._maybe_complete_join_phase(t)

    def _maybe_complete_join_phase(self, t: int) -> None:
        if self.state is PREPARING and self.previous_state is not EMPTY and self._all_joined():
            self._complete_join(t)

    def _all_joined(self) -> bool:
        return self.awaiting_join == len(self.members) and not self.pending_members

    def _group_rebalance_timeout(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def _prepare_rebalance(self, t: int) -> None:
        if self.state is COMPLETING:
            for member in self.members.values():
                if member.assignment:
                    member.assignment = ""
                    self._touch()
                if member.sync_waiter is not None:
                    self._answer_sync(member.sync_waiter, t, Error.REBALANCE_IN_PROGRESS)
                    member.sync_waiter = None
                    self._schedule_session(member, t)
        self.pending_sync.clear()
        self.timers.cancel(TimerKind.SYNC)
        initial = self.state is EMPTY
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(self._group_rebalance_timeout() - delay, 0)
            self.timers.schedule(TimerKind.JOIN, "", t + delay, (delay, remaining))
        self._transition_to(PREPARING)
        if not initial:
            if self._all_joined():
                self._complete_join(t)
            else:
                self.timers.schedule(TimerKind.JOIN, "", t + self._group_rebalance_timeout())

    def _initial_delay_fire(self, delay: int, remaining: int, t: int) -> None:
        """KIP-134: extend the initial delay while new members keep arriving, up to the rebalance timeout."""
        if self.new_member_added and remaining != 0:
            self.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self.timers.schedule(TimerKind.JOIN, "", t + new_delay, (new_delay, new_remaining))
        else:
            self._complete_join(t)

    def _complete_join(self, t: int) -> None:
        """CompleteJoin (4.8)."""
        self.timers.cancel(TimerKind.JOIN)
        for member in [m for m in self.members.values() if m.join_waiter is None and m.group_instance_id is None]:
            self._remove(member.member_id)
            self.timers.cancel(TimerKind.HEARTBEAT, member.member_id)
        if not self._elect_joined_leader() and self.members:
            # Only static members that did not rejoin are left: wait for them, or for their sessions.
            self.timers.schedule(TimerKind.JOIN, "", t + self._group_rebalance_timeout())
            return
        self.generation_id += 1
        self.pending_sync.clear()
        self._touch()
        if not self.members:
            self.protocol_name = None
            self._compute_subscribed_topics()
            self._transition_to(EMPTY)
            self.timers.schedule(TimerKind.RETENTION, "", t + self.config.empty_group_retention_ms)
            return
        self.protocol_name = self._select_protocol()
        self._compute_subscribed_topics()
        self._transition_to(COMPLETING)
        leader = self.leader or ""
        for member in self.members.values():
            if member.join_waiter is not None:
                members = self._member_list() if member.member_id == leader else []
                self._answer_join(member.join_waiter, t, Error.NONE, member_id=member.member_id,
                                  generation_id=self.generation_id, protocol_type=self.protocol_type,
                                  protocol_name=self.protocol_name, leader=leader, members=members)
                member.join_waiter = None
            self._schedule_session(member, t)
            member.is_new = False
            self.pending_sync[member.member_id] = None
        self.awaiting_join = 0
        self.timers.schedule(TimerKind.SYNC, "", t + self._group_rebalance_timeout(), (self.generation_id,))

    def _elect_joined_leader(self) -> bool:
        if self.leader is None:
            return False
        if self.members[self.leader].join_waiter is not None:
            return True
        for member in self.members.values():
            if member.join_waiter is not None:
                self.leader = member.member_id
                self._touch()
                return True
        return False

    def _select_protocol(self) -> str | None:
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

    def _member_list(self) -> list[tuple[str, str | None, str]]:
        """The leader's member list (9.2): every member's metadata for the selected protocol."""
        name = self.protocol_name
        return [(m.member_id, m.group_instance_id, m.metadata_for(name) or "") for m in self.members.values()]

    def _transition_to(self, state: GroupState) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransition(f"group {self.group_id!r}: {self.state.value} -> {state.value}")
        self.previous_state = self.state
        self.state = state
        self.state_since_ms = self.clock
        self._expiry_moved = True
        self._touch()

    # ------------------------------------------------------------------ offsets (OFFSETS_AND_LISTING.md 9)

    def commit_offset(self, topic: str, partition: int, value: CommittedOffset) -> None:
        """Stores one committed offset and records the change for the offsets topic."""
        self.offsets.put(topic, partition, value)
        self.offset_changes.append(OffsetChange(self.group_id, topic, partition, value))
        self._expiry_moved = True

    def drain_offset_changes(self) -> list[OffsetChange]:
        changes, self.offset_changes = self.offset_changes, []
        return changes

    def _expiry_condition(self) -> ExpiryCondition | None:
        return expiry_condition(self.state, self.protocol_type, self.state_since_ms, self.subscribed_topics,
                                self.config.offsets_retention_ms)

    def _reschedule_offset_expiry(self) -> None:
        deadline = self.offsets.next_deadline(self._expiry_condition())
        timer = self.timers.get(TimerKind.OFFSETS)
        if deadline is None:
            self.timers.cancel(TimerKind.OFFSETS)
        elif timer is None or timer.deadline != deadline:
            self.timers.schedule(TimerKind.OFFSETS, "", deadline)

    def _expire_offsets(self, t: int) -> None:
        """OffsetExpiry (9.3): drop what expired by t; an Empty group whose last offset went is removed."""
        for topic, partition in self.offsets.expire(self._expiry_condition(), t):
            self.offset_changes.append(OffsetChange(self.group_id, topic, partition, None))
        self._expiry_moved = True
        if self.state is EMPTY and not self.offsets:
            self.removed = True
            self._touch()

    def _compute_subscribed_topics(self) -> None:
        """ClassicGroup.computeSubscribedTopics, at the end of every join phase (9.2)."""
        if self.protocol_type != "consumer":
            self.subscribed_topics = None
        else:
            name = self.protocol_name
            self.subscribed_topics = subscribed_topics(m.metadata_for(name) for m in self.members.values())

    # ------------------------------------------------------------------ timers (section 2)

    def _schedule_session(self, member: Member, t: int) -> None:
        self.timers.schedule(TimerKind.HEARTBEAT, member.member_id, t + member.session_timeout_ms)

    def _session_expiry(self, member_id: str, t: int) -> None:
        member = self.members.get(member_id)
        if member is None:
            return
        if not member.is_new and (member.join_waiter is not None or member.sync_waiter is not None):
            return  # a member waiting in a rebalance satisfies its heartbeats
        if member.join_waiter is not None:
            self._answer_join(member.join_waiter, t, Error.UNKNOWN_MEMBER_ID)
        self._remove(member_id)
        if self.state in (STABLE, COMPLETING):
            self._maybe_prepare_rebalance_or_complete_join(t)
        elif self.state is PREPARING and self._all_joined():
            self._complete_join(t)

    def _pending_expiry(self, member_id: str, t: int) -> None:
        self._remove(member_id)
        if self.state is PREPARING and self._all_joined():
            self._complete_join(t)

    def _pending_sync_expiry(self, generation_id: int, t: int) -> None:
        if generation_id != self.generation_id or self.state not in (COMPLETING, STABLE) or not self.pending_sync:
            return
        for member_id in list(self.pending_sync):
            self._remove(member_id)
            self.timers.cancel(TimerKind.HEARTBEAT, member_id)
        self._prepare_rebalance(t)

    # ------------------------------------------------------------------ SyncGroup (section 6)

    def _sync(self, req: SyncGroup, t: int) -> None:
        if self.state is EMPTY:
            self._answer_sync(req.reply, t, Error.UNKNOWN_MEMBER_ID)
            return
        error = self._validate_member(req.member_id, req.group_instance_id)
        if error is Error.NONE and req.generation_id != self.generation_id:
            error = Error.ILLEGAL_GENERATION
        if error is Error.NONE and (
                (req.protocol_type is not None and req.protocol_type != self.protocol_type)
                or (req.protocol_name is not None and req.protocol_name != self.protocol_name)):
            error = Error.INCONSISTENT_GROUP_PROTOCOL
        if error is Error.NONE and self.state is PREPARING:
            error = Error.REBALANCE_IN_PROGRESS
        if error is not Error.NONE:
            self._answer_sync(req.reply, t, error)
            return
        member = self.members[req.member_id]
        if self.state is STABLE:
            self._synced(member.member_id)
            self._answer_sync(req.reply, t, Error.NONE, member.assignment)
            return
        # CompletingRebalance (6.2): park; the leader's assignment completes everyone's.
        if member.sync_waiter is not None:
            self._answer_sync(member.sync_waiter, t, Error.REBALANCE_IN_PROGRESS)
        member.sync_waiter = req.reply
        self._synced(member.member_id)
        if member.member_id == self.leader:
            assignments = dict(req.assignments)
            for each in self.members.values():
                assignment = assignments.get(each.member_id, "")
                if each.assignment != assignment:
                    each.assignment = assignment
                    self._touch()
            for each in self.members.values():
                if each.sync_waiter is not None:
                    self._answer_sync(each.sync_waiter, t, Error.NONE, each.assignment)
                    each.sync_waiter = None
                    self._schedule_session(each, t)
            self._transition_to(STABLE)

    def _synced(self, member_id: str) -> None:
        if self.pending_sync.pop(member_id, 0) is None and not self.pending_sync:
            self.timers.cancel(TimerKind.SYNC)

    # ------------------------------------------------------------------ Heartbeat (section 7)

    def _heartbeat(self, req: Heartbeat, t: int) -> None:
        error = self._validate_member(req.member_id, req.group_instance_id)
        if error is Error.NONE:
            if req.generation_id != self.generation_id:
                error = Error.ILLEGAL_GENERATION
            elif self.state is EMPTY:
                error = Error.UNKNOWN_MEMBER_ID
            else:
                self._schedule_session(self.members[req.member_id], t)
                if self.state is PREPARING:
                    error = Error.REBALANCE_IN_PROGRESS
        self.out.append(envelope(req.reply, self.group_id, t, error_body(error)))

    # ------------------------------------------------------------------ LeaveGroup (section 8)

    def _leave(self, req: LeaveGroup, t: int) -> None:
        results: list[tuple[str, str | None, Error]] = []
        for entry in req.members:
            member_id = entry.member_id
            if member_id == "":
                mapped = None if entry.group_instance_id is None else self.static_members.get(entry.group_instance_id)
                error = Error.UNKNOWN_MEMBER_ID if mapped is None else self._leave_removal(mapped, t)
            elif member_id in self.pending_members:
                self._remove(member_id)
                self.timers.cancel(TimerKind.HEARTBEAT, member_id)
                error = Error.NONE
            else:
                error = self._validate_member(member_id, entry.group_instance_id)
                if error is Error.NONE:
                    self._leave_removal(member_id, t)
            results.append((member_id, entry.group_instance_id, error))
        top = Error.NONE if req.reply.version >= 3 else results[0][2]
        self.out.append(envelope(req.reply, self.group_id, t, leave_body(req.reply.version, top, results)))
        if any(error is Error.NONE for _, _, error in results):
            if self.state in (STABLE, COMPLETING):
                self._maybe_prepare_rebalance_or_complete_join(t)
            elif self.state is PREPARING:
                self._maybe_complete_join_phase(t)

    def _leave_removal(self, member_id: str, t: int) -> Error:
        member = self.members[member_id]
        self.timers.cancel(TimerKind.HEARTBEAT, member_id)
        if member.join_waiter is not None:
            self._answer_join(member.join_waiter, t, Error.UNKNOWN_MEMBER_ID)
        if member.sync_waiter is not None:  # SEMANTICS.md 14.5
            self._answer_sync(member.sync_waiter, t, Error.UNKNOWN_MEMBER_ID)
        self._remove(member_id)
        return Error.NONE

    # ------------------------------------------------------------------ shared procedures (4.1, 4.9)

    def _validate_member(self, member_id: str, instance_id: str | None) -> Error:
        if instance_id is not None:
            mapped = self.static_members.get(instance_id)
            if mapped is None:
                return Error.UNKNOWN_MEMBER_ID
            if mapped != member_id:
                return Error.FENCED_INSTANCE_ID
        return Error.NONE if member_id in self.members else Error.UNKNOWN_MEMBER_ID

    def _remove(self, member_id: str) -> None:
        """Plain removal of a member or a pending id; the leader passes to the first member left."""
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count_protocols(member, -1)
            if member.join_waiter is not None:
                self.awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
            self._touch()
        if self.pending_members.pop(member_id, 0) is None:
            self._touch()
        self.pending_sync.pop(member_id, None)
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)

    def _count_protocols(self, member: Member, delta: int) -> None:
        counts = self.protocol_counts
        for name in {p.name for p in member.protocols}:
            left = counts.get(name, 0) + delta
            if left:
                counts[name] = left
            else:
                del counts[name]

    def _new_member_id(self, prefix: str) -> str:
        """`prefix-uuid`, the uuid derived from the group's identity and a counter (PROTOCOL.md 5)."""
        seq = self.next_id_seq
        self.next_id_seq += 1
        h = hashlib.sha256(f"{self.group_id}\x00{self.created_ms}\x00{seq}".encode()).hexdigest()
        return f"{prefix}-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

    # ------------------------------------------------------------------ answers

    def _answer_join(self, reply: Reply, t: int, error: Error, **fields: Any) -> None:
        if reply.api != "JoinGroup":
            raise IllegalTransition(f"a {reply.api} parked as a JoinGroup")
        self.out.append(envelope(reply, self.group_id, t, join_body(reply.version, error, **fields)))

    def _answer_sync(self, reply: Reply, t: int, error: Error, assignment: str = "") -> None:
        body = (sync_body(reply.version, error, assignment=assignment, protocol_type=self.protocol_type,
                          protocol_name=self.protocol_name)
                if error is Error.NONE else sync_body(reply.version, error))
        self.out.append(envelope(reply, self.group_id, t, body))

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

    validate_member = _validate_member
    schedule_session = _schedule_session

    _HANDLERS: ClassVar[dict[type, Callable[[Group, Any, int], None]]] = {
        JoinGroup: _join,
        SyncGroup: _sync,
        Heartbeat: _heartbeat,
        LeaveGroup: _leave,
    }
