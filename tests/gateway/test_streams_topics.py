"""The gateway's part of streams groups, sans I/O (PROTOCOL.md section 10): a heartbeat's `topic_metadata` from the
upstream's counts (cached, refreshed, fetched on a miss), the internal topics an answer asks for, and
StreamsGroupDescribe split one group per envelope."""

from __future__ import annotations

from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_gateway.gateway import CreateTopics, FetchTopicMetadata, Gateway, Limits
from kafka_gateway.streams_topics import counts_from_metadata

from .wire import T0, answer, decode_responses, envelopes, make_gateway, request, to_client

TOPOLOGY = {"epoch": 0, "subtopologies": [{
    "subtopology_id": "0", "source_topics": ["in"], "source_topic_regex": [],
    "state_changelog_topics": [{"name": "app-store-changelog", "partitions": 0, "replication_factor": 0,
                                "topic_configs": []}],
    "repartition_sink_topics": ["app-rep"],
    "repartition_source_topics": [{"name": "app-rep", "partitions": 0, "replication_factor": 0, "topic_configs": []}],
    "copartition_groups": []}]}
JOIN = {"group_id": "app", "member_id": "m-1", "member_epoch": 0, "endpoint_information_epoch": 0,
        "instance_id": "i-1", "rebalance_timeout_ms": 30_000, "topology": TOPOLOGY, "active_tasks": [],
        "standby_tasks": [], "warmup_tasks": [], "process_id": "p-1"}
HEARTBEAT = {"group_id": "app", "member_id": "m-1", "member_epoch": 1, "endpoint_information_epoch": 0}
TOPICS = ("app-rep", "app-store-changelog", "in")
COUNTS = {"app-rep": -1, "app-store-changelog": -1, "in": 4}
ANSWER = {"error_code": 0, "error": "NONE", "member_id": "m-1", "member_epoch": 1, "heartbeat_interval_ms": 5000,
          "status": []}
CHANGELOG = {"name": "app-store-changelog", "partitions": 4, "replication_factor": 0,
             "configs": [{"key": "cleanup.policy", "value": "compact"}]}


def heartbeat(gateway: Gateway, connection: int, body: dict[str, Any], now_ms: int, correlation_id: int = 1) -> list:
    return gateway.receive(connection, request(ApiKey.StreamsGroupHeartbeat, 0, correlation_id, body), now_ms)


def fetches(actions: list) -> list[tuple[str, ...]]:
    return [a.topics for a in actions if isinstance(a, FetchTopicMetadata)]


def creations(actions: list) -> list[tuple[dict[str, Any], ...]]:
    return [a.topics for a in actions if isinstance(a, CreateTopics)]


def test_a_join_waits_for_the_counts_of_its_topologys_topics_then_carries_them() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    actions = heartbeat(gateway, conn, JOIN, T0)
    assert fetches(actions) == [TOPICS] and envelopes(actions) == []
    # Another member of the group meanwhile: it waits for the same fetch, which is not asked twice.
    other = gateway.open("10.0.0.8")
    assert heartbeat(gateway, other, {**JOIN, "member_id": "m-2", "instance_id": "i-2"}, T0) == []
    sent = envelopes(gateway.receive_topic_metadata(TOPICS, COUNTS, T0 + 3))
    assert [e["body"]["member_id"] for e in sent] == ["m-1", "m-2"]
    assert sent[0]["topic_metadata"] == {"topics": [{"name": "app-rep", "partitions": -1},
                                                    {"name": "app-store-changelog", "partitions": -1},
                                                    {"name": "in", "partitions": 4}]}
    assert sent[0]["body"] == JOIN | {"rack_id": None, "warmup_tasks": [], "user_endpoint": None, "client_tags": None,
                                      "task_offsets": None, "task_end_offsets": None, "shutdown_application": False}


def test_later_heartbeats_carry_the_cached_counts_and_refresh_them_once_they_are_old() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    [join] = envelopes(heartbeat(gateway, conn, JOIN, T0) + gateway.receive_topic_metadata(TOPICS, COUNTS, T0))
    gateway.receive_answers([answer(join, ANSWER)], T0 + 1)
    actions = heartbeat(gateway, conn, HEARTBEAT, T0 + 1000, correlation_id=2)
    [sent] = envelopes(actions)
    assert fetches(actions) == [] and sent["topic_metadata"]["topics"][2] == {"name": "in", "partitions": 4}
    gateway.receive_answers([answer(sent, ANSWER)], T0 + 1001)
    # Older than the cache's age: sent at once with the counts known, and fetched again meanwhile.
    late = T0 + gateway.topic_counts.max_age_ms
    actions = heartbeat(gateway, conn, HEARTBEAT, late, correlation_id=3)
    [sent] = envelopes(actions)
    assert fetches(actions) == [TOPICS] and sent["topic_metadata"]["topics"][2]["partitions"] == 4
    gateway.receive_topic_metadata(TOPICS, {**COUNTS, "in": 6}, late + 5)
    gateway.receive_answers([answer(sent, ANSWER)], late + 6)
    [sent] = envelopes(heartbeat(gateway, conn, HEARTBEAT, late + 10, correlation_id=4))
    assert sent["topic_metadata"]["topics"][2] == {"name": "in", "partitions": 6}


def test_a_heartbeat_of_a_group_never_seen_joining_carries_no_topic_metadata() -> None:
    gateway = make_gateway()
    [sent] = envelopes(heartbeat(gateway, gateway.open("10.0.0.7"), HEARTBEAT, T0))
    assert "topic_metadata" not in sent


