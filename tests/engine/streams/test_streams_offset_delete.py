"""OffsetDelete against a streams group (OffsetMetadataManager.deleteOffsets with StreamsGroup's validateOffsetDelete
and isSubscribedToTopic), through the engine's front door, as a plain Kafka 4.4 broker answered the same requests:
while the group has members its topology's source topics are GROUP_SUBSCRIBED_TO_TOPIC and every other topic's
offsets go; once it is Empty every offset goes, and the group stays (Empty, listed) until its retention."""

from __future__ import annotations

from typing import Any

from coordinator_state import LocalCoordinator, request_envelope

TOPOLOGY = {"epoch": 0, "subtopologies": [{
    "subtopology_id": "s", "source_topics": ["in"], "source_topic_regex": [], "state_changelog_topics": [],
    "repartition_sink_topics": [], "repartition_source_topics": [], "copartition_groups": []}]}


def _send(engine: LocalCoordinator, api: str, version: int, t: int, body: dict[str, Any],
          **extra: Any) -> dict[str, Any]:
    request = request_envelope(api, body, version=version, correlation_id=t, client_id="c", client_host="/10.0.0.1",
                               reply_to="r", timestamp_ms=t)
    [answer] = [a for a in engine.handle({**request, **extra}) if a["correlation_id"] == t]
    return dict(answer["body"])


def _delete(engine: LocalCoordinator, t: int, *topics: str) -> dict[str, int]:
    body = _send(engine, "OffsetDelete", 0, t, {"group_id": "g", "topics": [
        {"name": topic, "partitions": [{"partition_index": 0}]} for topic in topics]})
    assert body["error_code"] == 0, body
    return {topic["name"]: topic["partitions"][0]["error_code"] for topic in body["topics"]}


def test_offset_delete_on_a_streams_group_spares_the_source_topics_while_it_has_members() -> None:
    engine = LocalCoordinator({"group.streams.initial.rebalance.delay.ms": 0})
    joined = _send(engine, "StreamsGroupHeartbeat", 0, 1000, {
        "group_id": "g", "member_id": "a1", "member_epoch": 0, "endpoint_information_epoch": 0,
        "rebalance_timeout_ms": 30000, "topology": TOPOLOGY, "active_tasks": [], "standby_tasks": [],
        "warmup_tasks": [], "process_id": "p1"}, topic_metadata={"topics": [{"name": "in", "partitions": 1}]})
    epoch = joined["member_epoch"]
    committed = _send(engine, "OffsetCommit", 9, 1100, {
        "group_id": "g", "generation_id_or_member_epoch": epoch, "member_id": "a1", "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                   "committed_leader_epoch": -1, "committed_metadata": ""}]}
                   for topic in ("in", "other")]})
    assert all(p["error_code"] == 0 for topic in committed["topics"] for p in topic["partitions"])

    assert _delete(engine, 1200, "in", "other", "never-committed") == {"in": 86, "other": 0, "never-committed": 0}
    left = _send(engine, "StreamsGroupHeartbeat", 0, 1300, {
        "group_id": "g", "member_id": "a1", "member_epoch": -1, "endpoint_information_epoch": 0})
    assert left["error_code"] == 0
    assert _delete(engine, 1400, "in") == {"in": 0}

    fetched = _send(engine, "OffsetFetch", 8, 1500, {"groups": [{"group_id": "g", "topics": None}],
                                                     "require_stable": False})
    assert fetched["groups"][0]["topics"] == []
    listed = _send(engine, "ListGroups", 5, 1600, {"states_filter": [], "types_filter": []})
    assert [(g["group_id"], g["group_state"], g["group_type"]) for g in listed["groups"]] == [("g", "Empty", "streams")]
