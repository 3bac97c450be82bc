"""KafkaTransport: Kafka's murmur2 partitioning of reply_to, and a member joining through real topics."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator

import pytest
from kafka.partitioner.default import murmur2

from coordinator_state import ReplayDriver, tick_envelope
from coordinator_state.envelope import response_partition
from group_client.kafka_transport import KafkaTransport
from group_client.member import GroupMember, MemberConfig, MemberState, new_reply_to
from group_client.realtime import run_member, wall_clock_ms

# Kafka's UtilsTest.testMurmur2 vectors: the Java client's murmur2 of these keys.
JAVA_MURMUR2 = {"21": -973932308, "foobar": -790332482, "a-little-bit-long-string": -985981536,
                "a-little-bit-longer-string": -1486304829, "abc": 479470107}


@pytest.mark.parametrize("key, java_hash", sorted(JAVA_MURMUR2.items()))
def test_reply_to_is_partitioned_as_the_java_client_does(key: str, java_hash: int) -> None:
    for partitions in (1, 3, 7, 50):
        assert response_partition(key, partitions, murmur2) == (java_hash & 0x7FFFFFFF) % partitions


class Bridge(threading.Thread):
    """A stand-in for the streaming job: requests topic -> the engine's replay driver -> responses topic.

    Like the job, it reads event time from the records only, and a Tick at the wall clock after each poll
    stands for the job's tick writer.
    """

    def __init__(self, bootstrap: str, requests: str, responses: str) -> None:
        super().__init__(daemon=True)
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition

        self.driver = ReplayDriver({"group.initial.rebalance.delay.ms": 0, "coordinator.lateness.ms": 0})
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
        self.consumer.assign([TopicPartition(requests, 0)])
        self.consumer.seek_to_beginning()
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
        self.responses = responses
        self.stop = threading.Event()
        self.left = threading.Event()
        self.heartbeats_answered = 0
        self.steady = threading.Event()  # three heartbeats answered NONE
        self.errors: list[BaseException] = []

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                answers = []
                for records in self.consumer.poll(timeout_ms=50).values():
                    for record in records:
                        answers += self.driver.feed(record.value, f"topic:{record.partition}:{record.offset}").responses
                        if json.loads(record.value)["api"] == "LeaveGroup":
                            self.left.set()
                answers += self.driver.feed(tick_envelope(wall_clock_ms()), "tick").responses
                for answer in answers:
                    if answer["api"] == "Heartbeat" and answer["body"]["error"] == "NONE":
                        self.heartbeats_answered += 1
                        if self.heartbeats_answered >= 3:
                            self.steady.set()
                    self.producer.send(self.responses, key=answer["reply_to"].encode(),
                                       value=json.dumps(answer).encode())
                self.producer.flush()
        except BaseException as exc:  # reported by the test, which owns the thread
            self.errors.append(exc)
        finally:
            self.consumer.close()
            self.producer.close()


@pytest.fixture
def topics(kafka_bootstrap: str, unique_topic: Callable[[str], str]) -> Iterator[tuple[str, str]]:
    from coordinator_job.broker import create_topics

    names = (unique_topic("requests"), unique_topic("responses"))
    create_topics(kafka_bootstrap, [(names[0], 1, False), (names[1], 3, False)])
    yield names


@pytest.mark.kafka
def test_a_member_joins_heartbeats_and_leaves_through_kafka(
    kafka_bootstrap: str, topics: tuple[str, str]
) -> None:
    requests, responses = topics
    bridge = Bridge(kafka_bootstrap, requests, responses)
    bridge.start()
    transport = KafkaTransport(kafka_bootstrap, request_topic=requests, response_topic=responses)
    assigned = threading.Event()
    config = MemberConfig(group_id="g", client_id="c", topics=("t",), topic_partitions={"t": 2},
                          session_timeout_ms=6000, heartbeat_interval_ms=500, rebalance_timeout_ms=10000)
    member = GroupMember(config, new_reply_to("c"), on_assigned=lambda a: assigned.set())
    stopping = threading.Event()
    runner = threading.Thread(target=run_member, args=(member, transport),
                              kwargs={"should_stop": stopping.is_set}, daemon=True)
    runner.start()
    try:
        assert assigned.wait(30), f"no assignment; member state {member.state}, bridge errors {bridge.errors}"
        assert bridge.steady.wait(10), "heartbeats were not answered"
        assert member.state is MemberState.STABLE
        stopping.set()
        runner.join(10)
        assert member.state is MemberState.CLOSED
        assert bridge.left.wait(10), "the LeaveGroup never reached the coordinator"
    finally:
        stopping.set()
        bridge.stop.set()
        bridge.join(10)
        transport.close()
    assert bridge.errors == []
    snapshot = bridge.driver.coordinator.describe("g")
    assert snapshot is not None and snapshot["state"] == "Empty"
