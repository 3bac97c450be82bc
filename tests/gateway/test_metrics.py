"""The gateway's Prometheus endpoint (PROTOCOL.md section 11), scraped over HTTP while a real consumer group
forms through it (the in-process engine, the embedded broker)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from kafka import KafkaConsumer

from coordinator_job.broker import create_topics
from kafka_gateway.coordinators import TopicEngine
from kafka_gateway.gateway import answer_error_code
from kafka_gateway.runner import BackgroundGateway, GatewayOptions, coordinator_limits, host_ports
from tests.scrape import scrape, total

pytestmark = pytest.mark.kafka

# Every series of section 11 the gateway serves: (name as exposed, type).
GATEWAY_SERIES = {
    "coordinator_gateway_requests": "counter",
    "coordinator_gateway_request_duration_seconds": "histogram",
    "coordinator_gateway_connections": "gauge",
    "coordinator_gateway_upstream_connections": "gauge",
    "coordinator_gateway_authentication_failures": "counter",
    "coordinator_gateway_authentication_successes": "counter",
    "coordinator_gateway_authorization_denials": "counter",
    "coordinator_gateway_coordinator_timeouts": "counter",
    "coordinator_gateway_late_answers": "counter",
    "coordinator_gateway_bad_connections": "counter",
    "coordinator_gateway_unmapped_nodes": "counter",
    "coordinator_groups": "gauge",
    "coordinator_rebalances": "counter",
}

def test_answer_error_codes_are_the_top_level_code_else_the_first_item_code() -> None:
    assert answer_error_code({"error_code": 27, "members": [{"error_code": 25}]}) == "27"
    assert answer_error_code({"error_code": 0, "members": [{"error_code": 0}, {"error_code": 25}]}) == "25"
    assert answer_error_code({"topics": [{"partitions": [{"error_code": 0}, {"error_code": 29}]}]}) == "29"
    assert answer_error_code({"throttle_time_ms": 0, "groups": []}) == "0"


def test_a_scrape_shows_every_series_and_the_traffic_of_a_forming_group(
        kafka_bootstrap: str, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("metered")
    create_topics(kafka_bootstrap, [(topic, 2, False)])
    settings = {"group.initial.rebalance.delay.ms": 0}
    options = GatewayOptions(listen=("127.0.0.1", 0), upstream=host_ports(kafka_bootstrap), engine="local",
                             settings=settings, status_interval_s=0, limits=coordinator_limits("local", settings),
                             metrics_listen=("127.0.0.1", 0))
    with BackgroundGateway(options) as gateway:
        assert gateway.server is not None and gateway.server.metrics_url is not None
        url = gateway.server.metrics_url
        families, before = scrape(url)
        assert {name: families.get(name) for name in GATEWAY_SERIES} == GATEWAY_SERIES
        assert total(before, "coordinator_gateway_requests_total") == 0
        assert total(before, "coordinator_gateway_connections", listener="PLAINTEXT") == 0

        consumer = KafkaConsumer(topic, bootstrap_servers=gateway.address, group_id="metered-group",
                                 enable_auto_commit=False, session_timeout_ms=10_000)
        try:
            deadline = time.monotonic() + 60
            while not consumer.assignment():
                assert time.monotonic() < deadline, "the group did not form"
                consumer.poll(timeout_ms=200)
            _, during = scrape(url)
        finally:
            consumer.close()

    for api in ("ApiVersions", "Metadata", "FindCoordinator", "JoinGroup", "SyncGroup"):
        assert total(during, "coordinator_gateway_requests_total", api=api, listener="PLAINTEXT") >= 1, api
        assert total(during, "coordinator_gateway_request_duration_seconds_count", api=api) >= 1, api
    assert total(during, "coordinator_gateway_requests_total", api="JoinGroup", error_code="0") >= 1
    assert total(during, "coordinator_gateway_connections", listener="PLAINTEXT") >= 1
    assert total(during, "coordinator_gateway_upstream_connections") >= 1
    assert total(during, "coordinator_groups", state="Stable") == 1
    assert total(during, "coordinator_rebalances_total") >= 1


def test_the_topic_engine_knows_the_groups_from_the_snapshot_topic() -> None:
    engine = TopicEngine("127.0.0.1:1", {}, "gateway-test")  # not started: fed as its snapshot reader feeds it
    engine._apply_snapshots({"a": {"state": "Stable", "generation_id": 3}, "b": {"state": "Empty", "generation_id": 1},
                             "s": {"state": "Reconciling", "group_epoch": 5, "group_type": "streams"}})
    engine._apply_snapshots({"b": None})  # a tombstone
    assert engine.group_states() == {"a": ("Stable", 3), "s": ("Reconciling", 5)}
