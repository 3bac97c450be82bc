"""The gateway's protocol logic, fed bytes and answers, read back as bytes (no network)."""

from __future__ import annotations

import pytest
from kafka.protocol.api_key import ApiKey

from chaos_harness.gateway_stack import JoinGenerations
from kafka_gateway.errors import MalformedFrame
from kafka_gateway.frames import FrameSplitter, frame
from kafka_gateway.gateway import FetchTopicMetadata, Limits, ResumeReading

from .wire import (
    REPLY_TO,
    SCHEME,
    T0,
    answer,
    closes,
    decode_responses,
    envelopes,
    make_gateway,
    request,
    response,
    to_client,
    to_upstream,
)

JOIN_V7 = {"group_id": "orders", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 30_000, "member_id": "",
           "group_instance_id": "i-1", "protocol_type": "consumer",
           "protocols": [{"name": "range", "metadata": "AAEC"}]}
HEARTBEAT_V4 = {"group_id": "orders", "generation_id": 1, "member_id": "m-1", "group_instance_id": "i-1"}
PRODUCE_ACKS_1 = {"transactional_id": None, "acks": 1, "timeout_ms": 100, "topic_data": []}


def test_frames_split_across_reads_and_refuse_bad_sizes() -> None:
    splitter = FrameSplitter(max_frame_bytes=10)
    stream = frame(b"abc") + frame(b"0123456789")
    assert [f for i in range(len(stream)) for f in splitter.feed(stream[i:i + 1])] == [b"abc", b"0123456789"]
    assert splitter.buffered == 0
    for size in (b"\x00\x00\x00\x0b", b"\xff\xff\xff\xff", b"\x00\x00\x00\x00"):
        with pytest.raises(MalformedFrame):
            FrameSplitter(max_frame_bytes=10).feed(size)


def test_api_versions_advertise_the_contract_and_the_proxied_apis_without_kip848() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    actions = gateway.receive(conn, request(ApiKey.ApiVersions, 3, 5, {}), T0)
    [(correlation_id, body)] = decode_responses(to_client(actions), [(ApiKey.ApiVersions, 3)])
    table = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    assert correlation_id == 5 and body["error_code"] == 0
    assert {k: table[k] for k in (11, 14, 12, 13, 8, 9, 15, 16, 42, 47)} == {
        11: (0, 9), 14: (0, 5), 12: (0, 4), 13: (0, 5), 8: (0, 9), 9: (0, 9), 15: (0, 6), 16: (0, 5), 42: (0, 2),
        47: (0, 0)}
    # Produce and Fetch below the versions whose answers may carry broker addresses (KIP-951).
    assert table[0] == (0, 9) and table[1] == (0, 15) and table[3] == (0, 12) and table[10] == (0, 6)
    assert table[60] == (0, 1)  # DescribeCluster, its answer rewritten
    # KIP-848, share groups, SASL, TxnOffsetCommit: absent.
    assert not {68, 69, 76, 17, 36, 28} & set(table)


def test_api_versions_at_an_unknown_version_answers_v0_unsupported_with_the_table() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    raw = request(ApiKey.ApiVersions, 0, 9, {})
    too_new = raw[:6] + (99).to_bytes(2, "big") + raw[8:]
    [(correlation_id, body)] = decode_responses(to_client(gateway.receive(conn, too_new, T0)),
                                                [(ApiKey.ApiVersions, 0)])
    assert correlation_id == 9 and body["error_code"] == 35
    assert {"api_key": 18, "min_version": 0, "max_version": 4} in body["api_keys"]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_find_coordinator_single_key_names_the_gateway(version: int) -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    body = {"key": "orders", "key_type": 0}
    [(_, answer_body)] = decode_responses(to_client(gateway.receive(conn, request(
        ApiKey.FindCoordinator, version, 1, body), T0)), [(ApiKey.FindCoordinator, version)])
    # On the bootstrap port: the lowest live node, at its port.
    assert (answer_body["error_code"], answer_body["node_id"], answer_body["host"], answer_body["port"]) == (
        0, 1, SCHEME.host, SCHEME.start)


