"""Answers given before any group is looked at: the refusal of a request with one error and the default body
(SEMANTICS.md 9.3 for its member id), and the answer to an OffsetCommit that names no partition."""

from __future__ import annotations

from .envelope import Response, response_envelope
from .errors import Error
from .records import JoinGroup, OffsetCommit, Request
from .responses import commit_body, error_response_body


def error_response(req: Request, t: int, error: Error) -> Response:
    member_id = req.member_id if isinstance(req, JoinGroup) and error is not Error.UNKNOWN_SERVER_ERROR else ""
    return response_envelope(req.reply, req.group_id, t,
                             error_response_body(req.reply.api, req.reply.version, error, member_id, req.group_id))


def names_no_partition(req: OffsetCommit) -> bool:
    """A commit with no topics, or only topics without partitions: Kafka's `KafkaApis.handleOffsetCommitRequest`
    answers it before the coordinator is called (PROTOCOL.md 8), so no group is created or checked."""
    return not any(topic.partitions for topic in req.topics)


def nothing_to_commit(req: OffsetCommit, t: int) -> Response:
    """The answer to a commit that names no partition: error NONE and an empty `topics` list."""
    return response_envelope(req.reply, req.group_id, t, commit_body(req.reply.version, Error.NONE, []))
