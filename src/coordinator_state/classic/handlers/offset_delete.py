"""OffsetDelete (PROTOCOL.md 11): committed offsets removed from a group, partition by partition
(OffsetMetadataManager.deleteOffsets).

The whole request is refused when the group does not exist (GROUP_ID_NOT_FOUND) or has members without using the
consumer protocol (NON_EMPTY_GROUP), with no topics. Otherwise each partition of a topic the group subscribes to
is answered GROUP_SUBSCRIBED_TO_TOPIC, and every other one NONE, its offset removed (a tombstone where there was
one). An Empty group whose last offset goes is removed with it, as when its last offset expires.
"""

from __future__ import annotations

from ...envelope import Response, response_envelope
from ...errors import NO_ERROR, Error
from ...records import OffsetDelete
from ...responses import offset_delete_body
from ..answers import answer
from ..data import ClassicGroup
from ..deletion_rules import is_subscribed_to_topic, offset_delete_error
from ..expiry import remove_if_drained, remove_offset


def absent_group(req: OffsetDelete, t: int) -> Response:
    return response_envelope(req.reply, req.group_id, t, offset_delete_body(Error.GROUP_ID_NOT_FOUND))


def handle_offset_delete(group: ClassicGroup, req: OffsetDelete, t: int) -> None:
    error = offset_delete_error(group.state, group.protocol_type)
    if error is not NO_ERROR:
        answer(group, req.reply, t, offset_delete_body(error))
        return
    had_offsets = bool(group.offsets)
    results = []
    for topic in req.topics:
        if is_subscribed_to_topic(group.state, group.protocol_type, group.subscribed_topics, topic.name):
            results.append((topic.name, [(p, Error.GROUP_SUBSCRIBED_TO_TOPIC) for p in topic.partition_indexes]))
            continue
        for partition in topic.partition_indexes:
            remove_offset(group, topic.name, partition)
        results.append((topic.name, [(p, NO_ERROR) for p in topic.partition_indexes]))
    if had_offsets:
        remove_if_drained(group)
    answer(group, req.reply, t, offset_delete_body(NO_ERROR, results))
