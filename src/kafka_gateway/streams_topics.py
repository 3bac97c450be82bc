"""What the gateway adds around a StreamsGroupHeartbeat (PROTOCOL.md section 10): the partition counts of the
topics its group's topology names (the envelope's `topic_metadata`), and the internal topics an answer asks for
(`create_topics`), as Kafka's broker reads its metadata image and its `KafkaApis` creates the topics. Sans I/O:
the gateway's core asks, the shell fetches and creates upstream and tells the result.

- `TopicCounts`: counts learned from the upstream's Metadata, cached (up to `max_topics`). A heartbeat is sent
  at once with what the cache holds; topics cached longer than `max_age_ms` are fetched again meanwhile (so a
  topic created later shows up within that age); a heartbeat naming a topic the cache has never held waits for
  one fetch of it (a miss), then goes with whatever that fetch learned. A topic the upstream lacks counts -1. The
  gateway checks an OffsetDelete's topics against the same cache (`offset_delete`).
- `GroupTopics`: the topics each group's topology names (source, repartition source and changelog topics, the
  ones section 10 configures from), learned from the topologies that joins carry: later heartbeats carry none.
  Bounded: the groups least recently heard of are forgotten first.
- `InternalTopics`: which asked-for topics to create: one CreateTopics per topic at a time, and none again within
  `retry_ms` of the last one's end (a created topic's count is fetched afresh, so the coordinator stops asking;
  one deleted later is created again; a failure is logged and counted by the gateway, then retried).
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

# Metadata errors that mean "no such topic" (it may be created later); other errors leave a topic unknown.
UNKNOWN_TOPIC_OR_PARTITION: Final = 3
INVALID_TOPIC_EXCEPTION: Final = 17
ABSENT: Final = -1  # section 10's count of a topic that does not exist
TOPIC_ALREADY_EXISTS: Final = 36
_MAX_REMEMBERED: Final = 10_000  # creations remembered before those out of their retry window are dropped


def topology_topics(topology: Any) -> frozenset[str]:
    """The topics a StreamsGroupHeartbeat's `topology` (the decoded body's) names as sources, repartition sources
    or changelogs; none for a heartbeat without one."""
    if not isinstance(topology, Mapping):
        return frozenset()
    topics: set[str] = set()
    for subtopology in topology.get("subtopologies") or []:
        topics.update(subtopology.get("source_topics") or [])
        for kind in ("repartition_source_topics", "state_changelog_topics"):
            topics.update(info["name"] for info in subtopology.get(kind) or [])
    return frozenset(topics)


def counts_from_metadata(body: Mapping[str, Any]) -> dict[str, int]:
    """A Metadata answer's partition counts: a topic the upstream lacks -1, one in error otherwise left out."""
    counts: dict[str, int] = {}
    for topic in body.get("topics") or []:
        name, error = topic.get("name"), topic.get("error_code", 0)
        if not isinstance(name, str):
            continue
        if error in (UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION):
            counts[name] = ABSENT
        elif error == 0 and topic.get("partitions"):
            counts[name] = len(topic["partitions"])
    return counts


class GroupTopics:
    """The topics each streams group's topology names, for the heartbeats that carry no topology."""

    def __init__(self, max_groups: int = 10_000) -> None:
        self.max_groups = max_groups
        self._topics: OrderedDict[str, frozenset[str]] = OrderedDict()

    def of(self, group_id: Any, topology: Any) -> frozenset[str]:
        """The topics of `group_id`'s topology: those of `topology` when the heartbeat carries one (remembered),
        else the ones remembered (none for a group never seen joining)."""
        if not isinstance(group_id, str):
            return frozenset()
        if topology is not None:
            self._topics[group_id] = topology_topics(topology)
            if len(self._topics) > self.max_groups:
                self._topics.popitem(last=False)
        topics = self._topics.get(group_id)
        if topics is None:
            return frozenset()
        self._topics.move_to_end(group_id)
        return topics


