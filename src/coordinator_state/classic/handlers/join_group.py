"""JoinGroup (SEMANTICS.md section 5): new members, known members rejoining, static members replaced."""

from __future__ import annotations

from collections.abc import Callable

from ...errors import Error
from ...records import JoinGroup
from ...timers import TimerKind
from ..answers import answer_join, answer_sync
from ..data import ClassicGroup
from ..membership import add_member, new_member_id, remove, update_member, validate_member
from ..model import COMPLETING, EMPTY, PREPARING, STABLE, ClassicGroupState, Member
from ..rebalance import (
    maybe_complete_join_phase,
    maybe_prepare_rebalance_or_complete_join,
    member_list,
    prepare_rebalance,
    select_protocol,
)


def handle_join_group(group: ClassicGroup, req: JoinGroup, t: int) -> None:
    """5.2 rows 5-7 (rows 1-4 need no group, or create it: group_step.py)."""
    if not _accept_join(group, req.member_id):
        remove(group, req.member_id)
        group.timers.cancel(TimerKind.HEARTBEAT, req.member_id)
        answer_join(group, req.reply, t, Error.GROUP_MAX_SIZE_REACHED)
    elif req.member_id == "":
        _join_new_member(group, req, t)
    else:
        _join_known_member(group, req, t)


def _accept_join(group: ClassicGroup, member_id: str) -> bool:
    """AcceptJoin (4.2): group.max.size (KIP-389)."""
    max_size = group.config.max_size
    if group.state is PREPARING:
        member = group.members.get(member_id)
        return (member is not None and member.join_waiter is not None) or group.awaiting_join < max_size
    if group.state in (COMPLETING, STABLE):
        return member_id in group.members or len(group.members) < max_size
    return True


def _supports_protocols(group: ClassicGroup, req: JoinGroup) -> bool:
    """SupportsProtocols (4.3)."""
    if group.state is EMPTY:
        return req.protocol_type != "" and len(req.protocols) > 0
    count = len(group.members)
    counts = group.protocol_counts
    return req.protocol_type == group.protocol_type and any(counts.get(p.name, 0) == count for p in req.protocols)


def _join_new_member(group: ClassicGroup, req: JoinGroup, t: int) -> None:
    """5.3: a member with an empty member id."""
    if not _supports_protocols(group, req):
        answer_join(group, req.reply, t, Error.INCONSISTENT_GROUP_PROTOCOL)
        return
    instance = req.group_instance_id
    new_id = new_member_id(group, req.reply.client_id if instance is None else instance)
    if instance is not None and instance in group.static_members:
        _replace_static_member(group, req, new_id, t)
    elif instance is not None or req.reply.version <= 3:
        add_member(group, new_id, req, t)
        maybe_prepare_rebalance_or_complete_join(group, t)
    else:  # KIP-394: a dynamic member must rejoin with the id it is given
        group.put(group.pending_members, new_id, group.take_rank())
        group.touch()
        group.timers.schedule(TimerKind.HEARTBEAT, new_id, t + req.session_timeout_ms)
        answer_join(group, req.reply, t, Error.MEMBER_ID_REQUIRED, member_id=new_id)


