"""The gateway against what broke it (issue 18), over real sockets with the in-process engine: each cause on
its own, seen as a client sees it."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from kafka.protocol.api_key import ApiKey

from kafka_gateway.frames import frame
from kafka_gateway.runner import BackgroundGateway, loopback_gateway

from .wire import RawClient, request

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def gateway(kafka_bootstrap: str) -> Iterator[BackgroundGateway]:
    with loopback_gateway(kafka_bootstrap, "local", {"group.initial.rebalance.delay.ms": 0}) as running:
        yield running


def received_until_closed(sock: socket.socket) -> bytes:
    """Everything the gateway sends until it closes the connection (a time-out fails the test)."""
    received = b""
    while data := sock.recv(65536):
        received += data
    return received


def compact_string(text: bytes) -> bytes:
    """A compact (flexible-version) string: unsigned varint of length + 1, then the bytes."""
    length, varint = len(text) + 1, b""
    while length >= 0x80:
        varint += bytes([length & 0x7F | 0x80])
        length >>= 7
    return varint + bytes([length]) + text


def test_a_string_longer_than_32767_bytes_closes_the_connection_as_kafkas_reader_does(
        gateway: BackgroundGateway) -> None:
    client = RawClient(gateway.address)
    heartbeat = request(ApiKey.Heartbeat, 4, 1, {"group_id": "g", "generation_id": 1, "member_id": "m"})
    # Heartbeat v4 (flexible): size, header (api key, version, correlation id, client id, no tags), then the group
    # id as a compact string: swap it for one of 32,768 bytes.
    header_end = 4 + 8 + 2 + len("test-client") + 1
    assert heartbeat[header_end:header_end + 2] == compact_string(b"g")
    body = compact_string(b"g" * 32_768) + heartbeat[header_end + 2:]
    client.sock.sendall(frame(heartbeat[4:header_end] + body))
    assert received_until_closed(client.sock) == b""
    client.close()


def crashes(gateway: BackgroundGateway) -> int:
    """Failures the gateway met that no rule handles (each one a traceback in its log)."""
    server = gateway.server
    assert server is not None
    return int(gateway.call(lambda: server.crashes + server.gateway.counters["crashes"]))


def test_find_coordinator_v4_with_null_keys_closes_the_connection_as_kafkas_reader_does(
        gateway: BackgroundGateway) -> None:
    crashes_before = crashes(gateway)
    client = RawClient(gateway.address)
    client.sock.sendall(request(ApiKey.FindCoordinator, 4, 1, {"key_type": 0, "coordinator_keys": None}))
    assert received_until_closed(client.sock) == b""
    client.close()
    assert crashes(gateway) == crashes_before
