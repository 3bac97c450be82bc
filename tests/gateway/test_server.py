"""The gateway over real sockets, in front of the embedded broker: the frame fuzz, the proxy path, the CLI."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.api_key import ApiKey

from coordinator_job.broker import EmbeddedBroker, create_topics, free_loopback_port
from kafka_gateway.runner import BackgroundGateway, GatewayOptions, host_port

from .wire import RawClient, request

pytestmark = pytest.mark.kafka
FUZZ_CONNECTIONS = 1500
JOIN = {"group_id": "fuzz-good", "session_timeout_ms": 6000, "rebalance_timeout_ms": 6000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": "AA=="}]}
SEEDS = [
    request(ApiKey.ApiVersions, 3, 1, {"client_software_name": "fuzz", "client_software_version": "1"}),
    request(ApiKey.Metadata, 12, 2, {"topics": None}),
    request(ApiKey.FindCoordinator, 6, 3, {"key_type": 0, "coordinator_keys": ["g"]}),
    request(ApiKey.JoinGroup, 9, 4, {**JOIN, "group_id": "fuzz"}),
    request(ApiKey.SyncGroup, 5, 5, {"group_id": "fuzz", "generation_id": 1, "member_id": "m",
                                     "protocol_type": "consumer", "protocol_name": "range", "assignments": []}),
    request(ApiKey.Heartbeat, 4, 6, {"group_id": "fuzz", "generation_id": 1, "member_id": "m"}),
    request(ApiKey.LeaveGroup, 5, 7, {"group_id": "fuzz", "members": [{"member_id": "m"}]}),
    request(ApiKey.OffsetCommit, 8, 8, {"group_id": "fuzz", "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "committed_offset": 1}]}]}),
    request(ApiKey.OffsetFetch, 8, 9, {"groups": [{"group_id": "fuzz", "topics": None}]}),
    request(ApiKey.DescribeGroups, 5, 10, {"groups": ["fuzz", "other"]}),
    request(ApiKey.ListGroups, 5, 11, {}),
]


def hostile_frames(rng: random.Random) -> list[bytes]:
    """One connection's worth of frames: a seed request mutated, cut, extended, resized, or noise."""
    frames = []
    for _ in range(rng.randint(1, 3)):
        base = bytearray(rng.choice(SEEDS))
        kind = rng.randrange(7)
        if kind == 0:  # bytes flipped after the size
            for _ in range(rng.randint(1, 6)):
                base[rng.randrange(4, len(base))] = rng.randrange(256)
        elif kind == 1:  # body cut short, size consistent
            base = bytearray((len(base) - 4 - (cut := rng.randint(1, len(base) - 5))).to_bytes(4, "big")
                             + base[4:len(base) - cut])
        elif kind == 2:  # garbage appended inside the frame
            extra = rng.randbytes(rng.randint(1, 32))
            base = bytearray((len(base) - 4 + len(extra)).to_bytes(4, "big") + base[4:] + extra)
        elif kind == 3:  # a size that lies: huge, negative, zero, or a little off
            size = rng.choice([2**31 - 1, 2**30, -1, -(2**31), 0, len(base) - 4 + rng.randint(-3, 3)])
            base[0:4] = size.to_bytes(4, "big", signed=True)
        elif kind == 4:  # an unknown, unserved or out-of-range API key or version
            base[4:6] = rng.choice([999, -1, 68, 69, 76, 42, 60, 17]).to_bytes(2, "big", signed=True)
        elif kind == 5:
            base[6:8] = rng.choice([99, -1, 32767]).to_bytes(2, "big", signed=True)
        else:  # noise
            base = bytearray(rng.randbytes(rng.randint(0, 40)))
        frames.append(bytes(base))
    return frames


def send_and_drain(address: tuple[str, int], payload: bytes) -> None:
    """Sends `payload`, closes the write side, reads until the gateway closes (bounded)."""
    with socket.create_connection(address, timeout=10) as sock:
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
        except (ConnectionResetError, BrokenPipeError):
            pass


@pytest.fixture(scope="module")
def fuzz_broker() -> Iterator[str]:
    """A broker of its own: fuzzed frames of proxied APIs reach it, and must not disturb other tests."""
    with EmbeddedBroker() as broker:
        yield broker.bootstrap_servers


