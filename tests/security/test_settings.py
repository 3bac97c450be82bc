"""The security keys of the gateway's configuration: what they build, and bad values named by key."""

from __future__ import annotations

from pathlib import Path

import pytest
import trustme

from kafka_gateway.chain import ConnectionContext
from kafka_gateway.security.settings import access_settings, listener_security, protocol_map, upstream_security
from kafka_gateway.security.units import AclAuthorization, SaslAuthentication, gateway_security


@pytest.fixture(scope="module")
def pems(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    ca = trustme.CA()
    where = tmp_path_factory.mktemp("pem")
    cert = ca.issue_cert("127.0.0.1")
    (where / "keystore.pem").write_bytes(cert.private_key_pem.bytes() + b"".join(c.bytes() for c in
                                                                                 cert.cert_chain_pems))
    ca.cert_pem.write_to_path(str(where / "ca.pem"))
    (where / "users").write_text("")
    (where / "acls").write_text("")
    return {name: str(where / name) for name in ("keystore.pem", "ca.pem", "users", "acls")}


def lookup(settings: dict[str, str]):  # type: ignore[no-untyped-def]
    return settings.get


def test_a_sasl_ssl_listener_with_its_own_prefixed_keys(pems: dict[str, str]) -> None:
    settings = {"listener.security.protocol.map": "EXTERNAL:SASL_SSL,INTERNAL:PLAINTEXT",
                "listener.name.external.ssl.keystore.location": pems["keystore.pem"],
                "listener.name.external.sasl.enabled.mechanisms": "PLAIN, SCRAM-SHA-512",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256"}
    external = listener_security("EXTERNAL", lookup(settings))
    assert (external.protocol, external.sasl, external.sasl_mechanisms) == ("SASL_SSL", True,
                                                                            ("PLAIN", "SCRAM-SHA-512"))
    assert external.tls is not None
    internal = listener_security("INTERNAL", lookup(settings))
    assert (internal.tls, internal.sasl_mechanisms) == (None, ())


def test_kafkas_default_protocol_map_and_mechanisms(pems: dict[str, str]) -> None:
    assert protocol_map(lookup({}))["SASL_PLAINTEXT"] == "SASL_PLAINTEXT"
    assert listener_security("SASL_PLAINTEXT", lookup({})).sasl_mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512")


@pytest.mark.parametrize("settings, name, message", [
    ({}, "OTHER", "no security protocol for listener OTHER"),
    ({"listener.security.protocol.map": "A:TLS"}, "A", "listener.security.protocol.map"),
    ({}, "SSL", "listener.name.ssl.ssl.keystore.location: listener SSL uses SSL and needs a keystore"),
    ({"ssl.keystore.location": "/nonexistent.pem"}, "SSL", "ssl.keystore.location: /nonexistent.pem is not"),
    ({"ssl.keystore.location": "CA", "ssl.keystore.type": "JKS"}, "SSL", "ssl.keystore.type: only PEM"),
    ({"ssl.keystore.location": "CA"}, "SSL", "does not hold a PEM key"),
    ({"ssl.keystore.location": "KEYSTORE", "ssl.client.auth": "always"}, "SSL", "ssl.client.auth"),
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "SASL_PLAINTEXT", "sasl.enabled.mechanisms: expected some of"),
])
def test_bad_listener_keys_are_named(pems: dict[str, str], settings: dict[str, str], name: str,
                                     message: str) -> None:
    resolved = {k: pems["ca.pem"] if v == "CA" else pems["keystore.pem"] if v == "KEYSTORE" else v
                for k, v in settings.items()}
    with pytest.raises(ValueError, match=message):
        listener_security(name, lookup(resolved))


def test_upstream_sasl_ssl_from_jaas(pems: dict[str, str]) -> None:
    upstream = upstream_security(lookup({
        "upstream.security.protocol": "SASL_SSL", "upstream.sasl.mechanism": "SCRAM-SHA-512",
        "upstream.ssl.truststore.location": pems["ca.pem"], "upstream.ssl.endpoint.identification.algorithm": "",
        "upstream.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                     'username="svc" password="pw";'}))
    assert upstream.tls is not None and not upstream.tls.check_hostname
    assert upstream.credentials is not None and upstream.credentials.username == "svc"
    assert upstream_security(lookup({})).tls is None


@pytest.mark.parametrize("settings, message", [
    ({"upstream.security.protocol": "TLS"}, "upstream.security.protocol"),
    ({"upstream.security.protocol": "SASL_PLAINTEXT"}, "COORDINATOR_GATEWAY__UPSTREAM_SASL_JAAS_CONFIG"),
    ({"upstream.security.protocol": "SSL", "upstream.ssl.endpoint.identification.algorithm": "ldap"},
     "endpoint.identification"),
])
def test_bad_upstream_keys_are_named(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        upstream_security(lookup(settings))


def test_access_settings(pems: dict[str, str]) -> None:
    access = access_settings(lookup({"coordinator.gateway.users.file": pems["users"],
                                     "coordinator.gateway.acl.file": pems["acls"], "super.users": "User:a;User:b",
                                     "allow.everyone.if.no.acl.found": "True"}), sasl_listeners=True)
    assert access.super_users == {"User:a", "User:b"} and access.allow_everyone_if_no_acl_found
    assert access.reload_interval_ms == 1000
    with pytest.raises(ValueError, match=r"coordinator.gateway.users.file: a listener uses SASL"):
        access_settings(lookup({}), sasl_listeners=True)
    with pytest.raises(ValueError, match=r"coordinator.gateway.acl.file: /no/acls is not a readable file"):
        access_settings(lookup({"coordinator.gateway.acl.file": "/no/acls"}), sasl_listeners=False)
    with pytest.raises(ValueError, match=r"reload.interval.ms"):
        access_settings(lookup({"coordinator.gateway.reload.interval.ms": "soon"}), sasl_listeners=False)


def test_gateway_security_gives_each_listener_its_units(pems: dict[str, str]) -> None:
    settings = {"listener.security.protocol.map": "EXTERNAL:SASL_SSL,INTERNAL:PLAINTEXT",
                "ssl.keystore.location": pems["keystore.pem"], "coordinator.gateway.users.file": pems["users"],
                "coordinator.gateway.acl.file": pems["acls"]}
    configured = gateway_security(lookup(settings), ["EXTERNAL", "INTERNAL"])
    context = ConnectionContext(1, "127.0.0.1", "EXTERNAL", None)
    assert [type(make(context)) for make in configured.units("EXTERNAL")] == [SaslAuthentication, AclAuthorization]
    assert [type(make(context)) for make in configured.units("INTERNAL")] == [AclAuthorization]
    assert configured.tls("EXTERNAL") is not None and configured.tls("INTERNAL") is None
    plain = gateway_security(lookup({}), ["PLAINTEXT"])
    assert plain.security is None and plain.units("PLAINTEXT") == []


def test_a_bad_users_file_stops_the_gateway_before_it_listens(tmp_path: Path) -> None:
    bad = tmp_path / "users"
    bad.write_text("alice SCRAM-SHA-256 nonsense\n")
    with pytest.raises(ValueError, match="users file line 1"):
        gateway_security(lookup({"coordinator.gateway.users.file": str(bad)}), ["PLAINTEXT"])