def test_a_failed_fetch_lets_the_waiting_heartbeat_go_without_counts_and_the_next_one_fetches_again() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    heartbeat(gateway, conn, JOIN, T0)
    [sent] = envelopes(gateway.receive_topic_metadata(TOPICS, {}, T0 + 10))
    assert "topic_metadata" not in sent
    gateway.receive_answers([answer(sent, ANSWER)], T0 + 11)
    assert fetches(heartbeat(gateway, conn, HEARTBEAT, T0 + 20, correlation_id=2)) == [TOPICS]


def test_a_heartbeat_whose_counts_never_come_is_answered_coordinator_not_available_at_its_bound() -> None:
    gateway = make_gateway(Limits(coordinator_timeout_ms=1000))
    conn = gateway.open("10.0.0.7")
    heartbeat(gateway, conn, JOIN, T0)
    [(correlation_id, body)] = decode_responses(to_client(gateway.expire(T0 + 1000)),
                                                [(ApiKey.StreamsGroupHeartbeat, 0)])
    assert (correlation_id, body["error_code"]) == (1, 15)
    assert envelopes(gateway.receive_topic_metadata(TOPICS, COUNTS, T0 + 1001)) == []


def test_internal_topics_an_answer_asks_for_are_created_once_then_fetched_afresh() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    [join] = envelopes(heartbeat(gateway, conn, JOIN, T0) + gateway.receive_topic_metadata(TOPICS, COUNTS, T0))
    missing = {**ANSWER, "status": [{"status_code": 3, "status_detail": "missing"}]}
    actions = gateway.receive_answers([{**answer(join, missing), "create_topics": [CHANGELOG]}], T0 + 1)
    assert creations(actions) == [({"name": "app-store-changelog", "num_partitions": 4, "replication_factor": 0,
                                    "assignments": [], "configs": [{"name": "cleanup.policy",
                                                                    "value": "compact"}]},)]
    [(_, body)] = decode_responses(to_client(actions), [(ApiKey.StreamsGroupHeartbeat, 0)])
    assert body["status"] == [{"status_code": 3, "status_detail": "missing"}]
    # Asked again while being created: not created twice.
    [sent] = envelopes(heartbeat(gateway, conn, HEARTBEAT, T0 + 2, correlation_id=2))
    assert creations(gateway.receive_answers([{**answer(sent, missing), "create_topics": [CHANGELOG]}], T0 + 3)) == []
    gateway.topics_created({"app-store-changelog": (0, None)}, T0 + 4)
    assert gateway.counters["internal_topics_created"] == 1
    # Its count is fetched afresh before the next heartbeat goes.
    actions = heartbeat(gateway, conn, HEARTBEAT, T0 + 5, correlation_id=3)
    assert fetches(actions) == [("app-store-changelog",)] and envelopes(actions) == []


def test_a_failed_creation_is_counted_and_tried_again_only_after_the_retry_interval() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    [join] = envelopes(heartbeat(gateway, conn, JOIN, T0) + gateway.receive_topic_metadata(TOPICS, COUNTS, T0))
    assert creations(gateway.receive_answers([{**answer(join, ANSWER), "create_topics": [CHANGELOG]}], T0 + 1))
    gateway.topics_created({"app-store-changelog": (38, "replication factor too large")}, T0 + 2)
    assert gateway.counters["internal_topic_errors"] == 1
    retry = gateway.internal_topics.retry_ms
    for at, created in ((T0 + 1 + retry, 0), (T0 + 2 + retry, 1)):
        [sent] = envelopes(heartbeat(gateway, conn, HEARTBEAT, at, correlation_id=at - T0))
        assert len(creations(gateway.receive_answers([{**answer(sent, ANSWER), "create_topics": [CHANGELOG]}],
                                                     at))) == created


def test_metadata_answers_count_partitions_and_mark_absent_topics() -> None:
    body = {"topics": [{"name": "a", "error_code": 0, "partitions": [{}, {}, {}]},
                       {"name": "b", "error_code": 3, "partitions": []},
                       {"name": "c", "error_code": 5, "partitions": []}]}
    assert counts_from_metadata(body) == {"a": 3, "b": -1}


def test_a_streams_describe_of_two_groups_goes_one_group_per_envelope_and_comes_back_in_order() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    parts = envelopes(gateway.receive(conn, request(ApiKey.StreamsGroupDescribe, 0, 8, {
        "group_ids": ["a", "b"], "include_authorized_operations": False}), T0))
    assert [(e["api"], e["body"]["group_ids"]) for e in parts] == [("StreamsGroupDescribe", ["a"]),
                                                                   ("StreamsGroupDescribe", ["b"])]
    entry = {"error_code": 69, "error": "GROUP_ID_NOT_FOUND", "error_message": "Group b not found.",
             "group_id": "b", "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "topology": None,
             "members": [], "authorized_operations": -(2**31)}
    actions = gateway.receive_answers([answer(parts[1], {"error_code": 0, "groups": [entry]}),
                                       answer(parts[0], {"error_code": 42})], T0 + 1)
    [(_, body)] = decode_responses(to_client(actions), [(ApiKey.StreamsGroupDescribe, 0)])
    assert [(g["group_id"], g["error_code"]) for g in body["groups"]] == [("a", 42), ("b", 69)]


def test_the_counts_cache_forgets_the_counts_learned_longest_ago_beyond_its_bound() -> None:
    gateway = make_gateway()
    gateway.topic_counts.max_topics = 2
    gateway.receive_topic_metadata(["a", "b"], {"a": 1, "b": 2}, T0)
    gateway.receive_topic_metadata(["c", "a"], {"c": 3, "a": 4}, T0 + 1)
    assert gateway.topic_counts.field(["a", "b", "c"]) == {"topics": [{"name": "a", "partitions": 4},
                                                                      {"name": "c", "partitions": 3}]}