@pytest.mark.parametrize("version", [4, 5, 6])
def test_find_coordinator_batched_keys_name_the_gateway_for_each_group(version: int) -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    body = {"key_type": 0, "coordinator_keys": ["a", "b"]}
    [(_, answer_body)] = decode_responses(to_client(gateway.receive(conn, request(
        ApiKey.FindCoordinator, version, 1, body), T0)), [(ApiKey.FindCoordinator, version)])
    assert [(c["key"], c["node_id"], c["host"], c["port"], c["error_code"]) for c in answer_body["coordinators"]] == [
        ("a", 1, SCHEME.host, SCHEME.start, 0), ("b", 1, SCHEME.host, SCHEME.start, 0)]


def test_find_coordinator_of_a_share_group_is_refused() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    [(_, body)] = decode_responses(to_client(gateway.receive(conn, request(
        ApiKey.FindCoordinator, 6, 1, {"key_type": 2, "coordinator_keys": ["s"]}), T0)),
        [(ApiKey.FindCoordinator, 6)])
    assert body["coordinators"][0]["error_code"] == 42


def test_a_group_request_becomes_an_envelope_and_its_answer_the_clients_response() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    [env] = envelopes(gateway.receive(conn, request(ApiKey.JoinGroup, 7, 42, JOIN_V7, client_id="consumer-a"), T0))
    assert env == {"api": "JoinGroup", "version": 7, "correlation_id": 1, "client_id": "consumer-a",
                   "client_host": "/10.0.0.7", "reply_to": REPLY_TO, "timestamp_ms": T0, "body": JOIN_V7}
    reply = {"error_code": 0, "error": "NONE", "generation_id": 1, "protocol_type": "consumer",
             "protocol_name": "range", "leader": "i-1-x", "member_id": "i-1-x",
             "members": [{"member_id": "i-1-x", "group_instance_id": "i-1", "metadata": "AAEC"}]}
    actions = gateway.receive_answers([answer(env, reply)], T0 + 5)
    [(correlation_id, body)] = decode_responses(to_client(actions), [(ApiKey.JoinGroup, 7)])
    assert correlation_id == 42
    assert body == {"throttle_time_ms": 0, **{k: v for k, v in reply.items() if k != "error"}}
    assert list(gateway.latencies_ms["JoinGroup"]) == [5]


def test_the_harness_sees_each_groups_latest_successful_join_generation_through_the_answer_observer() -> None:
    generations = JoinGenerations()
    gateway = make_gateway(on_answer=generations)
    conn = gateway.open("10.0.0.7")
    joined = {"generation_id": 3, "protocol_type": "consumer", "protocol_name": "range", "leader": "m",
              "member_id": "m", "members": []}
    for group, reply in (("orders", {"error_code": 0, **joined}), ("orders", {"error_code": 0, **joined,
                                                                             "generation_id": 4}),
                         ("orders", {"error_code": 79, "member_id": "m-2"}),  # an error: not a generation
                         ("payments", {"error_code": 0, **joined, "generation_id": 1})):
        [env] = envelopes(gateway.receive(conn, request(ApiKey.JoinGroup, 7, 1, {**JOIN_V7, "group_id": group}), T0))
        gateway.receive_answers([answer(env, reply)], T0)
    [heartbeat] = envelopes(gateway.receive(conn, request(ApiKey.Heartbeat, 4, 2, HEARTBEAT_V4), T0))
    gateway.receive_answers([answer(heartbeat, {"error_code": 0})], T0)
    assert generations.latest == {"orders": 4, "payments": 1}


def test_envelope_correlation_ids_are_the_gateways_own_across_connections() -> None:
    gateway = make_gateway()
    a, b = gateway.open("10.0.0.1"), gateway.open("10.0.0.2")
    first = envelopes(gateway.receive(a, request(ApiKey.Heartbeat, 4, 7, HEARTBEAT_V4), T0))
    second = envelopes(gateway.receive(b, request(ApiKey.Heartbeat, 4, 7, HEARTBEAT_V4), T0))
    assert first[0]["correlation_id"] != second[0]["correlation_id"]
    out = gateway.receive_answers([answer(second[0], {"error_code": 0}), answer(first[0], {"error_code": 27})], T0)
    assert decode_responses(to_client(out, a), [(ApiKey.Heartbeat, 4)])[0][1]["error_code"] == 27
    assert decode_responses(to_client(out, b), [(ApiKey.Heartbeat, 4)])[0][1]["error_code"] == 0


