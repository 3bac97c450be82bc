"""What expires in a classic group (SEMANTICS.md 2, 13; docs/OFFSETS_AND_LISTING.md 9): member sessions, pending
member ids, the pending-sync window, an Empty group's retention, and committed offsets.

Committed offsets are not in the snapshot, so a commit or an expiry is no change there; every change to them
is recorded in `offset_changes` for the offsets topic (and in the undo journal, like every other change).
One `offsets` timer sits at the next expiry deadline under the group's current expiry condition; whatever
can move that deadline (a commit, a transition, new subscriptions) marks it, and `settle_offset_expiry`
reschedules it at the end of the event.
"""

from __future__ import annotations

from ..errors import Error
from ..offsets import CommittedOffset, ExpiryCondition, OffsetChange
from ..records import new_record
from ..timers import HEARTBEAT_TIMER, OFFSETS_TIMER, Timer
from .answers import answer_join
from .data import ClassicGroup
from .membership import remove
from .model import COMPLETING, EMPTY, PREPARING, STABLE
from .offset_rules import expiry_condition as classic_expiry_condition
from .rebalance import all_joined, complete_join, maybe_prepare_rebalance_or_complete_join, prepare_rebalance


def heartbeat_expired(group: ClassicGroup, timer: Timer, t: int) -> None:
    """The heartbeat timer of a member (SessionExpiry) or of a pending member id (PendingExpiry)."""
    if timer.target in group.pending_members:
        _pending_expiry(group, timer.target, t)
    else:
        _session_expiry(group, timer.target, t)


def _session_expiry(group: ClassicGroup, member_id: str, t: int) -> None:
    member = group.members.get(member_id)
    if member is None:
        return
    if not member.is_new and (member.join_waiter is not None or member.sync_waiter is not None):
        return  # a member waiting in a rebalance satisfies its heartbeats
    if member.join_waiter is not None:
        answer_join(group, member.join_waiter, t, Error.UNKNOWN_MEMBER_ID)
    remove(group, member_id)
    if group.state in (STABLE, COMPLETING):
        maybe_prepare_rebalance_or_complete_join(group, t)
    elif group.state is PREPARING and all_joined(group):
        complete_join(group, t)


def _pending_expiry(group: ClassicGroup, member_id: str, t: int) -> None:
    remove(group, member_id)
    if group.state is PREPARING and all_joined(group):
        complete_join(group, t)


def pending_sync_expired(group: ClassicGroup, timer: Timer, t: int) -> None:
    """PendingSyncExpiry of the generation the timer was scheduled with."""
    if (timer.payload[0] != group.generation_id or group.state not in (COMPLETING, STABLE)
            or not group.pending_sync):
        return
    for member_id in list(group.pending_sync):
        remove(group, member_id)
        group.timers.cancel(HEARTBEAT_TIMER, member_id)
    prepare_rebalance(group, t)


def retention_expired(group: ClassicGroup, timer: Timer, t: int) -> None:
    """GroupRetention: a group still Empty is removed; one with offsets goes with its last one instead."""
    if group.state is EMPTY and not group.offsets:
        group.removed = True
        group.touch()


# ---------------------------------------------------------------------------------------------- offsets

def commit_offset(group: ClassicGroup, topic: str, partition: int, value: CommittedOffset) -> None:
    """Stores one committed offset and records the change for the offsets topic."""
    group.put(group.offsets.entries, (topic, partition), value)
    group.offset_changes.append(new_record(OffsetChange, (group.group_id, topic, partition, value)))
    condition = expiry_condition(group)
    deadline = None if condition is None else condition.deadline(topic, value)
    if deadline is not None and (group.new_deadline is None or deadline < group.new_deadline):
        group.new_deadline = deadline


def expiry_condition(group: ClassicGroup) -> ExpiryCondition | None:
    """The group's offset expiry condition now (kept until a transition or new subscriptions change it)."""
    if group.condition is None:
        group.condition = (classic_expiry_condition(group.state, group.protocol_type, group.state_since_ms,
                                                    group.subscribed_topics, group.config.offsets_retention_ms),)
    return group.condition[0]


def settle_offset_expiry(group: ClassicGroup) -> None:
    """At the end of an event: the offsets timer at the next expiry deadline, if the event may have moved it."""
    if group.expiry_moved:
        group.expiry_moved = False
        group.new_deadline = None
        group.condition = None
        deadline = group.offsets.next_deadline(expiry_condition(group))
        timer = group.timers.get(OFFSETS_TIMER)
        if deadline is None:
            group.timers.cancel(OFFSETS_TIMER)
        elif timer is None or timer.deadline != deadline:
            group.timers.schedule(OFFSETS_TIMER, "", deadline)
    elif group.new_deadline is not None:
        # A commit can only bring the next expiry earlier through its own offset: a timer left too early by an
        # offset it replaced fires, finds nothing expired and moves on.
        timer = group.timers.get(OFFSETS_TIMER)
        if timer is None or group.new_deadline < timer.deadline:
            group.timers.schedule(OFFSETS_TIMER, "", group.new_deadline)
        group.new_deadline = None


def remove_offset(group: ClassicGroup, topic: str, partition: int) -> None:
    """Removes one committed offset, if there is one, and records its tombstone for the offsets topic."""
    if group.offsets.get(topic, partition) is None:
        return
    group.pop(group.offsets.entries, (topic, partition))
    group.offset_changes.append(OffsetChange(group.group_id, topic, partition, None))
    group.expiry_moved = True


def remove_if_drained(group: ClassicGroup) -> None:
    """An Empty group whose last offset went (expired or deleted) is removed with it (PROTOCOL.md 8, 11)."""
    if group.state is EMPTY and not group.offsets:
        group.removed = True
        group.touch()


def offsets_expired(group: ClassicGroup, timer: Timer, t: int) -> None:
    """OffsetExpiry (9.3): drop what expired by `t`; an Empty group whose last offset went is removed."""
    for topic, partition in group.offsets.expired(expiry_condition(group), t):
        remove_offset(group, topic, partition)
    group.expiry_moved = True
    remove_if_drained(group)
