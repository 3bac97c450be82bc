"""Authorization per API: what goes on, what the gateway answers, and that every answer encodes at its version
(Kafka's errors in Kafka's places, as KafkaApis and the authorizer integration tests expect)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import groups as admin_groups
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import fetch
from kafka.protocol.consumer import group as consumer_group
from kafka.protocol.metadata import find_coordinator, metadata
from kafka.protocol.producer import produce

from kafka_gateway.apis import response_class
from kafka_gateway.chain import Port
from kafka_gateway.codec import body_to_message, encode_response
from kafka_gateway.gateway import Gateway
from kafka_gateway.security.acl import (
    AccessControlEntry,
    AclBinding,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    write_acls,
)
from kafka_gateway.security.authorization import Authorization
from kafka_gateway.security.settings import AccessSettings, ListenerSecurity
from kafka_gateway.security.units import Security
from tests.gateway.wire import (
    REPLY_TO,
    T0,
    UPSTREAM_VERSIONS,
    decode_responses,
    request,
    response,
    to_client,
    to_upstream,
)

RESPONSES: dict[ApiKey, Any] = {
    ApiKey.FindCoordinator: find_coordinator.FindCoordinatorResponse,
    ApiKey.JoinGroup: consumer_group.JoinGroupResponse,
    ApiKey.Heartbeat: consumer_group.HeartbeatResponse,
    ApiKey.OffsetCommit: consumer_group.OffsetCommitResponse,
    ApiKey.OffsetFetch: consumer_group.OffsetFetchResponse,
    ApiKey.DescribeGroups: admin_groups.DescribeGroupsResponse,
    ApiKey.ListGroups: admin_groups.ListGroupsResponse,
    ApiKey.DeleteGroups: admin_groups.DeleteGroupsResponse,
    ApiKey.OffsetDelete: consumer_group.OffsetDeleteResponse,
    ApiKey.Metadata: metadata.MetadataResponse,
    ApiKey.Produce: produce.ProduceResponse,
    ApiKey.Fetch: fetch.FetchResponse,
    ApiKey.StreamsGroupHeartbeat: response_class(ApiKey.StreamsGroupHeartbeat),
    ApiKey.StreamsGroupDescribe: response_class(ApiKey.StreamsGroupDescribe),
}


def binding(resource_type: ResourceType, name: str, operation: Operation, principal: str = "User:alice",
            permission: Permission = Permission.ALLOW, pattern: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, "*", operation, permission))


ACLS = Authorizer([
    binding(ResourceType.GROUP, "g1", Operation.READ),
    binding(ResourceType.GROUP, "g2", Operation.DESCRIBE),
    binding(ResourceType.TOPIC, "t1", Operation.READ),
    binding(ResourceType.TOPIC, "w", Operation.WRITE, pattern=PatternType.PREFIXED),
    binding(ResourceType.TOPIC, "t2", Operation.DESCRIBE),
], frozenset({"User:admin"}))


def alice(authorizer: Authorizer = ACLS) -> tuple[Authorization, list[tuple[Any, ...]]]:
    denials: list[tuple[Any, ...]] = []
    auth = Authorization("User:alice", "127.0.0.1", lambda: authorizer, lambda *d: denials.append(d))
    return auth, denials


def encodes(api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """The body, after checking that it encodes as the API's response at `version`."""
    encode_response(body_to_message(RESPONSES[api_key], version, body), 1)
    return body


@pytest.mark.parametrize("api_key, version", [(ApiKey.JoinGroup, 0), (ApiKey.JoinGroup, 9), (ApiKey.Heartbeat, 4),
                                              (ApiKey.StreamsGroupHeartbeat, 0)])