def test_frame_fuzz_closes_bad_connections_only_and_never_crashes_the_gateway(fuzz_broker: str) -> None:
    options = GatewayOptions(listen=("127.0.0.1", 0), upstream=host_port(fuzz_broker), engine="local",
                             settings={"group.initial.rebalance.delay.ms": 0}, status_interval_s=0)
    rng = random.Random(20_240_610)
    batches = [hostile_frames(rng) for _ in range(FUZZ_CONNECTIONS)]
    with BackgroundGateway(options) as gateway:
        address = host_port(gateway.address)
        broker_port = gateway.listening[0].scheme.start  # the embedded broker's one node
        good = RawClient(gateway.address)
        done = threading.Event()
        good_round_trips = 0

        def fuzz() -> None:
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda frames: send_and_drain(address, b"".join(frames)), batches))
            done.set()

        fuzzer = threading.Thread(target=fuzz)
        fuzzer.start()
        while not done.is_set() or good_round_trips == 0:
            assert good.call(ApiKey.ApiVersions, 3, {})["error_code"] == 0
            assert good.call(ApiKey.Metadata, 12, {"topics": None})["brokers"][0]["port"] == broker_port
            assert good.call(ApiKey.FindCoordinator, 6, {"key_type": 0, "coordinator_keys": ["g"]})[
                "coordinators"][0]["port"] == broker_port
            assert good.call(ApiKey.JoinGroup, 9, JOIN)["error_code"] == 79  # MEMBER_ID_REQUIRED
            good_round_trips += 1
        fuzzer.join()
        good.close()
        server = gateway.server
        assert server is not None
        counters = gateway.call(lambda: dict(server.gateway.counters))
        crashes = gateway.call(lambda: server.crashes)
        still_accepting = RawClient(gateway.address)
        assert still_accepting.call(ApiKey.ApiVersions, 0, {})["error_code"] == 0
        still_accepting.close()
    frames_sent = sum(len(frames) for frames in batches)
    bad_closed = sum(v for k, v in counters.items() if k.startswith("closed_"))
    print(f"\nframe fuzz: {frames_sent} hostile frames on {len(batches)} connections, {counters['frames']} whole "
          f"frames read, {bad_closed} connections closed for bad input, {good_round_trips} good round trips "
          f"meanwhile, {crashes} crashes")
    assert crashes == 0
    assert bad_closed > FUZZ_CONNECTIONS // 2
    assert counters["connections_opened"] == FUZZ_CONNECTIONS + 1  # and the good one


def test_a_consumer_and_a_producer_without_a_group_go_through_the_gateway(kafka_bootstrap: str,
                                                                            unique_topic: object) -> None:
    topic = unique_topic("proxied")  # type: ignore[operator]
    create_topics(kafka_bootstrap, [(topic, 2, False)])
    options = GatewayOptions(listen=("127.0.0.1", 0), upstream=host_port(kafka_bootstrap), engine="local",
                             status_interval_s=0)
    with BackgroundGateway(options) as gateway:
        producer = KafkaProducer(bootstrap_servers=gateway.address, acks="all")
        for i in range(100):
            producer.send(topic, str(i).encode(), partition=i % 2)
        producer.send(topic, b"fire-and-forget", partition=0)
        producer.flush(10)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=gateway.address, group_id=None, enable_auto_commit=False)
        partitions = [TopicPartition(topic, p) for p in (0, 1)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < 101 and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                values += [r.value for r in records]
        brokers = {(b.host, b.port) for b in consumer._client.cluster.brokers()}
        consumer.close()
    assert sorted(values) == sorted([str(i).encode() for i in range(100)] + [b"fire-and-forget"])
    assert brokers == {("127.0.0.1", gateway.listening[0].scheme.start)}


def test_the_gateway_command_serves_and_stops_cleanly_on_sigterm(kafka_bootstrap: str) -> None:
    port = free_loopback_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "coordinator_cli", "gateway", "--listen", f"127.0.0.1:{port}", "--bootstrap-servers",
         kafka_bootstrap, "--engine", "local", "--status-interval", "0.5"],
        stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(["src", "."])})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                client = RawClient(f"127.0.0.1:{port}")
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, "the gateway did not start"
                time.sleep(0.1)
        # The embedded broker's one node, at the port after the bootstrap port.
        assert client.call(ApiKey.FindCoordinator, 2, {"key": "g", "key_type": 0})["port"] == port + 1
        client.close()
        time.sleep(1.2)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    assert "gateway: connections=" in stderr and "local=1" in stderr
    assert "gateway stopped:" in stderr
