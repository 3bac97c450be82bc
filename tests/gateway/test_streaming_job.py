"""End to end: real kafka-python consumers through the gateway to the streaming job (the request and
response topics), in real time. Slow (a Spark query), so there is one such test."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from pyspark.sql import SparkSession

from chaos_harness.real_consumer import ConsumerProcess
from kafka_gateway.runner import BackgroundGateway, GatewayOptions, host_port
from streaming.broker import create_topics
from streaming.live_job import LiveJob, ensure_topics
from streaming.settings import load_settings

pytestmark = [pytest.mark.spark, pytest.mark.kafka]
PARTITIONS = 4
# Timer-decided answers of the job come lateness + a tick + a couple of micro-batches late: sessions of 20 s.
SESSION_MS = 20_000


def wait_until(check: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_real_static_consumers_through_the_gateway_and_the_streaming_job(
        spark: SparkSession, kafka_bootstrap: str, tmp_path: Path) -> None:
    run = f"gateway-e2e-{uuid.uuid4().hex[:8]}"
    overrides = [f"coordinator.{name}.topic={run}.{name}" for name in ("requests", "responses", "snapshots")]
    overrides += [f"coordinator.dead.letters.topic={run}.dead-letters", f"coordinator.query.name={run}",
                  "group.initial.rebalance.delay.ms=1000"]
    settings = load_settings(overrides=overrides)
    settings["bootstrap.servers"] = kafka_bootstrap
    ensure_topics(settings)
    topic, group = f"{run}.data", f"{run}.group"
    create_topics(kafka_bootstrap, [(topic, PARTITIONS, False)])
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for i in range(40):
        producer.send(topic, str(i).encode(), partition=i % PARTITIONS)
    producer.flush(30)
    producer.close()

    job = LiveJob(spark, settings, tmp_path / "checkpoint")
    job.start()
    consumers: list[ConsumerProcess] = []
    try:
        job.wait_ready(180)
        options = GatewayOptions(listen=("127.0.0.1", 0), upstream=host_port(kafka_bootstrap), engine="topics",
                                 settings=settings, status_interval_s=0)
        with BackgroundGateway(options) as gateway:
            def start(instance: str) -> ConsumerProcess:
                consumer = ConsumerProcess("kafka-python", gateway.address, group, topic, instance,
                                           session_timeout_ms=SESSION_MS, rebalance_timeout_ms=30_000)
                consumers.append(consumer)
                return consumer

            members = [start("e2e-0"), start("e2e-1")]
            wait_until(lambda: all(m.assignment() for m in members)
                       and sorted(p for m in members for p in m.assignment() or []) == list(range(PARTITIONS))
                       and len({r for c in consumers for r in c.records()}) == 40, 240, "a stable group")

            def described() -> dict[str, object]:
                admin = KafkaAdminClient(bootstrap_servers=gateway.address, client_id="e2e-admin")
                try:
                    listed = [g["group_id"] for g in admin.list_groups()]
                    assert group in listed
                    return admin.describe_groups([group])[group]  # type: ignore[no-any-return]
                finally:
                    admin.close()

            first = described()
            before = members[0].assignment()
            stayed_events = len(members[1].events)
            assert members[0].stop() == 0
            again = start("e2e-0")
            wait_until(lambda: again.assignment() is not None, 120, "the restarted member's partitions")
            assert again.assignment() == before
            after = described()
            assert after["group_state"] == "Stable"
            instances = sorted(m["group_instance_id"] for m in after["members"])  # type: ignore[attr-defined]
            assert instances == ["e2e-0", "e2e-1"]
            assert first["group_state"] == "Stable"
            # No rebalance: the member that stayed was neither revoked nor reassigned meanwhile.
            assert not [e for e in members[1].events[stayed_events:] if e["event"] in ("assigned", "revoked")]
            server = gateway.server
            assert server is not None
            assert gateway.call(lambda: server.gateway.counters["coordinator_timeouts"]) == 0
    finally:
        for consumer in consumers:
            consumer.kill()
        job.close()
