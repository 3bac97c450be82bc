"""Apache Kafka in a container (testcontainers) where a Docker engine answers; skipped, with the reason, here."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from coordinator_job.broker import create_topics
from tests.conftest import _docker_engine_answers

pytestmark = pytest.mark.skipif(not _docker_engine_answers(),
                                reason="no Docker engine answers on this machine: testcontainers cannot start "
                                       "Apache Kafka (the suite uses KAFKA_BOOTSTRAP_SERVERS or the embedded broker)")


def test_the_topics_and_a_round_trip_work_on_apache_kafka() -> None:
    from testcontainers.community.kafka import KafkaContainer

    with KafkaContainer() as kafka:
        bootstrap = kafka.get_bootstrap_server()
        create_topics(bootstrap, [("coordinator.requests", 3, False), ("coordinator.snapshots", 3, True)])
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        producer.send("coordinator.requests", key=b"g", value=b'{"api": "Tick", "timestamp_ms": 1}', partition=0)
        producer.flush()
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=10000)
        consumer.assign([TopicPartition("coordinator.requests", 0)])
        consumer.seek_to_beginning()
        assert [r.value for r in consumer] == [b'{"api": "Tick", "timestamp_ms": 1}']
