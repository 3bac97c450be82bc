"""What the gateway does to an OffsetDelete before and after the engine (PROTOCOL.md section 11), as Kafka's
`KafkaApis.handleOffsetDeleteRequest` does around its group coordinator: the partitions the upstream does not have
are taken out of the request and answered UNKNOWN_TOPIC_OR_PARTITION; the engine assumes the rest exist.

Existence comes from the partition counts the gateway caches from the upstream's Metadata (`TopicCounts`, the one
cache it also keeps for streams groups): a topic counted -1 is absent, a partition outside 0 .. count - 1 is
unknown. A topic with no count at all (its fetch failed) is taken to exist, so the engine decides as it would
without the gateway."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

UNKNOWN_TOPIC_OR_PARTITION: Final = 3


def without_unknown_partitions(body: Mapping[str, Any], counts: Mapping[str, int]) -> tuple[
        dict[str, Any], list[dict[str, Any]]]:
    """(The OffsetDelete body with only the partitions the upstream has, a topic left with none dropped as Kafka
    drops it; the answer's topics for the others, each partition UNKNOWN_TOPIC_OR_PARTITION). `counts`: topic ->
    partition count (-1: absent)."""
    known: list[dict[str, Any]] = []
    unknown: list[dict[str, Any]] = []
    for topic in body.get("topics") or []:
        count = counts.get(topic.get("name"))
        partitions = topic.get("partitions") or []
        exists: list[Any] = []
        absent: list[Any] = []
        for partition in partitions:
            index = partition.get("partition_index")
            has = count is None or (isinstance(index, int) and 0 <= index < count)
            (exists if has else absent).append(partition)
        if exists:
            known.append({**topic, "partitions": exists})
        if absent:
            unknown.append({"name": topic.get("name"), "partitions": [
                {"partition_index": p.get("partition_index"), "error_code": UNKNOWN_TOPIC_OR_PARTITION}
                for p in absent]})
    return {**body, "topics": known}, unknown


def with_unknown_partitions(answer: dict[str, Any], unknown: list[dict[str, Any]]) -> dict[str, Any]:
    """The engine's answer with the unknown partitions first (a topic the engine answered too gets its partitions
    after them, as Kafka's `OffsetDeleteResponse.Builder.merge`); an answer with a top-level error stays as it is,
    with no topics (section 11)."""
    if not unknown or answer.get("error_code"):
        return answer
    topics = {topic["name"]: topic for topic in unknown}
    merged: list[dict[str, Any]] = list(topics.values())
    for topic in answer.get("topics") or []:
        mine = topics.get(topic.get("name"))
        if mine is None:
            merged.append(topic)
        else:
            mine["partitions"] = mine["partitions"] + list(topic.get("partitions") or [])
    return {**answer, "topics": merged}
