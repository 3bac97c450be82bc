"""The Apache Kafka launcher (one KRaft node, three nodes, a node killed and restarted) and the Tansu fallback."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from coordinator_job.broker import create_topics
from kafka_jvm.cluster import KafkaCluster


def _round_trip(bootstrap: str, topic: str) -> list[bytes]:
    """Create the topic, write two records to partition 0, read them back."""
    create_topics(bootstrap, [(topic, 3, False)])
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for value in (b"one", b"two"):
            producer.send(topic, key=b"g", value=value, partition=0)
        producer.flush()
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=10_000, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        values = []
        for record in consumer:
            values.append(record.value)
            if len(values) == 2:
                break
        return values
    finally:
        consumer.close()


def _kafka_pids() -> set[int]:
    listing = subprocess.run(["pgrep", "-f", "kafka.Kafka"], capture_output=True, text=True, check=False).stdout
    return {int(pid) for pid in listing.split()}


def test_the_session_broker_is_apache_kafka_4_4_and_round_trips(kafka_bootstrap: str,
                                                                 unique_topic: Callable[[str], str]) -> None:
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        versions = admin._client.check_version()  # kafka-python's guess from the ApiVersions it was sent
    finally:
        admin.close()
    assert versions >= (4, 0)
    assert _round_trip(kafka_bootstrap, unique_topic("rt")) == [b"one", b"two"]


def test_the_tansu_fallback_still_round_trips(tansu_bootstrap: str) -> None:
    assert _round_trip(tansu_bootstrap, "tansu-smoke") == [b"one", b"two"]


def test_three_nodes_lead_partitions_each_and_survive_a_node_killed_and_restarted(
        kafka_cluster3: KafkaCluster) -> None:
    topic = "three-nodes"
    create_topics(kafka_cluster3.bootstrap_servers, [(topic, 6, False)])
    admin = KafkaAdminClient(bootstrap_servers=kafka_cluster3.bootstrap_servers)
    try:
        (described,) = admin.describe_topics([topic])
        assert {p["leader_id"] for p in described["partitions"]} == {1, 2, 3}
    finally:
        admin.close()
    port = kafka_cluster3.node(2).port
    kafka_cluster3.kill(2)
    assert not kafka_cluster3.node(2).alive
    kafka_cluster3.restart(2)
    assert kafka_cluster3.node(2).port == port, "a restarted node binds the port it had"
    assert _round_trip(kafka_cluster3.bootstrap_servers, "after-restart") == [b"one", b"two"]


def test_stop_leaves_no_kafka_process() -> None:
    cluster = KafkaCluster(1).start()
    [node] = cluster.nodes
    assert node.process is not None
    pid = node.process.pid
    assert pid in _kafka_pids()
    cluster.stop()
    assert not cluster.work_dir.exists()
    assert pid not in _kafka_pids()


def test_a_node_dies_with_the_process_that_started_it() -> None:
    """PR_SET_PDEATHSIG: a test run killed with SIGKILL leaves no broker behind."""
    script = ("import sys\nfrom kafka_jvm.cluster import KafkaCluster\n"
              "c = KafkaCluster(1).start()\nprint(c.nodes[0].process.pid, flush=True)\nsys.stdin.read()\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert parent.stdout is not None
        node_pid = int(parent.stdout.readline())
        assert node_pid in _kafka_pids()
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while node_pid in _kafka_pids() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert node_pid not in _kafka_pids()
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
