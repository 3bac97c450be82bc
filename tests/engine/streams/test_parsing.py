"""Parsing of StreamsGroupHeartbeat v0 and StreamsGroupDescribe v0 bodies (PROTOCOL.md section 10): required
fields, JSON spec defaults for absent ones, ranges, and the envelope's `topic_metadata`."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator_state.fields import Bad
from coordinator_state.records import CopartitionGroup, Endpoint, Reply, Subtopology, TopicInfo, Topology
from coordinator_state.streams.parsing import parse_streams_describe, parse_streams_heartbeat, parse_topic_metadata
from coordinator_state.streams.tasks import TaskSets, owned_tasks

_ABSENT = object()
REPLY = Reply("StreamsGroupHeartbeat", 0, 1, "client-a", "a")
JOIN: dict[str, Any] = {
    "group_id": "g", "member_id": "a1", "member_epoch": 0, "instance_id": "i1", "rebalance_timeout_ms": 30000,
    "topology": {"epoch": 2, "subtopologies": [{
        "subtopology_id": "s", "source_topics": ["in"],
        "state_changelog_topics": [{"name": "c", "partitions": 0, "replication_factor": 3,
                                    "topic_configs": [{"key": "k", "value": "v"}]}],
        "copartition_groups": [{"source_topics": [0]}]}]},
    "active_tasks": [], "standby_tasks": [], "warmup_tasks": [], "process_id": "p1",
    "user_endpoint": {"host": "h", "port": 8080}, "client_tags": [{"key": "rack", "value": "r1"}],
}


def test_join_body_with_topology_and_defaults() -> None:
    hb = parse_streams_heartbeat(REPLY, 1000, "/10.0.0.1", JOIN, {"topics": [{"name": "in", "partitions": 4}]})
    assert (hb.group_id, hb.member_id, hb.member_epoch, hb.instance_id, hb.rack_id) == ("g", "a1", 0, "i1", None)
    assert hb.endpoint_information_epoch == 0 and hb.shutdown_application is False
    assert hb.topology == Topology(2, (Subtopology(
        "s", ("in",), (), (TopicInfo("c", 0, 3, (("k", "v"),)),), (), (), (CopartitionGroup((0,), (), ()),)),))
    assert owned_tasks(hb.active_tasks, hb.standby_tasks, hb.warmup_tasks) == TaskSets()
    assert hb.user_endpoint == Endpoint("h", 8080) and hb.client_tags == (("rack", "r1"),)
    assert hb.topic_metadata == (("in", 4),)


def test_absent_optional_fields_take_the_spec_defaults() -> None:
    hb = parse_streams_heartbeat(REPLY, 1000, "", {"group_id": "g", "member_id": "a1", "member_epoch": 3})
    assert (hb.rebalance_timeout_ms, hb.topology, hb.process_id, hb.user_endpoint, hb.client_tags) == (
        -1, None, None, None, None)
    assert hb.active_tasks is None and hb.topic_metadata == ()
    assert owned_tasks(hb.active_tasks, hb.standby_tasks, hb.warmup_tasks) is None


def test_task_lists_keep_their_entries_and_owned_is_none_when_any_list_is_null() -> None:
    body = {"group_id": "g", "member_id": "a1", "member_epoch": 3,
            "active_tasks": [{"subtopology_id": "s", "partitions": [2, 0]}, {"subtopology_id": "t"}],
            "standby_tasks": [], "warmup_tasks": None}
    hb = parse_streams_heartbeat(REPLY, 1000, "", body)
    assert hb.active_tasks == (("s", (2, 0)), ("t", ()))
    assert owned_tasks(hb.active_tasks, hb.standby_tasks, hb.warmup_tasks) is None


@pytest.mark.parametrize(("change", "where"), [
    ({"member_epoch": _ABSENT}, "member_epoch"),
    ({"member_id": 5}, "member_id"),
    ({"member_epoch": 2**31}, "member_epoch"),
    ({"rebalance_timeout_ms": "x"}, "rebalance_timeout_ms"),
    ({"user_endpoint": {"host": "h", "port": 70000}}, "port"),
    ({"topology": {"subtopologies": [{"state_changelog_topics": [{"replication_factor": 40000}]}]}},
     "replication_factor"),
    ({"topology": {"subtopologies": [{"copartition_groups": [{"source_topics": ["0"]}]}]}}, "source_topics"),
    ({"active_tasks": [{"subtopology_id": "s", "partitions": [1.5]}]}, "partitions"),
    ({"shutdown_application": 1}, "shutdown_application"),
])
def test_mistyped_or_out_of_range_fields_make_the_record_invalid(change: dict[str, Any], where: str) -> None:
    body = {**JOIN, **change}
    body = {key: value for key, value in body.items() if value is not _ABSENT}
    with pytest.raises(Bad, match=where):
        parse_streams_heartbeat(REPLY, 1000, "", body)


@pytest.mark.parametrize("metadata", [
    {"topics": [{"name": "in", "partitions": 0}]},
    {"topics": [{"name": "in", "partitions": -2}]},
    {"topics": [{"name": "in"}]},
    {"topics": [{"name": "in", "partitions": 1}, {"name": "in", "partitions": 2}]},
    {"topic": []},
    [],
])
def test_malformed_topic_metadata_makes_the_record_invalid(metadata: Any) -> None:
    with pytest.raises(Bad, match="topic_metadata"):
        parse_topic_metadata(metadata)


def test_topic_metadata_names_existing_and_missing_topics() -> None:
    assert parse_topic_metadata({"topics": [{"name": "a", "partitions": 3}, {"name": "b", "partitions": -1}]}) == (
        ("a", 3), ("b", -1))


def test_describe_names_exactly_one_group() -> None:
    reply = Reply("StreamsGroupDescribe", 0, 2, "client-x", "x")
    described = parse_streams_describe(reply, 5, "", {"group_ids": ["g"]})
    assert (described.group_id, described.include_authorized_operations) == ("g", False)
    with pytest.raises(Bad, match="exactly one group"):
        parse_streams_describe(reply, 5, "", {"group_ids": ["g", "h"]})
    with pytest.raises(Bad, match="group_ids"):
        parse_streams_describe(reply, 5, "", {})
