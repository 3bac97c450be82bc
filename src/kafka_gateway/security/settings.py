"""The security keys of the gateway's configuration (PROTOCOL.md section 11), read into what the units need.

`lookup(key)` gives a key's value as configured (the properties file, the environment winning), None when unset.
A listener's own keys take Kafka's prefix `listener.name.<name in lower case>.` and fall back to the unprefixed
key. Every bad value raises ValueError naming its key, before the gateway listens.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .acl import parse_super_users
from .sasl_client import ServiceCredentials, UpstreamSecurity
from .sasl_server import MECHANISMS
from .tls import client_context, server_context

Lookup = Callable[[str], str | None]
PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP: Final = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
DEFAULT_MECHANISMS: Final = "SCRAM-SHA-256,SCRAM-SHA-512"
DEFAULT_RELOAD_INTERVAL_MS: Final = 1000

# The keys this module reads (a listener may prefix those of LISTENER_KEYS).
LISTENER_KEYS: Final = ("sasl.enabled.mechanisms", "ssl.keystore.type", "ssl.keystore.location", "ssl.key.password",
                        "ssl.truststore.type", "ssl.truststore.location", "ssl.client.auth", "ssl.enabled.protocols")
KEYS: Final = (*LISTENER_KEYS, "listener.security.protocol.map", "super.users", "allow.everyone.if.no.acl.found",
               "upstream.security.protocol", "upstream.sasl.mechanism", "upstream.sasl.jaas.config",
               "upstream.ssl.truststore.type", "upstream.ssl.truststore.location",
               "upstream.ssl.endpoint.identification.algorithm", "coordinator.gateway.users.file",
               "coordinator.gateway.acl.file", "coordinator.gateway.reload.interval.ms")


@dataclass(frozen=True)
class ListenerSecurity:
    """How a listener's clients connect: its security protocol, its TLS context, the SASL mechanisms it offers."""

    name: str
    protocol: str
    tls: ssl.SSLContext | None = None
    sasl_mechanisms: tuple[str, ...] = ()

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


@dataclass(frozen=True)
class AccessSettings:
    """The users and ACL files and the authorizer's settings."""

    users_file: Path | None = None
    acl_file: Path | None = None
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    reload_interval_ms: int = DEFAULT_RELOAD_INTERVAL_MS


def protocol_map(lookup: Lookup) -> dict[str, str]:
    """`listener.security.protocol.map`: listener name to security protocol."""
    text = lookup("listener.security.protocol.map") or DEFAULT_PROTOCOL_MAP
    mapping: dict[str, str] = {}
    for item in text.split(","):
        name, sep, protocol = item.strip().partition(":")
        if not sep or not name or protocol not in PROTOCOLS:
            raise ValueError(f"listener.security.protocol.map: expected NAME:PROTOCOL with PROTOCOL one of "
                             f"{', '.join(PROTOCOLS)}, got {item.strip()!r}")
        mapping[name] = protocol
    return mapping


def _pem_only(lookup: Lookup, key: str) -> None:
    kind = lookup(key)
    if kind is not None and kind.upper() != "PEM":
        raise ValueError(f"{key}: only PEM is supported, got {kind!r}")


def _readable(key: str, value: str) -> Path:
    path = Path(value)
    if not path.is_file():
        raise ValueError(f"{key}: {value} is not a readable file")
    return path


