"""TLS for the gateway: the ssl contexts of client listeners and of the upstream connection, from PEM files
(stdlib `ssl`), and the principal a client certificate stands for.

Kafka's keys (PROTOCOL.md section 11): `ssl.keystore.location` is one PEM file with the PKCS#8 private key and the
certificate chain (`ssl.key.password` if the key is encrypted); `ssl.truststore.location` the CA certificates that
client certificates must chain to; `ssl.client.auth` none, requested or required; `ssl.enabled.protocols` the TLS
versions. A client that shows a certificate on an SSL listener is `User:` + the certificate's subject DN as Java's
`X500Principal.getName()` writes it (RFC 2253: most specific RDN first, CN/O/OU/... keywords, special characters
escaped); without one it is `User:ANONYMOUS`.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

CLIENT_AUTH: Final = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
PROTOCOLS: Final = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
ANONYMOUS: Final = "User:ANONYMOUS"

# The attribute keywords of RFC 2253 (and Java's X500Principal, which adds none for RFC 2253 output).
_KEYWORDS: Final = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
                    "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
                    "domainComponent": "DC", "userId": "UID"}
# Java writes other attributes as OID=#<hex of the DER value>; the one met in practice is the e-mail address, an
# IA5String (tag 0x16).
_EMAIL_OID: Final = "1.2.840.113549.1.9.1"


def _protocol_range(protocols: Sequence[str]) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    unknown = [p for p in protocols if p not in PROTOCOLS]
    if unknown or not protocols:
        raise ValueError(f"ssl.enabled.protocols: expected some of {', '.join(PROTOCOLS)}, got {list(protocols)}")
    versions = sorted(PROTOCOLS[p] for p in protocols)
    return versions[0], versions[-1]


def server_context(keystore: Path, key_password: str | None = None, truststore: Path | None = None,
                   client_auth: str = "none", protocols: Sequence[str] = ("TLSv1.2", "TLSv1.3")) -> ssl.SSLContext:
    """The context of a TLS listener. ValueError naming the key at fault; OSError/ssl.SSLError when a file is
    unreadable or is not PEM."""
    if client_auth not in CLIENT_AUTH:
        raise ValueError(f"ssl.client.auth: expected none, requested or required, got {client_auth!r}")
    if client_auth != "none" and truststore is None:
        raise ValueError("ssl.client.auth requested or required needs ssl.truststore.location")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version, context.maximum_version = _protocol_range(protocols)
    context.load_cert_chain(keystore, password=key_password)
    if truststore is not None:
        context.load_verify_locations(cafile=truststore)
    context.verify_mode = CLIENT_AUTH[client_auth]
    return context


def client_context(truststore: Path | None = None, check_hostname: bool = True) -> ssl.SSLContext:
    """The context of the gateway's connections to the upstream cluster: its CA certificates (else the system's),
    the host name checked unless `ssl.endpoint.identification.algorithm` is empty."""
    context = ssl.create_default_context(cafile=truststore)
    context.check_hostname = check_hostname
    return context


def _escape(value: str) -> str:
    escaped = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if escaped.startswith(("#", " ")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


def _attribute(name: str, value: str) -> str:
    if name in _KEYWORDS:
        return f"{_KEYWORDS[name]}={_escape(value)}"
    if name == "emailAddress" and value.isascii() and len(value) < 128:
        return f"{_EMAIL_OID}=#16{len(value):02x}{value.encode('ascii').hex()}"
    return f"{name}={_escape(value)}"


def subject_dn(peer_certificate: dict[str, Any]) -> str:
    """The subject of `SSLSocket.getpeercert()`'s certificate as an RFC 2253 string (most specific RDN first)."""
    rdns = peer_certificate.get("subject", ())
    return ",".join("+".join(_attribute(name, value) for name, value in rdn) for rdn in reversed(rdns))


def certificate_principal(peer_certificate: dict[str, Any] | None) -> str:
    """`User:<subject DN>` for a verified client certificate, `User:ANONYMOUS` without one."""
    return f"User:{subject_dn(peer_certificate)}" if peer_certificate else ANONYMOUS
