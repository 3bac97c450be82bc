"""The gateway over SASL_SSL with a test CA, in front of the embedded broker, used by real Kafka clients
(kafka-python and librdkafka): SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN logins, a refused login, and ACLs as a
Kafka broker applies them, including an ACL added while the gateway runs. Every wait is bounded."""

from __future__ import annotations

import os
import socket
import ssl
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from coordinator_job.broker import create_topics
from kafka_gateway.frames import FrameSplitter
from kafka_gateway.properties import environment_name, setting
from kafka_gateway.runner import BackgroundGateway, GatewayOptions, ListenerOptions, host_port
from kafka_gateway.security.acl import (
    AccessControlEntry,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    read_acls,
    write_acls,
)
from kafka_gateway.security.credentials import ScramMechanism, Users, make_credential, write_users
from kafka_gateway.security.sasl_server import failure_message
from kafka_gateway.security.settings import AccessSettings, listener_security, upstream_security
from kafka_gateway.security.units import Security
from tests.scrape import scrape, total

pytestmark = pytest.mark.kafka
ENGINE = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1_000}
PASSWORDS = {"alice": "alice-pw", "admin": "admin-pw", "bob": "bob-pw"}
RELOAD_MS = 200
CAROL = "User:CN=carol,OU=Payments,O=Acme"  # her certificate's subject, as Kafka's principal builder writes it


def allow(resource_type: ResourceType, name: str, operation: Operation, principal: str,
          pattern: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, "*", operation, Permission.ALLOW))


@dataclass
class Secured:
    gateway: BackgroundGateway
    ca_file: str
    acl_file: Path
    topic: str
    kafka_bootstrap: str
    carol: tuple[str, str]  # carol's client certificate and key, for the SSL listener

    def ssl_listener(self) -> str:
        return self.gateway.listening[1].address

    def kafka_python(self, user: str, mechanism: str, password: str | None = None) -> dict[str, Any]:
        return {"bootstrap_servers": self.gateway.address, "security_protocol": "SASL_SSL",
                "sasl_mechanism": mechanism, "sasl_plain_username": user,
                "sasl_plain_password": PASSWORDS[user] if password is None else password,
                "ssl_cafile": self.ca_file, "request_timeout_ms": 10_000}

    def librdkafka(self, user: str, mechanism: str) -> dict[str, Any]:
        return {"bootstrap.servers": self.gateway.address, "security.protocol": "SASL_SSL",
                "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": PASSWORDS[user],
                "ssl.ca.location": self.ca_file}


