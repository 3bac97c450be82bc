"""The listener and port keys of the gateway's configuration (PROTOCOL.md section 11), read into what the
runner opens: each listener's bootstrap address, what its answers advertise, and the ports of the
upstream's nodes.

`lookup(key)` gives a key's value as configured (the properties file, the environment winning), None when
unset, as for the security keys. A listener's own keys take Kafka's prefix `listener.name.<name in lower
case>.`; the first listener falls back to the unprefixed key, a second one must set its first broker port
(it cannot default to the bootstrap port + 1 of both). Every bad value raises ValueError naming its key.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

Lookup = Callable[[str], str | None]
DEFAULT_LISTENERS: Final = "PLAINTEXT://127.0.0.1:9092"
BROKER_PORT_START: Final = "coordinator.gateway.broker.port.start"
BROKER_ID_LOWEST: Final = "coordinator.gateway.broker.id.lowest"
BROKER_PORTS: Final = "coordinator.gateway.broker.ports"
# The keys this module reads (a listener may prefix those of LISTENER_KEYS).
LISTENER_KEYS: Final = (BROKER_PORT_START,)
KEYS: Final = ("bootstrap.servers", "listeners", "advertised.listeners", *LISTENER_KEYS, BROKER_ID_LOWEST,
               BROKER_PORTS)


@dataclass(frozen=True)
class ListenerAddress:
    """One listener: its name, where it listens (an empty host: every interface), what its answers advertise
    (an advertised port other than the listening one shifts the advertised broker ports alike, for a gateway
    behind a port mapping), its first broker port (None: the bootstrap port + 1)."""

    name: str
    host: str
    port: int
    advertised_host: str
    advertised_port: int
    broker_port_start: int | None


@dataclass(frozen=True)
class PortSettings:
    """Where the upstream is and where the gateway listens for it."""

    bootstrap_servers: list[tuple[str, int]]
    listeners: list[ListenerAddress]
    broker_id_lowest: int = 0
    broker_ports: int = 3


def listener_key(name: str, key: str) -> str:
    """`key` as set for listener `name` alone: `listener.name.sasl_ssl.coordinator.gateway.broker.port.start`."""
    return f"listener.name.{name.lower()}.{key}"


def port_settings(lookup: Lookup) -> PortSettings:
    """The listener and port keys; ValueError naming the first bad one."""
    bootstrap = lookup("bootstrap.servers")
    if not bootstrap:
        raise ValueError("bootstrap.servers: required (the upstream cluster, HOST:PORT[,HOST:PORT...])")
    servers = [_host_port("bootstrap.servers", item) for item in bootstrap.split(",")]
    listens = _endpoints("listeners", lookup("listeners") or DEFAULT_LISTENERS)
    advertised_text = lookup("advertised.listeners")
    advertised = _endpoints("advertised.listeners", advertised_text) if advertised_text else listens
    if list(advertised) != list(listens):
        raise ValueError(f"advertised.listeners: names {', '.join(advertised)} must be those of listeners "
                         f"({', '.join(listens)})")
    addresses = []
    for index, (name, (host, port)) in enumerate(listens.items()):
        own = lookup(listener_key(name, BROKER_PORT_START))
        start = own if own is not None or index > 0 else lookup(BROKER_PORT_START)
        if start is None and index > 0:
            raise ValueError(f"{listener_key(name, BROKER_PORT_START)}: required for a listener after the first")
        advertised_host, advertised_port = advertised[name]
        addresses.append(ListenerAddress(name, host, port, advertised_host or host or socket.getfqdn(), advertised_port,
                                         None if start is None else _int(BROKER_PORT_START, start, 1, 65535)))
    return PortSettings(servers, addresses, _int(BROKER_ID_LOWEST, lookup(BROKER_ID_LOWEST) or "0", 0, 2**31 - 1),
                        _int(BROKER_PORTS, lookup(BROKER_PORTS) or "3", 1, 65535))


def _endpoints(key: str, text: str) -> dict[str, tuple[str, int]]:
    """`NAME://HOST:PORT,...` by name (an empty host: every interface, as Kafka)."""
    endpoints: dict[str, tuple[str, int]] = {}
    for item in text.split(","):
        name, sep, address = item.strip().partition("://")
        if not sep or not name.replace("_", "").isalnum():
            raise ValueError(f"{key}: expected NAME://HOST:PORT, got {item.strip()!r}")
        if name in endpoints:
            raise ValueError(f"{key}: listener {name} is named twice")
        endpoints[name] = _host_port(key, address, empty_host=True)
    return endpoints


def parse_host_port(text: str, empty_host: bool = False) -> tuple[str, int]:
    """`HOST:PORT` (`[IPv6]:PORT`) as a pair; ValueError when it is not one."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or (not host and not empty_host) or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT, got {text.strip()!r}")
    return host.strip("[]"), int(port)


def _host_port(key: str, text: str, empty_host: bool = False) -> tuple[str, int]:
    try:
        return parse_host_port(text, empty_host)
    except ValueError as exc:
        raise ValueError(f"{key}: {exc}") from None


def _int(key: str, text: str, low: int, high: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"{key}: expected a whole number, got {text!r}") from None
    if not low <= value <= high:
        raise ValueError(f"{key}: expected {low}..{high}, got {value}")
    return value
