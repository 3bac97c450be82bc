"""The gateway against what broke it (issue 18), over real sockets with the in-process engine: each cause on
its own, seen as a client sees it."""

from __future__ import annotations

import base64
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.api_key import ApiKey

from coordinator_job.broker import create_topics
from kafka_gateway.coordinators import _PollThread
from kafka_gateway.frames import FrameSplitter, frame
from kafka_gateway.runner import BackgroundGateway, loopback_gateway

from .wire import RawClient, decode_responses, request

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


def join(group_id: str, instance_id: str | None, rebalance_timeout_ms: int = 10_000) -> dict[str, object]:
    return {"group_id": group_id, "session_timeout_ms": 10_000, "rebalance_timeout_ms": rebalance_timeout_ms,
            "member_id": "", "group_instance_id": instance_id, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": "AA=="}]}


def test_find_coordinator_v4_with_null_keys_closes_the_connection_as_kafkas_reader_does(
        gateway: BackgroundGateway) -> None:
    crashes_before = crashes(gateway)
    alone, queued = RawClient(gateway.address), RawClient(gateway.address)
    null_keys = request(ApiKey.FindCoordinator, 4, 2, {"key_type": 0, "coordinator_keys": None})
    alone.sock.sendall(null_keys)
    assert received_until_closed(alone.sock) == b""
    # Behind a JoinGroup (the channel muted while the coordinator has it): the JoinGroup is answered first, as a
    # broker reads the next request only after answering the previous one.
    queued.sock.sendall(request(ApiKey.JoinGroup, 5, 1, join("null-keys", "i-1")) + null_keys)
    [(correlation_id, joined)] = decode_responses(received_until_closed(queued.sock), [(ApiKey.JoinGroup, 5)])
    assert (correlation_id, joined["error_code"]) == (1, 0)
    assert crashes(gateway) == crashes_before


def test_an_answer_that_does_not_fit_the_wire_is_answered_unknown_server_error_and_the_connection_goes_on(
        gateway: BackgroundGateway) -> None:
    client = RawClient(gateway.address)
    # A static member may have an instance id of 32,767 characters; its member id (the instance id, "-", a UUID)
    # then fits no answer that carries it, as Kafka's writer refuses strings over 32,767 bytes.
    joined = client.call(ApiKey.JoinGroup, 5, join("long-member-id", "i" * 32_767))
    assert joined["error_code"] == -1  # UNKNOWN_SERVER_ERROR
    [described] = client.call(ApiKey.DescribeGroups, 0, {"groups": ["long-member-id"]})["groups"]
    assert (described["group_id"], described["error_code"]) == ("long-member-id", -1)
    [other] = client.call(ApiKey.DescribeGroups, 0, {"groups": ["another-group"]})["groups"]
    assert (other["error_code"], other["group_state"]) == (0, "Dead")
    client.close()


def test_the_engines_clock_goes_on_after_an_answer_it_delivers_does_not_fit_the_wire(
        kafka_bootstrap: str, caplog: pytest.LogCaptureFixture) -> None:
    with loopback_gateway(kafka_bootstrap, "local", {"group.initial.rebalance.delay.ms": 300}) as gateway:
        client = RawClient(gateway.address)
        # Both joins are answered by the engine's clock, when the group's initial rebalance delay is over.
        assert client.call(ApiKey.JoinGroup, 5, join("clock-long", "i" * 32_767))["error_code"] == -1
        assert client.call(ApiKey.JoinGroup, 5, join("clock-after", "i-1"))["error_code"] == 0
        client.close()
    assert "does not fit the wire" in caplog.text


def assert_no_error(answer: dict[str, object]) -> None:
    assert answer["error_code"] == 0


def answered_meanwhile(gateway: BackgroundGateway, call: Callable[[], None]) -> tuple[float, list[float]]:
    """Runs `call` on a thread; meanwhile another connection sends ApiVersions after ApiVersions. The seconds
    `call` took, and each ApiVersions' round trip."""
    took: list[float] = []

    def timed() -> None:
        started = time.monotonic()
        call()
        took.append(time.monotonic() - started)

    other = RawClient(gateway.address)
    caller = threading.Thread(target=timed)
    caller.start()
    round_trips: list[float] = []
    while caller.is_alive():
        started = time.monotonic()
        assert other.call(ApiKey.ApiVersions, 3, {})["error_code"] == 0
        round_trips.append(time.monotonic() - started)
    caller.join()
    other.close()
    [seconds] = took  # absent if `call` failed
    return seconds, round_trips


def subscription(topics: int) -> str:
    """Consumer-protocol subscription metadata (v0) to `topics` topics, base64 as in an envelope."""
    names = [b"t%d" % i for i in range(topics)]
    raw = struct.pack(">hi", 0, topics) + b"".join(struct.pack(">h", len(n)) + n for n in names) + b"\xff" * 4
    return base64.b64encode(raw).decode()


def test_a_slow_engine_call_does_not_hold_up_other_connections(gateway: BackgroundGateway) -> None:
    # A real slow call: at the end of the join phase the engine reads every member's subscription, here one of
    # 400,000 topics (about 2 s on the shared machine).
    slow_join = {"group_id": "huge-subscription", "session_timeout_ms": 600_000, "member_id": "",
                 "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": subscription(400_000)}]}
    slow = RawClient(gateway.address, timeout_s=120)
    slow_call_s, round_trips = answered_meanwhile(
        gateway, lambda: assert_no_error(slow.call(ApiKey.JoinGroup, 0, slow_join)))
    slow.close()
    assert slow_call_s > 0.25, "the engine call was too quick to show anything"
    print(f"slow call {slow_call_s:.2f} s, {len(round_trips)} round trips meanwhile, longest {max(round_trips):.3f} s")
    # Were the engine on the event loop, a round trip begun as the call starts would wait for all of it.
    assert max(round_trips) < slow_call_s / 2


