"""Port per broker with real clients: the gateway in front of Apache Kafka 4.4 as three KRaft nodes, partition leaders
on all three, producers and a static group of consumers of several client libraries, each in a process of its own;
one node killed and restarted in the middle of the run."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections import Counter

import pytest
from kafka import KafkaAdminClient
from kafka.protocol.api_key import ApiKey

from chaos_harness.real_consumer import ConsumerProcess
from coordinator_job.broker import create_topics
from kafka_gateway.runner import BackgroundGateway, GatewayOptions, ListenerOptions, host_ports
from kafka_jvm.cluster import KafkaCluster

from .wire import RawClient

pytestmark = pytest.mark.kafka
PARTITIONS = 6
PER_PARTITION = 10  # records per partition from each producer, each round
ENGINE = {"group.initial.rebalance.delay.ms": 300, "group.min.session.timeout.ms": 1_000}
LIBRARIES = ("kafka-python", "confluent")
# A producer process: sends PER_PARTITION records to each partition and exits non-zero unless all are acknowledged.
PRODUCER = """
import sys
library, bootstrap, topic, partitions, count, round_ = sys.argv[1:]
sends = [(p, f"{library}-{round_}-{p}-{i}".encode()) for p in range(int(partitions)) for i in range(int(count))]
if library == "kafka-python":
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    for future in [producer.send(topic, value, partition=p) for p, value in sends]:
        future.get(30)
    producer.close()
else:
    from confluent_kafka import Producer
    failures = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for p, value in sends:
        producer.produce(topic, value, partition=p, on_delivery=lambda error, _: error and failures.append(error))
    sys.exit(f"unsent {producer.flush(30)}, failed {failures}" if producer.flush(30) or failures else 0)
"""


def produce(library: str, bootstrap: str, topic: str, round_: int) -> None:
    done = subprocess.run([sys.executable, "-c", PRODUCER, library, bootstrap, topic, str(PARTITIONS),
                           str(PER_PARTITION), str(round_)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def wait_until(condition: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_static_consumers_keep_their_partitions_and_lose_nothing_while_a_node_is_killed_and_restarted(
        kafka_cluster3: KafkaCluster) -> None:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"three-nodes-{suffix}", f"three-nodes-{suffix}"
    upstream = kafka_cluster3.bootstrap_servers
    create_topics(upstream, [(topic, PARTITIONS, False)], replication_factor=3)  # on the cluster itself
    admin = KafkaAdminClient(bootstrap_servers=upstream)
    try:
        (described,) = admin.describe_topics([topic])
        assert {p["leader_id"] for p in described["partitions"]} == {1, 2, 3}
    finally:
        admin.close()
    options = GatewayOptions(listen=("127.0.0.1", 0), upstream=host_ports(upstream), engine="local",
                             settings=ENGINE, status_interval_s=0)
    consumers: list[ConsumerProcess] = []
    rounds = 0

    def produce_round() -> None:
        nonlocal rounds
        for library in LIBRARIES:
            produce(library, gateway.address, topic, rounds)
        rounds += 1

    def read_everything() -> bool:
        expected = rounds * len(LIBRARIES) * PER_PARTITION * PARTITIONS
        return len({r for c in consumers for r in c.records()}) == expected

    with BackgroundGateway(options) as gateway:
        try:
            for i, library in enumerate(LIBRARIES * 2):
                consumers.append(ConsumerProcess(library, gateway.address, group, topic, f"{library}-{i}",
                                                 session_timeout_ms=6_000, rebalance_timeout_ms=10_000))

            def assigned_once() -> bool:
                assignments = [c.assignment() for c in consumers]
                return None not in assignments and sorted(p for a in assignments for p in a or []) == \
                    list(range(PARTITIONS))

            wait_until(assigned_once, 60, f"no stable group: {[c.assignment() for c in consumers]}")
            kept, stood = [c.assignment() for c in consumers], time.time()
            produce_round()
            wait_until(read_everything, 60, "the first round was not read")
            kafka_cluster3.kill(2)
            produce_round()  # while node 2 is down: its partitions' leadership moved to the others
            wait_until(read_everything, 90, "the round written while node 2 was down was not read")
            kafka_cluster3.restart(2)
            produce_round()
            wait_until(read_everything, 90, "the round written after node 2 came back was not read")
            seen = Counter(r for c in consumers for r in c.records())
            assignments = [c.assignment() for c in consumers]
            revoked = [e for c in consumers for e in c.events if e["event"] == "revoked" and e["t"] > stood]
        finally:
            for consumer in consumers:
                consumer.kill()
    print(f"\nthree nodes, node 2 killed and restarted: {len(seen)} records read by {len(consumers)} static "
          f"consumers ({', '.join(LIBRARIES)}); assignments {assignments}")
    assert set(seen.values()) == {1}, "a record was read twice"
    assert assignments == kept and revoked == [], "a consumer lost or changed its partitions"
    # No group request reached the cluster: it knows nothing of the group (a JoinGroup, SyncGroup or OffsetCommit
    # would have made it one of its groups).
    admin = KafkaAdminClient(bootstrap_servers=kafka_cluster3.bootstrap_servers)
    try:
        assert group not in {listed["group_id"] for listed in admin.list_groups()}
    finally:
        admin.close()


def test_answers_advertise_the_listeners_advertised_host_and_ports(kafka_cluster3: KafkaCluster) -> None:
    listener = ListenerOptions(("127.0.0.1", 0), advertised_host="gw.example", advertised_port=29092)
    options = GatewayOptions(listen=("127.0.0.1", 0), upstream=host_ports(kafka_cluster3.bootstrap_servers),
                             engine="local", status_interval_s=0, listeners=[listener])
    with BackgroundGateway(options) as gateway:
        client = RawClient(gateway.address)
        brokers = client.call(ApiKey.Metadata, 12, {"topics": None})["brokers"]
        coordinator = client.call(ApiKey.FindCoordinator, 3, {"key": "g", "key_type": 0})
        client.close()
    assert sorted((b["node_id"], b["host"], b["port"]) for b in brokers) == [
        (1, "gw.example", 29093), (2, "gw.example", 29094), (3, "gw.example", 29095)]
    assert (coordinator["host"], coordinator["port"]) in {("gw.example", p) for p in (29093, 29094, 29095)}