def test_responses_leave_in_request_order() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    metadata = request(ApiKey.Metadata, 9, 1, {"topics": [], "allow_auto_topic_creation": False})
    actions = gateway.receive(conn, metadata + request(ApiKey.Heartbeat, 4, 2, HEARTBEAT_V4), T0)
    [env] = envelopes(actions)
    # The heartbeat is answered first, but waits for the Metadata answer before it.
    assert to_client(gateway.receive_answers([answer(env, {"error_code": 0})], T0)) == b""
    upstream = response(ApiKey.Metadata, 9, 1, {"brokers": [], "cluster_id": None, "controller_id": 1, "topics": []})
    decoded = decode_responses(to_client(gateway.receive_upstream(conn, upstream, T0)),
                               [(ApiKey.Metadata, 9), (ApiKey.Heartbeat, 4)])
    assert [correlation_id for correlation_id, _ in decoded] == [1, 2]


def test_the_channel_is_muted_while_a_group_request_is_with_the_coordinator() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    pipelined = request(ApiKey.JoinGroup, 7, 1, JOIN_V7) + request(ApiKey.Heartbeat, 4, 2, HEARTBEAT_V4)
    [join] = envelopes(gateway.receive(conn, pipelined, T0))
    assert join["api"] == "JoinGroup"
    actions = gateway.receive_answers([answer(join, {"error_code": 79, "member_id": "i-1-x"})], T0 + 10)
    [heartbeat] = envelopes(actions)
    assert heartbeat["api"] == "Heartbeat" and heartbeat["timestamp_ms"] == T0 + 10
    assert decode_responses(to_client(actions), [(ApiKey.JoinGroup, 7)])[0][1]["error_code"] == 79


def test_an_unanswered_request_gets_coordinator_not_available_and_its_late_answer_is_dropped() -> None:
    gateway = make_gateway(Limits(coordinator_timeout_ms=25_000))
    conn = gateway.open("10.0.0.7")
    [env] = envelopes(gateway.receive(conn, request(ApiKey.Heartbeat, 4, 3, HEARTBEAT_V4), T0))
    assert gateway.next_deadline() == T0 + 25_000
    assert gateway.expire(T0 + 24_999) == []
    [(correlation_id, body)] = decode_responses(to_client(gateway.expire(T0 + 25_000)), [(ApiKey.Heartbeat, 4)])
    assert (correlation_id, body["error_code"]) == (3, 15)
    assert gateway.receive_answers([answer(env, {"error_code": 0})], T0 + 26_000) == []
    assert gateway.counters["late_answers_dropped"] == 1 and gateway.counters["coordinator_timeouts"] == 1


@pytest.mark.parametrize(("version", "body", "bound"), [
    (7, JOIN_V7, 30_000 + 2_000),
    (7, {**JOIN_V7, "rebalance_timeout_ms": 500}, 3_000 + 2_000),  # the initial rebalance delay is longer
    (0, {"group_id": "g", "session_timeout_ms": 10_000, "member_id": "", "protocol_type": "consumer",
         "protocols": []}, 10_000 + 2_000),
])
def test_a_join_waits_its_rebalance_timeout_or_the_initial_delay_plus_the_grace(
        version: int, body: dict[str, object], bound: int) -> None:
    gateway = make_gateway(Limits(join_grace_ms=2_000, initial_rebalance_delay_ms=3_000))
    conn = gateway.open("10.0.0.7")
    gateway.receive(conn, request(ApiKey.JoinGroup, version, 1, body), T0)
    assert gateway.next_deadline() == T0 + bound


