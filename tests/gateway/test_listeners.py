"""The listener and port keys of section 11: a table of configurations and what the gateway opens, and of bad
values and the key each error names."""

from __future__ import annotations

import pytest

from kafka_gateway.listeners import ListenerAddress, PortSettings, port_settings

UPSTREAM = {"bootstrap.servers": "kafka-1:9092, kafka-2:9092"}


@pytest.mark.parametrize(("keys", "expected"), [
    ({}, PortSettings([("kafka-1", 9092), ("kafka-2", 9092)],
                      [ListenerAddress("PLAINTEXT", "127.0.0.1", 9092, "127.0.0.1", 9092, None)], 0, 3)),
    ({"listeners": "PLAINTEXT://0.0.0.0:19092", "advertised.listeners": "PLAINTEXT://gw.example:29092",
      "coordinator.gateway.broker.port.start": "19100", "coordinator.gateway.broker.id.lowest": "1",
      "coordinator.gateway.broker.ports": "5"},
     PortSettings([("kafka-1", 9092), ("kafka-2", 9092)],
                  [ListenerAddress("PLAINTEXT", "0.0.0.0", 19092, "gw.example", 29092, 19100)], 1, 5)),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9192",
      "listener.name.sasl_ssl.coordinator.gateway.broker.port.start": "9193"},
     PortSettings([("kafka-1", 9092), ("kafka-2", 9092)],
                  [ListenerAddress("PLAINTEXT", "127.0.0.1", 9092, "127.0.0.1", 9092, None),
                   ListenerAddress("SASL_SSL", "127.0.0.1", 9192, "127.0.0.1", 9192, 9193)], 0, 3)),
])
def test_listeners_and_their_broker_ports(keys: dict[str, str], expected: PortSettings) -> None:
    assert port_settings({**UPSTREAM, **keys}.get) == expected


@pytest.mark.parametrize(("keys", "named"), [
    ({"bootstrap.servers": ""}, "bootstrap.servers"),
    ({"bootstrap.servers": "kafka-1"}, "bootstrap.servers"),
    ({"listeners": "127.0.0.1:9092"}, "listeners"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093"}, "listeners"),
    ({"advertised.listeners": "OTHER://gw:9092"}, "advertised.listeners"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9192"},
     "listener.name.ssl.coordinator.gateway.broker.port.start"),
    ({"coordinator.gateway.broker.port.start": "70000"}, "coordinator.gateway.broker.port.start"),
    ({"coordinator.gateway.broker.id.lowest": "-1"}, "coordinator.gateway.broker.id.lowest"),
    ({"coordinator.gateway.broker.ports": "three"}, "coordinator.gateway.broker.ports"),
    ({"coordinator.gateway.broker.ports": "0"}, "coordinator.gateway.broker.ports"),
])
def test_a_bad_value_is_refused_naming_its_key(keys: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=f"^{named}:"):
        port_settings({**UPSTREAM, **keys}.get)
