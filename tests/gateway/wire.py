"""Test helpers: a client's side of the Kafka wire, built with kafka.protocol (no network)."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_gateway.apis import request_class, response_class
from kafka_gateway.chain import ConnectionContext, Port, Unit
from kafka_gateway.codec import body_to_message, message_to_body
from kafka_gateway.frames import FrameSplitter
from kafka_gateway.gateway import (
    Action,
    AnswerObserver,
    CloseClient,
    Gateway,
    Limits,
    ToClient,
    ToCoordinator,
    ToUpstream,
)
from kafka_gateway.port_mapping import PortMapping, PortScheme, UpstreamDirectory

# A gateway whose bootstrap port is 19092, in front of an upstream of nodes 1, 2 and 3 (ports 19093-19095).
SCHEME = PortScheme(host="gateway.test", bootstrap_port=19092, start=19093, lowest=1, count=3)
UPSTREAM_NODES = {1: ("kafka-1.internal", 9092), 2: ("kafka-2.internal", 9092), 3: ("kafka-3.internal", 9092)}
REPLY_TO = "gateway-test-1"
# What an upstream broker (a Kafka 3.x node) might advertise, KIP-848 and DescribeCluster included.
UPSTREAM_VERSIONS = {
    0: (0, 11), 1: (0, 16), 2: (0, 8), 3: (0, 12), 8: (0, 9), 9: (0, 9), 10: (0, 6), 11: (0, 9), 12: (0, 4),
    13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (0, 7), 20: (0, 6), 22: (0, 5),
    28: (0, 4), 32: (0, 4), 36: (0, 2), 42: (0, 2), 60: (0, 1), 68: (0, 0), 69: (0, 0), 76: (0, 1),
}
T0 = 1_700_000_000_000


def upstream_directory() -> UpstreamDirectory:
    return UpstreamDirectory(UPSTREAM_NODES[1], dict(UPSTREAM_NODES))


def port(node_id: int | None, directory: UpstreamDirectory | None = None) -> Port:
    """The gateway's port of `node_id` (None: its bootstrap port), with the port-mapping unit."""
    known = directory or upstream_directory()

    def port_mapping(context: ConnectionContext) -> Unit:
        return PortMapping(context, SCHEME, known)

    return Port("PLAINTEXT", node_id, [port_mapping])


def make_gateway(limits: Limits | None = None, on_answer: AnswerObserver | None = None,
                 directory: UpstreamDirectory | None = None) -> Gateway:
    """A gateway whose connections open on its bootstrap port unless they name another."""
    return Gateway(port(None, directory), UPSTREAM_VERSIONS, REPLY_TO, limits, on_answer)


def request(api_key: ApiKey, version: int, correlation_id: int, body: dict[str, Any],
            client_id: str | None = "test-client") -> bytes:
    """A framed request, header included, as a client would send it."""
    message = body_to_message(request_class(api_key), version, body)
    message.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(message.encode(header=True, framed=True))


def response(api_key: ApiKey, version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
    """A framed response, as the upstream broker would send it."""
    message = body_to_message(response_class(api_key), version, body)
    message.with_header(correlation_id=correlation_id)
    return bytes(message.encode(header=True, framed=True))


def decode_responses(data: bytes, expected: Sequence[tuple[ApiKey, int]]) -> list[tuple[int, dict[str, Any]]]:
    """Splits a client's received bytes into responses of the expected APIs and versions, in order:
    [(correlation id, body)]."""
    frames = FrameSplitter().feed(data)
    assert len(frames) == len(expected), f"{len(frames)} responses, expected {len(expected)}"
    decoded = []
    for payload, (api_key, version) in zip(frames, expected, strict=True):
        message = response_class(api_key).decode(payload, version=version, header=True)
        decoded.append((message.header.correlation_id, message_to_body(message, version)))
    return decoded


def to_client(actions: Sequence[Action], connection: int | None = None) -> bytes:
    return b"".join(a.data for a in actions if isinstance(a, ToClient)
                    and (connection is None or a.connection == connection))


def to_upstream(actions: Sequence[Action]) -> bytes:
    return b"".join(a.data for a in actions if isinstance(a, ToUpstream))


def envelopes(actions: Sequence[Action]) -> list[dict[str, Any]]:
    return [a.envelope for a in actions if isinstance(a, ToCoordinator)]


def closes(actions: Sequence[Action]) -> list[CloseClient]:
    return [a for a in actions if isinstance(a, CloseClient)]


def answer(request_envelope: dict[str, Any], body: dict[str, Any], reply_to: str = REPLY_TO) -> dict[str, Any]:
    """The coordinator's response envelope to `request_envelope`."""
    return {"api": request_envelope["api"], "version": request_envelope["version"],
            "correlation_id": request_envelope["correlation_id"], "client_id": request_envelope["client_id"],
            "reply_to": reply_to, "group_id": None, "timestamp_ms": request_envelope["timestamp_ms"], "body": body}


class RawClient:
    """A blocking socket speaking the Kafka wire with kafka.protocol messages, one request at a time."""

    def __init__(self, address: str, timeout_s: float = 10.0) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.splitter = FrameSplitter()
        self.frames: list[bytes] = []
        self.correlation_id = 0

    def call(self, api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.correlation_id += 1
        self.sock.sendall(request(api_key, version, self.correlation_id, body))
        while not self.frames:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the gateway closed the connection")
            self.frames += self.splitter.feed(data)
        message = response_class(api_key).decode(self.frames.pop(0), version=version, header=True)
        assert message.header.correlation_id == self.correlation_id
        return message_to_body(message, version)

    def close(self) -> None:
        self.sock.close()