def test_a_join_with_a_rebalance_timeout_under_the_initial_delay_waits_for_the_delay(kafka_bootstrap: str) -> None:
    with loopback_gateway(kafka_bootstrap, "local", {"group.initial.rebalance.delay.ms": 3_000}) as gateway:
        client = RawClient(gateway.address)
        started = time.monotonic()
        joined = client.call(ApiKey.JoinGroup, 5, join("quick-rebalance", "i-1", rebalance_timeout_ms=500))
        assert joined["error_code"] == 0  # not COORDINATOR_NOT_AVAILABLE (15) from the gateway at 2.5 s
        assert time.monotonic() - started >= 3.0
        client.close()


def test_requests_pipelined_behind_a_parked_join_are_all_answered_in_order(kafka_bootstrap: str) -> None:
    # The gateway reads no more of a connection while a group request is with the coordinator, as a broker
    # mutes it: the client's requests wait in the sockets' buffers (before: over 1,000 closed the connection).
    with loopback_gateway(kafka_bootstrap, "local", {"group.initial.rebalance.delay.ms": 500}) as gateway:
        client = RawClient(gateway.address, timeout_s=30)
        client.sock.sendall(request(ApiKey.JoinGroup, 5, 0, join("parked", "i-1"))
                            + b"".join(request(ApiKey.ApiVersions, 0, i, {}) for i in range(1, 5_001)))
        splitter, answers = FrameSplitter(), []
        while len(answers) < 5_001:
            data = client.sock.recv(1 << 16)
            assert data, f"closed after {len(answers)} answers"
            answers += splitter.feed(data)
        client.close()
    assert [int.from_bytes(answer[:4], "big") for answer in answers] == list(range(5_001))


def test_the_engine_keeps_no_record_of_commits_nobody_reads(gateway: BackgroundGateway) -> None:
    client = RawClient(gateway.address)
    for offset in range(3):
        committed = client.call(ApiKey.OffsetCommit, 2, {
            "group_id": "offsets-only", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset}]}]})
        assert committed["topics"][0]["partitions"][0]["error_code"] == 0
    client.close()
    server = gateway.server
    assert server is not None
    kept = server.coordinator.inspect(lambda engine: len(engine.offset_changes))  # type: ignore[attr-defined]
    assert kept.result(10) == 0


def test_a_describe_groups_of_20000_groups_is_answered_whole_while_other_connections_are_answered(
        gateway: BackgroundGateway) -> None:
    # One envelope per group, a window of them with the engine at a time, each group's answer encoded as it comes:
    # no step of the event loop and no queue of the engine grows with the request.
    groups = [f"many-{i}" for i in range(20_000)]
    big = RawClient(gateway.address, timeout_s=120)
    described: list[dict[str, object]] = []
    took, round_trips = answered_meanwhile(
        gateway, lambda: described.extend(big.call(ApiKey.DescribeGroups, 5, {"groups": groups})["groups"]))
    big.close()
    print(f"20,000 groups described in {took:.2f} s, {len(round_trips)} round trips meanwhile, "
          f"longest {max(round_trips):.3f} s")
    assert [(d["group_id"], d["error_code"], d["group_state"]) for d in described] == [
        (g, 0, "Dead") for g in groups]
    # Handled in one step (sent whole, or merged and encoded whole), the request held up everyone for a good part
    # of the time it took (a quarter leaves room for a loaded machine's scheduling).
    assert max(round_trips) < took / 4


def test_the_topic_engines_poll_thread_goes_on_after_a_failure(kafka_bootstrap: str,
                                                                unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("responses")
    create_topics(kafka_bootstrap, [(topic, 1, False)])
    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False, group_id=None)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    received: list[bytes] = []
    failed = threading.Event()

    def on_records(records: list[object]) -> None:
        values = [r.value for r in records]  # type: ignore[attr-defined]
        if b"unreadable" in values:
            failed.set()
            raise ValueError("a batch the callback cannot take")
        received.extend(values)

    poller = _PollThread("test-poller", consumer, on_records)
    poller.RETRY_S = 0.1
    poller.start()
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    try:
        producer.send(topic, b"unreadable").get(10)
        assert failed.wait(20)
        producer.send(topic, b"readable").get(10)
        deadline = time.monotonic() + 20
        while not received and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        producer.close()
        poller.stopping.set()
        poller.join(10)
    assert received == [b"readable"]