def test_describe_groups_is_split_per_group_and_merged_in_request_order() -> None:
    gateway = make_gateway(Limits(coordinator_timeout_ms=1_000))
    conn = gateway.open("10.0.0.7")
    parts = envelopes(gateway.receive(conn, request(ApiKey.DescribeGroups, 5, 8, {
        "groups": ["a", "b", "c"], "include_authorized_operations": True}), T0))
    assert [p["body"] for p in parts] == [{"groups": [g], "include_authorized_operations": True} for g in "abc"]
    described = {"error_code": 0, "group_state": "Stable", "protocol_type": "consumer", "protocol_data": "range",
                 "authorized_operations": 328, "members": [
                     {"member_id": "m", "group_instance_id": "i", "client_id": "c", "client_host": "/h",
                      "member_metadata": "AA==", "member_assignment": "AQ=="}]}
    gateway.receive_answers([answer(parts[2], {"groups": [{"group_id": "c", **described}]}),
                             answer(parts[0], {"groups": [{"group_id": "a", **described}]})], T0)
    [(_, body)] = decode_responses(to_client(gateway.expire(T0 + 1_000)), [(ApiKey.DescribeGroups, 5)])
    assert [(g["group_id"], g["error_code"]) for g in body["groups"]] == [("a", 0), ("b", 15), ("c", 0)]
    assert body["groups"][0]["members"][0]["group_instance_id"] == "i"
    assert body["groups"][0]["authorized_operations"] == 328
    assert body["groups"][1]["authorized_operations"] == -2**31  # "not provided"


def test_a_request_split_by_group_keeps_a_window_of_envelopes_with_the_coordinator() -> None:
    gateway = make_gateway(Limits(max_envelopes_in_flight=2, coordinator_timeout_ms=1_000))
    conn = gateway.open("10.0.0.7")
    first = envelopes(gateway.receive(conn, request(ApiKey.DescribeGroups, 5, 8, {"groups": list("abcd")}), T0))
    assert [e["body"]["groups"] for e in first] == [["a"], ["b"]]
    actions = gateway.receive_answers([answer(first[1], {"groups": [{"group_id": "b", "error_code": 0}]})], T0 + 5)
    [third] = envelopes(actions)
    assert (third["body"]["groups"], third["timestamp_ms"]) == (["c"], T0)  # stamped with the request's receipt
    [(_, body)] = decode_responses(to_client(gateway.expire(T0 + 1_000)), [(ApiKey.DescribeGroups, 5)])
    assert [(g["group_id"], g["error_code"]) for g in body["groups"]] == [("a", 15), ("b", 0), ("c", 15), ("d", 15)]
    assert gateway.counters["coordinator_timeouts"] == 3 and gateway.in_flight == 0


def test_describe_groups_of_no_group_is_answered_without_the_coordinator() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    actions = gateway.receive(conn, request(ApiKey.DescribeGroups, 5, 8, {"groups": []}), T0)
    assert envelopes(actions) == []
    assert decode_responses(to_client(actions), [(ApiKey.DescribeGroups, 5)])[0][1]["groups"] == []


def test_delete_groups_is_split_per_distinct_group_and_merged_in_request_order() -> None:
    """One envelope per group id, duplicates once (KafkaApis takes them distinct); an invalid-request answer and a
    timeout each land in their group's entry."""
    gateway = make_gateway(Limits(coordinator_timeout_ms=1_000))
    conn = gateway.open("10.0.0.7")
    parts = envelopes(gateway.receive(conn, request(ApiKey.DeleteGroups, 2, 8, {
        "groups_names": ["a", "b", "a", "c"]}), T0))
    assert [p["body"] for p in parts] == [{"groups_names": [g]} for g in "abc"]
    assert {p["api"] for p in parts} == {"DeleteGroups"}
    gateway.receive_answers([
        answer(parts[2], {"error_code": 0, "results": [{"group_id": "c", "error_code": 68}]}),
        answer(parts[0], {"error_code": 42, "error": "INVALID_REQUEST"})], T0)
    [(_, body)] = decode_responses(to_client(gateway.expire(T0 + 1_000)), [(ApiKey.DeleteGroups, 2)])
    assert [(r["group_id"], r["error_code"]) for r in body["results"]] == [("a", 42), ("b", 15), ("c", 68)]


