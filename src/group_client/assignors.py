"""The consumer's partition assignors, as Kafka's `RangeAssignor` and `RoundRobinAssignor` compute them.

Both order members as Kafka's `AbstractPartitionAssignor.MemberInfo` does (KIP-345): members with a
`group_instance_id` first, sorted by it, then the others sorted by member id. A static member that
restarts gets a new member id but keeps its instance id, hence its place, hence its partitions.
Topics with no known partition count are skipped, as Kafka skips topics without metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from coordinator_state.consumer_protocol import Assignment, TopicPartition


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """One member as the leader sees it in the JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    topics: tuple[str, ...]


Assignor = Callable[[Sequence[MemberSubscription], Mapping[str, int]], dict[str, Assignment]]


def member_order(member: MemberSubscription) -> tuple[int, str]:
    """Sort key: static members by instance id, then dynamic members by member id."""
    if member.group_instance_id is not None:
        return (0, member.group_instance_id)
    return (1, member.member_id)


def range_assign(
    members: Sequence[MemberSubscription], partitions_per_topic: Mapping[str, int]
) -> dict[str, Assignment]:
    """Per topic, contiguous ranges; the first `n % c` members in order get one extra partition."""
    owned: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
    ordered = sorted(members, key=member_order)
    for topic in sorted({t for m in members for t in m.topics}):
        count = partitions_per_topic.get(topic)
        if count is None:
            continue
        consumers = [m for m in ordered if topic in m.topics]
        per_member, extra = divmod(count, len(consumers))
        for i, member in enumerate(consumers):
            start = per_member * i + min(i, extra)
            length = per_member + (1 if i < extra else 0)
            owned[member.member_id].extend((topic, p) for p in range(start, start + length))
    return {member_id: Assignment(frozenset(tps)) for member_id, tps in owned.items()}


def round_robin_assign(
    members: Sequence[MemberSubscription], partitions_per_topic: Mapping[str, int]
) -> dict[str, Assignment]:
    """All subscribed partitions, sorted by topic then partition, dealt in turn to the members subscribed."""
    owned: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
    ordered = sorted(members, key=member_order)
    if not ordered:
        return {}
    position = 0
    for topic in sorted({t for m in members for t in m.topics}):
        for partition in range(partitions_per_topic.get(topic, 0)):
            while topic not in ordered[position % len(ordered)].topics:
                position += 1
            owned[ordered[position % len(ordered)].member_id].append((topic, partition))
            position += 1
    return {member_id: Assignment(frozenset(tps)) for member_id, tps in owned.items()}


ASSIGNORS: dict[str, Assignor] = {"range": range_assign, "roundrobin": round_robin_assign}
