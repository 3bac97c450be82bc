"""A request frame as large as the gateway accepts holds no other connection up (PROTOCOL.md section 9's last
point): it is decoded off the event loop while another connection's group keeps heartbeating."""

from __future__ import annotations

import dataclasses
import statistics
import struct
import threading
import time

import pytest
from kafka.protocol.api_key import ApiKey

from kafka_gateway.runner import BackgroundGateway, GatewayOptions, coordinator_limits, host_ports

from .wire import RawClient

pytestmark = pytest.mark.kafka

# The largest frame this test's gateway accepts (socket.request.max.bytes): a SyncGroup of this size decodes in
# about 3 s on the shared machine (kafka.protocol reads its 300,000 assignments at about 1.3 MB/s).
MAX_FRAME_BYTES = 4 << 20
ENTRY_BYTES = 14  # an assignment: member id "m%07d" (int16 length + 8 bytes), empty assignment (int32 length)


def string(text: bytes) -> bytes:
    return struct.pack(">h", len(text)) + text


def largest_sync_group(correlation_id: int) -> bytes:
    """A SyncGroup v0 from a member the coordinator does not know, with as many assignments as fit in the largest
    frame (built by hand: kafka.protocol would take longer to encode it than the gateway to decode it)."""
    header = struct.pack(">hhi", ApiKey.SyncGroup, 0, correlation_id) + string(b"large-client")
    fields = string(b"large-sync") + struct.pack(">i", 1) + string(b"member-x")
    entries = (MAX_FRAME_BYTES - len(header) - len(fields) - 4) // ENTRY_BYTES
    payload = (header + fields + struct.pack(">i", entries)
               + b"".join(string(b"m%07d" % i) + b"\x00\x00\x00\x00" for i in range(entries)))
    return struct.pack(">i", len(payload)) + payload


def heartbeats(client: RawClient, member: dict[str, object], until: threading.Event) -> list[float]:
    """Heartbeat after heartbeat of a member of a Stable group until `until` is set: each round trip (s)."""
    round_trips = []
    while not until.is_set():
        started = time.monotonic()
        assert client.call(ApiKey.Heartbeat, 3, member)["error_code"] == 0
        round_trips.append(time.monotonic() - started)
    return round_trips


def stable_member(client: RawClient) -> dict[str, object]:
    """Joins a static member to a group of its own and syncs it: its Heartbeat body."""
    joined = client.call(ApiKey.JoinGroup, 5, {
        "group_id": "heartbeating", "session_timeout_ms": 30_000, "rebalance_timeout_ms": 30_000, "member_id": "",
        "group_instance_id": "hb-1", "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": ""}]})
    assert joined["error_code"] == 0
    member = {"group_id": "heartbeating", "generation_id": joined["generation_id"], "member_id": joined["member_id"],
              "group_instance_id": "hb-1"}
    synced = client.call(ApiKey.SyncGroup, 3, {**member, "assignments": [
        {"member_id": joined["member_id"], "assignment": ""}]})
    assert synced["error_code"] == 0
    return member


def test_the_largest_frame_is_decoded_while_another_connections_heartbeats_are_answered(kafka_bootstrap: str) -> None:
    settings = {"group.initial.rebalance.delay.ms": 0}
    limits = dataclasses.replace(coordinator_limits("local", settings), max_frame_bytes=MAX_FRAME_BYTES)
    options = GatewayOptions(listen=("127.0.0.1", 0), upstream=host_ports(kafka_bootstrap), engine="local",
                             settings=settings, status_interval_s=0, limits=limits)
    frame = largest_sync_group(1)
    assert len(frame) - 4 > MAX_FRAME_BYTES - ENTRY_BYTES
    with BackgroundGateway(options) as gateway:
        other = RawClient(gateway.address)
        member = stable_member(other)
        quiet, quiet_done = [], threading.Event()
        timer = threading.Timer(1.0, quiet_done.set)
        timer.start()
        quiet = heartbeats(other, member, quiet_done)

        large = RawClient(gateway.address, timeout_s=120)
        answered = threading.Event()
        took: list[float] = []

        def send_large() -> None:
            started = time.monotonic()
            large.sock.sendall(frame)
            while not large.frames:
                large.frames += large.splitter.feed(large.sock.recv(65536))
            took.append(time.monotonic() - started)
            answered.set()

        sender = threading.Thread(target=send_large)
        sender.start()
        during = heartbeats(other, member, answered)
        sender.join()
        large.close()
        other.close()
    [large_s] = took
    print(f"largest frame ({len(frame) / 1e6:.1f} MB) answered in {large_s:.2f} s; heartbeat round trips: quiet "
          f"median {statistics.median(quiet) * 1000:.1f} ms, meanwhile median {statistics.median(during) * 1000:.1f} "
          f"ms, longest {max(during) * 1000:.0f} ms over {len(during)}")
    assert large_s > 0.5, "the frame was decoded too quickly to show anything"
    # Decoded on the event loop, one heartbeat waits for the whole decode (most of the request's time). Off the loop,
    # the loop shares the interpreter with the decoding thread: heartbeats slow down by scheduling, never by all of
    # it (a quarter leaves room for a loaded machine).
    assert max(during) < large_s / 4
    assert statistics.median(during) < max(20 * statistics.median(quiet), large_s / 20)