def test_group_membership_needs_read_on_the_group(api_key: ApiKey, version: int) -> None:
    auth, denials = alice()
    body = {"group_id": "g1", "member_id": ""}
    assert auth.authorize_request(api_key, version, body).forward == body
    denied = auth.authorize_request(api_key, version, {"group_id": "g2", "member_id": ""})
    assert denied.forward is None and encodes(api_key, version, denied.answer)["error_code"] == 30  # type: ignore[arg-type]
    assert denials == [(api_key, ResourceType.GROUP, Operation.READ)]


def test_find_coordinator_v4_answers_denied_keys_and_forwards_the_rest() -> None:
    auth, _ = alice()
    decision = auth.authorize_request(ApiKey.FindCoordinator, 4, {"key_type": 0, "coordinator_keys": ["x", "g1", "g2"]})
    assert decision.forward == {"key_type": 0, "coordinator_keys": ["g1", "g2"]}  # Read and Describe imply Describe
    answer = {"coordinators": [{"key": "g1", "node_id": 1, "host": "h", "port": 1, "error_code": 0},
                               {"key": "g2", "node_id": 1, "host": "h", "port": 1, "error_code": 0}]}
    merged = encodes(ApiKey.FindCoordinator, 4, auth.complete_answer(ApiKey.FindCoordinator, 4, answer,
                                                                     decision.pending))
    assert [(c["key"], c["error_code"]) for c in merged["coordinators"]] == [("x", 30), ("g1", 0), ("g2", 0)]


@pytest.mark.parametrize("key_type, error", [(0, 30), (1, 53)])
def test_find_coordinator_before_v4_is_one_error(key_type: int, error: int) -> None:
    auth, _ = alice()
    decision = auth.authorize_request(ApiKey.FindCoordinator, 3, {"key": "nope", "key_type": key_type})
    answer = encodes(ApiKey.FindCoordinator, 3, decision.answer)  # type: ignore[arg-type]
    assert (answer["error_code"], answer["node_id"]) == (error, -1)


def test_offset_commit_group_denied_is_30_on_every_partition() -> None:
    auth, _ = alice()
    body = {"group_id": "g2", "topics": [{"name": "t1", "partitions": [{"partition_index": 0},
                                                                       {"partition_index": 1}]}]}
    answer = encodes(ApiKey.OffsetCommit, 8, auth.authorize_request(ApiKey.OffsetCommit, 8, body).answer)  # type: ignore[arg-type]
    assert [p["error_code"] for p in answer["topics"][0]["partitions"]] == [30, 30]


def test_offset_commit_denied_topics_first_then_the_coordinators_answer() -> None:
    auth, _ = alice()
    body = {"group_id": "g1", "topics": [{"name": "t1", "partitions": [{"partition_index": 0}]},
                                         {"name": "t2", "partitions": [{"partition_index": 3}]}]}
    decision = auth.authorize_request(ApiKey.OffsetCommit, 8, body)
    assert decision.forward == {"group_id": "g1", "topics": [body["topics"][0]]}  # Describe is not Read
    answer = {"topics": [{"name": "t1", "partitions": [{"partition_index": 0, "error_code": 0}]}]}
    merged = encodes(ApiKey.OffsetCommit, 8, auth.complete_answer(ApiKey.OffsetCommit, 8, answer, decision.pending))
    assert [(t["name"], t["partitions"][0]["error_code"]) for t in merged["topics"]] == [("t2", 29), ("t1", 0)]
    everything_denied = auth.authorize_request(ApiKey.OffsetCommit, 8, {**body, "topics": [body["topics"][1]]})
    assert everything_denied.forward is None


