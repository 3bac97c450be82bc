"""What the largest request frame costs the gateway's other connections (PROTOCOL.md section 9's last point).

    python -m coordinator_lab.large_frame --embedded              # a 100 MiB frame (Kafka's default maximum)
    python -m coordinator_lab.large_frame --embedded --mib 24 --decode-on-loop

A gateway (`--engine local`, socket.request.max.bytes set to the frame's size) runs in this process in front of
a broker. One connection forms a static group and heartbeats; once its quiet round trips are measured, another
connection sends a SyncGroup frame of exactly the maximum size (a member the coordinator does not know, with as
many assignments as fit: kafka.protocol reads them at about 1.3 MB/s), and the heartbeats go on until it is
answered. Prints the frame's time and the heartbeats' round trips, quiet and meanwhile. `--decode-on-loop` decodes
every frame on the event loop (the threshold above the frame), for the figures before the fix.
"""

from __future__ import annotations

import argparse
import dataclasses
import socket
import statistics
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_gateway.apis import request_class, response_class
from kafka_gateway.codec import body_to_message, message_to_body
from kafka_gateway.frames import FrameSplitter
from kafka_gateway.runner import BackgroundGateway, GatewayOptions, coordinator_limits, host_ports
from kafka_jvm.embedded import broker_or_embedded

ENTRY_BYTES = 14  # an assignment: member id "m%07d" (int16 length + 8 bytes), an empty assignment (int32 length)
QUIET_S = 1.0
ENGINE = {"group.initial.rebalance.delay.ms": 0}


def _string(text: bytes) -> bytes:
    return struct.pack(">h", len(text)) + text


def largest_sync_group(max_frame_bytes: int, correlation_id: int = 1) -> bytes:
    """A framed SyncGroup v0 of a member the coordinator does not know, as large as `max_frame_bytes` allows (built
    by hand: kafka.protocol would take longer to encode it than the gateway to decode it)."""
    header = struct.pack(">hhi", ApiKey.SyncGroup, 0, correlation_id) + _string(b"large-client")
    fields = _string(b"large-sync") + struct.pack(">i", 1) + _string(b"member-x")
    entries = (max_frame_bytes - len(header) - len(fields) - 4) // ENTRY_BYTES
    payload = (header + fields + struct.pack(">i", entries)
               + b"".join(_string(b"m%07d" % i) + b"\x00\x00\x00\x00" for i in range(entries)))
    return struct.pack(">i", len(payload)) + payload


class _Connection:
    """One blocking client connection, a request at a time."""

    def __init__(self, address: str, timeout_s: float) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.splitter = FrameSplitter()
        self.correlation_id = 0

    def next_frame(self) -> bytes:
        while True:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the gateway closed the connection")
            frames = self.splitter.feed(data)
            if frames:
                return frames[0]

    def call(self, api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.correlation_id += 1
        message = body_to_message(request_class(api_key), version, body)
        message.with_header(correlation_id=self.correlation_id, client_id="large-frame-bench")
        self.sock.sendall(bytes(message.encode(header=True, framed=True)))
        return message_to_body(response_class(api_key).decode(self.next_frame(), version=version, header=True),
                                version)


def _stable_member(connection: _Connection) -> dict[str, Any]:
    """Joins a static member to a group of its own and syncs it: its Heartbeat v3 body."""
    joined = connection.call(ApiKey.JoinGroup, 5, {
        "group_id": "heartbeating", "session_timeout_ms": 30_000, "rebalance_timeout_ms": 30_000, "member_id": "",
        "group_instance_id": "hb-1", "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": ""}]})
    member = {"group_id": "heartbeating", "generation_id": joined["generation_id"], "member_id": joined["member_id"],
              "group_instance_id": "hb-1"}
    synced = connection.call(ApiKey.SyncGroup, 3, {**member, "assignments": [
        {"member_id": joined["member_id"], "assignment": ""}]})
    if joined["error_code"] or synced["error_code"]:
        raise RuntimeError(f"the heartbeating member did not join: {joined['error_code']}, {synced['error_code']}")
    return member