def listener_security(name: str, lookup: Lookup) -> ListenerSecurity:
    """The security of listener `name` (its protocol from the protocol map)."""
    protocols = protocol_map(lookup)
    if name not in protocols:
        raise ValueError(f"listener.security.protocol.map: no security protocol for listener {name}")
    protocol = protocols[name]
    prefix = f"listener.name.{name.lower()}."

    def own(key: str) -> str | None:
        value = lookup(prefix + key)
        return value if value is not None else lookup(key)

    def key_name(key: str) -> str:
        return prefix + key if lookup(prefix + key) is not None else key

    tls = None
    if protocol in ("SSL", "SASL_SSL"):
        for key in ("ssl.keystore.type", "ssl.truststore.type"):
            _pem_only(own, key)
        keystore = own("ssl.keystore.location")
        if not keystore:
            raise ValueError(f"{prefix}ssl.keystore.location: listener {name} uses {protocol} and needs a keystore")
        truststore = own("ssl.truststore.location")
        protocols_text = own("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3"
        try:
            tls = server_context(_readable(key_name("ssl.keystore.location"), keystore), own("ssl.key.password"),
                                 _readable(key_name("ssl.truststore.location"), truststore) if truststore else None,
                                 (own("ssl.client.auth") or "none").lower(),
                                 [p.strip() for p in protocols_text.split(",") if p.strip()])
        except ssl.SSLError as exc:
            raise ValueError(f"{key_name('ssl.keystore.location')}: {keystore} does not hold a PEM key and "
                             f"certificate chain that go together (or ssl.key.password is wrong): {exc}") from None
    mechanisms: tuple[str, ...] = ()
    if protocol.startswith("SASL_"):
        mechanisms = tuple(m.strip() for m in (own("sasl.enabled.mechanisms") or DEFAULT_MECHANISMS).split(",")
                           if m.strip())
        unknown = [m for m in mechanisms if m not in MECHANISMS]
        if unknown or not mechanisms:
            raise ValueError(f"{key_name('sasl.enabled.mechanisms')}: expected some of {', '.join(MECHANISMS)}, "
                             f"got {list(mechanisms)}")
    return ListenerSecurity(name, protocol, tls, mechanisms)


def upstream_security(lookup: Lookup) -> UpstreamSecurity:
    """How the gateway connects to the upstream cluster (`upstream.` + Kafka's client keys)."""
    protocol = lookup("upstream.security.protocol") or "PLAINTEXT"
    if protocol not in PROTOCOLS:
        raise ValueError(f"upstream.security.protocol: expected one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    tls = None
    if protocol in ("SSL", "SASL_SSL"):
        _pem_only(lookup, "upstream.ssl.truststore.type")
        truststore = lookup("upstream.ssl.truststore.location")
        algorithm = lookup("upstream.ssl.endpoint.identification.algorithm")
        if algorithm not in (None, "", "https"):
            raise ValueError(f"upstream.ssl.endpoint.identification.algorithm: expected https or empty, "
                             f"got {algorithm!r}")
        tls = client_context(_readable("upstream.ssl.truststore.location", truststore) if truststore else None,
                             check_hostname=algorithm != "")
    credentials = None
    if protocol.startswith("SASL_"):
        jaas = lookup("upstream.sasl.jaas.config")
        if not jaas:
            raise ValueError("upstream.sasl.jaas.config: the upstream uses SASL and the gateway needs its "
                             "credentials (set it, or COORDINATOR_GATEWAY__UPSTREAM_SASL_JAAS_CONFIG)")
        credentials = ServiceCredentials.from_jaas(lookup("upstream.sasl.mechanism") or "GSSAPI", jaas)
    return UpstreamSecurity(protocol, tls, credentials)


def access_settings(lookup: Lookup, sasl_listeners: bool) -> AccessSettings:
    """The users file (required when a listener uses SASL), the ACL file and the authorizer's settings."""
    users = lookup("coordinator.gateway.users.file")
    if sasl_listeners and not users:
        raise ValueError("coordinator.gateway.users.file: a listener uses SASL and needs the users file "
                         "(create it with `coordinator users add`)")
    allow = (lookup("allow.everyone.if.no.acl.found") or "false").strip().lower()
    if allow not in ("true", "false"):
        raise ValueError(f"allow.everyone.if.no.acl.found: expected true or false, got {allow!r}")
    interval = (lookup("coordinator.gateway.reload.interval.ms") or str(DEFAULT_RELOAD_INTERVAL_MS)).strip()
    if not interval.isdigit() or int(interval) < 1:
        raise ValueError(f"coordinator.gateway.reload.interval.ms: expected a positive number, got {interval!r}")
    acl_file = lookup("coordinator.gateway.acl.file")
    return AccessSettings(_readable("coordinator.gateway.users.file", users) if users else None,
                          _readable("coordinator.gateway.acl.file", acl_file) if acl_file else None,
                          parse_super_users(lookup("super.users") or ""), allow == "true", int(interval))