def test_offset_fetch_v8_per_group_and_per_topic() -> None:
    auth, _ = alice()
    body = {"groups": [{"group_id": "secret", "topics": None},
                       {"group_id": "g1", "topics": [{"name": "t1", "partition_indexes": [0]},
                                                     {"name": "hidden", "partition_indexes": [0, 1]}]},
                       {"group_id": "g2", "topics": None}], "require_stable": False}
    decision = auth.authorize_request(ApiKey.OffsetFetch, 8, body)
    assert decision.forward is not None
    assert [g["group_id"] for g in decision.forward["groups"]] == ["g1", "g2"]
    assert decision.forward["groups"][0]["topics"] == [{"name": "t1", "partition_indexes": [0]}]
    offsets = [{"partition_index": 0, "committed_offset": 5, "metadata": "", "error_code": 0}]
    answer = {"groups": [{"group_id": "g1", "error_code": 0, "topics": [{"name": "t1", "partitions": offsets}]},
                         {"group_id": "g2", "error_code": 0, "topics": [{"name": "t1", "partitions": offsets},
                                                                        {"name": "other", "partitions": offsets}]}]}
    merged = encodes(ApiKey.OffsetFetch, 8, auth.complete_answer(ApiKey.OffsetFetch, 8, answer, decision.pending))
    assert [(g["group_id"], g["error_code"]) for g in merged["groups"]] == [("secret", 30), ("g1", 0), ("g2", 0)]
    assert [(t["name"], [p["error_code"] for p in t["partitions"]]) for t in merged["groups"][1]["topics"]] == \
        [("t1", [0]), ("hidden", [29, 29])]
    assert [t["name"] for t in merged["groups"][2]["topics"]] == ["t1"]  # all topics: "other" left out


@pytest.mark.parametrize("version", [1, 2, 7])
def test_offset_fetch_before_v8_group_denied(version: int) -> None:
    auth, _ = alice()
    body = {"group_id": "nope", "topics": [{"name": "t1", "partition_indexes": [0]}]}
    answer = encodes(ApiKey.OffsetFetch, version,
                     auth.authorize_request(ApiKey.OffsetFetch, version, body).answer)  # type: ignore[arg-type]
    errors = answer.get("error_code") if version >= 2 else answer["topics"][0]["partitions"][0]["error_code"]
    assert errors == 30


def test_describe_groups_denied_first_and_list_groups_filtered() -> None:
    auth, _ = alice()
    decision = auth.authorize_request(ApiKey.DescribeGroups, 5, {"groups": ["g1", "secret"]})
    assert decision.forward == {"groups": ["g1"]}
    answer = {"groups": [{"group_id": "g1", "error_code": 0, "group_state": "Empty", "protocol_type": "consumer",
                          "protocol_data": "", "members": []}]}
    merged = encodes(ApiKey.DescribeGroups, 5, auth.complete_answer(ApiKey.DescribeGroups, 5, answer,
                                                                    decision.pending))
    assert [(g["group_id"], g["error_code"]) for g in merged["groups"]] == [("secret", 30), ("g1", 0)]
    listed = {"error_code": 0, "groups": [{"group_id": g, "protocol_type": "consumer"} for g in ["g1", "g2", "x"]]}
    assert auth.authorize_request(ApiKey.ListGroups, 4, {}).forward == {}
    filtered = encodes(ApiKey.ListGroups, 4, auth.complete_answer(ApiKey.ListGroups, 4, listed, None))
    assert [g["group_id"] for g in filtered["groups"]] == ["g1", "g2"]


def test_streams_group_describe_answers_denied_groups_first() -> None:
    auth, _ = alice()
    decision = auth.authorize_request(ApiKey.StreamsGroupDescribe, 0, {"group_ids": ["secret", "g2"]})
    assert decision.forward == {"group_ids": ["g2"]}
    answer = {"groups": [{"group_id": "g2", "error_code": 69, "group_state": "", "members": []}]}
    merged = encodes(ApiKey.StreamsGroupDescribe, 0, auth.complete_answer(ApiKey.StreamsGroupDescribe, 0, answer,
                                                                          decision.pending))
    assert [(g["group_id"], g["error_code"]) for g in merged["groups"]] == [("secret", 30), ("g2", 69)]


