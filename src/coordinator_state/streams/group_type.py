"""The streams group type (PROTOCOL.md section 10): what the engine's shells call for a streams group.

The module the group-type registry chooses for a streams group and for the streams APIs' requests to a group that
does not exist: answers for an absent group, creation, a request's event, its timers, its next deadline, its
snapshot and its stored state. Each event is atomic: one that raises leaves the group as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..config import EngineConfig
from ..envelope import Api, Response, response_envelope
from ..errors import Error
from ..records import (
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    Reply,
    Request,
    StreamsGroupDescribe,
    StreamsGroupHeartbeat,
)
from .answers import heartbeat_body
from .codec import decode_streams_group, encode_streams_group
from .group import StreamsGroup
from .heartbeat import steady_heartbeat, streams_heartbeat
from .offsets import handle_offset_commit, handle_offset_delete, handle_offset_fetch
from .views import describe_entry, not_found_entry, snapshot

if TYPE_CHECKING:
    from ..group_types import Group

__all__ = ["APIS", "HANDLES", "NAME", "absent_group", "create", "deadline_lower_bound", "decode", "describe_response",
           "encode", "fire_due", "from_other_group", "handle", "next_deadline", "snapshot"]

NAME = "streams"
STREAMS_GROUP_HEARTBEAT, STREAMS_GROUP_DESCRIBE = "StreamsGroupHeartbeat", "StreamsGroupDescribe"
APIS = frozenset({STREAMS_GROUP_HEARTBEAT, STREAMS_GROUP_DESCRIBE})
# A streams group also takes the offsets APIs (StreamsGroup.validateOffsetCommit / validateOffsetFetch /
# validateOffsetDelete); the classic group's other APIs meet it through the classic type's `from_other_group`.
HANDLES = APIS | {Api.OFFSET_COMMIT, Api.OFFSET_FETCH, Api.OFFSET_DELETE}
StreamsRequest = StreamsGroupHeartbeat | StreamsGroupDescribe

# Whether a request to an absent group creates one does not depend on the settings (a first member always fits):
# the defaults decide it.
_DEFAULTS = EngineConfig()


def absent_group(request: StreamsRequest, t: int) -> Response | None:
    """The answer for a group that does not exist, or None when the request creates one (a join that succeeds)."""
    if isinstance(request, StreamsGroupDescribe):
        return describe_response(None, request, t)
    outcome = streams_heartbeat(None, request, t, _DEFAULTS)
    return None if outcome.group is not None else _heartbeat_response(request.reply, request.group_id, t,
                                                                      outcome.body, outcome.create_topics)


def create(group_id: str, t: int, config: EngineConfig) -> StreamsGroup:
    return StreamsGroup(group_id, t, config, fresh=True)


def from_other_group(group: Group, request: StreamsRequest, t: int, config: EngineConfig) -> Response | StreamsGroup:
    """A streams request for a group of another type (a classic group): StreamsGroupDescribe and a heartbeat that
    is not a join read it as absent; a join converts an Empty one (its offsets kept) and is GROUP_ID_NOT_FOUND on
    any other (PROTOCOL.md section 10, group types)."""
    answer = absent_group(request, t)
    if answer is not None:
        return answer
    if not group.is_empty():
        assert isinstance(request, StreamsGroupHeartbeat)
        body = heartbeat_body(Error.GROUP_ID_NOT_FOUND,
                              message=f"Group {request.group_id} is not a streams group.")
        return _heartbeat_response(request.reply, request.group_id, t, body, None)
    converted = create(request.group_id, t, config)
    converted.take_offsets_of(group)
    return converted


def handle(group: StreamsGroup, request: Request, t: int) -> None:
    """A request's event at `t` (one of `HANDLES`); its answer goes to `group.out`."""
    if type(request) is StreamsGroupHeartbeat:
        steady = steady_heartbeat(group, request, t)  # changes nothing that could need undoing
        if steady is not None:
            group.clock = max(group.clock, t)
            group.out.append(_heartbeat_response(request.reply, group.group_id, t, steady.body, steady.create_topics))
            return
    group.begin()
    try:
        group.clock = max(group.clock, t)
        if isinstance(request, StreamsGroupHeartbeat):
            outcome = streams_heartbeat(group, request, t, group.config)
            group.out.append(_heartbeat_response(request.reply, group.group_id, t, outcome.body,
                                                 outcome.create_topics))
        elif isinstance(request, StreamsGroupDescribe):
            group.out.append(describe_response(group, request, t))
        elif isinstance(request, OffsetCommit):
            handle_offset_commit(group, request, t)
        elif isinstance(request, OffsetDelete):
            handle_offset_delete(group, request, t)
        else:
            assert isinstance(request, OffsetFetch)
            handle_offset_fetch(group, request, t)
    except BaseException:
        group.undo()
        raise
    group.commit()


def fire_due(group: StreamsGroup, now: int, before_request: bool = False) -> None:
    """A streams timer never defers itself: `before_request` changes nothing."""
    heap = group.timers.heap
    if heap and heap[0][0] <= now:  # the heap's top is a lower bound of every deadline: usually nothing is due
        group.fire_due(now)


def next_deadline(group: StreamsGroup) -> int | None:
    return group.next_deadline()


def deadline_lower_bound(group: StreamsGroup) -> int | None:
    heap = group.timers.heap
    return heap[0][0] if heap else None


def encode(group: StreamsGroup) -> dict[str, Any]:
    return encode_streams_group(group)


def decode(data: Mapping[str, Any], config: EngineConfig) -> StreamsGroup:
    return decode_streams_group(data, config)


def describe_response(group: StreamsGroup | None, request: StreamsGroupDescribe, t: int) -> Response:
    """A StreamsGroupDescribe answer for its one group (None: absent, or not a streams group)."""
    entry = describe_entry(group) if group is not None else not_found_entry(request.group_id)
    body = {"error_code": 0, "error": "NONE", "throttle_time_ms": 0, "groups": [entry]}
    return response_envelope(request.reply, request.group_id, t, body)


def _heartbeat_response(reply: Reply, group_id: str, t: int, body: dict[str, Any],
                        create_topics: list[dict[str, Any]] | None) -> Response:
    response = response_envelope(reply, group_id, t, body)
    if create_topics is not None:
        response["create_topics"] = create_topics
    return response
