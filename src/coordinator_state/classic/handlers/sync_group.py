"""SyncGroup (SEMANTICS.md section 6): the leader's assignment reaches every member of the generation."""

from __future__ import annotations

from collections.abc import Callable

from ...errors import NO_ERROR, Error
from ...records import SyncGroup
from ..answers import answer_sync
from ..data import ClassicGroup
from ..membership import schedule_session, synced, validate_member
from ..model import STABLE, ClassicGroupState, Member
from ..rebalance import transition_to


def _park_until_assignment(group: ClassicGroup, member: Member, req: SyncGroup, t: int) -> None:
    """CompletingRebalance (6.2): park; the leader's assignment completes everyone's."""
    group.changing(member)
    if member.sync_waiter is not None:  # SEMANTICS.md 14.4
        answer_sync(group, member.sync_waiter, t, Error.REBALANCE_IN_PROGRESS)
    member.sync_waiter = req.reply
    synced(group, member.member_id)
    if member.member_id != group.leader:
        return
    assignments = dict(req.assignments)
    for each in group.members.values():
        group.changing(each)
        assignment = assignments.get(each.member_id, "")
        if each.assignment != assignment:
            each.assignment = assignment
            group.touch()
    for each in group.members.values():
        if each.sync_waiter is not None:
            answer_sync(group, each.sync_waiter, t, NO_ERROR, each.assignment)
            each.sync_waiter = None
            schedule_session(group, each, t)
    transition_to(group, STABLE)


def _answer_stored_assignment(group: ClassicGroup, member: Member, req: SyncGroup, t: int) -> None:
    """Stable (6.1 row 11): the member's assignment at once; no session refresh [4.x]."""
    synced(group, member.member_id)
    answer_sync(group, req.reply, t, NO_ERROR, member.assignment)


SyncAction = Callable[[ClassicGroup, Member, SyncGroup, int], None]

# Answered before the member is looked at (6.1 row 4): an Empty group has no members.
REFUSED_BEFORE_MEMBER_CHECKS: dict[ClassicGroupState, Error] = {ClassicGroupState.EMPTY: Error.UNKNOWN_MEMBER_ID}
# What a valid member of the current generation gets, per state (6.1 rows 9-11).
AFTER_MEMBER_CHECKS: dict[ClassicGroupState, Error | SyncAction] = {
    ClassicGroupState.PREPARING_REBALANCE: Error.REBALANCE_IN_PROGRESS,
    ClassicGroupState.COMPLETING_REBALANCE: _park_until_assignment,
    ClassicGroupState.STABLE: _answer_stored_assignment,
}


def handle_sync_group(group: ClassicGroup, req: SyncGroup, t: int) -> None:
    refused = REFUSED_BEFORE_MEMBER_CHECKS.get(group.state)
    if refused is not None:
        answer_sync(group, req.reply, t, refused)
        return
    error = validate_member(group, req.member_id, req.group_instance_id)
    if error is NO_ERROR and req.generation_id != group.generation_id:
        error = Error.ILLEGAL_GENERATION
    if error is NO_ERROR and (
            (req.protocol_type is not None and req.protocol_type != group.protocol_type)
            or (req.protocol_name is not None and req.protocol_name != group.protocol_name)):
        error = Error.INCONSISTENT_GROUP_PROTOCOL
    if error is not NO_ERROR:
        answer_sync(group, req.reply, t, error)
        return
    action = AFTER_MEMBER_CHECKS[group.state]
    if isinstance(action, Error):
        answer_sync(group, req.reply, t, action)
    else:
        action(group, group.members[req.member_id], req, t)