@pytest.fixture(scope="module")
def secured(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    where = tmp_path_factory.mktemp("secured")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    keystore = where / "keystore.pem"
    keystore.write_bytes(cert.private_key_pem.bytes() + b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    ca_file = where / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    users = Users({})
    for name, password in PASSWORDS.items():
        for mechanism in ScramMechanism:
            users = users.with_credential(name, mechanism, make_credential(mechanism, password))
    write_users(where / "users.properties", users)
    carol = ca.issue_cert("carol@example.com", common_name="carol", organization_name="Acme",
                          organization_unit_name="Payments")
    carol.cert_chain_pems[0].write_to_path(str(where / "carol.pem"))
    carol.private_key_pem.write_to_path(str(where / "carol.key"))
    topic = f"secured-{uuid.uuid4().hex[:8]}"
    create_topics(kafka_bootstrap, [(topic, 2, False)])
    acl_file = where / "acls.jsonl"
    write_acls(acl_file, [allow(ResourceType.TOPIC, topic, Operation.READ, "User:alice"),
                          allow(ResourceType.TOPIC, "described-", Operation.DESCRIBE, "User:alice",
                                PatternType.PREFIXED),
                          allow(ResourceType.GROUP, "alice-", Operation.READ, "User:alice", PatternType.PREFIXED),
                          allow(ResourceType.TOPIC, topic, Operation.READ, CAROL),
                          allow(ResourceType.GROUP, "carol-", Operation.READ, CAROL, PatternType.PREFIXED)])
    settings = {"ssl.keystore.location": str(keystore), "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"}
    listener = listener_security("SASL_SSL", settings.get)
    tls_only = listener_security("SSL", {"ssl.keystore.location": str(keystore), "ssl.client.auth": "required",
                                         "ssl.truststore.location": str(ca_file)}.get)
    security = Security.load(AccessSettings(where / "users.properties", acl_file, frozenset({"User:admin"}),
                                            reload_interval_ms=RELOAD_MS))
    options = GatewayOptions(listen=("127.0.0.1", 0), upstream=host_port(kafka_bootstrap), engine="local",
                             settings=ENGINE, status_interval_s=0, security=security, metrics_listen=("127.0.0.1", 0),
                             listeners=[ListenerOptions(("127.0.0.1", 0), "SASL_SSL", units=security.units(listener),
                                                        tls=listener.tls),
                                        ListenerOptions(("127.0.0.1", 0), "SSL", units=security.units(tls_only),
                                                        tls=tls_only.tls)])
    with BackgroundGateway(options) as running:
        yield Secured(running, str(ca_file), acl_file, topic, kafka_bootstrap,
                      (str(where / "carol.pem"), str(where / "carol.key")))


MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_logs_in_and_consumes(secured: Secured, mechanism: str) -> None:
    producer = KafkaProducer(bootstrap_servers=secured.kafka_bootstrap)
    producer.send(secured.topic, b"hello", partition=0).get(10)
    producer.close()
    consumer = KafkaConsumer(secured.topic, group_id=f"alice-{mechanism}", auto_offset_reset="earliest",
                             **secured.kafka_python("alice", mechanism))
    try:
        _consume_until(consumer, b"hello")
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_librdkafka_logs_in(secured: Secured, mechanism: str) -> None:
    admin = AdminClient(secured.librdkafka("admin", mechanism))
    topics = admin.list_topics(timeout=15).topics
    assert secured.topic in topics


def _frame(message: Any, correlation_id: int) -> bytes:
    message.with_header(correlation_id=correlation_id, client_id="raw")
    return bytes(message.encode(header=True, framed=True))


def _read_frame(sock: ssl.SSLSocket) -> bytes:
    splitter = FrameSplitter()
    while True:
        data = sock.recv(65536)
        assert data, "the gateway closed the connection before answering"
        frames = splitter.feed(data)
        if frames:
            return frames[0]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_a_wrong_password_gets_sasl_authentication_failed_then_a_closed_connection(secured: Secured,
                                                                                   mechanism: str) -> None:
    context = ssl.create_default_context(cafile=secured.ca_file)
    host, port = host_port(secured.gateway.address)
    with socket.create_connection((host, port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=host) as sock:
        sock.sendall(_frame(SaslHandshakeRequest[1](mechanism=mechanism), 1))
        assert SaslHandshakeResponse.decode(_read_frame(sock), version=1, header=True).error_code == 0
        token = b"\x00alice\x00wrong" if mechanism == "PLAIN" else b"n,,n=alice,r=abcdefghijklmnop"
        sock.sendall(_frame(SaslAuthenticateRequest[1](auth_bytes=token), 2))
        answer = SaslAuthenticateResponse.decode(_read_frame(sock), version=1, header=True)
        if mechanism != "PLAIN":  # SCRAM: the server's first message, then a wrong proof
            assert answer.error_code == 0
            nonce = bytes(answer.auth_bytes).decode().split(",")[0]
            proof = "c=biws," + nonce + ",p=" + "A" * 44
            sock.sendall(_frame(SaslAuthenticateRequest[1](auth_bytes=proof.encode()), 3))
            answer = SaslAuthenticateResponse.decode(_read_frame(sock), version=1, header=True)
        assert (answer.error_code, answer.error_message) == (58, failure_message(mechanism))
        assert sock.recv(1) == b"", "the connection stays open after a failed login"


def test_no_read_on_the_group_is_group_authorization_failed(secured: Secured) -> None:
    _refused_a_group(secured, "SCRAM-SHA-256")


def _refused_a_group(secured: Secured, mechanism: str) -> None:
    """Alice, logged in with `mechanism`, consumes in a group she may not read: GROUP_AUTHORIZATION_FAILED."""
    consumer = KafkaConsumer(secured.topic, group_id="not-alices", **secured.kafka_python("alice", mechanism))
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            _poll_until_error(consumer)
    finally:
        consumer.close()


def test_no_read_on_the_topic_is_topic_authorization_failed(secured: Secured) -> None:
    # alice may describe the topic (so she is assigned its partitions) but not read it: her Fetch is refused.
    other = f"described-{uuid.uuid4().hex[:8]}"
    create_topics(secured.kafka_bootstrap, [(other, 1, False)])
    consumer = KafkaConsumer(other, group_id="alice-topics", **secured.kafka_python("alice", "SCRAM-SHA-256"))
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            _poll_until_error(consumer)
    finally:
        consumer.close()


def _consume_until(consumer: KafkaConsumer, value: bytes, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            if any(record.value == value for record in records):
                return
    raise AssertionError(f"{value!r} not consumed within {timeout_s} s")


def _poll_until_error(consumer: KafkaConsumer, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        consumer.poll(timeout_ms=500)
    raise AssertionError("no error within the deadline")


def _listed_groups(admin: KafkaAdminClient) -> set[str]:
    return {group["group_id"] for group in admin.list_groups()}


def _join(secured: Secured, user: str, group: str) -> None:
    """A consumer of `user` joins `group` and commits, so the group exists."""
    consumer = KafkaConsumer(secured.topic, group_id=group, auto_offset_reset="earliest",
                             **secured.kafka_python(user, "SCRAM-SHA-512"))
    try:
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(timeout_ms=500)
        assert consumer.assignment(), f"{user} did not join {group}"
        consumer.commit()
    finally:
        consumer.close()


def test_list_groups_hides_what_the_user_may_not_describe_and_a_super_user_sees_all(secured: Secured) -> None:
    _join(secured, "admin", "admins-only")
    _join(secured, "alice", "alice-listed")
    alice = KafkaAdminClient(**secured.kafka_python("alice", "SCRAM-SHA-256"))
    admin = KafkaAdminClient(**secured.kafka_python("admin", "PLAIN"))
    try:
        assert "alice-listed" in _listed_groups(alice) and "admins-only" not in _listed_groups(alice)
        assert {"alice-listed", "admins-only"} <= _listed_groups(admin)
    finally:
        alice.close()
        admin.close()


def test_an_acl_added_while_the_gateway_runs_applies_within_seconds(secured: Secured) -> None:
    group = f"bobs-{uuid.uuid4().hex[:6]}"
    bob = KafkaConsumer(secured.topic, group_id=group, **secured.kafka_python("bob", "SCRAM-SHA-256"))
    try:
        with pytest.raises((TopicAuthorizationFailedError, GroupAuthorizationFailedError)):
            _poll_until_error(bob)
    finally:
        bob.close()

    write_acls(secured.acl_file, [*read_acls(secured.acl_file),
                                  allow(ResourceType.TOPIC, secured.topic, Operation.READ, "User:bob"),
                                  allow(ResourceType.GROUP, group, Operation.READ, "User:bob")])
    added = time.monotonic()
    _eventually(lambda: _joins(secured, "bob", group), timeout_s=10)
    assert time.monotonic() - added < 10


def _joins(secured: Secured, user: str, group: str) -> bool:
    try:
        _join(secured, user, group)
    except (TopicAuthorizationFailedError, GroupAuthorizationFailedError, AssertionError):
        return False
    return True


def _eventually(condition: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
    raise AssertionError("the condition did not hold in time")


def test_a_gateway_reaches_a_sasl_ssl_upstream_with_service_credentials_from_the_environment(
        secured: Secured, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second gateway whose upstream is the first one's SASL_SSL listener: it verifies the upstream's
    certificate, logs in as the service user (a super user there) with the password from the environment, and
    its own plaintext clients consume through it."""
    properties = {"upstream.security.protocol": "SASL_SSL", "upstream.sasl.mechanism": "SCRAM-SHA-512",
                  "upstream.ssl.truststore.location": secured.ca_file}
    monkeypatch.setenv(environment_name("upstream.sasl.jaas.config"),
                       'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
                       f'password="{PASSWORDS["admin"]}";')
    upstream = upstream_security(lambda key: setting(properties, os.environ, key))
    options = GatewayOptions(listen=("127.0.0.1", 0), upstream=host_port(secured.gateway.address), engine="local",
                             settings=ENGINE, status_interval_s=0, upstream_security=upstream)
    producer = KafkaProducer(bootstrap_servers=secured.kafka_bootstrap)
    producer.send(secured.topic, b"through two gateways", partition=1).get(10)
    producer.close()
    with BackgroundGateway(options) as outer:
        consumer = KafkaConsumer(secured.topic, bootstrap_servers=outer.address, group_id="outer-group",
                                 auto_offset_reset="earliest")
        try:
            _consume_until(consumer, b"through two gateways")
        finally:
            consumer.close()


def test_a_client_certificate_is_the_principal_on_an_ssl_listener(secured: Secured) -> None:
    tls = {"bootstrap_servers": secured.ssl_listener(), "security_protocol": "SSL", "ssl_cafile": secured.ca_file,
           "ssl_certfile": secured.carol[0], "ssl_keyfile": secured.carol[1]}
    producer = KafkaProducer(bootstrap_servers=secured.kafka_bootstrap)
    producer.send(secured.topic, b"for carol", partition=0).get(10)
    producer.close()
    allowed = KafkaConsumer(secured.topic, group_id="carol-reads", auto_offset_reset="earliest", **tls)
    try:
        _consume_until(allowed, b"for carol")
    finally:
        allowed.close()
    denied = KafkaConsumer(secured.topic, group_id="not-carols", **tls)
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            _poll_until_error(denied)
    finally:
        denied.close()


def test_logins_failed_handshakes_and_denials_are_counted_in_the_gateways_metrics(secured: Secured) -> None:
    assert secured.gateway.server is not None and secured.gateway.server.metrics_url is not None
    url = secured.gateway.server.metrics_url
    _, before = scrape(url)
    host, port = host_port(secured.ssl_listener())
    with socket.create_connection((host, port), timeout=10) as plain:  # Kafka's bytes where TLS is expected
        plain.sendall(_frame(SaslHandshakeRequest[1](mechanism="PLAIN"), 1))
        assert plain.recv(65536) in (b"", b"\x15\x03\x01\x00\x02\x02\x16")  # closed, or a TLS alert first
    _refused_a_group(secured, "SCRAM-SHA-512")

    def moved(samples: Any, name: str, **labels: str) -> float:
        return total(samples, name, **labels) - total(before, name, **labels)

    _eventually(lambda: moved(scrape(url)[1], "coordinator_gateway_authentication_failures_total",
                              listener="SSL", mechanism="TLS") == 1, timeout_s=10)
    _, after = scrape(url)
    assert moved(after, "coordinator_gateway_authentication_successes_total", listener="SASL_SSL",
                 mechanism="SCRAM-SHA-512") >= 1
    # kafka-python asks FindCoordinator first: Describe on the group, denied (GROUP_AUTHORIZATION_FAILED).
    assert moved(after, "coordinator_gateway_authorization_denials_total", api="FindCoordinator",
                 resource_type="GROUP", operation="DESCRIBE") >= 1
    assert moved(after, "coordinator_gateway_requests_total", listener="SASL_SSL", error_code="30") >= 1
