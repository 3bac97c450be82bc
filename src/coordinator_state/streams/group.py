"""A streams group's data and the procedures its requests and timers share (Kafka's StreamsGroup and the streams
paths of GroupMetadataManager; PROTOCOL.md section 10).

Theory of operation. The group holds its members (immutable `StreamsMember`s), their target assignment at the
assignment epoch, the topology as first received, the topology configured against the group's topic view, and its
timers (session and rebalance timeout per member, the initial delay, retention once Empty). A request builds every
new value first and stores them only once it has succeeded (`heartbeat.py`), so a refused request changes nothing
but the view. Every store goes through a method here that bumps `version` when the snapshot changes.

An event is atomic all the same (`begin`, `commit`, `undo`): the group's attributes are saved by reference when it
starts, and each change to the contents of `members`, `static_members` and `targets` (the only containers changed
in place; the others are replaced whole) records its before-image, like the timers' own journal; undoing puts them
back. Members being immutable, that costs O(what the event changed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from enum import StrEnum
from typing import Any

from ..config import EngineConfig
from ..envelope import Response
from ..journal import MISSING, Journal
from ..offsets import CommittedOffset, ExpiryCondition, OffsetChange, OffsetStore
from ..outbox import Outbox
from ..records import Topology
from ..timers import (
    HEARTBEAT_TIMER,
    JOIN_TIMER,
    OFFSETS_TIMER,
    RETENTION_TIMER,
    SYNC_TIMER,
    TimerFailed,
    TimerKind,
    Timers,
)
from .assignor import AssignorMember, SubtopologyTasks, assign
from .member import StreamsMember
from .reconciliation import CurrentOwners, MemberState
from .tasks import EMPTY_TASKS, TaskSets
from .topics import ConfiguredTopology

__all__ = ["GroupState", "StreamsGroup"]

# The timers of a streams group, on the engine's keyed timers: a member's session (HEARTBEAT) and rebalance
# timeout (SYNC, with the member epoch it was set at), the group's initial delay (JOIN) and retention.
SESSION_TIMER, REBALANCE_TIMER, INITIAL_TIMER = HEARTBEAT_TIMER, SYNC_TIMER, JOIN_TIMER


class GroupState(StrEnum):
    """StreamsGroup.StreamsGroupState, as the snapshot and the describe answer name them."""

    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


class StreamsGroup(Outbox):
    """One streams group (StreamsGroup): its data, its state, fencing, target assignment and timers."""

    group_type = "streams"

    def __init__(self, group_id: str, created_ms: int, config: EngineConfig, fresh: bool = False) -> None:
        self.group_id = group_id
        self.config = config
        self.fresh = fresh  # created for the join being handled (PROTOCOL.md section 10's creation artifacts)
        self.settings = config.streams
        self.retention_ms = config.empty_group_retention_ms
        self.group_epoch = 1  # a new group starts at epoch 1 (TargetAssignmentMetadata.INITIAL, KAFKA-20268)
        self.assignment_epoch = 1
        self.topology: Topology | None = None
        self.configured: ConfiguredTopology | None = None
        self.configured_view: dict[str, int] = {}  # the view of the required topics when last configured
        self.validated_topology_epoch = -1
        self.topic_view: dict[str, int] = {}
        self.endpoint_information_epoch = 0
        self.members: dict[str, StreamsMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.targets: dict[str, TaskSets] = {}
        self.last_assignment_ms: int | None = None
        self.standby_replicas_at_bump: int | None = None
        self.shutdown_requested = False
        self.timers = Timers()
        self.clock = created_ms
        self.version = 1
        self.changed_at = created_ms
        self.removed = False
        self.offsets = OffsetStore()  # committed offsets (PROTOCOL.md sections 8 and 10)
        self.out: list[Response] = []
        self.offset_changes: list[OffsetChange] = []  # for the offsets topic, in order
        self._saved: dict[str, object] | None = None
        self._undo: list[tuple[dict[Any, Any], Any, object]] = []
        self._offset_changes_length = 0
        self._expiry_inputs: tuple[bool, Topology | None] = (True, None)

    # ------------------------------------------------------------------ atomic events

    def begin(self) -> None:
        self._saved = dict(self.__dict__)
        self._undo = []
        self._offset_changes_length = len(self.offset_changes)
        self._expiry_inputs = (not self.members, self.topology)
        self.timers.journal = Journal((), len(self.out), self.timers.next_seq)

    def commit(self) -> None:
        """The end of an event: the offsets' expiry is reconsidered if the event may have moved it."""
        if self._saved is not None and (self.offsets or self.timers.get(OFFSETS_TIMER) is not None) and (
                len(self.offset_changes) != self._offset_changes_length
                or self._expiry_inputs != (not self.members, self.topology)):
            self.settle_offset_expiry()
        self._end()

    def _end(self) -> None:
        self._saved = None
        self._undo = []
        self.timers.journal = None

    def undo(self) -> None:
        """Puts the group back as it was at `begin` (an event that raised)."""
        saved, journal = self._saved, self.timers.journal
        assert saved is not None and journal is not None
        for container, key, old in reversed(self._undo):
            if old is MISSING:
                container.pop(key, None)
            else:
                container[key] = old
        journal.undo_entries()
        self.__dict__.update(saved)
        self.timers.next_seq = journal.timer_seq
        self.timers.rebuild_heap()
        del self.out[journal.out_length:]
        del self.offset_changes[self._offset_changes_length:]
        self._end()

    def _put(self, container: dict[Any, Any], key: Any, value: Any) -> None:
        if self._saved is not None:
            self._undo.append((container, key, container.get(key, MISSING)))
        container[key] = value

    def _pop(self, container: dict[Any, Any], key: Any) -> Any:
        if self._saved is not None and key in container:
            self._undo.append((container, key, container[key]))
        return container.pop(key, None)

    def is_empty(self) -> bool:
        return not self.members

    def take_offsets_of(self, other: Any) -> None:
        """A group converted from `other` (a classic group, PROTOCOL.md section 10) keeps its committed offsets and
        the snapshot's version line."""
        self.offsets = other.offsets
        self.version = other.version + 1

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> GroupState:
        """StreamsGroup.maybeUpdateGroupState; a -2 member is never reconciled, so it keeps a group Reconciling."""
        if not self.members:
            return GroupState.EMPTY
        if self.topology is None or self.configured is None or not self.configured.ready:
            return GroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        for member in self.members.values():
            if member.member_epoch != self.assignment_epoch or member.state is not MemberState.STABLE:
                return GroupState.RECONCILING
        return GroupState.STABLE

    def changed(self, t: int) -> None:
        """Something the snapshot shows changed at `t`."""
        self.version += 1
        self.changed_at = t

    def target(self, member_id: str) -> TaskSets:
        return self.targets.get(member_id, EMPTY_TASKS)

    def owners(self) -> CurrentOwners:
        return CurrentOwners.of((m.process_id, m.assigned, m.pending_revocation) for m in self.members.values())

    # ------------------------------------------------------------------ stores

    def set_view(self, topics: Sequence[tuple[str, int]], t: int) -> None:
        if not topics:
            return
        view = dict(self.topic_view)
        view.update(topics)
        if view != self.topic_view:
            self.topic_view = view
            self.changed(t)

    def put_member(self, member: StreamsMember, t: int) -> None:
        old = self.members.get(member.member_id)
        if old is member:
            return
        self._put(self.members, member.member_id, member)
        if member.instance_id is not None:
            self._put(self.static_members, member.instance_id, member.member_id)
        self.timers.cancel(RETENTION_TIMER)
        if old is None or _shown(old) != _shown(member):
            self.changed(t)

    def replace_member(self, old_id: str, member: StreamsMember, t: int) -> None:
        """A static member's restart under a new id takes the replaced member's target (replaceStreamsMember)."""
        self._pop(self.members, old_id)
        if old_id in self.targets:
            self._put(self.targets, member.member_id, self._pop(self.targets, old_id))
        self.put_member(member, t)
        self.changed(t)

    def fence(self, member_id: str, t: int) -> None:
        """streamsGroupFenceMember: the member is removed and the group epoch rises by 1; the last one out also
        sets the assignment epoch to the group epoch (KAFKA-20442)."""
        member = self._pop(self.members, member_id)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            self._pop(self.static_members, member.instance_id)
        self._pop(self.targets, member_id)
        self.timers.cancel(SESSION_TIMER, member_id)
        self.timers.cancel(REBALANCE_TIMER, member_id)
        self.bump_group_epoch()
        if not self.members:
            self.assignment_epoch = self.group_epoch
            self.shutdown_requested = False
            self.timers.schedule(RETENTION_TIMER, "", t + self.retention_ms)
        self.changed(t)

    def bump_group_epoch(self) -> None:
        self.group_epoch += 1
        self.standby_replicas_at_bump = self.settings.num_standby_replicas

    # ------------------------------------------------------------------ target assignment

    def compute_targets(self, t: int) -> None:
        """The target assignment of every member at the group epoch (TargetAssignmentBuilder with the sticky
        assignor; empty for everyone while the topology is not ready)."""
        configured = self.configured
        if configured is not None and configured.ready and configured.subtopologies is not None:
            subtopologies = [SubtopologyTasks(s.subtopology_id, s.task_count, s.stateful)
                             for s in configured.subtopologies]
            members = [AssignorMember(m.member_id, m.instance_id, m.process_id, frozenset(m.assigned.active),
                                      m.assigned.standby) for m in self.members.values()]
            result = assign(members, subtopologies, self.settings.num_standby_replicas)
            targets = {member_id: TaskSets(tasks.active, tasks.standby) for member_id, tasks in result.items()}
        else:
            targets = dict.fromkeys(self.members, EMPTY_TASKS)
        self.targets = targets
        self.assignment_epoch = self.group_epoch
        self.last_assignment_ms = t
        self.changed(t)

    def assignment_delayed(self, t: int) -> bool:
        """The initial delay is pending, or the last computation is more recent than the assignment interval."""
        return self.timers.get(INITIAL_TIMER) is not None or (
            self.last_assignment_ms is not None and t - self.last_assignment_ms < self.settings.assignment_interval_ms)

    # ------------------------------------------------------------------ committed offsets

    def commit_offset(self, topic: str, partition: int, value: CommittedOffset) -> None:
        """Stores one committed offset and records the change for the offsets topic."""
        self._put(self.offsets.entries, (topic, partition), value)
        self.offset_changes.append(OffsetChange(self.group_id, topic, partition, value))

    def subscribed_topics(self) -> frozenset[str]:
        """StreamsGroup.isSubscribedToTopic: while the group has members, its topology's source and repartition
        source topics."""
        topology = self.topology
        return frozenset() if not self.members or topology is None else frozenset(
            topic for s in topology.subtopologies
            for topic in (*s.source_topics, *(t.name for t in s.repartition_source_topics)))

    def expiry_condition(self) -> ExpiryCondition:
        """StreamsGroup.offsetExpirationCondition (from each offset's commit time) with isSubscribedToTopic folded
        in: offsets of the topics it is subscribed to never expire."""
        return ExpiryCondition(self.config.offsets_retention_ms, kept_topics=self.subscribed_topics())

    def remove_offset(self, topic: str, partition: int) -> None:
        """Removes one committed offset, if there is one, and records the tombstone for the offsets topic."""
        if (topic, partition) in self.offsets.entries:
            self._pop(self.offsets.entries, (topic, partition))
            self.offset_changes.append(OffsetChange(self.group_id, topic, partition, None))

    def remove_if_forgotten(self) -> None:
        """An Empty group without offsets whose retention timer has already fired goes now (when the timer is still
        pending, it goes then)."""
        if not self.members and not self.offsets and self.timers.get(RETENTION_TIMER) is None:
            self.removed = True

    def settle_offset_expiry(self) -> None:
        """The offsets timer at the next expiry deadline under the group's condition now (after an event that may
        have moved it: a commit, a first member or a last one, a topology)."""
        deadline = self.offsets.next_deadline(self.expiry_condition())
        if deadline is None:
            self.timers.cancel(OFFSETS_TIMER)
        else:
            timer = self.timers.get(OFFSETS_TIMER)
            if timer is None or timer.deadline != deadline:
                self.timers.schedule(OFFSETS_TIMER, "", deadline)

    def _expire_offsets(self, t: int) -> None:
        """OffsetMetadataManager.cleanupExpiredOffsets: what expired by `t` goes; an Empty group whose last offset
        went is removed."""
        for topic, partition in self.offsets.expired(self.expiry_condition(), t):
            self.remove_offset(topic, partition)
        if not self.members and not self.offsets:
            self.removed = True
        else:
            self.settle_offset_expiry()

    # ------------------------------------------------------------------ timers

    def fire_due(self, now: int) -> None:
        """Fires every timer due at or before `now`, in (deadline, scheduling) order; firing answers nothing.

        Each firing is one atomic event: one that raises leaves the group as it was before it, with that timer
        dropped (so that it cannot fire again and again), and the exception goes on to the caller."""
        while (timer := self.timers.pop_due(now)) is not None:
            self.begin()
            try:
                self._fire(timer.kind, timer.target, timer.payload, max(self.clock, timer.deadline))
            except Exception as error:
                self.undo()
                self.timers.cancel(timer.kind, timer.target)
                raise TimerFailed(f"group {self.group_id!r}: timer {timer.key} at {timer.deadline}; dropped") from error
            self.commit()
            if self.removed:
                return

    def _fire(self, kind: TimerKind, target: str, payload: tuple[int, ...], t: int) -> None:
        self.clock = t
        if kind is SESSION_TIMER:
            if target in self.members:
                self.fence(target, t)
        elif kind is REBALANCE_TIMER:
            member = self.members.get(target)
            if member is not None and member.member_epoch == payload[0]:
                self.fence(target, t)
        elif kind is INITIAL_TIMER:
            # computeDelayedTargetAssignment; 4.4 skips it when only the group-creating heartbeat configured the
            # topology, this engine does not (PROTOCOL.md section 10, Timers)
            if self.members and self.group_epoch > self.assignment_epoch:
                self.compute_targets(t)
        elif kind is RETENTION_TIMER:
            if not self.members and not self.offsets:
                self.removed = True
        elif kind is OFFSETS_TIMER:
            self._expire_offsets(t)

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()


def _shown(member: StreamsMember) -> StreamsMember:
    """The member as the snapshot shows it (task offsets are state, not snapshot)."""
    return replace(member, task_offsets=(), task_end_offsets=()) if member.task_offsets or member.task_end_offsets \
        else member
