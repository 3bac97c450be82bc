"""Topic metadata and internal topics of a streams topology: Kafka 4.4's InternalTopicManager.configureTopics.

Theory of operation. The engine learns partition counts only from the heartbeat envelopes' `topic_metadata`, kept
per group as a view (topic -> partitions, -1 or absent: the topic does not exist). Configuring a topology against
the view decides, in Kafka's order: every source topic must exist (else MISSING_SOURCE_TOPICS); repartition topics
without a fixed count get the largest count among the sources of the subtopologies writing them (RepartitionTopics,
a fix-point over the subtopologies); copartitioned topics must agree and flexible repartition topics among them are
coerced (CopartitionedTopicsEnforcer; else INCORRECTLY_PARTITIONED_TOPICS); changelog topics get the largest count
among their subtopology's sources (ChangelogTopics); a subtopology has as many tasks as its largest source; internal
topics that exist must have the decided count (else INCORRECTLY_PARTITIONED_TOPICS) and the missing ones are listed
to be created (MISSING_INTERNAL_TOPICS). Only a topology with no such status is ready. A topology Kafka rejects with
StreamsInvalidTopologyException raises `TopologyRefused` (STREAMS_INVALID_TOPOLOGY), as does one its code cannot
configure at all (an IllegalStateException there, UNKNOWN_SERVER_ERROR).

Kafka iterates hash maps in several places; here subtopologies go by id and topics by name, so the outcome and the
first error found are the same on every run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from ..errors import Error
from ..records import Subtopology, TopicInfo, Topology

__all__ = [
    "ConfiguredInternalTopic",
    "ConfiguredSubtopology",
    "ConfiguredTopology",
    "Status",
    "TopologyRefused",
    "configure_topics",
]


class Status(IntEnum):
    """The status codes of a StreamsGroupHeartbeat answer (StreamsGroupHeartbeatResponse.Status)."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5


class TopologyRefused(Exception):
    """A topology the heartbeat is refused for, with the error Kafka answers."""

    def __init__(self, error: Error, message: str) -> None:
        super().__init__(message)
        self.error = error


