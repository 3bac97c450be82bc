"""Committed offsets of one group, and Kafka's rules around them (docs/OFFSETS_AND_LISTING.md).

Theory of operation. A classic group holds, per topic-partition, the last offset committed to it:
the offset, its leader epoch, the client's metadata string, when it was committed and, for
OffsetCommit v2-4 with an explicit `retention_time_ms`, an explicit expiry time. `OffsetStore` is that
map, nothing more: it neither validates commits nor knows the group's state.

Whether and when an offset expires depends on the group (Kafka's `OffsetExpirationConditionImpl`): its
group type turns its state into an `ExpiryCondition` (the classic group's rule: classic/offset_rules.py),
or None when nothing may expire in that state, and the store answers "what expires by now" and "when is
the next expiry" under that condition.
Kafka looks at expiry every `offsets.retention.check.interval.ms`; the engine keeps one timer at the
exact next deadline instead (PROTOCOL.md section 8 allows it), so both answers are needed.

`absent_group_commit_error` is `OffsetMetadataManager.validateOffsetCommit` for a group that does not
exist; the checks of a group that does are its type's (classic/offset_rules.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from .errors import Error
from .records import OffsetCommit, new_record

NO_OFFSET = -1  # what OffsetFetch answers for a partition with no committed offset
NO_LEADER_EPOCH = -1
NO_METADATA = ""
# OffsetCommit v2-4 `retention_time_ms` that means "the broker's offsets.retention.minutes".
DEFAULT_RETENTION_TIME_MS = -1
# OffsetCommit v1 per-partition `commit_timestamp` that means "the time the coordinator receives it".
DEFAULT_COMMIT_TIMESTAMP_MS = -1
CONSUMER_PROTOCOL_TYPE = "consumer"

TopicPartition = tuple[str, int]
_NONE, _TOO_LARGE = Error.NONE, Error.OFFSET_METADATA_TOO_LARGE


class CommittedOffset(NamedTuple):
    """One partition's committed position (the value of Kafka's OffsetCommitValue record).

    Immutable; a named tuple because every committed partition makes one (cheaper than a dataclass)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None  # only from OffsetCommit v2-4 with an explicit retention time

    def to_json(self) -> list[Any]:
        return [self.offset, self.leader_epoch, self.metadata, self.commit_timestamp_ms, self.expire_timestamp_ms]

    @classmethod
    def from_json(cls, data: list[Any]) -> CommittedOffset:
        offset, epoch, metadata, committed, expires = data
        return cls(int(offset), int(epoch), str(metadata), int(committed), None if expires is None else int(expires))


class OffsetChange(NamedTuple):
    """A committed offset set or removed: one record of the compacted offsets topic (PROTOCOL.md section 8)."""

    group_id: str
    topic: str
    partition: int
    value: CommittedOffset | None  # None: the offset is gone (expired)

    @property
    def key(self) -> str:
        return f"{self.group_id}/{self.topic}/{self.partition}"

    def line(self) -> dict[str, Any]:
        """The change as a line of an offsets file: the record's value, or its tombstone line."""
        record = self.record()
        if record is None:
            return {"group_id": self.group_id, "topic": self.topic, "partition": self.partition, "tombstone": True}
        return record

    def record(self) -> dict[str, Any] | None:
        """The record's value, or None for a tombstone."""
        value = self.value
        if value is None:
            return None
        return {
            "group_id": self.group_id,
            "topic": self.topic,
            "partition": self.partition,
            "committed_offset": value.offset,
            "committed_leader_epoch": value.leader_epoch,
            "committed_metadata": value.metadata,
            "commit_timestamp_ms": value.commit_timestamp_ms,
            "expire_timestamp_ms": value.expire_timestamp_ms,
        }


@dataclass(frozen=True, slots=True)
class ExpiryCondition:
    """When offsets expire, as Kafka's OffsetExpirationConditionImpl decides it.

    An offset with an explicit expiry time (OffsetCommit v2-4) expires at that time. Otherwise its
    retention counts from `since_ms` (the time an Empty group became Empty) or, when that is None, from
    the offset's own commit time. Offsets of `kept_topics` (topics a Stable consumer group subscribes
    to) never expire.
    """

    retention_ms: int
    since_ms: int | None = None
    kept_topics: frozenset[str] = frozenset()

    def deadline(self, topic: str, offset: CommittedOffset) -> int | None:
        """The time at which the offset counts as expired (Kafka: `now >= deadline`), or None for never."""
        if topic in self.kept_topics:
            return None
        if offset.expire_timestamp_ms is not None:
            return offset.expire_timestamp_ms
        base = offset.commit_timestamp_ms if self.since_ms is None else self.since_ms
        return base + self.retention_ms


