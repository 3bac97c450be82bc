"""kafka-consumer-groups (Kafka 4.4's ConsumerGroupCommand, run as its script runs it) prints through the gateway what
it prints against a plain Kafka 4.4 broker, command by command, for groups in the same state (tests/gateway/kafka_tools
says what is masked and why).

The groups are brought there by real consumers (kafka-python processes) through the gateway (the in-process engine in
front of the session's Kafka 4.4 broker) and directly on that broker, each side with its own group ids, on the same
topic: a Stable group of two static members that consumed and committed everything, and an Empty group whose one
dynamic member did the same and left.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.errors import KafkaError

from chaos_harness.real_consumer import ConsumerProcess
from coordinator_cli.groups import CLI_CLIENT_ID, Administration, add_groups_arguments, run_groups
from coordinator_job.broker import create_topics
from coordinator_state import request_envelope
from coordinator_state.envelope import Api
from kafka_gateway.coordinators import LocalEngine
from kafka_gateway.runner import BackgroundGateway, GatewayOptions, host_port
from kafka_jvm.tools import CONSUMER_GROUPS

from .kafka_tools import Side, assert_same, mask, only_our_groups, printed, rows_in_any_order, run_on

pytestmark = pytest.mark.kafka
PARTITIONS, RECORDS_PER_PARTITION = 3, 10
# The session broker's group settings (tests/conftest.py): no initial rebalance delay.
ENGINE = {"group.initial.rebalance.delay.ms": 0}
SETTLE_S = 60.0


@dataclass(frozen=True)
class Groups:
    gateway: Side
    kafka: Side
    gateway_process: BackgroundGateway


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
            yield Groups(*sides, gateway)
        finally:
            for consumer in consumers:
                consumer.stop()


def test_list(groups: Groups) -> None:
    # The session's broker holds every test's groups, the gateway's engine only this module's (only_our_groups), listed
    # in the order of the broker's coordinator's hash map.
    assert_same(CONSUMER_GROUPS, "--list --state", groups.gateway, groups.kafka, only_our_groups)
    assert_same(CONSUMER_GROUPS, "--list --type", groups.gateway, groups.kafka, only_our_groups)


def test_describe_a_stable_group_of_static_members(groups: Groups) -> None:
    g, k = groups.gateway, groups.kafka
    assert_same(CONSUMER_GROUPS, "--describe --group {stable}", g, k)
    assert_same(CONSUMER_GROUPS, "--describe --group {stable} --members --verbose", g, k, rows_in_any_order)
    assert_same(CONSUMER_GROUPS, "--describe --group {stable} --state --verbose", g, k)


def test_a_stable_group_refuses_delete_reset_and_delete_offsets(groups: Groups) -> None:
    g, k = groups.gateway, groups.kafka
    assert_same(CONSUMER_GROUPS, "--delete --group {stable}", g, k)
    assert_same(CONSUMER_GROUPS, "--delete-offsets --group {stable} --topic {topic}", g, k)
    assert_same(CONSUMER_GROUPS, "--reset-offsets --group {stable} --topic {topic} --to-earliest --execute", g, k)


class GatewayEngine(Administration):
    """`coordinator groups`' source over the gateway's in-process engine: its envelopes answered by that engine (as
    the running job answers them from its topics), the log end offsets read from the gateway's upstream."""

    def __init__(self, gateway: BackgroundGateway, upstream: str) -> None:
        engine = gateway.server.coordinator if gateway.server is not None else None
        assert isinstance(engine, LocalEngine)
        self.engine, self.bootstrap = engine, upstream
        # What the state view's COORDINATOR column shows: the tool names the node it asked (a gateway port of node 1)
        self.description = f"{gateway.address}  (1)"
        self.correlation_id = 0

    def ask(self, api: str, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.correlation_id += 1
        envelope = request_envelope(api, body, version=version, correlation_id=self.correlation_id,
                                    client_id=CLI_CLIENT_ID, reply_to=CLI_CLIENT_ID,
                                    timestamp_ms=int(time.time() * 1000))
        answers = self.engine.inspect(lambda engine: engine.handle(envelope)).result(30)
        [answer] = [a for a in answers if a["reply_to"] == CLI_CLIENT_ID and a["correlation_id"] == self.correlation_id]
        return dict(answer["body"])

    def list_groups(self, states: Sequence[str]) -> list[dict[str, Any]]:
        return list(self.ask(Api.LIST_GROUPS, 5, {"states_filter": list(states), "types_filter": []})["groups"])


def test_coordinator_groups_prints_what_kafka_consumer_groups_prints(groups: Groups,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The README's promise: `coordinator groups` shows kafka-consumer-groups.sh's views and columns. Both read the
    same groups, the CLI from the engine, the tool through the gateway in front of it."""
    source = GatewayEngine(groups.gateway_process, groups.kafka.bootstrap)
    parser = argparse.ArgumentParser()
    add_groups_arguments(parser)

    def coordinator_groups(command: str) -> str:
        status = run_groups(parser.parse_args(command.format(**groups.gateway.names).split()), source)
        captured = capsys.readouterr()
        return mask(f"exit {status}\n[stdout]\n{captured.out}[stderr]\n{captured.err}", groups.gateway)

    # The listing's and the members' rows in any order: the tool prints them in the order of its admin client's
    # hash maps.
    for command, normalise in (("--list --state", rows_in_any_order), ("--describe --group {stable}", str),
                               ("--describe --group {stable} --members", rows_in_any_order),
                               ("--describe --group {stable} --members --verbose", rows_in_any_order),
                               ("--describe --group {stable} --state", str), ("--describe --group {empty}", str),
                               ("--describe --group {empty} --members", str),
                               ("--describe --group {empty} --state", str)):
        expected = normalise(printed(run_on(CONSUMER_GROUPS, command, groups.gateway), groups.gateway))
        shown = normalise(coordinator_groups(command))
        assert shown == expected, (
            f"`coordinator groups {command}` differs from kafka-consumer-groups through the gateway:\n"
            f"--- coordinator groups ---\n{shown}\n--- kafka-consumer-groups ---\n{expected}")


def test_describe_reset_delete_offsets_and_delete_an_empty_group(groups: Groups) -> None:
    """Last in this module: it deletes the Empty groups."""
    g, k = groups.gateway, groups.kafka
    assert_same(CONSUMER_GROUPS, "--describe --group {empty}", g, k)
    assert_same(CONSUMER_GROUPS, "--describe --group {empty} --state", g, k)
    assert_same(CONSUMER_GROUPS, "--reset-offsets --group {empty} --topic {topic} --to-earliest --dry-run", g, k)
    assert_same(CONSUMER_GROUPS, "--reset-offsets --group {empty} --all-topics --to-offset 3 --execute", g, k)
    assert_same(CONSUMER_GROUPS, "--delete-offsets --group {empty} --topic {topic}:0", g, k)
    assert_same(CONSUMER_GROUPS, "--describe --group {empty} --offsets --verbose", g, k)
    assert_same(CONSUMER_GROUPS, "--delete --group {empty}", g, k)
    assert_same(CONSUMER_GROUPS, "--describe --group {empty}", g, k)
    assert_same(CONSUMER_GROUPS, "--delete --group {empty}", g, k)
