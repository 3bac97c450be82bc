"""The gateway over real sockets, in front of the embedded broker: the frame fuzz, the proxy path, the CLI."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.api_key import ApiKey

from coordinator_job.broker import EmbeddedBroker, create_topics
from coordinator_lab.gateway_fuzz import GatewayProcess, run_fuzz
from kafka_gateway.runner import BackgroundGateway, GatewayOptions, host_port

from .wire import RawClient

pytestmark = pytest.mark.kafka
# The fuzz is 10,000 frames, 48 writers, bursts of 150 (`python -m coordinator_lab.gateway_fuzz`);
# the suite's is a fifth of it, its memory bound (256 MiB there) in proportion.
FUZZ_GROWTH_LIMIT_MIB = 64


@pytest.fixture(scope="module")
def fuzz_broker() -> Iterator[str]:
    """A broker of its own: fuzzed frames of proxied APIs reach it, and must not disturb other tests."""
    with EmbeddedBroker() as broker:
        yield broker.bootstrap_servers


def test_hostile_frames_leave_the_gateway_process_answering_its_well_behaved_clients(fuzz_broker: str) -> None:
    report = run_fuzz(fuzz_broker, frames=2_000, writers=16, burst=50, burst_every=700, settle_s=1.0)
    print("\n" + "\n".join(report.lines()))
    assert report.tracebacks == 0 and report.gateway_answering and report.gateway_exit_code == 0
    assert report.closed_by_gateway > report.connections // 3  # it did refuse them
    assert report.rss_growth_mib is not None and report.rss_growth_mib < FUZZ_GROWTH_LIMIT_MIB
    assert report.records_produced > 0 and report.records_lost == 0 and report.records_duplicated == 0
    assert report.admin_answers > 0 and report.admin_failures == 0


def test_a_consumer_and_a_producer_without_a_group_go_through_the_gateway(kafka_bootstrap: str,
                                                                            unique_topic: object) -> None:
    topic = unique_topic("proxied")  # type: ignore[operator]
    create_topics(kafka_bootstrap, [(topic, 2, False)])
    options = GatewayOptions(listen=("127.0.0.1", 0), upstream=host_port(kafka_bootstrap), engine="local",
                             status_interval_s=0)
    with BackgroundGateway(options) as gateway:
        producer = KafkaProducer(bootstrap_servers=gateway.address, acks="all")
        for i in range(100):
            producer.send(topic, str(i).encode(), partition=i % 2)
        producer.send(topic, b"fire-and-forget", partition=0)
        producer.flush(10)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=gateway.address, group_id=None, enable_auto_commit=False)
        partitions = [TopicPartition(topic, p) for p in (0, 1)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < 101 and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                values += [r.value for r in records]
        brokers = {(b.host, b.port) for b in consumer._client.cluster.brokers()}
        consumer.close()
    assert sorted(values) == sorted([str(i).encode() for i in range(100)] + [b"fire-and-forget"])
    assert brokers == {("127.0.0.1", gateway.listening[0].scheme.start)}


def test_the_gateway_command_serves_and_stops_cleanly_on_sigterm(kafka_bootstrap: str) -> None:
    gateway = GatewayProcess(kafka_bootstrap, status_interval_s=0.5)
    try:
        gateway.wait_ready(timeout_s=30)
        client = RawClient(gateway.address)
        # The embedded broker's one node, at the first broker port: the port after the bootstrap port.
        assert gateway.first_broker_port == gateway.port + 1
        assert client.call(ApiKey.FindCoordinator, 2, {"key": "g", "key_type": 0})["port"] == gateway.first_broker_port
        client.close()
        time.sleep(1.2)
    finally:
        returncode = gateway.stop()  # SIGTERM
    log = gateway.log()
    gateway.log_path.unlink()
    assert returncode == 0, log
    # Answered by the gateway itself: the readiness check's ApiVersions and the FindCoordinator.
    assert "gateway: connections=" in log and "local=2" in log
    assert "gateway stopped:" in log
