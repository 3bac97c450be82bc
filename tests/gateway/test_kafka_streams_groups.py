"""kafka-streams-groups (Kafka 4.4's StreamsGroupCommand, run as its script runs it) prints through the gateway what it
prints against a plain Kafka 4.4 broker, command by command, for streams groups in the same state (tests/gateway/
kafka_tools says what is masked and why).

Each side's group is one application of two Streams members on the wire (streams_wire.StreamsMember: one static, one
dynamic, the same member and process ids on both sides) reading one topic of the session's broker, that committed
offsets as its tasks' owners; a thread heartbeats them while the tools run. Then both members leave: the Empty group's
offsets are reset, deleted, and the group deleted.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kafka import KafkaProducer
from kafka.protocol.api_key import ApiKey

from coordinator_job.broker import create_topics
from kafka_gateway.runner import BackgroundGateway, GatewayOptions, host_port
from kafka_jvm.tools import STREAMS_GROUPS

from .kafka_tools import Side, assert_same, only_our_groups, rows_in_any_order
from .streams_wire import StreamsMember, settle, topology
from .wire import RawClient

pytestmark = pytest.mark.kafka
PARTITIONS, RECORDS_PER_PARTITION = 4, 10
# The session broker's streams settings (tests/conftest.py), and no wait between two assignments (Kafka's default).
ENGINE = {"group.streams.initial.rebalance.delay.ms": 0, "group.streams.assignment.interval.ms": 0}
HEARTBEAT_S = 2.0  # well within the default 45 s session


@dataclass
class App:
    side: Side
    members: list[StreamsMember]


class Heartbeats:
    """A thread heartbeating the members that have not left, every HEARTBEAT_S, until stopped (the members' wire
    clients are then the caller's again)."""

    def __init__(self, members: list[StreamsMember]) -> None:
        self.members = members
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="streams-heartbeats", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            for member in self.members:
                assert member.heartbeat()["error_code"] == 0, member.last

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the heartbeat thread did not stop"


@dataclass
class Apps:
    gateway: App
    kafka: App
    heartbeats: Heartbeats

    def leave(self) -> None:
        """Both applications' members leave (epoch -1): their groups are Empty."""
        self.heartbeats.stop()
        for member in [*self.gateway.members, *self.kafka.members]:
            if member.epoch > 0:
                assert member.leave()["error_code"] == 0
                member.epoch = -1


def _commit(member: StreamsMember, topic: str) -> None:
    """The member commits offset 5 + p of each partition p it owns, as a Streams task commits its position."""
    answer = member.client.call(ApiKey.OffsetCommit, 9, {
        "group_id": member.group_id, "generation_id_or_member_epoch": member.epoch, "member_id": member.member_id,
        "group_instance_id": None, "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "committed_offset": 5 + p, "committed_leader_epoch": -1, "committed_metadata": ""}
            for p in member.active]}]})
    assert all(p["error_code"] == 0 for t in answer["topics"] for p in t["partitions"]), answer


def _await_coordinator(bootstrap: str, group: str, timeout_s: float = 60.0) -> None:
    """Until the group's coordinator answers (a fresh broker creates its offsets topic on the first FindCoordinator,
    then loads it). The session's broker is one node: that node is the coordinator."""
    client = RawClient(bootstrap, timeout_s)
    deadline = time.monotonic() + timeout_s

    def answers() -> bool:
        if client.call(ApiKey.FindCoordinator, 3, {"key": group, "key_type": 0})["error_code"] != 0:
            return False
        described = client.call(ApiKey.DescribeGroups, 5, {"groups": [group], "include_authorized_operations": False})
        return bool(described["groups"][0]["error_code"] == 0)

    try:
        while not answers():
            assert time.monotonic() < deadline, f"no coordinator for {group} on {bootstrap} within {timeout_s} s"
            time.sleep(0.2)
    finally:
        client.close()


@pytest.fixture(scope="module")
def apps(kafka_bootstrap: str) -> Iterator[Apps]:
    suffix = uuid.uuid4().hex[:8]
    source = f"tools-in-{suffix}"
    create_topics(kafka_bootstrap, [(source, PARTITIONS, False)])
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for i in range(PARTITIONS * RECORDS_PER_PARTITION):
        producer.send(source, str(i).encode(), partition=i % PARTITIONS)
    producer.flush(30)
    producer.close()
    options = GatewayOptions(listen=("127.0.0.1", 0), upstream=host_port(kafka_bootstrap), engine="local",
                             settings=ENGINE, status_interval_s=0)
    with BackgroundGateway(options) as gateway:
        apps = []
        for name, bootstrap in (("gw", gateway.address), ("kf", kafka_bootstrap)):  # ids of the same length
            side = Side(name, bootstrap, {"app": f"{name}-app-{suffix}", "source": source})
            app = side.names["app"]
            shape = topology(source, f"{app}-store-changelog")
            _await_coordinator(bootstrap, app)
            members = [StreamsMember(bootstrap, app, "member-a", shape, instance_id="instance-a",
                                     process_id="process-a", timeout_s=30),
                       StreamsMember(bootstrap, app, "member-b", shape, process_id="process-b", timeout_s=30)]
            settle(members, PARTITIONS)
            for member in members:
                _commit(member, source)
            apps.append(App(side, members))
        both = Apps(apps[0], apps[1], Heartbeats([m for app in apps for m in app.members]))
        try:
            yield both
        finally:
            both.leave()


def _without_assignor(text: str) -> str:
    """StreamsGroupDescribe v1's assignor name (KIP-1357, 'sticky' on Kafka 4.4) is beyond the coordinator's contract
    (v0, PROTOCOL.md 10): the state view's ASSIGNOR value is blank through the gateway. Masked here, listed as a
    remaining difference."""
    return text.replace("sticky", "      ")


def test_list_and_describe_a_stable_streams_group(apps: Apps) -> None:
    gateway, kafka = apps.gateway.side, apps.kafka.side

    assert_same(STREAMS_GROUPS, "--list --state", gateway, kafka, only_our_groups)
    assert_same(STREAMS_GROUPS, "--describe --group {app} --offsets --verbose", gateway, kafka)
    assert_same(STREAMS_GROUPS, "--describe --group {app} --members --verbose", gateway, kafka, rows_in_any_order)
    assert_same(STREAMS_GROUPS, "--describe --group {app} --state --verbose", gateway, kafka, _without_assignor)
    assert_same(STREAMS_GROUPS, "--delete --group {app}", gateway, kafka)


def test_reset_delete_offsets_and_delete_an_empty_streams_group(apps: Apps) -> None:
    gateway, kafka = apps.gateway.side, apps.kafka.side
    apps.leave()
    assert_same(STREAMS_GROUPS, "--describe --group {app} --state", gateway, kafka, _without_assignor)
    assert_same(STREAMS_GROUPS, "--reset-offsets --group {app} --all-input-topics --to-earliest --dry-run",
                gateway, kafka)
    assert_same(STREAMS_GROUPS, "--reset-offsets --group {app} --input-topic {source} --to-offset 3 --execute",
                gateway, kafka)
    assert_same(STREAMS_GROUPS, "--delete-offsets --group {app} --input-topic {source}", gateway, kafka)
    assert_same(STREAMS_GROUPS, "--delete --group {app}", gateway, kafka)
    assert_same(STREAMS_GROUPS, "--describe --group {app}", gateway, kafka)
