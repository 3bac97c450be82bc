"""TLS contexts from PEM files, over real loopback connections, with a test CA (trustme)."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from kafka_gateway.security.tls import certificate_principal, client_context, server_context, subject_dn


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def keystore(tmp_path: Path, cert: trustme.LeafCert, password: str | None = None) -> Path:
    """One PEM file, PKCS#8 key then the chain: what ssl.keystore.location names."""
    key = cert.private_key_pem.bytes()
    if password is not None:
        key = serialization.load_pem_private_key(key, None).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password.encode()))
    path = tmp_path / "keystore.pem"
    path.write_bytes(key + b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    return path


def truststore(tmp_path: Path, ca: trustme.CA, name: str = "ca.pem") -> Path:
    path = tmp_path / name
    ca.cert_pem.write_to_path(str(path))
    return path


async def exchange(server: ssl.SSLContext, client: ssl.SSLContext, host: str = "127.0.0.1") -> dict | None:  # type: ignore[type-arg]
    """One TLS connection: the client sends a line, the server echoes it; returns the server's view of the client
    certificate."""
    seen: list[dict | None] = []  # type: ignore[type-arg]

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(writer.get_extra_info("peercert"))
        writer.write(await reader.readline())
        await writer.drain()
        writer.close()

    listening = await asyncio.start_server(echo, "127.0.0.1", 0, ssl=server)
    port = listening.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname=host)
        writer.write(b"hello\n")
        if await reader.readline() != b"hello\n":  # TLS 1.3 refuses a client certificate after the handshake
            raise ConnectionError("the server closed the connection")
        writer.close()
    finally:
        listening.close()
    return seen[0]


def test_a_listener_with_a_keystore_serves_clients_that_trust_the_ca(tmp_path: Path, ca: trustme.CA) -> None:
    server = server_context(keystore(tmp_path, ca.issue_cert("127.0.0.1", "localhost")))
    assert asyncio.run(exchange(server, client_context(truststore(tmp_path, ca)))) is None


def test_an_encrypted_key_needs_its_password(tmp_path: Path, ca: trustme.CA) -> None:
    path = keystore(tmp_path, ca.issue_cert("127.0.0.1"), password="key-pw")
    server = server_context(path, key_password="key-pw")
    asyncio.run(exchange(server, client_context(truststore(tmp_path, ca))))
    with pytest.raises(ssl.SSLError):
        server_context(path, key_password="wrong")


def test_the_upstream_host_name_is_checked_unless_disabled(tmp_path: Path, ca: trustme.CA) -> None:
    server = server_context(keystore(tmp_path, ca.issue_cert("broker.example")))
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        asyncio.run(exchange(server, client_context(truststore(tmp_path, ca))))
    asyncio.run(exchange(server, client_context(truststore(tmp_path, ca), check_hostname=False)))


def test_a_ca_the_client_does_not_trust_fails(tmp_path: Path, ca: trustme.CA) -> None:
    server = server_context(keystore(tmp_path, trustme.CA().issue_cert("127.0.0.1")))
    with pytest.raises(ssl.SSLCertVerificationError):
        asyncio.run(exchange(server, client_context(truststore(tmp_path, ca))))


def test_required_client_certificates_give_the_subject_as_principal(tmp_path: Path, ca: trustme.CA) -> None:
    server = server_context(keystore(tmp_path, ca.issue_cert("127.0.0.1")), truststore=truststore(tmp_path, ca),
                            client_auth="required")
    client = client_context(truststore(tmp_path, ca))
    client_cert = ca.issue_cert("alice@example.com", common_name="alice, the \"admin\"",
                                organization_name="Acme", organization_unit_name="Payments")
    client_cert.configure_cert(client)
    peer = asyncio.run(exchange(server, client))
    assert certificate_principal(peer) == 'User:CN=alice\\, the \\"admin\\",OU=Payments,O=Acme'
    with pytest.raises((ssl.SSLError, ConnectionError)):
        asyncio.run(exchange(server, client_context(truststore(tmp_path, ca))))  # no certificate: refused


def test_requested_client_certificates_are_optional(tmp_path: Path, ca: trustme.CA) -> None:
    server = server_context(keystore(tmp_path, ca.issue_cert("127.0.0.1")), truststore=truststore(tmp_path, ca),
                            client_auth="requested")
    assert certificate_principal(asyncio.run(exchange(server, client_context(truststore(tmp_path, ca))))) == \
        "User:ANONYMOUS"


def test_tls_versions_follow_ssl_enabled_protocols(tmp_path: Path, ca: trustme.CA) -> None:
    server = server_context(keystore(tmp_path, ca.issue_cert("127.0.0.1")), protocols=["TLSv1.3"])
    client = client_context(truststore(tmp_path, ca))
    client.maximum_version = ssl.TLSVersion.TLSv1_2
    with pytest.raises((ssl.SSLError, ConnectionError)):
        asyncio.run(exchange(server, client))


@pytest.mark.parametrize("kwargs, message", [
    ({"client_auth": "sometimes"}, "ssl.client.auth"),
    ({"client_auth": "required"}, "needs ssl.truststore.location"),
    ({"protocols": ["TLSv1"]}, "ssl.enabled.protocols"),
])
def test_bad_settings_name_their_key(tmp_path: Path, ca: trustme.CA, kwargs: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError, match=message):
        server_context(keystore(tmp_path, ca.issue_cert("127.0.0.1")), **kwargs)


def test_rfc2253_escapes_and_multi_valued_rdns() -> None:
    subject = ((("countryName", "US"),), (("organizationName", "#hash, inc"),),
               (("commonName", " padded "), ("userId", "u+1")), (("emailAddress", "a@b"),))
    assert subject_dn({"subject": subject}) == \
        "1.2.840.113549.1.9.1=#1603614062,CN=\\ padded\\ +UID=u\\+1,O=\\#hash\\, inc,C=US"
