"""The classic group's rebalance (SEMANTICS.md 4.4, 4.7, 4.8, 12): preparing and completing the join phase,
the initial delay, protocol selection, and the state transitions they make."""

from __future__ import annotations

from ..errors import NO_ERROR, Error
from ..offsets import CONSUMER_PROTOCOL_TYPE
from ..subscriptions import subscribed_topics
from ..timers import HEARTBEAT_TIMER, JOIN_TIMER, RETENTION_TIMER, SYNC_TIMER, Timer
from .answers import answer_join, answer_sync
from .data import ClassicGroup
from .membership import remove, schedule_session
from .model import (
    COMPLETING,
    EMPTY,
    PREPARING,
    STABLE,
    VALID_PREVIOUS_STATES,
    ClassicGroupState,
    IllegalTransition,
    metadata_for,
)

MemberListEntry = tuple[str, str | None, str]  # (member_id, group_instance_id, metadata)


def maybe_prepare_rebalance_or_complete_join(group: ClassicGroup, t: int) -> None:
    if group.state in (EMPTY, STABLE, COMPLETING):
        prepare_rebalance(group, t)
    else:
        maybe_complete_join_phase(group, t)


def maybe_complete_join_phase(group: ClassicGroup, t: int) -> None:
    """Completes the join phase early when everyone has joined, except during an initial rebalance."""
    if group.state is PREPARING and group.previous_state is not EMPTY and all_joined(group):
        complete_join(group, t)


def all_joined(group: ClassicGroup) -> bool:
    return group.awaiting_join == len(group.members) and not group.pending_members


def group_rebalance_timeout(group: ClassicGroup) -> int:
    return max((m.rebalance_timeout_ms for m in group.members.values()), default=0)


def prepare_rebalance(group: ClassicGroup, t: int) -> None:
    """PrepareRebalance (4.7)."""
    if group.state is COMPLETING:
        for member in group.members.values():
            group.changing(member)
            if member.assignment:
                member.assignment = ""
                group.touch()
            if member.sync_waiter is not None:
                answer_sync(group, member.sync_waiter, t, Error.REBALANCE_IN_PROGRESS)
                member.sync_waiter = None
                schedule_session(group, member, t)
    group.clear(group.pending_sync)
    group.timers.cancel(SYNC_TIMER)
    initial = group.state is EMPTY
    if initial:
        delay = group.config.initial_rebalance_delay_ms
        remaining = max(group_rebalance_timeout(group) - delay, 0)
        group.timers.schedule(JOIN_TIMER, "", t + delay, (delay, remaining))
    transition_to(group, PREPARING)
    if not initial:
        if all_joined(group):
            complete_join(group, t)
        else:
            group.timers.schedule(JOIN_TIMER, "", t + group_rebalance_timeout(group))


def join_timer_fired(group: ClassicGroup, timer: Timer, t: int) -> None:
    """The join timer: the end of an initial delay (its payload: the delay and what remains), or the rebalance
    timeout (no payload)."""
    if timer.payload:
        _initial_delay_fire(group, timer.payload[0], timer.payload[1], t)
    else:
        complete_join(group, t)


def _initial_delay_fire(group: ClassicGroup, delay: int, remaining: int, t: int) -> None:
    """KIP-134: extend the initial delay while new members keep arriving, up to the rebalance timeout."""
    if group.new_member_added and remaining != 0:
        group.new_member_added = False
        new_delay = min(group.config.initial_rebalance_delay_ms, remaining)
        new_remaining = max(remaining - delay, 0)
        group.timers.schedule(JOIN_TIMER, "", t + new_delay, (new_delay, new_remaining))
    else:
        complete_join(group, t)


def complete_join(group: ClassicGroup, t: int) -> None:
    """CompleteJoin (4.8)."""
    group.timers.cancel(JOIN_TIMER)
    for member in [m for m in group.members.values() if m.join_waiter is None and m.group_instance_id is None]:
        remove(group, member.member_id)
        group.timers.cancel(HEARTBEAT_TIMER, member.member_id)
    if not _elect_joined_leader(group) and group.members:
        # Only static members that did not rejoin are left: wait for them, or for their sessions (Kafka's
        # completeClassicGroupJoin postpones by the rebalance timeout; when that is 0, SEMANTICS.md T3a).
        group.timers.schedule(JOIN_TIMER, "", t + group_rebalance_timeout(group))
        return
    group.generation_id += 1
    group.clear(group.pending_sync)
    group.touch()
    if not group.members:
        group.protocol_name = None
        _compute_subscribed_topics(group)
        transition_to(group, EMPTY)
        group.timers.schedule(RETENTION_TIMER, "", t + group.config.empty_group_retention_ms)
        return
    group.protocol_name = select_protocol(group)
    _compute_subscribed_topics(group)
    transition_to(group, COMPLETING)
    leader = group.leader or ""
    for member in group.members.values():
        group.changing(member)
        if member.join_waiter is not None:
            members = member_list(group) if member.member_id == leader else []
            answer_join(group, member.join_waiter, t, NO_ERROR, member_id=member.member_id,
                        generation_id=group.generation_id, protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name, leader=leader, members=members)
            member.join_waiter = None
        schedule_session(group, member, t)
        member.is_new = False
        group.put(group.pending_sync, member.member_id, member.rank)
    group.awaiting_join = 0
    group.timers.schedule(SYNC_TIMER, "", t + group_rebalance_timeout(group), (group.generation_id,))


def _elect_joined_leader(group: ClassicGroup) -> bool:
    if group.leader is None:
        return False
    if group.members[group.leader].join_waiter is not None:
        return True
    for member in group.members.values():
        if member.join_waiter is not None:
            group.leader = member.member_id
            group.touch()
            return True
    return False


def select_protocol(group: ClassicGroup) -> str | None:
    """SelectProtocol (4.4): the candidate most members prefer; ties go to the smallest name (14.3)."""
    count = len(group.members)
    candidates = {name for name, n in group.protocol_counts.items() if n == count}
    votes: dict[str, int] = {}
    for member in group.members.values():
        for protocol in member.protocols:
            if protocol.name in candidates:
                votes[protocol.name] = votes.get(protocol.name, 0) + 1
                break
    return min(votes, key=lambda name: (-votes[name], name), default=None)


def member_list(group: ClassicGroup) -> list[MemberListEntry]:
    """The leader's member list (9.2): every member's metadata for the selected protocol."""
    name = group.protocol_name
    return [(m.member_id, m.group_instance_id, metadata_for(m.protocols, name) or "") for m in group.members.values()]


def transition_to(group: ClassicGroup, state: ClassicGroupState) -> None:
    """The one way the state changes: refused unless model.VALID_PREVIOUS_STATES allows it."""
    if group.state not in VALID_PREVIOUS_STATES[state]:
        raise IllegalTransition(f"group {group.group_id!r}: {group.state.value} -> {state.value}")
    group.previous_state = group.state
    group.state = state
    group.state_since_ms = group.clock
    group.expiry_moved = True  # the offsets' expiry condition depends on the state (expiry.py)
    group.touch()


def _compute_subscribed_topics(group: ClassicGroup) -> None:
    """ClassicGroup.computeSubscribedTopics, at the end of every join phase (OFFSETS_AND_LISTING.md 9.2)."""
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        group.subscribed_topics = None
    else:
        name = group.protocol_name
        group.subscribed_topics = subscribed_topics(metadata_for(m.protocols, name) for m in group.members.values())
