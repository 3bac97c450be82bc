"""Port per broker, sans I/O: every answer that names a broker names a gateway port, and nothing else
(PROTOCOL.md section 11). The gateway of `wire.py` stands in front of nodes 1, 2 and 3."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.api_key import ApiKey

from kafka_gateway.gateway import Gateway
from kafka_gateway.port_mapping import PortScheme, UnmappedNode

from .wire import (
    T0,
    UPSTREAM_NODES,
    closes,
    decode_responses,
    envelopes,
    make_gateway,
    port,
    request,
    response,
    to_client,
    to_upstream,
    upstream_directory,
)

TOPIC_ID = "00000000-0000-0000-0000-000000000001"
JOIN_V7 = {"group_id": "g", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 30_000, "member_id": "",
           "group_instance_id": "i-1", "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": ""}]}


def metadata_answer(brokers: dict[int, tuple[str, int]], leaders: list[int], controller: int) -> dict[str, Any]:
    return {
        "brokers": [{"node_id": n, "host": h, "port": p, "rack": None} for n, (h, p) in brokers.items()],
        "cluster_id": "c", "controller_id": controller,
        "topics": [{"error_code": 0, "name": "t", "is_internal": False, "topic_id": TOPIC_ID, "partitions": [
            {"error_code": 0, "partition_index": i, "leader_id": leader, "leader_epoch": 0,
             "replica_nodes": [leader, leader % 3 + 1], "isr_nodes": [leader], "offline_replicas": []}
            for i, leader in enumerate(leaders)]}]}


def through(gateway: Gateway, connection: int, api_key: ApiKey, version: int, body: dict[str, Any],
            upstream_body: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """Sends a request that goes upstream, answers it as the upstream would; the client's bytes and answer."""
    sent = request(api_key, version, 7, body)
    assert to_upstream(gateway.receive(connection, sent, T0)) == sent
    out = to_client(gateway.receive_upstream(connection, response(api_key, version, 7, upstream_body), T0))
    [(_, answer)] = decode_responses(out, [(api_key, version)])
    return out, answer


@pytest.mark.parametrize("node_id", [None, 1, 2, 3])
def test_metadata_names_every_broker_at_its_gateway_port_and_changes_nothing_else(node_id: int | None) -> None:
    directory = upstream_directory()
    gateway = make_gateway(directory=directory)
    connection = gateway.open("10.0.0.7", port(node_id, directory))
    moved = {**UPSTREAM_NODES, 2: ("kafka-2b.internal", 9093)}  # node 2 moved: the directory learns it
    upstream = metadata_answer(moved, leaders=[1, 2, 3, 2], controller=3)
    out, body = through(gateway, connection, ApiKey.Metadata, 12, {"topics": None}, upstream)
    assert b"internal" not in out
    assert [(b["node_id"], b["host"], b["port"]) for b in body["brokers"]] == [
        (1, "gateway.test", 19093), (2, "gateway.test", 19094), (3, "gateway.test", 19095)]
    assert body["controller_id"] == 3
    assert [{k: topic[k] for k in sent} for topic, sent in zip(body["topics"], upstream["topics"], strict=True)] == \
        upstream["topics"]
    assert directory.nodes == moved


@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster_names_every_broker_at_its_gateway_port(version: int) -> None:
    gateway = make_gateway()
    connection = gateway.open("10.0.0.7", port(2))
    upstream = {"error_code": 0, "error_message": None, "cluster_id": "c", "controller_id": 1,
                "brokers": [{"broker_id": n, "host": host, "port": p, "rack": "r"}
                            for n, (host, p) in UPSTREAM_NODES.items()],
                "cluster_authorized_operations": -2147483648}
    out, body = through(gateway, connection, ApiKey.DescribeCluster, version, {}, upstream)
    assert b"internal" not in out
    assert [(b["broker_id"], b["host"], b["port"], b["rack"]) for b in body["brokers"]] == [
        (n, "gateway.test", 19092 + n, "r") for n in (1, 2, 3)]
    assert body["controller_id"] == 1


