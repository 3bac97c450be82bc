"""kafka-consumer-groups (Kafka 4.4's ConsumerGroupCommand, run as its script runs it) prints through the gateway what
it prints against a plain Kafka 4.4 broker, command by command, for groups in the same state (tests/gateway/kafka_tools
says what is masked and why).

The groups are brought there by real consumers (kafka-python processes) through the gateway (the in-process engine in
front of the session's Kafka 4.4 broker) and directly on that broker, each side with its own group ids, on the same
topic: a Stable group of two static members that consumed and committed everything, and an Empty group whose one
dynamic member did the same and left.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.errors import KafkaError

from chaos_harness.real_consumer import ConsumerProcess
from coordinator_job.broker import create_topics
from kafka_gateway.runner import BackgroundGateway, GatewayOptions, host_port
from kafka_jvm.tools import CONSUMER_GROUPS

from .kafka_tools import Side, assert_same, rows_in_any_order

pytestmark = pytest.mark.kafka
PARTITIONS, RECORDS_PER_PARTITION = 3, 10
# The session broker's group settings (tests/conftest.py): no initial rebalance delay.
ENGINE = {"group.initial.rebalance.delay.ms": 0}
SETTLE_S = 60.0


@dataclass(frozen=True)
class Groups:
    gateway: Side
    kafka: Side


def _settled(bootstrap: str, group: str, state: str, members: int) -> bool:
    """The group is in `state` with `members` members, and has committed every record of the topic's partitions."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        described = admin.describe_groups([group])[group]
        offsets = admin.list_group_offsets(group)[group]
    except KafkaError as exc:
        if exc.retriable:  # a fresh broker's coordinator still loading its offsets partition
            return False
        raise
    finally:
        admin.close()
    return (described["group_state"] == state and len(described["members"]) == members
            and sorted(o.offset for o in offsets.values()) == [RECORDS_PER_PARTITION] * PARTITIONS)


def _await(bootstrap: str, group: str, state: str, members: int) -> None:
    deadline = time.monotonic() + SETTLE_S
    while not _settled(bootstrap, group, state, members):
        assert time.monotonic() < deadline, f"{group} on {bootstrap} did not reach {state} with {members} members"
        time.sleep(0.3)


@pytest.fixture(scope="module")
def groups(kafka_bootstrap: str) -> Iterator[Groups]:
    suffix = uuid.uuid4().hex[:8]
    topic = f"tools-{suffix}"
    create_topics(kafka_bootstrap, [(topic, PARTITIONS, False)])
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for i in range(PARTITIONS * RECORDS_PER_PARTITION):
        producer.send(topic, str(i).encode(), partition=i % PARTITIONS)
    producer.flush(30)
    producer.close()
    options = GatewayOptions(listen=("127.0.0.1", 0), upstream=host_port(kafka_bootstrap), engine="local",
                             settings=ENGINE, status_interval_s=0)
    with BackgroundGateway(options) as gateway:
        # Group ids of the same length on both sides: the tools size their columns to the longest value.
        sides = [Side(name, bootstrap, {"stable": f"{name}-stable-{suffix}", "empty": f"{name}-empty-{suffix}",
                                        "topic": topic})
                 for name, bootstrap in (("gw", gateway.address), ("kf", kafka_bootstrap))]
        consumers = [ConsumerProcess("kafka-python", side.bootstrap, side.names[group], topic, instance,
                                     client_id="tools-consumer")
                     for side in sides for group, instance in (("stable", "inst-0"), ("stable", "inst-1"),
                                                               ("empty", None))]
        try:
            for side in sides:
                _await(side.bootstrap, side.names["stable"], "Stable", 2)
                _await(side.bootstrap, side.names["empty"], "Stable", 1)
            for leaving in consumers[2::3]:  # the dynamic members: they leave the group as they close
                assert leaving.stop() == 0
            for side in sides:
                _await(side.bootstrap, side.names["empty"], "Empty", 0)
            yield Groups(*sides)
        finally:
            for consumer in consumers:
                consumer.stop()


def test_list(groups: Groups) -> None:
    # The session's broker holds every test's groups, the gateway's engine only this module's: only this module's
    # lines are compared (with the header and the exit status), in any order (the broker lists its groups in the
    # order of its coordinator's hash map).
    def ours(text: str) -> str:
        lines = text.split("\n")
        return "\n".join([line for line in lines if not line.startswith("{")]
                         + sorted(line for line in lines if line.startswith("{")))

    for command in ("--list", "--list --state", "--list --state Stable", "--list --type"):
        assert_same(CONSUMER_GROUPS, command, groups.gateway, groups.kafka, ours)


def test_describe_a_stable_group_of_static_members(groups: Groups) -> None:
    g, k = groups.gateway, groups.kafka
    assert_same(CONSUMER_GROUPS, "--describe --group {stable}", g, k)
    assert_same(CONSUMER_GROUPS, "--describe --group {stable} --offsets --verbose", g, k)
    assert_same(CONSUMER_GROUPS, "--describe --group {stable} --members", g, k, rows_in_any_order)
    assert_same(CONSUMER_GROUPS, "--describe --group {stable} --members --verbose", g, k, rows_in_any_order)
    assert_same(CONSUMER_GROUPS, "--describe --group {stable} --state", g, k)
    assert_same(CONSUMER_GROUPS, "--describe --group {stable} --state --verbose", g, k)


def test_a_stable_group_refuses_delete_reset_and_delete_offsets(groups: Groups) -> None:
    g, k = groups.gateway, groups.kafka
    assert_same(CONSUMER_GROUPS, "--delete --group {stable}", g, k)
    assert_same(CONSUMER_GROUPS, "--delete-offsets --group {stable} --topic {topic}", g, k)
    assert_same(CONSUMER_GROUPS, "--reset-offsets --group {stable} --topic {topic} --to-earliest --execute", g, k)


def test_describe_reset_delete_offsets_and_delete_an_empty_group(groups: Groups) -> None:
    g, k = groups.gateway, groups.kafka
    assert_same(CONSUMER_GROUPS, "--describe --group {empty}", g, k)
    assert_same(CONSUMER_GROUPS, "--describe --group {empty} --members --verbose", g, k)
    assert_same(CONSUMER_GROUPS, "--describe --group {empty} --state", g, k)
    assert_same(CONSUMER_GROUPS, "--reset-offsets --group {empty} --topic {topic} --to-earliest --dry-run", g, k)
    assert_same(CONSUMER_GROUPS, "--reset-offsets --group {empty} --all-topics --to-offset 3 --execute", g, k)
    assert_same(CONSUMER_GROUPS, "--reset-offsets --group {empty} --topic {topic}:1 --shift-by 4 --execute", g, k)
    assert_same(CONSUMER_GROUPS, "--delete-offsets --group {empty} --topic {topic}:0", g, k)
    assert_same(CONSUMER_GROUPS, "--describe --group {empty} --offsets --verbose", g, k)
    assert_same(CONSUMER_GROUPS, "--delete --group {empty}", g, k)
    assert_same(CONSUMER_GROUPS, "--describe --group {empty}", g, k)
    assert_same(CONSUMER_GROUPS, "--delete --group {empty}", g, k)
