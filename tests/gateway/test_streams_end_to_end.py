"""End to end through the gateway and a real broker (PROTOCOL.md section 10): Streams members on the wire join,
get their tasks, and a static member bounced with the -2 temporary leave comes back under a new member id with
the same tasks and no group epoch bump; the changelog topic the coordinator asks for exists upstream afterwards.
Against the in-process engine (`coordinator gateway --engine local`) and, once, the streaming job."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.protocol.api_key import ApiKey
from pyspark.sql import SparkSession

from chaos_harness.gateway_stack import GatewayStack, gateway_stack
from kafka_gateway.port_mapping import UpstreamDirectory
from kafka_gateway.runner import host_ports, probe_upstream
from kafka_gateway.security.sasl_client import UpstreamSecurity
from kafka_gateway.upstream_admin import UpstreamAdmin

from .streams_wire import TEMPORARY_LEAVE, StreamsMember, settle, topology
from .wire import RawClient

pytestmark = pytest.mark.kafka

PARTITIONS = 4
STREAMS_CONFIG = {"group.streams.initial.rebalance.delay.ms": 0, "group.streams.assignment.interval.ms": 0,
                  "group.initial.rebalance.delay.ms": 0}


def test_the_gateways_own_upstream_requests_count_partitions_without_creating_and_create_once(
        kafka_bootstrap: str, unique_topic: Callable[[str], str]) -> None:
    absent, created = unique_topic("absent"), unique_topic("changelog")

    async def run() -> list[Any]:
        upstream = await probe_upstream(host_ports(kafka_bootstrap))
        admin = UpstreamAdmin(UpstreamDirectory(upstream.bootstrap, upstream.nodes), UpstreamSecurity(),
                              upstream.versions)
        topic = {"name": created, "num_partitions": 3, "replication_factor": -1, "assignments": [],
                 "configs": [{"name": "cleanup.policy", "value": "compact"}]}
        try:
            return [await admin.topic_counts([absent, created]), await admin.create_topics([topic]),
                    await admin.create_topics([topic]), await admin.topic_counts([absent, created])]
        finally:
            admin.close()

    before, first, second, after = asyncio.run(run())
    assert before == {absent: -1, created: -1} and first == {created: (0, None)}
    assert second[created][0] == 36  # TOPIC_ALREADY_EXISTS
    assert after == {absent: -1, created: 3}  # asking did not create the absent one


def describe(stack: GatewayStack, group: str, timeout_s: float) -> dict[str, Any]:
    client = RawClient(stack.gateway.address, timeout_s)
    try:
        body = client.call(ApiKey.StreamsGroupDescribe, 0, {"group_ids": [group],
                                                            "include_authorized_operations": False})
    finally:
        client.close()
    [entry] = body["groups"]
    return dict(entry)


def bounce_a_static_member(stack: GatewayStack, kafka_bootstrap: str, unique: Callable[[str], str],
                           timeout_s: float = 10.0) -> None:
    """Two members (one static) settle, the static one leaves with -2 and comes back under a new id; `timeout_s`:
    how long one answer may take (the streaming job answers a micro-batch or more later)."""
    source, app = unique("in"), f"app-{uuid.uuid4().hex[:8]}"
    changelog = f"{app}-store-changelog"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap, client_id="streams-test-admin")
    try:
        admin.create_topics([NewTopic(source, PARTITIONS, 1)])
        shape = topology(source, changelog)
        dynamic = StreamsMember(stack.gateway.address, app, "member-b", shape, process_id="process-2",
                                timeout_s=timeout_s)
        static = StreamsMember(stack.gateway.address, app, "member-a", shape, instance_id="instance-a",
                               timeout_s=timeout_s)
        settle([dynamic, static], PARTITIONS, timeout_s=6 * timeout_s)
        kept, before = static.active, describe(stack, app, timeout_s)
        assert kept and dynamic.active and before["group_state"] == "Stable"
        assert sorted(m["instance_id"] or "" for m in before["members"]) == ["", "instance-a"]

        left = static.leave(TEMPORARY_LEAVE)
        assert (left["error_code"], left["member_id"], left["member_epoch"]) == (0, "member-a", TEMPORARY_LEAVE)
        assert dynamic.heartbeat()["error_code"] == 0 and not set(dynamic.active) & set(kept)  # nobody takes them

        restarted = StreamsMember(stack.gateway.address, app, "member-a2", shape, instance_id="instance-a",
                                  timeout_s=timeout_s)
        rejoined = restarted.heartbeat()
        assert rejoined["error_code"] == 0 and restarted.active == kept, rejoined
        settle([restarted, dynamic], PARTITIONS, timeout_s=6 * timeout_s)
        after = describe(stack, app, timeout_s)
        assert restarted.active == kept and after["group_epoch"] == before["group_epoch"]
        assert sorted(m["member_id"] for m in after["members"]) == ["member-a2", "member-b"]

        # The changelog the coordinator asked for, created upstream by the gateway, partitioned like the source.
        assert {changelog: PARTITIONS} == {t["name"]: len(t["partitions"])
                                          for t in admin.describe_topics([changelog])}
        listed = RawClient(stack.gateway.address, timeout_s)
        try:
            groups = listed.call(ApiKey.ListGroups, 5, {"states_filter": [], "types_filter": ["streams"]})["groups"]
        finally:
            listed.close()
        assert {"group_id": app, "protocol_type": "streams", "group_state": "Stable",
                "group_type": "streams"} in groups
        assert all(g["group_type"] == "streams" for g in groups)
    finally:
        admin.close()


def test_a_static_streams_member_bounced_with_a_temporary_leave_keeps_its_tasks_through_the_local_engine(
        kafka_bootstrap: str, unique_topic: Callable[[str], str]) -> None:
    with gateway_stack("local", STREAMS_CONFIG, bootstrap_servers=kafka_bootstrap) as stack:
        bounce_a_static_member(stack, kafka_bootstrap, unique_topic)
        assert stack.gateway.call(lambda: stack.gateway.server.gateway.counters["internal_topics_created"]) == 1


@pytest.mark.spark
def test_a_static_streams_member_bounced_with_a_temporary_leave_keeps_its_tasks_through_the_streaming_job(
        spark: SparkSession, kafka_bootstrap: str, unique_topic: Callable[[str], str]) -> None:
    with gateway_stack("spark", STREAMS_CONFIG, bootstrap_servers=kafka_bootstrap, spark=spark) as stack:
        bounce_a_static_member(stack, kafka_bootstrap, unique_topic, timeout_s=30.0)
