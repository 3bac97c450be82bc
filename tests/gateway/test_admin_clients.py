"""Real admin clients through the gateway (in-process engine, embedded broker): kafka-python's KafkaAdminClient and
confluent-kafka's AdminClient alter, list and delete a group's offsets and delete groups, with Kafka's answers and
errors (PROTOCOL.md 11): NON_EMPTY_GROUP and GROUP_SUBSCRIBED_TO_TOPIC while a live consumer holds the group,
GROUP_ID_NOT_FOUND for a group that is not there; and, with an ACL file, a delete refused
GROUP_AUTHORIZATION_FAILED without Delete on the group. Every wait is bounded."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import (
    GroupAuthorizationFailedError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    NoError,
)
from kafka.structs import OffsetAndMetadata

from coordinator_job.broker import create_topics
from kafka_gateway.runner import BackgroundGateway, GatewayOptions, ListenerOptions, host_port
from kafka_gateway.security import acl
from kafka_gateway.security.settings import AccessSettings, listener_security
from kafka_gateway.security.units import Security

pytestmark = pytest.mark.kafka
ENGINE = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1_000}


def running_gateway(kafka_bootstrap: str, security: Security | None = None) -> BackgroundGateway:
    """A gateway with the in-process engine in front of the broker; with `security`, a PLAINTEXT listener whose
    chain authorizes every request by its ACL file."""
    listeners = [] if security is None else [
        ListenerOptions(("127.0.0.1", 0), "PLAINTEXT", units=security.units(listener_security("PLAINTEXT", {}.get)))]
    return BackgroundGateway(GatewayOptions(listen=("127.0.0.1", 0), upstream=host_port(kafka_bootstrap),
                                            engine="local", settings=ENGINE, status_interval_s=0, security=security,
                                            listeners=listeners))


@pytest.fixture(scope="module")
def gateway(kafka_bootstrap: str) -> Iterator[BackgroundGateway]:
    with running_gateway(kafka_bootstrap) as running:
        yield running


@pytest.fixture
def topic(kafka_bootstrap: str) -> str:
    name = f"admin-{uuid.uuid4().hex[:8]}"
    create_topics(kafka_bootstrap, [(name, 2, False)])
    return name


def _live_consumer(address: str, group: str, topic: str) -> KafkaConsumer:
    """A kafka-python consumer holding `group` (Stable, its partitions assigned), until closed."""
    consumer = KafkaConsumer(topic, bootstrap_servers=address, group_id=group, session_timeout_ms=6_000,
                             enable_auto_commit=False, request_timeout_ms=15_000)
    deadline = time.monotonic() + 30
    while not consumer.assignment():
        assert time.monotonic() < deadline, "the consumer got no assignment within 30 s"
        consumer.poll(timeout_ms=200)
    return consumer


def test_admin_clients_alter_list_and_delete_offsets_and_groups(gateway: BackgroundGateway, topic: str) -> None:
    group, live_group, absent = (f"admin-group-{uuid.uuid4().hex[:8]}" for _ in range(3))
    admin = KafkaAdminClient(bootstrap_servers=gateway.address, client_id="admin-test", request_timeout_ms=15_000)
    confluent = AdminClient({"bootstrap.servers": gateway.address})
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    try:
        # Altering the offsets of a group that does not exist makes a simple (Empty) group, as Kafka does.
        assert admin.alter_group_offsets(group, {p0: OffsetAndMetadata(5, "", -1)}) == {p0: NoError}
        altered = confluent.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [ConfluentPartition(topic, 1, 7)])], request_timeout=15)
        assert [tp.offset for tp in altered[group].result().topic_partitions] == [7]
        fetched = admin.list_group_offsets(group)[group]
        assert {tp: o.offset for tp, o in fetched.items()} == {p0: 5, p1: 7}
        assert group in [g["group_id"] for g in admin.list_groups()]

        assert admin.delete_group_offsets(group, [p0]) == {p0: NoError}
        assert {tp: o.offset for tp, o in admin.list_group_offsets(group)[group].items()} == {p1: 7}

        consumer = _live_consumer(gateway.address, live_group, topic)
        try:
            assert admin.delete_groups([live_group]) == {live_group: "NonEmptyGroupError"}
            [future] = confluent.delete_consumer_groups([live_group], request_timeout=15).values()
            with pytest.raises(Exception) as refused:
                future.result()
            assert refused.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
            assert admin.delete_group_offsets(live_group, [p0, p1]) == {
                p0: GroupSubscribedToTopicError, p1: GroupSubscribedToTopicError}
            assert admin.describe_groups([live_group])[live_group]["group_state"] == "Stable"
        finally:
            consumer.close()  # leaves the group: Empty

        assert admin.delete_groups([live_group, group, absent, group]) == {
            live_group: "OK", group: "OK", absent: "GroupIdNotFoundError"}
        [future] = confluent.delete_consumer_groups([group], request_timeout=15).values()
        with pytest.raises(Exception) as gone:
            future.result()
        assert gone.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND
        with pytest.raises(GroupIdNotFoundError):
            admin.delete_group_offsets(group, [p1])
        assert admin.list_group_offsets(group)[group] == {}
        assert admin.describe_groups([group])[group]["group_state"] == "Dead"
        assert not {group, live_group} & {g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()


def test_delete_is_refused_without_delete_on_the_group(kafka_bootstrap: str, topic: str, tmp_path: Path) -> None:
    """With an ACL file, an anonymous client that may read and describe its group but not delete it gets
    GROUP_AUTHORIZATION_FAILED, and the group stays; the operations DescribeGroups reports are the client's."""
    group = f"acl-group-{uuid.uuid4().hex[:8]}"
    acl_file = tmp_path / "acls.jsonl"
    acl.write_acls(acl_file, [
        acl.AclBinding(acl.ResourcePattern(resource_type, name, acl.PatternType.LITERAL),
                       acl.AccessControlEntry("User:ANONYMOUS", "*", acl.Operation.READ, acl.Permission.ALLOW))
        for resource_type, name in ((acl.ResourceType.GROUP, group), (acl.ResourceType.TOPIC, topic))])
    with running_gateway(kafka_bootstrap, Security.load(AccessSettings(None, acl_file, frozenset()))) as running:
        admin = KafkaAdminClient(bootstrap_servers=running.address, request_timeout_ms=15_000)
        try:
            p0 = TopicPartition(topic, 0)
            assert admin.alter_group_offsets(group, {p0: OffsetAndMetadata(3, "", -1)}) == {p0: NoError}
            assert admin.delete_groups([group]) == {group: "GroupAuthorizationFailedError"}
            with pytest.raises(GroupAuthorizationFailedError):
                admin.delete_group_offsets(group, [p0])
            described = admin.describe_groups([group])[group]
            assert described["group_state"] == "Empty"
            assert set(described["authorized_operations"]) == {"READ", "DESCRIBE"}
        finally:
            admin.close()
