"""Heartbeat (SEMANTICS.md section 7): a member of the current generation keeps its session."""

from __future__ import annotations

from ...errors import NO_ERROR, Error
from ...records import Heartbeat
from ...responses import error_body
from ..answers import answer
from ..data import ClassicGroup
from ..membership import schedule_session, validate_member
from ..model import ClassicGroupState

# The answer to a valid member of the current generation, per state, and whether its session is
# refreshed (rows 6-8). In Empty no member exists, so member validation has already failed.
ANSWER_BY_STATE: dict[ClassicGroupState, tuple[Error, bool]] = {
    ClassicGroupState.EMPTY: (Error.UNKNOWN_MEMBER_ID, False),
    ClassicGroupState.PREPARING_REBALANCE: (Error.REBALANCE_IN_PROGRESS, True),
    ClassicGroupState.COMPLETING_REBALANCE: (Error.NONE, True),
    ClassicGroupState.STABLE: (Error.NONE, True),
}


def handle_heartbeat(group: ClassicGroup, req: Heartbeat, t: int) -> None:
    error = validate_member(group, req.member_id, req.group_instance_id)
    if error is NO_ERROR:
        if req.generation_id != group.generation_id:
            error = Error.ILLEGAL_GENERATION  # the session is not refreshed
        else:
            error, refresh = ANSWER_BY_STATE[group.state]
            if refresh:
                schedule_session(group, group.members[req.member_id], t)
    answer(group, req.reply, t, error_body(error))
