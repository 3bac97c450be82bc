"""The classic group's members (SEMANTICS.md 4.1, 4.5, 4.6, 4.9, 10): validation, adding, updating, removing.

These change the members and what is derived from them (the static map, the parked-join count, the
per-protocol counts) and nothing else: what a change of membership means for the rebalance is rebalance.py's.
"""

from __future__ import annotations

import hashlib

from ..errors import NO_ERROR, Error
from ..journal import MISSING
from ..records import JoinGroup
from ..timers import HEARTBEAT_TIMER, RETENTION_TIMER, SYNC_TIMER
from .answers import answer_join
from .data import ClassicGroup
from .model import EMPTY, PREPARING, Member, metadata_for

# Kafka's fixed timeout for a new member to complete its first join (NEW_MEMBER_JOIN_TIMEOUT_MS).
NEW_MEMBER_JOIN_TIMEOUT_MS = 300000


def validate_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> Error:
    """ValidateMember (4.1)."""
    if instance_id is not None:
        mapped = group.static_members.get(instance_id)
        if mapped is None:
            return Error.UNKNOWN_MEMBER_ID
        if mapped != member_id:
            return Error.FENCED_INSTANCE_ID
    return NO_ERROR if member_id in group.members else Error.UNKNOWN_MEMBER_ID


def add_member(group: ClassicGroup, member_id: str, req: JoinGroup, t: int) -> None:
    """AddMember (4.5) steps 1-3: the new member's JoinGroup stays parked until the join phase completes (the
    caller goes on with step 4, rebalance.maybe_prepare_rebalance_or_complete_join)."""
    if group.state is PREPARING and group.previous_state is EMPTY:
        group.new_member_added = True
    member = Member(member_id, req.group_instance_id, req.reply.client_id, req.client_host,
                    req.session_timeout_ms, req.rebalance_timeout_ms, req.protocol_type, req.protocols,
                    join_waiter=req.reply, rank=group.take_rank())
    if not group.members:
        group.protocol_type = req.protocol_type
    if group.leader is None:
        group.leader = member_id
    group.put(group.members, member_id, member)
    group.awaiting_join += 1
    count_protocols(group, member, +1)
    if member.group_instance_id is not None:
        group.put(group.static_members, member.group_instance_id, member_id)
    group.pop(group.pending_members, member_id)
    group.timers.cancel(RETENTION_TIMER)
    group.timers.schedule(HEARTBEAT_TIMER, member_id, t + NEW_MEMBER_JOIN_TIMEOUT_MS)
    group.touch()


def update_member(group: ClassicGroup, member: Member, req: JoinGroup, t: int) -> None:
    """UpdateMember (4.6): store the rejoin's protocols and timeouts; park its JoinGroup."""
    group.changing(member)
    if member.protocols != req.protocols:
        subscription = metadata_for(member.protocols, group.protocol_name)  # what the snapshot shows of them
        count_protocols(group, member, -1)
        member.protocols = req.protocols
        count_protocols(group, member, +1)
        if metadata_for(member.protocols, group.protocol_name) != subscription:
            group.touch()
    if (member.session_timeout_ms, member.rebalance_timeout_ms) != (
            req.session_timeout_ms, req.rebalance_timeout_ms):
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        group.touch()
    if member.join_waiter is not None:  # SEMANTICS.md 14.4: the older one is answered, not dropped
        answer_join(group, member.join_waiter, t, Error.REBALANCE_IN_PROGRESS, member_id=member.member_id)
    else:
        group.awaiting_join += 1
    member.join_waiter = req.reply


def remove(group: ClassicGroup, member_id: str) -> None:
    """Plain removal of a member or a pending id (4.9); the leader passes to the first member left."""
    member = group.pop(group.members, member_id)
    if member is not MISSING:
        count_protocols(group, member, -1)
        if member.join_waiter is not None:
            group.awaiting_join -= 1
        if member.group_instance_id is not None:
            group.pop(group.static_members, member.group_instance_id)
        group.touch()
    if group.pop(group.pending_members, member_id) is not MISSING:
        group.touch()
    group.pop(group.pending_sync, member_id)
    if group.leader == member_id:
        group.leader = next(iter(group.members), None)


def count_protocols(group: ClassicGroup, member: Member, delta: int) -> None:
    """Adds (+1) or takes away (-1) `member`'s protocols from the per-protocol member counts."""
    counts = group.protocol_counts
    for name in {p.name for p in member.protocols}:
        left = counts.get(name, 0) + delta
        if left:
            group.put(counts, name, left)
        else:
            group.pop(counts, name)


def new_member_id(group: ClassicGroup, prefix: str) -> str:
    """`prefix-uuid`, the uuid derived from the group's identity and a counter (PROTOCOL.md 5)."""
    seq = group.next_id_seq
    group.next_id_seq += 1
    h = hashlib.sha256(f"{group.group_id}\x00{group.created_ms}\x00{seq}".encode()).hexdigest()
    return f"{prefix}-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def synced(group: ClassicGroup, member_id: str) -> None:
    """`member_id` sent its SyncGroup: the pending-sync timer stops when nobody is left to sync."""
    if group.pop(group.pending_sync, member_id) is not MISSING and not group.pending_sync:
        group.timers.cancel(SYNC_TIMER)


def schedule_session(group: ClassicGroup, member: Member, t: int) -> None:
    group.timers.schedule(HEARTBEAT_TIMER, member.member_id, t + member.session_timeout_ms)
