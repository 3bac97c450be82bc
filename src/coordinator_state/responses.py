"""Response bodies (PROTOCOL.md section 3, SEMANTICS.md section 9); `envelope` wraps them.

Every body has every field its version defines, with Kafka's defaults where a case sets nothing,
and none of the fields its version does not define.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .envelope import Api, Response, response_envelope
from .errors import Error
from .offsets import NO_LEADER_EPOCH, NO_METADATA, NO_OFFSET, CommittedOffset, OffsetStore
from .records import Invalid, OffsetCommit, OffsetFetch

EMPTY_BYTES = ""
# Each error's (code, name), looked up once: Enum's `name` is a Python-level property, and every
# response carries both.
_CODE_AND_NAME: dict[Error, tuple[int, str]] = {error: (int(error), error.name) for error in Error}


def error_body(error: Error) -> dict[str, Any]:
    code, name = _CODE_AND_NAME[error]
    return {"error_code": code, "error": name}


def join_body(
    version: int,
    error: Error,
    *,
    generation_id: int = -1,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
    leader: str = "",
    member_id: str = "",
    members: Sequence[tuple[str, str | None, str]] = (),
    skip_assignment: bool = False,
) -> dict[str, Any]:
    """A JoinGroup body; `members` holds (member_id, group_instance_id, metadata) for the leader."""
    code, name = _CODE_AND_NAME[error]
    body: dict[str, Any] = {"error_code": code, "error": name, "generation_id": generation_id}
    # Kafka's JoinGroupResponse(data, version): a null name is "" below v7, and from v7 (nullable) an empty
    # name is null. SyncGroup's response has no such conversion.
    if version >= 7:
        body["protocol_type"] = protocol_type
        body["protocol_name"] = protocol_name or None
    else:
        body["protocol_name"] = protocol_name or ""
    body["leader"] = leader
    if version >= 9:
        body["skip_assignment"] = skip_assignment
    body["member_id"] = member_id
    if version >= 5:
        body["members"] = [{"member_id": m, "group_instance_id": i, "metadata": meta} for m, i, meta in members]
    else:
        body["members"] = [{"member_id": m, "metadata": meta} for m, _, meta in members]
    return body


def sync_body(
    version: int,
    error: Error,
    *,
    assignment: str = EMPTY_BYTES,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
) -> dict[str, Any]:
    body = error_body(error)
    if version >= 5:
        body["protocol_type"] = protocol_type
        body["protocol_name"] = protocol_name
    body["assignment"] = assignment
    return body


def leave_body(version: int, error: Error, members: Sequence[tuple[str, str | None, Error]] = ()) -> dict[str, Any]:
    """A LeaveGroup body; `members` holds (member_id, group_instance_id, error) per request entry (v3+)."""
    body = error_body(error)
    if version >= 3:
        body["members"] = [
            {"member_id": m, "group_instance_id": i, "error_code": _CODE_AND_NAME[e][0], "error": _CODE_AND_NAME[e][1]}
            for m, i, e in members
        ]
    return body


PartitionResults = Sequence[tuple[str, Sequence[tuple[int, Error]]]]  # (topic, [(partition, error)])
# An enum member's value and name, looked up once: a commit answers every partition.
_CODES = {e: int(e) for e in Error}
_NAMES = {e: e.name for e in Error}


def commit_body(version: int, error: Error, topics: PartitionResults) -> dict[str, Any]:
    """OffsetCommit's body: the whole-request error at the top, then one entry per request topic and partition."""
    body: dict[str, Any] = {"error_code": int(error), "error": error.name}
    if version >= 3:
        body["throttle_time_ms"] = 0
    body["topics"] = [
        {"name": name, "partitions": [{"partition_index": p, "error_code": _CODES[e], "error": _NAMES[e]}
                                      for p, e in partitions]}
        for name, partitions in topics
    ]
    return body