def test_describe_groups_authorized_operations_are_the_principals_when_asked() -> None:
    """KafkaApis: the group operations the authorizer allows this principal, on each group answered without error
    (g1: READ, which implies DESCRIBE; a denied DELETE on g1 for everyone stays out); not asked: left as answered."""
    authorizer = Authorizer([*ACLS.bindings, binding(ResourceType.GROUP, "g1", Operation.DELETE, "User:*",
                                                     Permission.DENY)], frozenset({"User:admin"}))
    auth, denials = alice(authorizer)
    entry = {"error_code": 0, "group_state": "Dead", "protocol_type": "", "protocol_data": "", "members": [],
             "authorized_operations": 3400}
    decision = auth.authorize_request(ApiKey.DescribeGroups, 5, {"groups": ["g1", "g2", "secret"],
                                                                 "include_authorized_operations": True})
    answer = {"groups": [{"group_id": g, **entry} for g in ["g1", "g2"]]}
    merged = encodes(ApiKey.DescribeGroups, 5, auth.complete_answer(ApiKey.DescribeGroups, 5, answer,
                                                                    decision.pending))
    assert [(g["group_id"], g.get("authorized_operations")) for g in merged["groups"]] == [
        ("secret", None), ("g1", (1 << 3) | (1 << 8)), ("g2", 1 << 8)]
    assert len(denials) == 1  # the denied group, not the operations looked at
    admin = Authorization("User:admin", "127.0.0.1", lambda: authorizer)
    everything = admin.authorize_request(ApiKey.DescribeGroups, 3, {"groups": ["g1"],
                                                                     "include_authorized_operations": True})
    assert admin.complete_answer(ApiKey.DescribeGroups, 3, {"groups": [{"group_id": "g1", **entry}]},
                                 everything.pending)["groups"][0]["authorized_operations"] == 3400
    not_asked = auth.authorize_request(ApiKey.DescribeGroups, 5, {"groups": ["g1"]})
    assert not_asked.pending is None


def test_delete_groups_and_offset_delete_need_delete_on_the_group_and_read_on_the_topic() -> None:
    authorizer = Authorizer([*ACLS.bindings, binding(ResourceType.GROUP, "g1", Operation.DELETE)])
    auth, _ = alice(authorizer)
    decision = auth.authorize_request(ApiKey.DeleteGroups, 2, {"groups_names": ["g1", "g2"]})
    assert decision.forward == {"groups_names": ["g1"]}
    merged = encodes(ApiKey.DeleteGroups, 2, auth.complete_answer(
        ApiKey.DeleteGroups, 2, {"results": [{"group_id": "g1", "error_code": 0}]}, decision.pending))
    assert [(r["group_id"], r["error_code"]) for r in merged["results"]] == [("g1", 0), ("g2", 30)]
    denied = auth.authorize_request(ApiKey.OffsetDelete, 0, {"group_id": "g2", "topics": []})
    assert denied.forward is None and encodes(ApiKey.OffsetDelete, 0, denied.answer or {})["error_code"] == 30
    topics = {"group_id": "g1", "topics": [{"name": n, "partitions": [{"partition_index": 0}]} for n in ["t1", "t2"]]}
    split = auth.authorize_request(ApiKey.OffsetDelete, 0, topics)
    assert split.forward == {"group_id": "g1", "topics": topics["topics"][:1]}
    answer = {"error_code": 0, "topics": [{"name": "t1", "partitions": [{"partition_index": 0, "error_code": 0}]}]}
    merged = encodes(ApiKey.OffsetDelete, 0, auth.complete_answer(ApiKey.OffsetDelete, 0, answer, split.pending))
    assert [(t["name"], t["partitions"][0]["error_code"]) for t in merged["topics"]] == [("t1", 0), ("t2", 29)]