def test_offset_delete_waits_for_its_topics_counts_and_answers_unknown_partitions_itself() -> None:
    """Section 11: the partitions the upstream lacks (absent topic, index beyond the count) are answered
    UNKNOWN_TOPIC_OR_PARTITION by the gateway, the rest go to the engine in one envelope and the answers merge."""
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    topics = [{"name": "t", "partitions": [{"partition_index": 0}, {"partition_index": 1}, {"partition_index": 2}]},
              {"name": "gone", "partitions": [{"partition_index": 0}]}]
    actions = gateway.receive(conn, request(ApiKey.OffsetDelete, 0, 3, {"group_id": "g", "topics": topics}), T0)
    assert [a.topics for a in actions if isinstance(a, FetchTopicMetadata)] == [("gone", "t")]
    assert envelopes(actions) == []
    [part] = envelopes(gateway.receive_topic_metadata(("gone", "t"), {"t": 2, "gone": -1}, T0 + 5))
    assert (part["api"], part["body"]) == ("OffsetDelete", {"group_id": "g", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}, {"partition_index": 1}]}]})
    assert "topic_metadata" not in part
    answered = {"error_code": 0, "error": "NONE", "throttle_time_ms": 0, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "error_code": 86, "error": "GROUP_SUBSCRIBED_TO_TOPIC"},
        {"partition_index": 1, "error_code": 0, "error": "NONE"}]}]}
    [(_, body)] = decode_responses(to_client(gateway.receive_answers([answer(part, answered)], T0 + 6)),
                                   [(ApiKey.OffsetDelete, 0)])
    assert body["error_code"] == 0
    assert [(t["name"], [(p["partition_index"], p["error_code"]) for p in t["partitions"]]) for t in body["topics"]] \
        == [("t", [(2, 3), (0, 86), (1, 0)]), ("gone", [(0, 3)])]
    # The counts are cached: the next OffsetDelete goes at once; a top-level error from the engine comes alone.
    [part] = envelopes(gateway.receive(conn, request(ApiKey.OffsetDelete, 0, 4, {"group_id": "h", "topics": topics}),
                                       T0 + 7))
    [(_, body)] = decode_responses(to_client(gateway.receive_answers(
        [answer(part, {"error_code": 69, "error": "GROUP_ID_NOT_FOUND"})], T0 + 8)), [(ApiKey.OffsetDelete, 0)])
    assert (body["error_code"], body["topics"]) == (69, [])


def test_offset_fetch_v8_is_split_per_group_and_merged() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    groups = [{"group_id": "a", "topics": [{"name": "t", "partition_indexes": [0, 1]}]},
              {"group_id": "b", "topics": None}]
    parts = envelopes(gateway.receive(conn, request(ApiKey.OffsetFetch, 8, 4, {
        "groups": groups, "require_stable": True}), T0))
    assert [p["body"] for p in parts] == [{"groups": [g], "require_stable": True} for g in groups]
    fetched = {"group_id": "a", "error_code": 0, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "committed_offset": 17, "committed_leader_epoch": -1, "metadata": "",
         "error_code": 0}]}]}
    actions = gateway.receive_answers([answer(parts[1], {"error_code": 42, "error": "INVALID_REQUEST"}),
                                       answer(parts[0], {"throttle_time_ms": 0, "groups": [fetched]})], T0)
    [(_, body)] = decode_responses(to_client(actions), [(ApiKey.OffsetFetch, 8)])
    assert body["groups"] == [fetched, {"group_id": "b", "error_code": 42, "topics": []}]


def test_offset_commit_bare_error_is_reported_on_every_partition() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    commit = {"group_id": "g", "generation_id_or_member_epoch": 3, "member_id": "m", "group_instance_id": None,
              "topics": [{"name": "t", "partitions": [
                  {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                   "committed_metadata": ""},
                  {"partition_index": 2, "committed_offset": 9, "committed_leader_epoch": -1,
                   "committed_metadata": None}]}]}
    [env] = envelopes(gateway.receive(conn, request(ApiKey.OffsetCommit, 8, 4, commit), T0))
    assert env["body"] == commit
    actions = gateway.receive_answers([answer(env, {"error_code": 42, "error": "INVALID_REQUEST"})], T0)
    [(_, body)] = decode_responses(to_client(actions), [(ApiKey.OffsetCommit, 8)])
    assert body["topics"] == [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 42},
                                                           {"partition_index": 2, "error_code": 42}]}]