@pytest.mark.parametrize(("node_id", "coordinator"), [(None, 1), (1, 1), (2, 2), (3, 3)])
@pytest.mark.parametrize("version", [0, 3, 4, 6])
def test_a_groups_coordinator_is_the_node_of_the_port_asked_the_lowest_live_node_on_a_bootstrap_port(
        node_id: int | None, coordinator: int, version: int) -> None:
    gateway = make_gateway()
    connection = gateway.open("10.0.0.7", port(node_id))
    body = {"key": "g"} if version < 4 else {"key_type": 0, "coordinator_keys": ["g", "h"]}
    actions = gateway.receive(connection, request(ApiKey.FindCoordinator, version, 1, body), T0)
    assert to_upstream(actions) == b""
    [(_, answer)] = decode_responses(to_client(actions), [(ApiKey.FindCoordinator, version)])
    named = [answer] if version < 4 else answer["coordinators"]
    assert [(c["error_code"], c["node_id"], c["host"], c["port"]) for c in named] == \
        [(0, coordinator, "gateway.test", 19092 + coordinator)] * len(named)
    # The message Kafka 4.4's broker gives with error 0: v1-v3 "NONE" (Errors.NONE.message()), v4+ the field's
    # default "" (the Java consumer logs it); v0 has none.
    assert [c.get("error_message", "absent") for c in named] == \
        [{0: "absent", 4: "", 6: ""}.get(version, "NONE")] * len(named)


@pytest.mark.parametrize("version", [3, 4])
def test_a_transactional_coordinator_is_asked_upstream_and_named_at_its_gateway_port(version: int) -> None:
    gateway = make_gateway()
    connection = gateway.open("10.0.0.7", port(1))
    if version < 4:
        sent: dict[str, Any] = {"key": "tx", "key_type": 1}
        upstream: dict[str, Any] = {"error_code": 0, "error_message": None, "node_id": 3,
                                    "host": "kafka-3.internal", "port": 9092}
    else:
        sent = {"key_type": 1, "coordinator_keys": ["tx", "ty"]}
        upstream = {"coordinators": [
            {"key": "tx", "node_id": 3, "host": "kafka-3.internal", "port": 9092, "error_code": 0,
             "error_message": None},
            {"key": "ty", "node_id": -1, "host": "", "port": -1, "error_code": 15, "error_message": None}]}
    out, body = through(gateway, connection, ApiKey.FindCoordinator, version, sent, upstream)
    assert b"internal" not in out
    named = [body] if version < 4 else body["coordinators"]
    assert [(c["node_id"], c["host"], c["port"]) for c in named] == \
        [(3, "gateway.test", 19095), (-1, "", -1)][:len(named)]


def test_an_upstream_node_without_a_port_closes_the_clients_connection_and_no_other() -> None:
    gateway = make_gateway()
    unlucky, bystander = gateway.open("10.0.0.7", port(1)), gateway.open("10.0.0.8", port(2))
    sent = request(ApiKey.Metadata, 12, 7, {"topics": None})
    gateway.receive(unlucky, sent, T0)
    upstream = metadata_answer({**UPSTREAM_NODES, 4: ("kafka-4.internal", 9092)}, leaders=[4], controller=1)
    actions = gateway.receive_upstream(unlucky, response(ApiKey.Metadata, 12, 7, upstream), T0)
    assert to_client(actions) == b""
    [close] = closes(actions)
    assert close.connection == unlucky and "node 4" in close.reason
    assert gateway.counters["closed_UnmappedNode"] == 1
    assert to_upstream(gateway.receive(bystander, sent, T0)) == sent


@pytest.mark.parametrize("node_id", [None, 1, 3])
def test_group_requests_go_to_the_coordinator_from_every_port(node_id: int | None) -> None:
    gateway = make_gateway()
    connection = gateway.open("10.0.0.7", port(node_id))
    actions = gateway.receive(connection, request(ApiKey.JoinGroup, 7, 1, JOIN_V7), T0)
    assert to_upstream(actions) == b""
    assert [e["api"] for e in envelopes(actions)] == ["JoinGroup"]


def test_the_scheme_puts_node_n_at_start_plus_its_offset_and_refuses_the_rest() -> None:
    scheme = PortScheme("gw", bootstrap_port=9092, start=9100, lowest=5, count=3)
    assert [scheme.port_of(n) for n in scheme.node_ids] == [9100, 9101, 9102]
    for outside in (4, 8, -1):
        with pytest.raises(UnmappedNode):
            scheme.port_of(outside)
    for bad in ({"count": 0}, {"start": 9091, "count": 3}, {"start": 65535, "count": 3}, {"lowest": -1}):
        with pytest.raises(ValueError):
            PortScheme(**{"host": "gw", "bootstrap_port": 9092, "start": 9100, **bad})  # type: ignore[arg-type]
