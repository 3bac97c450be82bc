"""OffsetFetch (docs/OFFSETS_AND_LISTING.md section 3): a group's committed offsets, listed or all.

A classic group answers every state the same way (ClassicGroup.validateOffsetFetch refuses only
Dead), and a group that does not exist answers like one without offsets: -1 for each listed
partition, no topics for all (OffsetMetadataManager.fetchOffsets / fetchAllOffsets). Nothing changes.
"""

from __future__ import annotations

from typing import Any

from ...envelope import Response, response_envelope
from ...errors import Error
from ...offsets import NO_LEADER_EPOCH, NO_METADATA, NO_OFFSET, CommittedOffset, OffsetStore
from ...records import OffsetFetch
from ..answers import answer
from ..data import ClassicGroup

_NONE = {"error_code": int(Error.NONE), "error": Error.NONE.name}


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
    entry.update(_NONE)
    return entry


def fetch_body(req: OffsetFetch, offsets: OffsetStore | None) -> dict[str, Any]:
    """The response body for `req` from the group's offsets (None: the group does not exist)."""
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
    body: dict[str, Any] = dict(_NONE)
    if version >= 3:
        body["throttle_time_ms"] = 0
    if version >= 8:
        body["groups"] = [{"group_id": req.group_id, "topics": topics, **_NONE}]
    else:
        body["topics"] = topics
    return body


def absent_group(req: OffsetFetch, t: int) -> Response:
    return response_envelope(req.reply, req.group_id, t, fetch_body(req, None))


def handle_offset_fetch(group: ClassicGroup, req: OffsetFetch, t: int) -> None:
    answer(group, req.reply, t, fetch_body(req, group.offsets))
