"""Real Kafka consumers (kafka-python and librdkafka processes) through the gateway, on the embedded broker,
with the in-process engine: static groups, restarts within the session, a mixed group, KIP-394, a
session expiry, and the admin clients. Every wait is bounded; sessions are short."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaProducer

from chaos_harness.real_consumer import ConsumerProcess
from coordinator_job.broker import create_topics
from kafka_gateway.runner import BackgroundGateway, GatewayOptions, host_port

pytestmark = pytest.mark.kafka
PARTITIONS = 6
SESSION_MS = 6_000
ENGINE = {"group.initial.rebalance.delay.ms": 300, "group.min.session.timeout.ms": 1_000}


@pytest.fixture(scope="module")
def gateway(kafka_bootstrap: str) -> Iterator[BackgroundGateway]:
    options = GatewayOptions(listen=("127.0.0.1", 0), upstream=host_port(kafka_bootstrap), engine="local",
                             settings=ENGINE, status_interval_s=0)
    with BackgroundGateway(options) as running:
        yield running


class Scene:
    """A topic, a group and the consumer processes of one test, with the engine's view of the group."""

    def __init__(self, gateway: BackgroundGateway, kafka_bootstrap: str) -> None:
        self.gateway, self.kafka_bootstrap = gateway, kafka_bootstrap
        suffix = uuid.uuid4().hex[:8]
        self.topic, self.group = f"gw-topic-{suffix}", f"gw-group-{suffix}"
        create_topics(kafka_bootstrap, [(self.topic, PARTITIONS, False)])
        self.produced = 0
        self.consumers: list[ConsumerProcess] = []

    def produce(self, count: int) -> None:
        producer = KafkaProducer(bootstrap_servers=self.kafka_bootstrap, linger_ms=5)
        for i in range(count):
            producer.send(self.topic, f"{self.produced + i}".encode(), partition=(self.produced + i) % PARTITIONS)
        producer.flush(30)
        producer.close()
        self.produced += count

    def start(self, library: str, instance_id: str | None, session_timeout_ms: int = SESSION_MS) -> ConsumerProcess:
        consumer = ConsumerProcess(library, self.gateway.address, self.group, self.topic, instance_id,
                                   session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=10_000,
                                   client_id=f"{library}-{instance_id or 'dynamic'}")
        self.consumers.append(consumer)
        return consumer

    def described(self) -> dict[str, Any] | None:
        server = self.gateway.server
        assert server is not None
        return server.coordinator.inspect(lambda engine: engine.describe(self.group)).result(10)  # type: ignore[attr-defined,no-any-return]

    def counters(self) -> Counter[str]:
        server = self.gateway.server
        assert server is not None
        return self.gateway.call(lambda: Counter(server.gateway.counters))  # type: ignore[no-any-return]

    def wait_stable(self, members: list[ConsumerProcess], timeout_s: float = 60) -> dict[str, Any]:
        """Waits until the engine has exactly these members, Stable, and each reports an assignment that
        together cover every partition once."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            group = self.described()
            assignments = [m.assignment() for m in members]
            if (group is not None and group["state"] == "Stable" and len(group["members"]) == len(members)
                    and all(a is not None for a in assignments)
                    and sorted(p for a in assignments for p in a or []) == list(range(PARTITIONS))):
                return group
            time.sleep(0.1)
        raise AssertionError(f"no stable group: {self.described()}, assignments {[m.assignment() for m in members]}")

    def wait_consumed(self, timeout_s: float = 60) -> None:
        expected = set(self.all_records_expected())
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not expected <= set(self.seen()):
            time.sleep(0.1)
        assert expected <= set(self.seen()), f"{len(expected - set(self.seen()))} records never consumed"

    def all_records_expected(self) -> list[tuple[int, int]]:
        per_partition = Counter(i % PARTITIONS for i in range(self.produced))
        return [(p, o) for p, n in per_partition.items() for o in range(n)]

    def seen(self) -> list[tuple[int, int]]:
        return [record for consumer in self.consumers for record in consumer.records()]

    def stop_all(self) -> None:
        for consumer in self.consumers:
            consumer.kill()


@pytest.fixture
def scene(gateway: BackgroundGateway, kafka_bootstrap: str) -> Iterator[Scene]:
    built = Scene(gateway, kafka_bootstrap)
    yield built
    built.stop_all()


def wait_assigned_again(consumer: ConsumerProcess, timeout_s: float = 30) -> list[int]:
    assert consumer.wait_for(lambda events: any(e["event"] == "assigned" for e in events), timeout_s), \
        "the restarted consumer got no assignment"
    assignment = consumer.assignment()
    assert assignment is not None
    return assignment


def committed(consumer: ConsumerProcess) -> dict[int, int]:
    """The next offset of each partition as the consumer last committed it."""
    offsets: dict[int, int] = {}
    for event in list(consumer.events):
        if event["event"] == "committed":
            offsets.update({int(p): o for p, o in event["offsets"].items()})
    return offsets


def restart_each_within_its_session(scene: Scene, members: list[ConsumerProcess], crash: bool = False,
                                    tails: dict[int, int] | None = None) -> list[ConsumerProcess]:
    """Stops each member (SIGTERM: commit, close, no LeaveGroup; or SIGKILL when `crash`) and starts it again
    at once; checks that it gets the same partitions back. Returns the new processes; `tails` gets, per
    partition, the lowest offset a crash left uncommitted."""
    current = list(members)
    for index, member in enumerate(list(current)):
        before = member.assignment()
        if crash:
            member.kill()
            for partition, offset in committed(member).items():
                if tails is not None:
                    tails[partition] = min(tails.get(partition, offset), offset)
        else:
            assert member.stop() == 0
        again = scene.start(member.library, member.instance_id)
        assert wait_assigned_again(again) == before, f"{member.instance_id} got other partitions"
        current[index] = again
    return current


@pytest.mark.parametrize("crash", [False, True], ids=["graceful", "crash"])
@pytest.mark.parametrize("library", ["kafka-python", "confluent"])
def test_a_static_group_keeps_its_partitions_and_generation_through_restarts(scene: Scene, library: str,
                                                                             crash: bool) -> None:
    scene.produce(120)
    members = [scene.start(library, f"{library}-{i}") for i in range(3)]
    formed = scene.wait_stable(members)
    scene.wait_consumed()
    assert sorted(m["group_instance_id"] for m in formed["members"]) == [f"{library}-{i}" for i in range(3)]
    tails: dict[int, int] = {}
    scene.produce(120)  # arriving while members restart
    members = restart_each_within_its_session(scene, members, crash, tails)
    scene.produce(120)
    after = scene.wait_stable(members)
    scene.wait_consumed()
    assert after["generation_id"] == formed["generation_id"]
    assert sorted(m["group_instance_id"] for m in after["members"]) == [f"{library}-{i}" for i in range(3)]
    duplicates = [record for record, n in Counter(scene.seen()).items() if n > 1]
    if crash:  # a crash re-reads at most what it had not committed
        assert all(offset >= tails.get(partition, 0) for partition, offset in duplicates), duplicates
    else:  # a graceful stop commits what it processed
        assert duplicates == []


def test_a_mixed_group_of_both_libraries(scene: Scene) -> None:
    scene.produce(60)
    members = [scene.start("kafka-python", "py-0"), scene.start("confluent", "rd-0"),
               scene.start("kafka-python", "py-1"), scene.start("confluent", "rd-1")]
    formed = scene.wait_stable(members)
    scene.wait_consumed()
    members = restart_each_within_its_session(scene, members[1:2]) + members[:1] + members[2:]
    after = scene.wait_stable(members)
    assert after["generation_id"] == formed["generation_id"]
    assert {m["client_id"] for m in after["members"]} == {"kafka-python-py-0", "kafka-python-py-1",
                                                         "confluent-rd-0", "confluent-rd-1"}


def test_dynamic_members_go_through_the_kip394_handshake(scene: Scene) -> None:
    before = scene.counters()["JoinGroup_error_79"]
    members = [scene.start("kafka-python", None), scene.start("confluent", None)]
    group = scene.wait_stable(members)
    assert scene.counters()["JoinGroup_error_79"] - before >= 2  # MEMBER_ID_REQUIRED, then the join with it
    assert all(m["group_instance_id"] is None for m in group["members"])


@pytest.mark.parametrize("library", ["kafka-python", "confluent"])
def test_a_crashed_static_member_is_removed_after_its_session(scene: Scene, library: str) -> None:
    scene.produce(30)
    members = [scene.start(library, "stays", session_timeout_ms=3_000),
               scene.start(library, "crashes", session_timeout_ms=3_000)]
    formed = scene.wait_stable(members)
    members[1].kill()
    crashed_at = time.monotonic()
    after = scene.wait_stable(members[:1], timeout_s=30)
    assert time.monotonic() - crashed_at >= 2.5  # not before its session ran out
    assert after["generation_id"] == formed["generation_id"] + 1
    assert [m["group_instance_id"] for m in after["members"]] == ["stays"]


def _eventually(check: Callable[[], Any], timeout_s: float = 20) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_admin_clients_list_and_describe_the_group_with_instance_ids(scene: Scene) -> None:
    scene.produce(12)
    members = [scene.start("kafka-python", "adm-0"), scene.start("confluent", "adm-1")]
    scene.wait_stable(members)

    admin = KafkaAdminClient(bootstrap_servers=scene.gateway.address, client_id="gateway-admin-test")
    try:
        listed = admin.list_groups()
        described = admin.describe_groups([scene.group])[scene.group]
    finally:
        admin.close()
    assert {"group_id": scene.group, "protocol_type": "consumer", "group_state": "Stable",
            "group_type": "classic"} in listed
    assert described["error"] is None and described["group_state"] == "Stable"
    assert described["protocol_data"] == "range"
    # The bits Kafka grants on a group, all of them operations kafka-python knows (it fails on unknown bits).
    assert {"READ", "DESCRIBE", "DELETE"} <= set(described["authorized_operations"])
    assert sorted(m["group_instance_id"] for m in described["members"]) == ["adm-0", "adm-1"]

    confluent_admin = AdminClient({"bootstrap.servers": scene.gateway.address})
    groups = confluent_admin.list_consumer_groups(request_timeout=15).result()
    assert scene.group in [g.group_id for g in groups.valid]
    result = confluent_admin.describe_consumer_groups([scene.group], request_timeout=15)[scene.group].result()
    assert result.state == ConsumerGroupState.STABLE
    assert sorted(m.group_instance_id for m in result.members) == ["adm-0", "adm-1"]
    assert all(m.assignment.topic_partitions for m in result.members)
