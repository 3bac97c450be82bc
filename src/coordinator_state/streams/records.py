"""The request records of the streams APIs (PROTOCOL.md section 10): StreamsGroupHeartbeat v0, StreamsGroupDescribe v0.

Immutable records like the classic APIs' (NamedTuples holding the request's `Reply`), with the fields of Kafka
4.4's StreamsGroupHeartbeatRequest.json and StreamsGroupDescribeRequest.json, plus the envelope's
`topic_metadata`. `parsing` builds them; a field absent from the body has its JSON spec default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..records import Reply
from .tasks import TaskSets, tasks_from_wire

TaskIds = tuple[str, tuple[int, ...]]
"""One entry of a task list: a subtopology id and partitions, as the request lists them."""

__all__ = [
    "CopartitionGroup",
    "Endpoint",
    "StreamsGroupDescribe",
    "StreamsGroupHeartbeat",
    "Subtopology",
    "TaskIds",
    "TaskOffset",
    "TopicInfo",
    "Topology",
]


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """An internal topic of a subtopology: partitions 0 = not fixed (always 0 for changelogs), replication 0 = the
    broker's default."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    topic_configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class CopartitionGroup:
    """Indexes into the subtopology's source topics and repartition source topics that must be copartitioned."""

    source_topics: tuple[int, ...] = ()
    source_topic_regex: tuple[int, ...] = ()
    repartition_source_topics: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()

    @property
    def stateful(self) -> bool:
        return bool(self.state_changelog_topics)


@dataclass(frozen=True, slots=True)
class Topology:
    """A streams application's topology as a join sends it."""

    epoch: int
    subtopologies: tuple[Subtopology, ...] = ()

    def same_as(self, other: Topology) -> bool:
        """Equal as Kafka's StreamsTopology: same epoch, same subtopologies by id (their list order aside)."""
        return self.epoch == other.epoch and self.by_id() == other.by_id()

    def by_id(self) -> dict[str, Subtopology]:
        return {subtopology.subtopology_id: subtopology for subtopology in self.subtopologies}

    def required_topics(self) -> frozenset[str]:
        """Source, repartition source and changelog topics (StreamsTopology.requiredTopics)."""
        return frozenset(name for s in self.subtopologies
                         for name in (*s.source_topics, *(t.name for t in s.repartition_source_topics),
                                      *(t.name for t in s.state_changelog_topics)))


class Endpoint(NamedTuple):
    """A user endpoint for Interactive Queries."""

    host: str
    port: int


class TaskOffset(NamedTuple):
    subtopology_id: str
    partition: int
    offset: int


class StreamsGroupHeartbeat(NamedTuple):
    """A StreamsGroupHeartbeat v0. Null (None) fields mean "unchanged since the last heartbeat"."""

    reply: Reply
    timestamp_ms: int
    client_host: str
    group_id: str
    member_id: str
    member_epoch: int  # 0 join, -1 leave, -2 static temporary leave
    endpoint_information_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int  # -1: unchanged
    topology: Topology | None
    active_tasks: tuple[TaskIds, ...] | None
    standby_tasks: tuple[TaskIds, ...] | None
    warmup_tasks: tuple[TaskIds, ...] | None
    process_id: str | None
    user_endpoint: Endpoint | None
    client_tags: tuple[tuple[str, str], ...] | None
    task_offsets: tuple[TaskOffset, ...] | None
    task_end_offsets: tuple[TaskOffset, ...] | None
    shutdown_application: bool
    topic_metadata: tuple[tuple[str, int], ...]  # the envelope's (topic, partitions); -1: the topic does not exist

    def owned(self) -> TaskSets | None:
        """The tasks the member reports owning, or None when it reports none (any list null)."""
        if self.active_tasks is None or self.standby_tasks is None or self.warmup_tasks is None:
            return None
        return TaskSets(tasks_from_wire(self.active_tasks), tasks_from_wire(self.standby_tasks),
                        tasks_from_wire(self.warmup_tasks))


class StreamsGroupDescribe(NamedTuple):
    """StreamsGroupDescribe of its one group (PROTOCOL.md 8's one-group rule)."""

    reply: Reply
    timestamp_ms: int
    group_id: str
    include_authorized_operations: bool
