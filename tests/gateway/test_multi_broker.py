"""Port per broker with real clients: the gateway in front of a three-node cluster (the test fake of
`three_node_proxy.py`, whose partition leaders span its three nodes), kafka-python and librdkafka
producers and a static group of consumers of both libraries, each in a process of its own."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from kafka.protocol.api_key import ApiKey

from chaos_harness.real_consumer import ConsumerProcess
from coordinator_job.broker import create_topics
from kafka_gateway.runner import BackgroundGateway, GatewayOptions, ListenerOptions, host_ports

from .three_node_proxy import ThreeNodeProxy
from .wire import RawClient

pytestmark = pytest.mark.kafka
PARTITIONS = 6
PER_PARTITION = 20  # records per partition from each producer
ENGINE = {"group.initial.rebalance.delay.ms": 300, "group.min.session.timeout.ms": 1_000}

# A producer process: sends PER_PARTITION records to each partition and exits non-zero unless all are acknowledged.
PRODUCER = """
import sys
library, bootstrap, topic, partitions, count = sys.argv[1:]
sends = [(p, f"{library}-{p}-{i}".encode()) for p in range(int(partitions)) for i in range(int(count))]
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


@pytest.fixture(scope="module")
def cluster(kafka_bootstrap: str) -> Iterator[ThreeNodeProxy]:
    with ThreeNodeProxy(kafka_bootstrap) as proxy:
        yield proxy


def produce(library: str, bootstrap: str, topic: str) -> None:
    done = subprocess.run([sys.executable, "-c", PRODUCER, library, bootstrap, topic, str(PARTITIONS),
                           str(PER_PARTITION)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


def wait_until(condition: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_a_static_group_of_both_libraries_reads_every_record_once_from_leaders_on_all_three_nodes(
        cluster: ThreeNodeProxy, kafka_bootstrap: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"three-nodes-{suffix}", f"three-nodes-{suffix}"
    create_topics(kafka_bootstrap, [(topic, PARTITIONS, False)])  # on the broker itself, not through the fake
    assert {cluster.leader(p) for p in range(PARTITIONS)} == {0, 1, 2}
    options = GatewayOptions(listen=("127.0.0.1", 0), upstream=host_ports(cluster.bootstrap_servers), engine="local",
                             settings=ENGINE, status_interval_s=0, broker_id_lowest=0, broker_ports=3)
    consumers: list[ConsumerProcess] = []
    accepted_before = Counter(cluster.accepted)
    with BackgroundGateway(options) as gateway:
        try:
            for library, instance in [("kafka-python", "py-0"), ("confluent", "rd-0"), ("kafka-python", "py-1"),
                                      ("confluent", "rd-1")]:
                consumers.append(ConsumerProcess(library, gateway.address, group, topic, instance,
                                                 session_timeout_ms=6_000, rebalance_timeout_ms=10_000))

            def assigned_once() -> bool:
                assignments = [c.assignment() for c in consumers]
                return None not in assignments and sorted(p for a in assignments for p in a or []) == \
                    list(range(PARTITIONS))

            wait_until(assigned_once, 40, f"no stable group: {[c.assignment() for c in consumers]}")
            for library in ("kafka-python", "confluent"):
                produce(library, gateway.address, topic)
            expected = {(p, o) for p in range(PARTITIONS) for o in range(2 * PER_PARTITION)}
            wait_until(lambda: expected <= {r for c in consumers for r in c.records()}, 30, "records never consumed")
            seen = Counter(r for c in consumers for r in c.records())
        finally:
            for consumer in consumers:
                consumer.kill()
        server = gateway.server
        assert server is not None
        opened = gateway.call(lambda: Counter(server.upstream_opened))
    assert set(seen) == expected and set(seen.values()) == {1}, "not every record exactly once"
    # Every connection the cluster accepted is one the gateway opened (and its probe at start): no client
    # learned a node's address.
    by_gateway = Counter({node: opened[(cluster.host, port)] for node, port in cluster.ports.items()})
    by_gateway[0] += 1
    wait_until(lambda: cluster.accepted - accepted_before == by_gateway, 5,
               f"accepted {cluster.accepted - accepted_before}, the gateway opened {by_gateway}")
    per_node = [(cluster.requests[(n, "Produce")], cluster.requests[(n, "Fetch")]) for n in (0, 1, 2)]
    print(f"\nthree nodes: {len(seen)} records read once by {len(consumers)} consumers; the fake accepted "
          f"{dict(cluster.accepted - accepted_before)} connections per node, the gateway opened them all; "
          f"Produce/Fetch requests per node {per_node}")
    assert cluster.group_requests == []
    assert cluster.misrouted == []
    assert all(produce > 0 and fetch > 0 for produce, fetch in per_node), per_node  # every node led partitions


def test_answers_advertise_the_listeners_advertised_host_and_ports(cluster: ThreeNodeProxy) -> None:
    listener = ListenerOptions(("127.0.0.1", 0), advertised_host="gw.example", advertised_port=29092)
    options = GatewayOptions(listen=("127.0.0.1", 0), upstream=host_ports(cluster.bootstrap_servers), engine="local",
                             status_interval_s=0, broker_id_lowest=0, broker_ports=3, listeners=[listener])
    with BackgroundGateway(options) as gateway:
        client = RawClient(gateway.address)
        brokers = client.call(ApiKey.Metadata, 12, {"topics": None})["brokers"]
        coordinator = client.call(ApiKey.FindCoordinator, 3, {"key": "g", "key_type": 0})
        client.close()
    assert [(b["node_id"], b["host"], b["port"]) for b in brokers] == [
        (0, "gw.example", 29093), (1, "gw.example", 29094), (2, "gw.example", 29095)]
    assert (coordinator["node_id"], coordinator["host"], coordinator["port"]) == (0, "gw.example", 29093)
