"""The Java consumer (kafka-clients 4.4, the classic protocol: jvm/'s ChaosConsumer) through the gateway in front of the
in-process engine, and, where Kafka's own coordinator is the measure, straight against the session's Apache Kafka
4.4 broker with the same group settings (the broker's group.initial.rebalance.delay.ms is 0, the engine's here too;
everything else is Kafka's default on both sides). Rebalances are counted from the generations the clients were
assigned in, which both coordinators tell them. The Java client's log (WARN, on stderr) must stay empty: it is
where the client says an answer surprised it."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

import pytest
from kafka import KafkaProducer

from chaos_harness.real_consumer import ConsumerProcess, heartbeat_interval_ms, missing_library
from coordinator_job.broker import create_topics
from kafka_gateway.runner import BackgroundGateway, GatewayOptions, host_port

pytestmark = [pytest.mark.kafka,
              pytest.mark.skipif(missing_library("java") is not None, reason=str(missing_library("java")))]
MEMBERS = 4
PARTITIONS = 2 * MEMBERS
# A bounced static member is back within its session only if its JVM starts in time: 2-3 s on a quiet 2-core
# machine, up to 20 s measured on one shared by several test runs (through the gateway and against Kafka alike).
# Nothing waits for this session to run out, so it costs no time.
STATIC_SESSION_MS = 30_000
SESSION_MS = 6_000  # where a session runs out, or nobody must be back in time: Kafka's group.min.session.timeout.ms
RECORDS_PER_S = 100
ENGINE = {"group.initial.rebalance.delay.ms": 0}  # what the test broker sets; the rest is Kafka's defaults


@pytest.fixture(scope="module")
def gateway(kafka_bootstrap: str) -> Iterator[BackgroundGateway]:
    options = GatewayOptions(listen=("127.0.0.1", 0), upstream=host_port(kafka_bootstrap), engine="local",
                             settings=ENGINE, status_interval_s=0)
    with BackgroundGateway(options) as running:
        yield running


class JavaGroup:
    """MEMBERS Java consumers of a topic and group of their own on `bootstrap` (the gateway, or Kafka itself), while
    a producer fills the topic; what they reported. A context manager: the producer and every process stop after."""

    def __init__(self, bootstrap: str, kafka_bootstrap: str, *, static: bool, session_ms: int) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.bootstrap, self.kafka_bootstrap = bootstrap, kafka_bootstrap
        self.topic, self.group = f"java-{suffix}", f"java-{suffix}"
        self.static, self.session_ms = static, session_ms
        create_topics(kafka_bootstrap, [(self.topic, PARTITIONS, False)])
        self.processes: list[ConsumerProcess] = []
        self.members: list[ConsumerProcess] = []
        self.produced = 0
        self._stop_producing = threading.Event()
        self._producer = threading.Thread(target=self._produce, name=f"producer-{suffix}", daemon=True)

    def __enter__(self) -> JavaGroup:
        self._producer.start()
        self.members = [self.start(index) for index in range(MEMBERS)]
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop_producing.set()
        self._producer.join()
        for process in self.processes:
            process.kill()

    def start(self, index: int) -> ConsumerProcess:
        process = ConsumerProcess("java", self.bootstrap, self.group, self.topic,
                                  f"{self.group}-{index}" if self.static else None,
                                  session_timeout_ms=self.session_ms, rebalance_timeout_ms=10_000,
                                  client_id=f"java-{index}")
        self.processes.append(process)
        return process

    def _produce(self) -> None:
        producer = KafkaProducer(bootstrap_servers=self.kafka_bootstrap, linger_ms=5)
        try:
            while not self._stop_producing.wait(1 / RECORDS_PER_S):
                producer.send(self.topic, str(self.produced).encode(), partition=self.produced % PARTITIONS)
                self.produced += 1
            producer.flush(30)
        finally:
            producer.close()

    # ---- waiting -------------------------------------------------------------------------------------------

    def wait_until(self, condition: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            assert time.monotonic() < deadline, f"{self.bootstrap}: timed out waiting for {what}: " \
                                                f"{[p.assignment() for p in self.members]}"
            time.sleep(0.05)

    def holding_everything(self, members: list[ConsumerProcess]) -> bool:
        """`members` are assigned, together every partition once, all in the latest generation."""
        assignments = [m.assignment() for m in members]
        return None not in assignments and sorted(p for a in assignments for p in a or []) == \
            list(range(PARTITIONS)) and {last_generation(m) for m in members} == {self.generation()}

    def wait_stable(self) -> None:
        self.wait_until(lambda: self.holding_everything(self.members), "a stable group")

    def all_read(self) -> bool:
        return len(set(self.seen())) >= self.produced

    def finish(self) -> None:
        """Stops the producer and waits until every record it sent has been read."""
        self._stop_producing.set()
        self._producer.join()
        self.wait_until(self.all_read, "every record read")

    # ---- what they reported ----------------------------------------------------------------------------

    def generation(self) -> int:
        """The latest generation any member was assigned in."""
        return max(last_generation(p) for p in self.processes)

    def seen(self) -> list[tuple[int, int]]:
        return [record for process in self.processes for record in process.records()]

    def log(self) -> list[str]:
        return [line for process in self.processes for line in process.log]


def last_generation(process: ConsumerProcess) -> int:
    return max((int(e["generation"]) for e in list(process.events) if e["event"] == "assigned"), default=-1)


def revoked_while_running(process: ConsumerProcess, since: float) -> list[int]:
    """Partitions revoked from `process` after `since` and before it was asked to stop."""
    until = process.stop_requested or float("inf")
    return [p for e in list(process.events) if e["event"] == "revoked" and since < e["t"] < until
            for p in e["partitions"]]


def test_static_java_members_keep_their_partitions_through_two_rolling_bounces(
        gateway: BackgroundGateway, kafka_bootstrap: str) -> None:
    with JavaGroup(gateway.address, kafka_bootstrap, static=True, session_ms=STATIC_SESSION_MS) as group:
        group.wait_stable()
        formed, stable_at = group.generation(), time.time()
        before = [m.assignment() for m in group.members]
        for _ in range(2):
            for index in range(MEMBERS):
                assert group.members[index].stop() == 0  # SIGTERM: commit, close, no LeaveGroup
                group.members[index] = group.start(index)
                group.wait_until(lambda i=index: group.members[i].assignment() is not None, f"member {index} back")
        group.wait_stable()
        group.finish()
        assert group.generation() == formed, "a rebalance"
        assert [m.assignment() for m in group.members] == before
        assert [revoked_while_running(p, stable_at) for p in group.processes] == [[]] * len(group.processes)
        seen = Counter(group.seen())
        assert set(seen) == {(i % PARTITIONS, i // PARTITIONS) for i in range(group.produced)}
        assert set(seen.values()) == {1}, "records read twice"
        assert group.log() == []


def bounce_dynamic_members(bootstrap: str, kafka_bootstrap: str) -> tuple[int, int, list[str]]:
    """A rolling bounce of dynamic members on `bootstrap`: each member stopped (SIGTERM: commit, close, LeaveGroup),
    the group left to rebalance without it, the member started again and the group left to rebalance with it (so
    that the count does not depend on whether a join came before the leave's rebalance ended). Returns the
    rebalances (generations after the first), the records read more than once and the Java clients' log."""
    with JavaGroup(bootstrap, kafka_bootstrap, static=False, session_ms=SESSION_MS) as group:
        group.wait_stable()
        formed = group.generation()
        for index in range(MEMBERS):
            assert group.members[index].stop() == 0
            others = group.members[:index] + group.members[index + 1:]
            group.wait_until(lambda o=others: group.holding_everything(o), f"the group without member {index}")
            group.members[index] = group.start(index)
            group.wait_stable()
        group.finish()
        seen = Counter(group.seen())
        assert len(seen) == group.produced
        return group.generation() - formed, sum(n - 1 for n in seen.values()), group.log()


def test_dynamic_java_members_rebalance_through_the_gateway_as_often_as_against_kafka(
        gateway: BackgroundGateway, kafka_bootstrap: str) -> None:
    with ThreadPoolExecutor(2) as pool:
        through_gateway = pool.submit(bounce_dynamic_members, gateway.address, kafka_bootstrap)
        against_kafka = pool.submit(bounce_dynamic_members, kafka_bootstrap, kafka_bootstrap)
        (gateway_rebalances, gateway_twice, gateway_log), (kafka_rebalances, kafka_twice, kafka_log) = \
            through_gateway.result(), against_kafka.result()
    print(f"a rolling bounce of {MEMBERS} dynamic Java consumers: {gateway_rebalances} rebalances through the "
          f"gateway, {kafka_rebalances} against Apache Kafka 4.4")
    # Kafka rebalances once as a dynamic member leaves (LeaveGroup on close) and once as it joins again.
    assert gateway_rebalances == kafka_rebalances == 2 * MEMBERS
    # Each batch is committed before the next poll, which is where an eager rebalance revokes: nothing read twice.
    assert gateway_twice == kafka_twice == 0
    assert gateway_log == kafka_log == []


def test_a_java_member_down_longer_than_its_session_loses_its_partitions_and_gets_them_back(
        gateway: BackgroundGateway, kafka_bootstrap: str) -> None:
    with JavaGroup(gateway.address, kafka_bootstrap, static=True, session_ms=SESSION_MS) as group:
        group.wait_stable()
        formed = group.generation()
        before = [m.assignment() for m in group.members]
        group.members[0].kill()  # SIGKILL: no commit, no close
        killed_at = time.monotonic()
        group.wait_until(lambda: group.holding_everything(group.members[1:]), "the group without member 0")
        # Not before its session ran out, counted from its last heartbeat.
        assert time.monotonic() - killed_at >= (SESSION_MS - heartbeat_interval_ms(SESSION_MS)) / 1000
        assert group.generation() == formed + 1
        group.members[0] = group.start(0)
        group.wait_stable()
        assert group.generation() == formed + 2
        assert [m.assignment() for m in group.members] == before
        group.finish()
        assert set(group.seen()) == {(i % PARTITIONS, i // PARTITIONS) for i in range(group.produced)}
        assert group.log() == []