class OffsetStore:
    """(topic, partition) -> committed offset. Listings are sorted, so every answer is deterministic.

    Its owner changes `entries` directly (the group records each change in its undo journal, as it
    does for its other dicts); the store answers the questions about them.
    """

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: dict[TopicPartition, CommittedOffset] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def get(self, topic: str, partition: int) -> CommittedOffset | None:
        return self.entries.get((topic, partition))

    def items(self) -> Iterator[tuple[str, int, CommittedOffset]]:
        """Every committed offset, by topic then partition."""
        entries = self.entries
        for topic, partition in sorted(entries):
            yield topic, partition, entries[(topic, partition)]

    def next_deadline(self, condition: ExpiryCondition | None) -> int | None:
        """The earliest time any offset expires under `condition`; None if none ever does."""
        if condition is None:
            return None
        deadlines = [d for (topic, _), value in self.entries.items()
                     if (d := condition.deadline(topic, value)) is not None]
        return min(deadlines, default=None)

    def expired(self, condition: ExpiryCondition | None, now: int) -> list[TopicPartition]:
        """Every offset expired at `now`, sorted (Kafka's cleanupExpiredOffsets); the owner removes them."""
        if condition is None:
            return []
        return sorted((topic, partition) for (topic, partition), value in self.entries.items()
                      if (deadline := condition.deadline(topic, value)) is not None and now >= deadline)

    def to_json(self) -> list[Any]:
        return [[topic, partition, value.to_json()] for topic, partition, value in self.items()]

    @classmethod
    def from_json(cls, data: list[Any]) -> OffsetStore:
        store = cls()
        for topic, partition, value in data:
            store.entries[(str(topic), int(partition))] = CommittedOffset.from_json(value)
        return store


# ---------------------------------------------------------------------------------------------- commit checks

def absent_group_commit_error(version: int, generation_id: int) -> Error | None:
    """OffsetMetadataManager.validateOffsetCommit for a group that does not exist.

    None: accept, creating a "simple" Empty group (negative generation: an admin client or a consumer
    that manages its own partitions). Otherwise v9+ answers GROUP_ID_NOT_FOUND, older versions
    ILLEGAL_GENERATION (kept for their clients' sake).
    """
    if generation_id < 0:
        return None
    return Error.GROUP_ID_NOT_FOUND if version >= 9 else Error.ILLEGAL_GENERATION


def java_length(text: str) -> int:
    """Java's String.length(): UTF-16 code units, which is what offset.metadata.max.bytes is compared with."""
    if text.isascii():
        return len(text)
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def metadata_too_large(metadata: str | None, max_length: int) -> bool:
    # A character is at most 2 UTF-16 code units: short metadata needs no counting.
    return metadata is not None and 2 * len(metadata) > max_length and java_length(metadata) > max_length


def committed_value(
    offset: int,
    leader_epoch: int,
    metadata: str | None,
    commit_timestamp_ms: int,
    now: int,
    retention_time_ms: int,
) -> CommittedOffset:
    """OffsetAndMetadata.fromRequest: what one accepted partition of an OffsetCommit stores."""
    return new_record(CommittedOffset, (  # offset, leader_epoch, metadata, commit_timestamp_ms, expire_timestamp_ms
        offset,
        leader_epoch,
        NO_METADATA if metadata is None else metadata,
        now if commit_timestamp_ms == DEFAULT_COMMIT_TIMESTAMP_MS else commit_timestamp_ms,
        None if retention_time_ms == DEFAULT_RETENTION_TIME_MS else now + retention_time_ms,
    ))


def commit_partitions(req: OffsetCommit, t: int, max_metadata_bytes: int,
                      store: Callable[[str, int, CommittedOffset], None]) -> list[tuple[str, list[tuple[int, Error]]]]:
    """An accepted OffsetCommit (OffsetMetadataManager.commitOffset): each partition whose metadata fits
    `offset.metadata.max.bytes` is stored through `store` (the group's), the others are OFFSET_METADATA_TOO_LARGE;
    the per-partition results, by request topic."""
    retention_time_ms = req.retention_time_ms
    results = []
    for topic in req.topics:
        name = topic.name
        answers = []
        # Unpacked: one step per partition instead of seven field reads (a NamedTuple's fields are slow to read).
        for partition, offset, leader_epoch, commit_timestamp_ms, metadata in topic.partitions:
            if metadata_too_large(metadata, max_metadata_bytes):
                answers.append((partition, _TOO_LARGE))
                continue
            store(name, partition, committed_value(
                offset, leader_epoch, metadata, commit_timestamp_ms, t, retention_time_ms))
            answers.append((partition, _NONE))
        results.append((name, answers))
    return results
