"""Topic configuration of a topology (Kafka 4.4's InternalTopicManager, RepartitionTopics, ChangelogTopics,
CopartitionedTopicsEnforcer) against a group's topic view; cases after InternalTopicManagerTest,
RepartitionTopicsTest, ChangelogTopicsTest and CopartitionedTopicsEnforcerTest."""

from __future__ import annotations

import pytest

from coordinator_state.errors import Error
from coordinator_state.records import CopartitionGroup, Subtopology, TopicInfo, Topology
from coordinator_state.streams.topics import Status, TopologyRefused, configure_topics


def _sub(subtopology_id: str, sources: tuple[str, ...] = (), *, changelogs: tuple[TopicInfo, ...] = (),
         sinks: tuple[str, ...] = (), repartition: tuple[TopicInfo, ...] = (),
         copartition: tuple[CopartitionGroup, ...] = ()) -> Subtopology:
    return Subtopology(subtopology_id, sources, (), changelogs, sinks, repartition, copartition)


def test_missing_source_topics_are_a_status_and_leave_the_topology_unconfigured() -> None:
    configured = configure_topics(Topology(0, (_sub("0", ("d", "b", "a", "c", "e")),)), {"a": -1, "e": 2})
    assert configured.status is Status.MISSING_SOURCE_TOPICS and not configured.ready
    assert configured.subtopologies is None and configured.topics_to_create == ()
    assert configured.status_detail == "Source topics a, b, c and 1 additional topics are missing."


def test_stateless_subtopology_has_a_task_per_partition_of_its_largest_source() -> None:
    configured = configure_topics(Topology(0, (_sub("0", ("in", "other")),)), {"in": 4, "other": 6})
    assert configured.ready and configured.status_detail == ""
    assert configured.subtopologies is not None
    assert [(s.subtopology_id, s.task_count, s.stateful) for s in configured.subtopologies] == [("0", 6, False)]


def test_missing_changelog_topic_is_to_be_created_with_the_largest_source_count() -> None:
    changelog = TopicInfo("app-store-changelog", 0, 0, (("cleanup.policy", "compact"),))
    configured = configure_topics(Topology(0, (_sub("0", ("in",), changelogs=(changelog,)),)), {"in": 4})
    assert configured.status is Status.MISSING_INTERNAL_TOPICS and not configured.ready
    assert configured.status_detail == "Internal topics are missing: app-store-changelog"
    assert [t.to_create() for t in configured.topics_to_create] == [
        {"name": "app-store-changelog", "partitions": 4, "replication_factor": -1,
         "configs": [{"key": "cleanup.policy", "value": "compact"}]}]


def test_existing_internal_topic_must_have_the_decided_count() -> None:
    subtopology = _sub("0", ("in",), changelogs=(TopicInfo("store-changelog", replication_factor=3),))
    assert configure_topics(Topology(0, (subtopology,)), {"in": 4, "store-changelog": 4}).ready
    wrong = configure_topics(Topology(0, (subtopology,)), {"in": 4, "store-changelog": 2})
    assert wrong.status is Status.INCORRECTLY_PARTITIONED_TOPICS and wrong.subtopologies is None
    assert wrong.status_detail == "Existing topic store-changelog has different number of partitions: " \
                                  "expected 4, found 2"


def test_source_topic_used_as_changelog_is_not_created() -> None:
    # ChangelogTopicsTest.shouldContainSourceBasedChangelogs: it is configured, then found existing
    configured = configure_topics(Topology(0, (_sub("0", ("in",), changelogs=(TopicInfo("in"),)),)), {"in": 3})
    assert configured.ready and configured.subtopologies is not None
    assert configured.subtopologies[0].stateful


def test_flexible_repartition_topic_takes_the_largest_count_of_the_subtopology_writing_it() -> None:
    writer = _sub("0", ("in", "in2"), sinks=("rep",))
    reader = _sub("1", repartition=(TopicInfo("rep"),))
    configured = configure_topics(Topology(0, (reader, writer)), {"in": 4, "in2": 2})
    assert configured.status is Status.MISSING_INTERNAL_TOPICS
    assert [(t.name, t.partitions) for t in configured.topics_to_create] == [("rep", 4)]
    assert configured.subtopologies is not None
    assert [(s.subtopology_id, s.task_count) for s in configured.subtopologies] == [("0", 4), ("1", 4)]


