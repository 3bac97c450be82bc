"""The request handlers, one module per API, and the table that dispatches a request to its handler.

A handler runs for a group that exists, at the request's time `t` (already the group's clock, with the
group's due timers fired); the checks that need no group and the answers for a group that does not exist
come before it (group_step.py). A handler changes the group only through its data and the shared
procedures of group.py, and appends its answers to `group.out`. A new API is a new module here and one
line in `HANDLERS`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..envelope import Api, Response
from ..group import Group
from ..records import Request
from . import describe_groups, offset_commit, offset_fetch
from .heartbeat import handle_heartbeat
from .join_group import handle_join_group
from .leave_group import handle_leave_group
from .sync_group import handle_sync_group

Handler = Callable[[Group, Any, int], None]
# The answer for a group that does not exist, or None when the request creates the group, for the APIs
# whose answer is their own (the membership APIs' absent-group answers are in engine.py).
AbsentGroupAnswer = Callable[[Any, int], Response | None]

HANDLERS: dict[str, Handler] = {
    Api.JOIN_GROUP: handle_join_group,
    Api.SYNC_GROUP: handle_sync_group,
    Api.HEARTBEAT: handle_heartbeat,
    Api.LEAVE_GROUP: handle_leave_group,
    Api.OFFSET_COMMIT: offset_commit.handle_offset_commit,
    Api.OFFSET_FETCH: offset_fetch.handle_offset_fetch,
    Api.DESCRIBE_GROUPS: describe_groups.handle_describe_groups,
}

ABSENT_GROUP_ANSWERS: dict[str, AbsentGroupAnswer] = {
    Api.OFFSET_COMMIT: offset_commit.absent_group,
    Api.OFFSET_FETCH: offset_fetch.absent_group,
    Api.DESCRIBE_GROUPS: describe_groups.absent_group,
}


def apply_request(group: Group, request: Request, t: int) -> None:
    """Processes one request at `t` (already >= the group's clock; due timers already fired)."""
    group.clock = t
    HANDLERS[request.reply.api](group, request, t)
    group.end_event(t)
    group.fire_due(t)  # timers the request scheduled with a zero delay (SEMANTICS.md T3)


__all__ = ["ABSENT_GROUP_ANSWERS", "HANDLERS", "AbsentGroupAnswer", "Handler", "apply_request"]