def test_offset_fetch_v1_timeout_is_reported_per_partition() -> None:
    gateway = make_gateway(Limits(coordinator_timeout_ms=10))
    conn = gateway.open("10.0.0.7")
    gateway.receive(conn, request(ApiKey.OffsetFetch, 1, 4, {
        "group_id": "g", "topics": [{"name": "t", "partition_indexes": [3]}]}), T0)
    [(_, body)] = decode_responses(to_client(gateway.expire(T0 + 10)), [(ApiKey.OffsetFetch, 1)])
    assert body["topics"] == [{"name": "t", "partitions": [
        {"partition_index": 3, "committed_offset": -1, "metadata": "", "error_code": 15}]}]


def test_produce_without_acks_gets_no_slot() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    produce = request(ApiKey.Produce, 8, 1, {"transactional_id": None, "acks": 0, "timeout_ms": 100,
                                             "topic_data": []})
    actions = gateway.receive(conn, produce + request(ApiKey.Heartbeat, 4, 2, HEARTBEAT_V4), T0)
    assert to_upstream(actions) == produce
    [env] = envelopes(actions)
    out = gateway.receive_answers([answer(env, {"error_code": 0})], T0)
    assert [c for c, _ in decode_responses(to_client(out), [(ApiKey.Heartbeat, 4)])] == [2]


@pytest.mark.parametrize(("payload", "reason"), [
    (frame(b"\x03\xe7\x00\x00\x00\x00\x00\x01\x00\x00"), "unknown API key 999"),
    (frame(b"\x00\x44\x00\x00\x00\x00\x00\x01\x00\x00"), "ConsumerGroupHeartbeat is not served"),
    (frame(b"\x00\x0b\x00\x0a\x00\x00\x00\x01\x00\x00"), "JoinGroup v10 is outside v0-9"),
    (frame(b"\x00\x0b"), "shorter than a request header"),
    (b"\x7f\xff\xff\xff", "frame size 2147483647"),
    (b"\xff\xff\xff\xfe", "frame size -2"),
])
def test_a_bad_frame_closes_its_connection_only(payload: bytes, reason: str) -> None:
    gateway = make_gateway()
    bad, good = gateway.open("10.0.0.6"), gateway.open("10.0.0.7")
    [env] = envelopes(gateway.receive(good, request(ApiKey.Heartbeat, 4, 1, HEARTBEAT_V4), T0))
    [closed] = closes(gateway.receive(bad, payload, T0))
    assert closed.connection == bad and reason in closed.reason
    assert gateway.receive(bad, request(ApiKey.ApiVersions, 0, 2, {}), T0) == []  # forgotten
    out = gateway.receive_answers([answer(env, {"error_code": 0})], T0)
    assert decode_responses(to_client(out, good), [(ApiKey.Heartbeat, 4)])[0][0] == 1


def test_a_truncated_body_closes_the_connection() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    whole = request(ApiKey.JoinGroup, 7, 1, JOIN_V7)
    [closed] = closes(gateway.receive(conn, frame(whole[4:-6]), T0))
    assert "JoinGroupRequest v7 does not decode" in closed.reason


def test_reading_stops_while_requests_wait_and_resumes_once_they_are_answered() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    [join] = envelopes(gateway.receive(conn, request(ApiKey.JoinGroup, 7, 1, JOIN_V7)
                                       + request(ApiKey.Heartbeat, 4, 2, HEARTBEAT_V4), T0))
    assert not gateway.reading(conn)  # muted, and a heartbeat unread
    actions = gateway.receive_answers([answer(join, {"error_code": 79, "member_id": "i-1-x"})], T0)
    [heartbeat] = envelopes(actions)
    assert not gateway.reading(conn) and not any(isinstance(a, ResumeReading) for a in actions)
    actions = gateway.receive_answers([answer(heartbeat, {"error_code": 0})], T0)
    assert ResumeReading(conn) in actions and gateway.reading(conn)


