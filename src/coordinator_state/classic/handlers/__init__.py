"""The classic group's request handlers, one module per API, and the table that dispatches a request to its handler.

A handler runs for a group that exists, at the request's time `t` (already the group's clock, with the
group's due timers fired); the checks that need no group come before it (group_step.py), and the answers for
a group that does not exist are `absent_group`'s. A handler changes the group only through its data
(data.py) and the procedures of the modules beside it, and appends its answers to `group.out`. A new API is
a new module here and one line in `HANDLERS` (and in `ABSENT_GROUP_ANSWERS` if its answer is its own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...envelope import Api, Response, response_envelope
from ...errors import Error
from ...no_group_answers import error_response
from ...records import JoinGroup, LeaveGroup, Request
from ...responses import leave_body
from ..data import ClassicGroup
from . import delete_groups, describe_groups, offset_commit, offset_delete, offset_fetch
from .heartbeat import handle_heartbeat
from .join_group import handle_join_group
from .leave_group import handle_leave_group
from .sync_group import handle_sync_group

Handler = Callable[[ClassicGroup, Any, int], None]
# The answer for a group that does not exist, or None when the request creates the group, for the APIs
# whose answer is their own (the membership APIs' are `absent_group`'s).
AbsentGroupAnswer = Callable[[Any, int], Response | None]

HANDLERS: dict[str, Handler] = {
    Api.JOIN_GROUP: handle_join_group,
    Api.SYNC_GROUP: handle_sync_group,
    Api.HEARTBEAT: handle_heartbeat,
    Api.LEAVE_GROUP: handle_leave_group,
    Api.OFFSET_COMMIT: offset_commit.handle_offset_commit,
    Api.OFFSET_FETCH: offset_fetch.handle_offset_fetch,
    Api.DESCRIBE_GROUPS: describe_groups.handle_describe_groups,
    Api.DELETE_GROUPS: delete_groups.handle_delete_groups,
    Api.OFFSET_DELETE: offset_delete.handle_offset_delete,
}

ABSENT_GROUP_ANSWERS: dict[str, AbsentGroupAnswer] = {
    Api.OFFSET_COMMIT: offset_commit.absent_group,
    Api.OFFSET_FETCH: offset_fetch.absent_group,
    Api.DESCRIBE_GROUPS: describe_groups.absent_group,
    Api.DELETE_GROUPS: delete_groups.absent_group,
    Api.OFFSET_DELETE: offset_delete.absent_group,
}


def absent_group(req: Request, t: int) -> Response | None:
    """The answer to a request for a group that does not exist, or None when the request creates it."""
    own_answer = ABSENT_GROUP_ANSWERS.get(req.reply.api)
    if own_answer is not None:
        return own_answer(req, t)
    if isinstance(req, JoinGroup) and req.member_id == "":
        return None
    if isinstance(req, LeaveGroup):
        entries = [(e.member_id, e.group_instance_id, Error.UNKNOWN_MEMBER_ID) for e in req.members]
        top = Error.NONE if req.reply.version >= 3 else Error.UNKNOWN_MEMBER_ID
        return response_envelope(req.reply, req.group_id, t, leave_body(req.reply.version, top, entries))
    return error_response(req, t, Error.UNKNOWN_MEMBER_ID)


__all__ = ["ABSENT_GROUP_ANSWERS", "HANDLERS", "AbsentGroupAnswer", "Handler", "absent_group"]