def test_list_groups_shows_all_with_describe_on_the_cluster_and_to_super_users() -> None:
    listed = {"error_code": 0, "groups": [{"group_id": "x", "protocol_type": "consumer"}]}
    cluster = Authorizer([binding(ResourceType.CLUSTER, "kafka-cluster", Operation.DESCRIBE)])
    assert alice(cluster)[0].complete_answer(ApiKey.ListGroups, 4, listed, None) == listed
    admin = Authorization("User:admin", "127.0.0.1", lambda: ACLS)
    assert admin.complete_answer(ApiKey.ListGroups, 4, listed, None) == listed
    assert admin.authorize_request(ApiKey.JoinGroup, 5, {"group_id": "anything"}).forward is not None


def test_metadata_named_topics_and_all_topics() -> None:
    auth, _ = alice()
    decision = auth.authorize_request(ApiKey.Metadata, 9, {"topics": [{"name": "t1"}, {"name": "secret"}],
                                                           "allow_auto_topic_creation": False})
    assert decision.forward is not None and decision.forward["topics"] == [{"name": "t1"}]
    topic = {"error_code": 0, "name": "t1", "is_internal": False, "partitions": []}
    answer = {"brokers": [], "topics": [topic]}
    merged = encodes(ApiKey.Metadata, 9, auth.complete_answer(ApiKey.Metadata, 9, answer, decision.pending))
    assert [(t["name"], t["error_code"]) for t in merged["topics"]] == [("t1", 0), ("secret", 29)]
    everything = auth.authorize_request(ApiKey.Metadata, 9, {"topics": None})
    all_topics = {"brokers": [], "topics": [topic, {**topic, "name": "secret"}]}
    assert [t["name"] for t in auth.complete_answer(ApiKey.Metadata, 9, all_topics, everything.pending)["topics"]] \
        == ["t1"]


def test_metadata_answers_carry_only_describable_topics_whatever_the_upstream_lists() -> None:
    # Some brokers list every topic whatever was asked: each topic an answer carries is checked, not only those
    # the request named. Alice may describe t1 and t2, not "secret".
    auth, _ = alice()
    topic = {"error_code": 0, "is_internal": False, "partitions": []}
    listed_by_upstream = {"brokers": [], "topics": [{**topic, "name": name} for name in ("t1", "secret", "t2")]}
    for version in (0, 1, 9, 12):
        named_t1 = auth.authorize_request(ApiKey.Metadata, version, {"topics": [{"name": "t1"}]})
        merged = encodes(ApiKey.Metadata, version,
                         auth.complete_answer(ApiKey.Metadata, version, listed_by_upstream, named_t1.pending))
        assert [(t["name"], t["error_code"]) for t in merged["topics"]] == [("t1", 0), ("t2", 0)], version
        named_secret = auth.authorize_request(ApiKey.Metadata, version, {"topics": [{"name": "secret"}]})
        merged = encodes(ApiKey.Metadata, version,
                         auth.complete_answer(ApiKey.Metadata, version, listed_by_upstream, named_secret.pending))
        assert [(t["name"], t["error_code"]) for t in merged["topics"]] == [("t1", 0), ("t2", 0), ("secret", 29)]


def test_the_gateway_passes_on_no_topic_the_client_may_not_describe_from_an_upstream_that_lists_them_all(
        tmp_path: Path) -> None:
    acl_file = tmp_path / "acls"
    write_acls(acl_file, [binding(ResourceType.TOPIC, "t1", Operation.DESCRIBE, principal="User:ANONYMOUS")])
    security = Security.load(AccessSettings(acl_file=acl_file))
    gateway = Gateway(Port("PLAINTEXT", None, security.units(ListenerSecurity("PLAINTEXT", "PLAINTEXT"))),
                      UPSTREAM_VERSIONS, REPLY_TO)
    connection = gateway.open("127.0.0.1")
    asked = {"topics": [{"name": "t1"}], "allow_auto_topic_creation": False}
    assert to_upstream(gateway.receive(connection, request(ApiKey.Metadata, 12, 5, asked), T0)) \
        == request(ApiKey.Metadata, 12, 5, asked)
    topic = {"error_code": 0, "topic_id": "00000000-0000-0000-0000-000000000001", "is_internal": False,
             "partitions": []}
    every_topic = {"brokers": [], "cluster_id": "c", "controller_id": 1,
                   "topics": [{**topic, "name": name} for name in ("payroll", "t1", "audit")]}
    answered = gateway.receive_upstream(connection, response(ApiKey.Metadata, 12, 5, every_topic), T0)
    [(_, body)] = decode_responses(to_client(answered), [(ApiKey.Metadata, 12)])
    assert [(t["name"], t["error_code"]) for t in body["topics"]] == [("t1", 0)]


