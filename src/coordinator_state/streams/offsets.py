"""OffsetCommit, OffsetFetch and OffsetDelete against a streams group (StreamsGroup.validateOffsetCommit /
validateOffsetFetch / validateOffsetDelete, PROTOCOL.md section 10, Group types).

The member epoch travels in OffsetCommit's `generation_id_or_member_epoch`. A negative epoch commits only while the
group has no members (the admin client, or a consumer outside group management); a member's commit must come from
OffsetCommit v9 or later; its own epoch commits everything, a newer one is STALE_MEMBER_EPOCH, and an older one
(KIP-1251, `createAssignmentEpochValidator`) commits a partition only if the member holds the active task reading
it, assigned or pending revocation, at an epoch no newer than the one received; otherwise the whole commit is
STALE_MEMBER_EPOCH.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..envelope import response_envelope
from ..errors import Error
from ..offsets import commit_partitions
from ..records import OffsetCommit, OffsetDelete, OffsetFetch
from ..responses import commit_body, commit_refused, fetch_body, offset_delete_body
from .group import StreamsGroup

__all__ = ["handle_offset_commit", "handle_offset_delete", "handle_offset_fetch", "validate_offset_commit",
           "validate_offset_fetch"]


def handle_offset_commit(group: StreamsGroup, req: OffsetCommit, t: int) -> None:
    """OffsetCommit against a streams group: refused whole (every partition with the error), or stored."""
    partitions = [(topic.name, p.partition_index) for topic in req.topics for p in topic.partitions]
    error = validate_offset_commit(group, req.member_id, req.generation_id, req.reply.version, partitions)
    if error is not None:
        group.out.append(commit_refused(req, t, error))
        return
    results = commit_partitions(req, t, group.config.offset_metadata_max_bytes, group.commit_offset)
    group.out.append(response_envelope(req.reply, req.group_id, t, commit_body(req.reply.version, Error.NONE,
                                                                                   results)))


def handle_offset_fetch(group: StreamsGroup, req: OffsetFetch, t: int) -> None:
    """OffsetFetch against a streams group: its offsets, or the group's error (v9's member id and epoch)."""
    error = validate_offset_fetch(group, req.member_id, req.member_epoch)
    body = fetch_body(req, group.offsets) if error is None else fetch_body(req, None, error)
    group.out.append(response_envelope(req.reply, req.group_id, t, body))

def handle_offset_delete(group: StreamsGroup, req: OffsetDelete, t: int) -> None:
    """OffsetMetadataManager.deleteOffsets on a streams group, which StreamsGroup.validateOffsetDelete allows in every
    state: each partition of a topic the group is subscribed to is GROUP_SUBSCRIBED_TO_TOPIC, every other one NONE,
    its offset removed. The group stays, Empty or not (a plain Kafka 4.4 broker keeps it until its cleanup): an Empty
    one goes when its retention timer fires, or at once if that fired while offsets kept it."""
    subscribed = group.subscribed_topics()
    results = []
    for topic in req.topics:
        if topic.name in subscribed:
            results.append((topic.name, [(p, Error.GROUP_SUBSCRIBED_TO_TOPIC) for p in topic.partition_indexes]))
            continue
        for partition in topic.partition_indexes:
            group.remove_offset(topic.name, partition)
        results.append((topic.name, [(p, Error.NONE) for p in topic.partition_indexes]))
    group.remove_if_forgotten()
    group.out.append(response_envelope(req.reply, req.group_id, t, offset_delete_body(Error.NONE, results)))


# The first OffsetCommit version a member of the streams protocol may use.
FIRST_STREAMS_COMMIT_VERSION = 9


def validate_offset_commit(group: StreamsGroup, member_id: str, member_epoch: int, version: int,
                           partitions: Iterable[tuple[str, int]]) -> Error | None:
    """The error refusing the commit of `partitions` ((topic, partition) pairs), or None when it is accepted."""
    if member_epoch < 0 and not group.members:
        return None
    member = group.members.get(member_id)
    if member is None:
        return Error.UNKNOWN_MEMBER_ID
    if version < FIRST_STREAMS_COMMIT_VERSION:
        return Error.UNSUPPORTED_VERSION
    if member_epoch == member.member_epoch:
        return None
    if member_epoch > member.member_epoch or group.topology is None:
        return Error.STALE_MEMBER_EPOCH
    subtopology_of = {topic: s.subtopology_id for s in group.topology.subtopologies
                      for topic in (*s.source_topics, *(t.name for t in s.repartition_source_topics))}
    for topic, partition in partitions:
        subtopology = subtopology_of.get(topic)
        if subtopology is None:
            return Error.STALE_MEMBER_EPOCH
        task = (subtopology, partition)
        epoch = member.assigned.active.get(task, member.pending_revocation.active.get(task))
        if epoch is None or member_epoch < epoch:
            return Error.STALE_MEMBER_EPOCH
    return None


def validate_offset_fetch(group: StreamsGroup, member_id: str | None, member_epoch: int) -> Error | None:
    """The error refusing an OffsetFetch (v9's member id and epoch), or None: without a member id and with a
    negative epoch (the admin client) it is accepted; a member must exist with exactly that epoch."""
    if member_id is None and member_epoch < 0:
        return None
    member = group.members.get(member_id or "")
    if member is None:
        return Error.UNKNOWN_MEMBER_ID
    return None if member.member_epoch == member_epoch else Error.STALE_MEMBER_EPOCH