def test_fixed_repartition_topic_keeps_its_count() -> None:
    writer = _sub("0", ("in",), sinks=("rep",))
    reader = _sub("1", repartition=(TopicInfo("rep", 8),))
    configured = configure_topics(Topology(0, (writer, reader)), {"in": 4, "rep": 8})
    assert configured.ready and configured.subtopologies is not None
    assert configured.subtopologies[1].task_count == 8


def test_repartition_topics_in_a_loop_are_an_invalid_topology() -> None:
    a = _sub("a", sinks=("r1",), repartition=(TopicInfo("r2"),))
    b = _sub("b", sinks=("r2",), repartition=(TopicInfo("r1"),))
    with pytest.raises(TopologyRefused) as refused:
        configure_topics(Topology(0, (a, b)), {})
    assert refused.value.error is Error.STREAMS_INVALID_TOPOLOGY


def test_repartition_source_never_written_is_an_invalid_topology() -> None:
    with pytest.raises(TopologyRefused) as refused:
        configure_topics(Topology(0, (_sub("0", ("in",), repartition=(TopicInfo("orphan"),)),)), {"in": 2})
    assert refused.value.error is Error.STREAMS_INVALID_TOPOLOGY
    assert "never used as a sink" in str(refused.value)


def test_subtopology_without_any_source_is_an_invalid_topology() -> None:
    # ChangelogTopicsTest.shouldFailIfNoSourceTopicsAndNoRepartitionSourceTopics
    with pytest.raises(TopologyRefused) as refused:
        configure_topics(Topology(0, (_sub("0", sinks=("rep",)),)), {})
    assert refused.value.error is Error.STREAMS_INVALID_TOPOLOGY


def test_copartitioned_external_topics_must_have_the_same_count() -> None:
    join = _sub("0", ("left", "right"), copartition=(CopartitionGroup(source_topics=(0, 1)),))
    assert configure_topics(Topology(0, (join,)), {"left": 4, "right": 4}).ready
    configured = configure_topics(Topology(0, (join,)), {"left": 4, "right": 3})
    assert configured.status is Status.INCORRECTLY_PARTITIONED_TOPICS


def test_flexible_repartition_topic_is_coerced_to_its_copartitioned_external_topic() -> None:
    writer = _sub("0", ("wide",), sinks=("rep",))
    join = _sub("1", ("narrow",), repartition=(TopicInfo("rep"),),
                copartition=(CopartitionGroup(source_topics=(0,), repartition_source_topics=(0,)),))
    configured = configure_topics(Topology(0, (writer, join)), {"wide": 8, "narrow": 2})
    assert [(t.name, t.partitions) for t in configured.topics_to_create] == [("rep", 2)]


def test_fixed_repartition_topic_disagreeing_with_its_copartitioned_topic_is_incorrectly_partitioned() -> None:
    writer = _sub("0", ("wide",), sinks=("rep",))
    join = _sub("1", ("narrow",), repartition=(TopicInfo("rep", 8),),
                copartition=(CopartitionGroup(source_topics=(0,), repartition_source_topics=(0,)),))
    configured = configure_topics(Topology(0, (writer, join)), {"wide": 8, "narrow": 2})
    assert configured.status is Status.INCORRECTLY_PARTITIONED_TOPICS


def test_copartition_group_naming_a_topic_out_of_range_cannot_be_configured() -> None:
    broken = _sub("0", ("in",), copartition=(CopartitionGroup(source_topics=(0, 1)),))
    with pytest.raises(TopologyRefused) as refused:
        configure_topics(Topology(0, (broken,)), {"in": 1})
    assert refused.value.error is Error.UNKNOWN_SERVER_ERROR


def test_topics_to_create_are_listed_by_name() -> None:
    subtopology = _sub("0", ("in",), changelogs=(TopicInfo("z-changelog"), TopicInfo("a-changelog")))
    configured = configure_topics(Topology(0, (subtopology,)), {"in": 1})
    assert [t.name for t in configured.topics_to_create] == ["a-changelog", "z-changelog"]


def test_required_topics_are_sources_repartition_sources_and_changelogs() -> None:
    topology = Topology(0, (_sub("0", ("in",), changelogs=(TopicInfo("c"),), sinks=("r",)),
                            _sub("1", repartition=(TopicInfo("r"),))))
    assert topology.required_topics() == {"in", "c", "r"}