def test_at_most_max_in_flight_requests_of_a_connection_are_read() -> None:
    gateway = make_gateway(Limits(max_in_flight_requests=2))
    conn = gateway.open("10.0.0.7")
    produces = [request(ApiKey.Produce, 8, i, PRODUCE_ACKS_1) for i in (1, 2, 3)]
    actions = gateway.receive(conn, b"".join(produces), T0)
    assert to_upstream(actions) == produces[0] + produces[1] and not gateway.reading(conn)
    actions = gateway.receive_upstream(conn, frame((1).to_bytes(4, "big") + b"produced"), T0)
    assert to_upstream(actions) == produces[2] and not gateway.reading(conn)
    actions = gateway.receive_upstream(conn, frame((2).to_bytes(4, "big") + b"produced"), T0)
    assert ResumeReading(conn) in actions and gateway.reading(conn)


def test_an_upstream_answer_out_of_order_closes_the_client_connection() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    gateway.receive(conn, request(ApiKey.Metadata, 9, 1, {"topics": [], "allow_auto_topic_creation": False}), T0)
    wrong = response(ApiKey.Metadata, 9, 2, {"brokers": [], "controller_id": 1, "topics": []})
    [closed] = closes(gateway.receive_upstream(conn, wrong, T0))
    assert "expected 1" in closed.reason


def test_an_answer_for_a_closed_connection_is_dropped() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    [env] = envelopes(gateway.receive(conn, request(ApiKey.Heartbeat, 4, 1, HEARTBEAT_V4), T0))
    gateway.close(conn)
    assert gateway.receive_answers([answer(env, {"error_code": 0})], T0) == []
    assert gateway.counters["answers_for_closed_connections"] == 1 and gateway.in_flight == 0


def test_answers_for_another_gateway_are_ignored() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    [env] = envelopes(gateway.receive(conn, request(ApiKey.Heartbeat, 4, 1, HEARTBEAT_V4), T0))
    assert gateway.receive_answers([answer(env, {"error_code": 0}, reply_to="someone-else")], T0) == []
    assert gateway.in_flight == 1


def test_an_upstream_answer_first_in_line_passes_through_as_it_arrives() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    gateway.receive(conn, request(ApiKey.Produce, 8, 5, PRODUCE_ACKS_1), T0)
    answer_frame = frame((5).to_bytes(4, "big") + bytes(range(200)))  # not decoded by the gateway
    pieces = [to_client(gateway.receive_upstream(conn, answer_frame[i:i + 7], T0))
              for i in range(0, len(answer_frame), 7)]
    assert b"".join(pieces) == answer_frame
    assert pieces[1] != b""  # the client got bytes before the whole answer was in


def test_upstream_answers_pass_through_in_request_order_around_a_group_request() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    metadata = request(ApiKey.Metadata, 9, 1, {"topics": [], "allow_auto_topic_creation": False})
    actions = gateway.receive(conn, metadata + request(ApiKey.Heartbeat, 4, 2, HEARTBEAT_V4)
                              + request(ApiKey.Produce, 8, 3, PRODUCE_ACKS_1), T0)
    [env] = envelopes(actions)
    assert to_upstream(actions) == metadata  # the Produce waits behind the muted channel
    actions = gateway.receive_answers([answer(env, {"error_code": 0})], T0)
    assert to_client(actions) == b"" and to_upstream(actions) == request(ApiKey.Produce, 8, 3, PRODUCE_ACKS_1)
    metadata_answer = response(ApiKey.Metadata, 9, 1, {"brokers": [], "controller_id": 1, "topics": []})
    produce_answer = frame((3).to_bytes(4, "big") + b"produced")
    out = to_client(gateway.receive_upstream(conn, metadata_answer + produce_answer[:6], T0))
    out += to_client(gateway.receive_upstream(conn, produce_answer[6:], T0))
    assert out.endswith(produce_answer)
    decoded = decode_responses(out[:-len(produce_answer)], [(ApiKey.Metadata, 9), (ApiKey.Heartbeat, 4)])
    assert [correlation_id for correlation_id, _ in decoded] == [1, 2]


def test_an_upstream_frame_too_short_for_a_correlation_id_closes_the_connection() -> None:
    gateway = make_gateway()
    conn = gateway.open("10.0.0.7")
    gateway.receive(conn, request(ApiKey.Produce, 8, 5, PRODUCE_ACKS_1), T0)
    [closed] = closes(gateway.receive_upstream(conn, b"\x00\x00\x00\x02\x00\x05\x00\x00", T0))
    assert "no correlation id" in closed.reason
