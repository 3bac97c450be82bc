"""LeaveGroup (SEMANTICS.md section 8): members leave one by one, then the group rebalances once."""

from __future__ import annotations

from ...errors import Error
from ...records import LeaveGroup
from ...responses import leave_body
from ...timers import TimerKind
from ..answers import answer, answer_join, answer_sync
from ..data import ClassicGroup
from ..membership import remove, validate_member
from ..model import COMPLETING, PREPARING, STABLE
from ..rebalance import maybe_complete_join_phase, maybe_prepare_rebalance_or_complete_join


def handle_leave_group(group: ClassicGroup, req: LeaveGroup, t: int) -> None:
    results: list[tuple[str, str | None, Error]] = []
    for entry in req.members:
        member_id = entry.member_id
        if member_id == "":
            # Administrative removal by instance id: no member id check (8.3 row 1).
            mapped = None if entry.group_instance_id is None else group.static_members.get(entry.group_instance_id)
            error = Error.UNKNOWN_MEMBER_ID if mapped is None else _leave_removal(group, mapped, t)
        elif member_id in group.pending_members:
            remove(group, member_id)
            group.timers.cancel(TimerKind.HEARTBEAT, member_id)
            error = Error.NONE
        else:
            error = validate_member(group, member_id, entry.group_instance_id)
            if error is Error.NONE:
                _leave_removal(group, member_id, t)
        results.append((member_id, entry.group_instance_id, error))
    top = Error.NONE if req.reply.version >= 3 else results[0][2]
    answer(group, req.reply, t, leave_body(req.reply.version, top, results))
    if any(error is Error.NONE for _, _, error in results):  # 8.4
        if group.state in (STABLE, COMPLETING):
            maybe_prepare_rebalance_or_complete_join(group, t)
        elif group.state is PREPARING:
            maybe_complete_join_phase(group, t)


def _leave_removal(group: ClassicGroup, member_id: str, t: int) -> Error:
    """LeaveRemoval (4.9): the member's parked requests are answered, then it is removed."""
    member = group.members[member_id]
    group.timers.cancel(TimerKind.HEARTBEAT, member_id)
    if member.join_waiter is not None:
        answer_join(group, member.join_waiter, t, Error.UNKNOWN_MEMBER_ID)
    if member.sync_waiter is not None:  # SEMANTICS.md 14.5
        answer_sync(group, member.sync_waiter, t, Error.UNKNOWN_MEMBER_ID)
    remove(group, member_id)
    return Error.NONE