@dataclass(slots=True)
class TopicCounts:
    """Partition counts from the upstream's Metadata: topic -> (count, when learned, ms)."""

    max_age_ms: int = 5_000
    max_topics: int = 100_000  # beyond it the counts learned longest ago are forgotten (fetched again if named)
    counts: dict[str, tuple[int, int]] = field(default_factory=dict)  # in the order learned
    fetching: set[str] = field(default_factory=set)  # asked for, not yet told

    def lookup(self, topics: Iterable[str], now_ms: int) -> tuple[frozenset[str], frozenset[str]]:
        """(missing: never learned, stale: older than the age) among `topics`."""
        missing, stale = set(), set()
        for topic in topics:
            known = self.counts.get(topic)
            if known is None:
                missing.add(topic)
            elif now_ms - known[1] >= self.max_age_ms:
                stale.add(topic)
        return frozenset(missing), frozenset(stale)

    def to_fetch(self, topics: Iterable[str]) -> tuple[str, ...]:
        """Those of `topics` not being fetched already, now marked as being fetched (sorted)."""
        new = sorted(set(topics) - self.fetching)
        self.fetching.update(new)
        return tuple(new)

    def learned(self, asked: Iterable[str], counts: Mapping[str, int], now_ms: int) -> None:
        """A fetch of `asked` ended with `counts` (a failed fetch: none); a topic it did not count stays as it
        was (a miss is fetched again by the next heartbeat that names it)."""
        self.fetching.difference_update(asked)
        for topic, count in counts.items():
            self.counts.pop(topic, None)
            self.counts[topic] = (count, now_ms)
        for topic in list(itertools.islice(self.counts, max(0, len(self.counts) - self.max_topics))):
            del self.counts[topic]

    def forget(self, topics: Iterable[str]) -> None:
        """Topics whose count just changed upstream (created): fetched afresh when next named."""
        for topic in topics:
            self.counts.pop(topic, None)

    def known(self, topics: Iterable[str]) -> dict[str, int]:
        """The counts of those of `topics` that have one."""
        return {topic: self.counts[topic][0] for topic in topics if topic in self.counts}

    def field(self, topics: Iterable[str]) -> dict[str, Any] | None:
        """The envelope's `topic_metadata` for `topics`, those with a count, by name; None when none has one."""
        known = [{"name": topic, "partitions": self.counts[topic][0]} for topic in sorted(topics)
                 if topic in self.counts]
        return {"topics": known} if known else None


@dataclass(slots=True)
class InternalTopics:
    """Which of the internal topics the coordinator asks for are to be created upstream now."""

    retry_ms: int = 10_000
    creating: set[str] = field(default_factory=set)
    ended_at: dict[str, int] = field(default_factory=dict)  # topic -> when its last creation ended (ms)

    def to_create(self, asked: Any, now_ms: int) -> list[dict[str, Any]]:
        """The entries of an answer's `create_topics` to create now (none being created, none whose last
        creation ended less than `retry_ms` ago), marked as being created."""
        chosen: list[dict[str, Any]] = []
        for topic in asked if isinstance(asked, list) else []:
            name = topic.get("name") if isinstance(topic, Mapping) else None
            ended = self.ended_at.get(name) if isinstance(name, str) else None
            if not isinstance(name, str) or name in self.creating or (ended is not None
                                                                      and now_ms - ended < self.retry_ms):
                continue
            self.creating.add(name)
            chosen.append(dict(topic))
        return chosen

    def finished(self, results: Mapping[str, int], now_ms: int) -> tuple[list[str], list[str]]:
        """CreateTopics ended with `results` (topic -> error code, every topic asked for):
        (created or there already, failed)."""
        done: list[str] = []
        failed: list[str] = []
        for name, error in sorted(results.items()):
            self.creating.discard(name)
            self.ended_at[name] = now_ms
            (done if error in (0, TOPIC_ALREADY_EXISTS) else failed).append(name)
        if len(self.ended_at) > _MAX_REMEMBERED:
            self.ended_at = {name: at for name, at in self.ended_at.items() if now_ms - at < self.retry_ms}
        return done, failed


def creatable_topics(create_topics: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """An answer's `create_topics` entries (section 10) as CreateTopics' `topics` (Kafka's CreatableTopic): what
    `KafkaApis` sends for a streams heartbeat, partitions and replication factor as configured, no assignments."""
    return [{"name": topic["name"], "num_partitions": topic.get("partitions", -1),
             "replication_factor": topic.get("replication_factor", -1), "assignments": [],
             "configs": [{"name": config.get("key"), "value": config.get("value")}
                         for config in topic.get("configs") or []]}
            for topic in create_topics]
