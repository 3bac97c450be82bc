"""OffsetCommit (docs/OFFSETS_AND_LISTING.md section 2): a member, or a "simple" client, stores its positions.

The whole-request checks are Kafka's `ClassicGroup.validateOffsetCommit` (offsets.commit_error); an
accepted request stores each partition whose metadata fits `offset.metadata.max.bytes` and answers
each partition on its own. A commit to a group that does not exist either creates a simple group
(negative generation) or is refused (`absent_group`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..envelope import Response, response_envelope
from ..errors import Error
from ..group import Group
from ..offsets import absent_group_commit_error, commit_error, commit_keeps_session, committed_value, metadata_too_large
from ..records import OffsetCommit

PartitionResults = Sequence[tuple[str, Sequence[tuple[int, Error]]]]
# An enum member's value and name, looked up once: a commit answers every partition.
_CODES = {e: int(e) for e in Error}
_NAMES = {e: e.name for e in Error}
_NONE = Error.NONE
_TOO_LARGE = Error.OFFSET_METADATA_TOO_LARGE


def commit_body(version: int, error: Error, topics: PartitionResults) -> dict[str, Any]:
    """The response body: the whole-request error at the top, then one entry per request topic and partition."""
    body: dict[str, Any] = {"error_code": int(error), "error": error.name}
    if version >= 3:
        body["throttle_time_ms"] = 0
    body["topics"] = [
        {"name": name, "partitions": [{"partition_index": p, "error_code": _CODES[e], "error": _NAMES[e]}
                                      for p, e in partitions]}
        for name, partitions in topics
    ]
    return body


def refused(req: OffsetCommit, t: int, error: Error) -> Response:
    """Every partition of the request answered with the whole-request error (OffsetCommitRequest.getErrorResponse)."""
    topics = [(topic.name, [(p.partition_index, error) for p in topic.partitions]) for topic in req.topics]
    return response_envelope(req.reply, req.group_id, t, commit_body(req.reply.version, error, topics))


def names_no_partition(req: OffsetCommit) -> bool:
    """A commit with no topics, or only topics without partitions: Kafka's `KafkaApis.handleOffsetCommitRequest`
    answers it before the coordinator is called (PROTOCOL.md 8), so no group is created or checked."""
    return not any(topic.partitions for topic in req.topics)


def nothing_to_commit(req: OffsetCommit, t: int) -> Response:
    """The answer to a commit that names no partition: error NONE and an empty `topics` list."""
    return response_envelope(req.reply, req.group_id, t, commit_body(req.reply.version, _NONE, []))


def absent_group(req: OffsetCommit, t: int) -> Response | None:
    """The answer for a group that does not exist, or None when the commit creates a simple group."""
    error = absent_group_commit_error(req.reply.version, req.generation_id)
    return None if error is None else refused(req, t, error)


def handle_offset_commit(group: Group, req: OffsetCommit, t: int) -> None:
    error = commit_error(group.state, group.generation_id, req.generation_id, req.member_id,
                         req.group_instance_id, group.validate_member)
    if error is not _NONE:
        group.out.append(refused(req, t, error))
        return
    if commit_keeps_session(group.state):
        group.schedule_session(group.members[req.member_id], t)
    max_length = group.config.offset_metadata_max_bytes
    retention_time_ms = req.retention_time_ms
    results = []
    for topic in req.topics:
        name = topic.name
        answers = []
        # Unpacked: one step per partition instead of seven field reads (a NamedTuple's fields are slow to read).
        for partition, offset, leader_epoch, commit_timestamp_ms, metadata in topic.partitions:
            if metadata_too_large(metadata, max_length):
                answers.append((partition, _TOO_LARGE))
                continue
            group.commit_offset(name, partition, committed_value(
                offset, leader_epoch, metadata, commit_timestamp_ms, t, retention_time_ms))
            answers.append((partition, _NONE))
        results.append((name, answers))
    group.answer(req.reply, t, commit_body(req.reply.version, _NONE, results))