class _TopicConfigurationError(Exception):
    """Kafka's TopicConfigurationException: becomes the configured topology's status, not an error answer."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class ConfiguredInternalTopic:
    name: str
    partitions: int
    replication_factor: int  # 0: the broker's default
    topic_configs: tuple[tuple[str, str], ...]

    def to_create(self) -> dict[str, Any]:
        """The `create_topics` entry of an answer (InternalTopicManager.toCreatableTopic)."""
        return {"name": self.name, "partitions": self.partitions,
                "replication_factor": self.replication_factor or -1,
                "configs": [{"key": key, "value": value} for key, value in self.topic_configs]}


@dataclass(frozen=True, slots=True)
class ConfiguredSubtopology:
    subtopology_id: str
    task_count: int
    source_topics: tuple[str, ...]
    source_topic_regex: tuple[str, ...]
    repartition_sink_topics: tuple[str, ...]
    repartition_source_topics: tuple[ConfiguredInternalTopic, ...]
    state_changelog_topics: tuple[ConfiguredInternalTopic, ...]

    @property
    def stateful(self) -> bool:
        return bool(self.state_changelog_topics)


@dataclass(frozen=True, slots=True)
class ConfiguredTopology:
    """A topology configured against a topic view (Kafka's ConfiguredTopology)."""

    epoch: int
    subtopologies: tuple[ConfiguredSubtopology, ...] | None  # by id; None when configuration failed
    topics_to_create: tuple[ConfiguredInternalTopic, ...]  # by name
    status: Status | None
    status_detail: str

    @property
    def ready(self) -> bool:
        return self.status is None


def topic_exists(view: Mapping[str, int], topic: str) -> bool:
    return view.get(topic, -1) >= 1


def configure_topics(topology: Topology, view: Mapping[str, int]) -> ConfiguredTopology:
    """InternalTopicManager.configureTopics against `view`; raises `TopologyRefused` where Kafka throws."""
    if topology.epoch < 0:  # ConfiguredTopology refuses it (IllegalArgumentException)
        raise TopologyRefused(Error.UNKNOWN_SERVER_ERROR, f"topology epoch {topology.epoch} is negative")
    subtopologies = sorted(topology.subtopologies, key=lambda s: s.subtopology_id)
    if len({s.subtopology_id for s in subtopologies}) != len(subtopologies):
        raise TopologyRefused(Error.UNKNOWN_SERVER_ERROR, "the topology names a subtopology id twice")
    copartition_groups = [group for s in subtopologies for group in _copartition_groups(s)]
    try:
        _check_source_topics(subtopologies, view)
        decided = _Decided(view)
        decided.counts.update(_repartition_counts(subtopologies, decided))
        _enforce_copartitioning(subtopologies, copartition_groups, decided)
        decided.counts.update(_changelog_counts(subtopologies, decided))
        configured = tuple(_configured(s, decided) for s in subtopologies)
        to_create = _missing_internal_topics(configured, topology, view)
    except _TopicConfigurationError as failed:
        return ConfiguredTopology(topology.epoch, None, (), failed.status, str(failed))
    if to_create:
        detail = "Internal topics are missing: " + _summarize(t.name for t in to_create)
        return ConfiguredTopology(topology.epoch, configured, to_create, Status.MISSING_INTERNAL_TOPICS, detail)
    return ConfiguredTopology(topology.epoch, configured, (), None, "")


class _Decided:
    """Partition counts: a topic's count in the view if it exists, else the count decided for it so far."""

    def __init__(self, view: Mapping[str, int]) -> None:
        self.view = view
        self.counts: dict[str, int] = {}

    def get(self, topic: str) -> int | None:
        count = self.view.get(topic, -1)
        return count if count >= 1 else self.counts.get(topic)

    def require(self, topic: str) -> int:
        count = self.get(topic)
        if count is None:
            raise TopologyRefused(Error.UNKNOWN_SERVER_ERROR, f"number of partitions is not set for topic {topic}")
        return count


def _copartition_groups(subtopology: Subtopology) -> list[frozenset[str]]:
    """Each copartition group's topic names (copartitionGroupsFromPersistedSubtopology)."""
    groups = []
    for group in subtopology.copartition_groups:
        try:
            names = [subtopology.source_topics[_index(i)] for i in group.source_topics]
            names += [subtopology.repartition_source_topics[_index(i)].name for i in group.repartition_source_topics]
        except IndexError:
            raise TopologyRefused(Error.UNKNOWN_SERVER_ERROR, f"a copartition group of subtopology "
                                  f"{subtopology.subtopology_id} names a topic index out of range") from None
        groups.append(frozenset(names))
    return groups


def _index(i: int) -> int:
    if i < 0:  # Java's List.get refuses what Python would count from the end
        raise IndexError(i)
    return i


def _check_source_topics(subtopologies: Sequence[Subtopology], view: Mapping[str, int]) -> None:
    missing = sorted({t for s in subtopologies for t in s.source_topics if not topic_exists(view, t)})
    if missing:
        raise _TopicConfigurationError(Status.MISSING_SOURCE_TOPICS,
                                       f"Source topics {_summarize(missing)} are missing.")


def _repartition_counts(subtopologies: Sequence[Subtopology], decided: _Decided) -> dict[str, int]:
    """RepartitionTopics.setup: fixed counts, then a fix-point over the sinks (subtopologies by id)."""
    counts = {t.name: t.partitions for s in subtopologies for t in s.repartition_source_topics if t.partitions != 0}
    while True:
        needed = progress = False
        for subtopology in subtopologies:
            for sink in subtopology.repartition_sink_topics:
                if sink in counts:
                    continue
                candidates = [counts[t.name] for t in subtopology.repartition_source_topics if t.name in counts]
                candidates += [c for t in subtopology.source_topics if (c := decided.view.get(t, -1)) >= 1]
                if candidates:
                    counts[sink] = max(candidates)
                    progress = True
                else:
                    needed = True
        if not needed:
            break
        if not progress:
            raise TopologyRefused(Error.STREAMS_INVALID_TOPOLOGY, "Failed to compute number of partitions for all "
                                  "repartition topics. There may be loops in the topology that cannot be resolved.")
    if any(t.name not in counts for s in subtopologies for t in s.repartition_source_topics):
        raise TopologyRefused(Error.STREAMS_INVALID_TOPOLOGY, "Failed to compute number of partitions for all "
                              "repartition topics, because a repartition source topic is never used as a sink topic.")
    return counts


def _enforce_copartitioning(subtopologies: Sequence[Subtopology], groups: Iterable[frozenset[str]],
                            decided: _Decided) -> None:
    """InternalTopicManager.enforceCopartitioning with CopartitionedTopicsEnforcer.enforce per group."""
    fixed = sorted({t.name for s in subtopologies for t in s.repartition_source_topics if t.partitions != 0})
    repartition = {t.name for s in subtopologies for t in s.repartition_source_topics}
    for group in groups:
        if not group:
            continue
        internal = {t: decided.require(t) for t in sorted(group & repartition)}
        external = {t: decided.require(t) for t in sorted(group - repartition)}
        if not external:
            if fixed:  # Kafka checks every fixed repartition topic of the topology here, not only the group's
                counts = {t: decided.require(t) for t in fixed}
                if len(set(counts.values())) > 1:
                    raise _TopicConfigurationError(Status.INCORRECTLY_PARTITIONED_TOPICS, "Following topics do not "
                                                   f"have the same number of partitions: [{internal}]")
                partitions = counts[fixed[0]]
            else:
                partitions = max(internal.values())
        else:
            if len(set(external.values())) > 1:
                raise _TopicConfigurationError(Status.INCORRECTLY_PARTITIONED_TOPICS, "Following topics do not have "
                                               f"the same number of partitions: [{external}]")
            partitions = next(iter(external.values()))
        for topic, count in internal.items():
            decided.counts[topic] = partitions
            if topic in fixed and count != partitions:
                raise _TopicConfigurationError(
                    Status.INCORRECTLY_PARTITIONED_TOPICS, f"Number of partitions [{count}] of repartition topic "
                    f"[{topic}] doesn't match number of partitions [{partitions}] of the source topic.")


def _changelog_counts(subtopologies: Sequence[Subtopology], decided: _Decided) -> dict[str, int]:
    """ChangelogTopics.setup: each changelog topic gets the largest count among its subtopology's sources."""
    counts = {}
    for subtopology in subtopologies:
        sources = [*subtopology.source_topics, *(t.name for t in subtopology.repartition_source_topics)]
        if not sources:
            raise TopologyRefused(Error.STREAMS_INVALID_TOPOLOGY,
                                  f"No source topics found for subtopology {subtopology.subtopology_id}")
        largest = max(decided.require(t) for t in sources)
        for changelog in subtopology.state_changelog_topics:
            counts[changelog.name] = largest
    return counts


def _configured(subtopology: Subtopology, decided: _Decided) -> ConfiguredSubtopology:
    """InternalTopicManager.fromPersistedSubtopology; its task count is computeNumberOfTasks."""
    sources = [*subtopology.source_topics, *(t.name for t in subtopology.repartition_source_topics)]
    return ConfiguredSubtopology(
        subtopology.subtopology_id,
        max(decided.require(t) for t in sources),
        tuple(sorted(subtopology.source_topics)),
        subtopology.source_topic_regex,
        tuple(sorted(subtopology.repartition_sink_topics)),
        tuple(sorted((_internal_topic(t, decided) for t in subtopology.repartition_source_topics),
                     key=lambda t: t.name)),
        tuple(sorted((_internal_topic(t, decided) for t in subtopology.state_changelog_topics),
                     key=lambda t: t.name)),
    )


def _internal_topic(info: TopicInfo, decided: _Decided) -> ConfiguredInternalTopic:
    partitions = info.partitions or decided.counts.get(info.name)
    if partitions is None:
        raise TopologyRefused(Error.UNKNOWN_SERVER_ERROR, f"number of partitions must be set for topic {info.name}")
    if len({key for key, _ in info.topic_configs}) != len(info.topic_configs):
        raise TopologyRefused(Error.UNKNOWN_SERVER_ERROR, f"topic {info.name} names a topic config twice")
    return ConfiguredInternalTopic(info.name, partitions, info.replication_factor, info.topic_configs)


def _missing_internal_topics(configured: Sequence[ConfiguredSubtopology], topology: Topology,
                             view: Mapping[str, int]) -> tuple[ConfiguredInternalTopic, ...]:
    """InternalTopicManager.missingInternalTopics: internal topics not in the view; existing ones must agree."""
    to_create = {t.name: t for s in configured for t in (*s.repartition_source_topics, *s.state_changelog_topics)}
    for topic in sorted(topology.required_topics()):
        if topic_exists(view, topic) and (expected := to_create.pop(topic, None)) is not None \
                and view[topic] != expected.partitions:
            raise _TopicConfigurationError(
                Status.INCORRECTLY_PARTITIONED_TOPICS, f"Existing topic {topic} has different number of partitions: "
                f"expected {expected.partitions}, found {view[topic]}")
    return tuple(to_create[name] for name in sorted(to_create))


def _summarize(topics: Iterable[str]) -> str:
    """Up to 3 topic names and a count of the others (InternalTopicManager.summarizeTopics)."""
    names = list(topics)
    shown = ", ".join(names[:3])
    return shown + (f" and {len(names) - 3} additional topics" if len(names) > 3 else "") if names else "<none>"