def _join_known_member(group: ClassicGroup, req: JoinGroup, t: int) -> None:
    """5.4: a member id that is not empty."""
    member_id = req.member_id
    if not _supports_protocols(group, req):
        answer_join(group, req.reply, t, Error.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        return
    if member_id in group.pending_members:
        if req.group_instance_id is not None:
            # Kafka raises an internal error here (SEMANTICS.md 15 row 11); nothing changes.
            answer_join(group, req.reply, t, Error.UNKNOWN_SERVER_ERROR)
        else:
            add_member(group, member_id, req, t)
            maybe_prepare_rebalance_or_complete_join(group, t)
        return
    error = validate_member(group, member_id, req.group_instance_id)
    if error is not Error.NONE:
        answer_join(group, req.reply, t, error, member_id=member_id)
        return
    REJOIN_BY_STATE[group.state](group, group.members[member_id], req, t)


def _rejoin_while_preparing(group: ClassicGroup, member: Member, req: JoinGroup, t: int) -> None:
    """5.4 row 6: parked until the join phase completes."""
    update_member(group, member, req, t)
    maybe_complete_join_phase(group, t)


def _rejoin_while_completing(group: ClassicGroup, member: Member, req: JoinGroup, t: int) -> None:
    """5.4 rows 7-8: the same metadata gets the current generation at once; changed metadata rebalances."""
    if member.matches(req.protocols):
        _answer_current_generation(group, member, req, t)
    else:
        update_member(group, member, req, t)
        prepare_rebalance(group, t)


def _rejoin_while_stable(group: ClassicGroup, member: Member, req: JoinGroup, t: int) -> None:
    """5.4 rows 9-11: the leader, or changed metadata, rebalances; a follower with the same metadata does not."""
    if member.matches(req.protocols) and member.member_id != group.leader:
        _answer_current_generation(group, member, req, t)
    else:
        update_member(group, member, req, t)
        prepare_rebalance(group, t)


def _rejoin_while_empty(group: ClassicGroup, member: Member, req: JoinGroup, t: int) -> None:
    """5.4 row 12: an Empty group has no members, so validation has already refused this."""
    answer_join(group, req.reply, t, Error.UNKNOWN_MEMBER_ID, member_id=member.member_id)


def _answer_current_generation(group: ClassicGroup, member: Member, req: JoinGroup, t: int) -> None:
    """The current generation at once; the request's timeouts are not stored, no heartbeat reschedule."""
    members = member_list(group) if member.member_id == group.leader else []
    answer_join(group, req.reply, t, Error.NONE, member_id=member.member_id, generation_id=group.generation_id,
                      protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                      leader=group.leader or "", members=members)


RejoinAction = Callable[[ClassicGroup, Member, JoinGroup, int], None]

# A known member's JoinGroup, once validated, per state (5.4 rows 6-12).
REJOIN_BY_STATE: dict[ClassicGroupState, RejoinAction] = {
    ClassicGroupState.EMPTY: _rejoin_while_empty,
    ClassicGroupState.PREPARING_REBALANCE: _rejoin_while_preparing,
    ClassicGroupState.COMPLETING_REBALANCE: _rejoin_while_completing,
    ClassicGroupState.STABLE: _rejoin_while_stable,
}


def _replace_static_member(group: ClassicGroup, req: JoinGroup, new_id: str, t: int) -> None:
    """A known group.instance.id rejoining with an empty member id (5.5, ReplaceStaticMember 4.10)."""
    instance = req.group_instance_id
    assert instance is not None
    old_id = group.static_members[instance]
    old = group.members[old_id]
    current_leader = group.leader
    if old.join_waiter is not None:
        answer_join(group, old.join_waiter, t, Error.FENCED_INSTANCE_ID, member_id=old_id)
        group.awaiting_join -= 1
    if old.sync_waiter is not None:
        answer_sync(group, old.sync_waiter, t, Error.FENCED_INSTANCE_ID)
    new = Member(new_id, instance, old.client_id, old.client_host, old.session_timeout_ms,
                 old.rebalance_timeout_ms, old.protocol_type, old.protocols, old.assignment, is_new=False,
                 rank=old.rank)
    group.members = {(new_id if key == old_id else key): (new if key == old_id else value)
                     for key, value in group.members.items()}
    group.put(group.static_members, instance, new_id)
    if group.leader == old_id:
        group.leader = new_id
    group.timers.cancel(TimerKind.HEARTBEAT, old_id)
    group.timers.schedule(TimerKind.HEARTBEAT, new_id, t + old.session_timeout_ms)
    group.touch()
    update_member(group, new, req, t)

    if group.state is PREPARING:
        maybe_complete_join_phase(group, t)
    elif group.state is COMPLETING:
        prepare_rebalance(group, t)
    elif select_protocol(group) != group.protocol_name:
        maybe_prepare_rebalance_or_complete_join(group, t)
    else:  # Stable and the selected protocol stays: the member gets its old assignment back
        new.join_waiter = None
        group.awaiting_join -= 1
        if req.reply.version >= 9 and group.leader == new_id:
            leader, members, skip = new_id, member_list(group), True
        else:
            # Below v9 a replaced leader is told the old leader id so that it does not assign.
            leader, members, skip = current_leader or "", [], False
        answer_join(group, req.reply, t, Error.NONE, member_id=new_id, generation_id=group.generation_id,
                          protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                          leader=leader, members=members, skip_assignment=skip)
