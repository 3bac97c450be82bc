"""The classic group type: Kafka's classic consumer group (SEMANTICS.md), one module behind the group-type
interface of group_types.py.

By concern:

- model.py: its states and their transitions, and its members;
- data.py: its data, declared once (declared.py), and its undo journal;
- membership.py, rebalance.py, expiry.py: the procedures (members; the join phase; what times out);
- offset_rules.py: Kafka's rules for its committed offsets;
- answers.py: the responses it decides;
- handlers/: one module per API, and the table of them;
- events.py: a request or a timer as one atomic event, and the table of timer handlers;
- snapshot.py, codec.py: what it shows and what it stores, derived from its declaration.

It may import the engine's shared modules, never group_types.py or another group type.
"""

from __future__ import annotations

from typing import Any

from ..config import EngineConfig
from ..envelope import Api, Response, response_envelope
from ..errors import Error
from ..no_group_answers import error_response
from ..records import DescribeGroups, Request
from ..responses import error_response_body
from ..timers import RETENTION_TIMER
from .codec import decode, encode
from .data import GROUP_TYPE, ClassicGroup
from .events import deadline_lower_bound, fire_due, handle, next_deadline
from .handlers import HANDLERS, absent_group, describe_groups
from .snapshot import snapshot

NAME = GROUP_TYPE
# The APIs whose requests for a group that does not exist this type answers (or creates the group for).
APIS = frozenset(HANDLERS)
HANDLES = APIS


def create(group_id: str, t: int, config: EngineConfig) -> ClassicGroup:
    """A new Empty group (SEMANTICS.md 5.2 row 4), with its retention timer running."""
    group = ClassicGroup.new(group_id, t, config)
    group.timers.schedule(RETENTION_TIMER, "", t + config.empty_group_retention_ms)
    group.version = 1
    return group


__all__ = ["APIS", "HANDLES", "NAME", "ClassicGroup", "absent_group", "create", "deadline_lower_bound", "decode",
           "encode", "fire_due", "from_other_group", "handle", "next_deadline", "snapshot"]


# The requests that turn an Empty group of another type into a classic one (its offsets kept) before they are
# handled: a JoinGroup, which then joins it; a DeleteGroups, which then removes it with its offsets, as Kafka deletes
# an Empty group of any type (its validateDeleteGroup).
_CONVERTING: dict[str, Error] = {Api.JOIN_GROUP: Error.INCONSISTENT_GROUP_PROTOCOL,
                                 Api.DELETE_GROUPS: Error.NON_EMPTY_GROUP}


def from_other_group(group: Any, req: Request, t: int, config: EngineConfig) -> Response | ClassicGroup:
    """A classic request for a group of another type (a streams group; PROTOCOL.md sections 10 and 11): a JoinGroup
    or a DeleteGroups is INCONSISTENT_GROUP_PROTOCOL or NON_EMPTY_GROUP (StreamsGroup.validateDeleteGroup) on a group
    with members and, on an Empty one, converts it (its offsets kept) where it would create a group (a DeleteGroups
    always); DescribeGroups describes it as Kafka describes a group of another type; the other APIs are answered as
    for a group that does not exist."""
    refusal = _CONVERTING.get(req.reply.api)
    if refusal is not None and not group.is_empty():
        body = error_response_body(req.reply.api, req.reply.version, refusal, group_id=req.group_id)
        return response_envelope(req.reply, req.group_id, t, body)
    if isinstance(req, DescribeGroups):
        return describe_groups.of_another_type(req, t, group.group_type)
    answer = None if req.reply.api == Api.DELETE_GROUPS else absent_group(req, t)
    if answer is not None or refusal is None:
        return answer if answer is not None else error_response(req, t, Error.UNKNOWN_MEMBER_ID)
    converted = create(req.group_id, t, config)
    converted.take_offsets_of(group)
    return converted