def commit_refused(req: OffsetCommit, t: int, error: Error) -> Response:
    """Every partition of the request answered with the whole-request error (OffsetCommitRequest.getErrorResponse)."""
    topics = [(topic.name, [(p.partition_index, error) for p in topic.partitions]) for topic in req.topics]
    return response_envelope(req.reply, req.group_id, t, commit_body(req.reply.version, error, topics))


_FETCHED = {"error_code": int(Error.NONE), "error": Error.NONE.name}


def _partition(version: int, index: int, value: CommittedOffset | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"partition_index": index}
    if value is None:
        entry["committed_offset"] = NO_OFFSET
        epoch, metadata = NO_LEADER_EPOCH, NO_METADATA
    else:
        entry["committed_offset"] = value.offset
        epoch, metadata = value.leader_epoch, value.metadata
    if version >= 5:
        entry["committed_leader_epoch"] = epoch
    entry["metadata"] = metadata
    entry.update(_FETCHED)
    return entry


def fetch_body(req: OffsetFetch, offsets: OffsetStore | None, error: Error = Error.NONE) -> dict[str, Any]:
    """OffsetFetch's body for `req` from the group's offsets (None: the group does not exist), or its group's
    `error` (v8+: in the group's entry, with no topics; OffsetFetchResponse's group-level error)."""
    version = req.reply.version
    topics: list[dict[str, Any]] = []
    if req.topics is not None:
        for topic in req.topics:
            topics.append({"name": topic.name, "partitions": [
                _partition(version, p, None if offsets is None else offsets.get(topic.name, p))
                for p in topic.partition_indexes]})
    elif offsets is not None:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for name, partition, value in offsets.items():
            by_topic.setdefault(name, []).append(_partition(version, partition, value))
        topics = [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()]
    body: dict[str, Any] = dict(_FETCHED) if version >= 8 else error_body(error)
    if version >= 3:
        body["throttle_time_ms"] = 0
    if version >= 8:
        body["groups"] = [{"group_id": req.group_id, "topics": topics if error is Error.NONE else [],
                           **error_body(error)}]
    else:
        body["topics"] = topics
    return body


def delete_groups_body(group_id: str, error: Error) -> dict[str, Any]:
    """DeleteGroups' body for its one group (PROTOCOL.md 11): the group's error in its `results` entry; the top
    level says NONE (Kafka's answer has no top-level error)."""
    return {"error_code": 0, "error": Error.NONE.name, "throttle_time_ms": 0,
            "results": [{"group_id": group_id, **error_body(error)}]}


def offset_delete_body(error: Error, topics: PartitionResults = ()) -> dict[str, Any]:
    """OffsetDelete's body: the whole-request error at the top (then no topics), else one entry per request topic
    and partition."""
    body = error_body(error)
    body["throttle_time_ms"] = 0
    body["topics"] = [
        {"name": name, "partitions": [{"partition_index": p, **error_body(e)} for p, e in partitions]}
        for name, partitions in topics
    ]
    return body


def error_response_body(api: str, version: int, error: Error, member_id: str = "",
                        group_id: str = "") -> dict[str, Any]:
    """The default body of `api` at `version` carrying `error` (SEMANTICS.md 9.1); DeleteGroups carries it in its
    group's entry."""
    if api == Api.JOIN_GROUP:
        return join_body(version, error, member_id=member_id)
    if api == Api.SYNC_GROUP:
        return sync_body(version, error)
    if api == Api.LEAVE_GROUP:
        return leave_body(version, error)
    if api == Api.DELETE_GROUPS:
        return delete_groups_body(group_id, error)
    if api == Api.OFFSET_DELETE:
        return offset_delete_body(error)
    return error_body(error)


def invalid_response(invalid: Invalid) -> Response | None:
    """The answer to a record that is not a valid request, or None when it names no reply_to."""
    if invalid.reply is None:
        return None
    return response_envelope(invalid.reply, invalid.group_id, invalid.timestamp_ms, error_body(invalid.error))