def test_metadata_never_auto_creates_a_topic_the_client_may_not_create() -> None:
    auth, _ = alice()
    decision = auth.authorize_request(ApiKey.Metadata, 9, {"topics": [{"name": "t2"}],
                                                           "allow_auto_topic_creation": True})
    assert decision.forward is not None and decision.forward["allow_auto_topic_creation"] is False
    unknown = {"brokers": [], "topics": [{"error_code": 3, "name": "t2", "is_internal": False, "partitions": []}]}
    merged = auth.complete_answer(ApiKey.Metadata, 9, unknown, decision.pending)
    assert merged["topics"][0]["error_code"] == 29


def test_produce_and_fetch_by_topic() -> None:
    auth, _ = alice()
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": "writes", "partition_data": [{"index": 0, "records": None}]},
                           {"name": "t1", "partition_data": [{"index": 2, "records": None}]}]}
    decision = auth.authorize_request(ApiKey.Produce, 9, body)
    assert decision.forward is not None and [t["name"] for t in decision.forward["topic_data"]] == ["writes"]
    merged = encodes(ApiKey.Produce, 9, auth.complete_answer(ApiKey.Produce, 9, {"responses": []}, decision.pending))
    assert merged["responses"][0]["partition_responses"][0]["error_code"] == 29
    fetch_body = {"topics": [{"topic": "t2", "partitions": [{"partition": 0}]}]}
    denied = auth.authorize_request(ApiKey.Fetch, 12, fetch_body)
    answer = encodes(ApiKey.Fetch, 12, denied.answer)  # type: ignore[arg-type]
    assert answer["responses"][0]["partitions"][0]["error_code"] == 29


def test_transactional_produce_needs_write_on_the_transactional_id() -> None:
    auth, _ = alice()
    body = {"transactional_id": "tx", "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": "writes", "partition_data": [{"index": 0, "records": None}]}]}
    answer = encodes(ApiKey.Produce, 9, auth.authorize_request(ApiKey.Produce, 9, body).answer)  # type: ignore[arg-type]
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == 53


def test_other_apis_are_for_super_users() -> None:
    auth, denials = alice()
    decision = auth.authorize_request(ApiKey.DescribeConfigs, 4, {"resources": []})
    assert decision.forward is None and decision.answer is not None and decision.answer["error_code"] == 31
    assert denials == [(ApiKey.DescribeConfigs, ResourceType.CLUSTER, Operation.ALL)]
    admin = Authorization("User:admin", "127.0.0.1", lambda: ACLS)
    assert admin.authorize_request(ApiKey.DescribeConfigs, 4, {"resources": []}).forward == {"resources": []}


def test_an_acl_change_applies_to_the_next_request() -> None:
    current = [Authorizer([])]
    auth = Authorization("User:bob", "127.0.0.1", lambda: current[0])
    assert auth.authorize_request(ApiKey.Heartbeat, 4, {"group_id": "g"}).forward is None
    current[0] = Authorizer([binding(ResourceType.GROUP, "g", Operation.READ, principal="User:bob")])
    assert auth.authorize_request(ApiKey.Heartbeat, 4, {"group_id": "g"}).forward is not None