def _heartbeats(connection: _Connection, member: dict[str, Any], until: threading.Event,
                errors: list[int]) -> list[float]:
    """Heartbeat after heartbeat until `until` is set: each round trip (s); error answers added to `errors` (the
    member's session ran out while its heartbeats waited: UNKNOWN_MEMBER_ID)."""
    round_trips = []
    while not until.is_set():
        started = time.monotonic()
        answer = connection.call(ApiKey.Heartbeat, 3, member)
        round_trips.append(time.monotonic() - started)
        if answer["error_code"]:
            errors.append(answer["error_code"])
    return round_trips


@dataclass(frozen=True)
class Figures:
    frame_bytes: int
    large_s: float  # from the frame's first byte sent to its answer read
    quiet: list[float]  # heartbeat round trips before it (s)
    during: list[float]  # heartbeat round trips while it was served (s)
    errors: list[int]  # error codes of the heartbeats answered with one

    def line(self) -> str:
        return (f"frame {self.frame_bytes / 2**20:.1f} MiB answered in {self.large_s:.2f} s; heartbeat round trips: "
                f"quiet median {statistics.median(self.quiet) * 1000:.1f} ms, meanwhile median "
                f"{statistics.median(self.during) * 1000:.1f} ms, longest {max(self.during) * 1000:.0f} ms "
                f"({len(self.during)} heartbeats, {len(self.errors)} answered with an error{self._codes()})")

    def _codes(self) -> str:
        return f": {sorted(set(self.errors))}" if self.errors else ""


def measure(bootstrap_servers: str, max_frame_bytes: int, decode_on_loop: bool = False) -> Figures:
    """A gateway in front of `bootstrap_servers` whose largest frame is `max_frame_bytes`: the figures."""
    limits = coordinator_limits("local", ENGINE)
    limits = dataclasses.replace(limits, max_frame_bytes=max_frame_bytes,
                                 decode_off_loop_bytes=max_frame_bytes + 1 if decode_on_loop
                                 else limits.decode_off_loop_bytes)
    options = GatewayOptions(listen=("127.0.0.1", 0), upstream=host_ports(bootstrap_servers), engine="local",
                             settings=ENGINE, status_interval_s=0, limits=limits)
    frame = largest_sync_group(max_frame_bytes)
    with BackgroundGateway(options) as gateway:
        other = _Connection(gateway.address, timeout_s=60)
        member = _stable_member(other)
        quiet_over = threading.Event()
        threading.Timer(QUIET_S, quiet_over.set).start()
        errors: list[int] = []
        quiet = _heartbeats(other, member, quiet_over, errors)
        large = _Connection(gateway.address, timeout_s=600)
        answered = threading.Event()
        took: list[float] = []

        def send_large() -> None:
            started = time.monotonic()
            try:
                large.sock.sendall(frame)
                large.next_frame()
                took.append(time.monotonic() - started)
            finally:
                answered.set()

        sender = threading.Thread(target=send_large, name="large-frame")
        sender.start()
        during = _heartbeats(other, member, answered, errors)
        sender.join()
        large.sock.close()
        other.sock.close()
    if not took:
        raise RuntimeError("the large frame was not answered")
    return Figures(len(frame), took[0], quiet, during, errors)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coordinator_lab.large_frame", description=__doc__)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--embedded", action="store_true", help="start the embedded broker")
    where.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="a running broker")
    parser.add_argument("--mib", type=float, default=100, help="the frame's size in MiB (default: %(default)s)")
    parser.add_argument("--decode-on-loop", action="store_true", help="decode every frame on the event loop")
    args = parser.parse_args(argv)
    with broker_or_embedded(args.bootstrap_servers) as bootstrap:
        print(measure(bootstrap, int(args.mib * 2**20), args.decode_on_loop).line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
