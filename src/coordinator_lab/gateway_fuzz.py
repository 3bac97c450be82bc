"""Hostile frames against `coordinator gateway --engine local`, with well-behaved clients beside them.

    python -m coordinator_lab.gateway_fuzz --embedded                       # 10,000 frames, 48 writers
    python -m coordinator_lab.gateway_fuzz --embedded --frames 50000 --seed 7 --json
    python -m coordinator_lab.gateway_fuzz --embedded --duration 300       # the soak: 5 minutes of it

The gateway runs as its own process (`coordinator gateway --engine local`, its memory measured alone) in front
of a broker (`--embedded`: one of its own, as hostile frames of proxied APIs reach it). Frames come from a
seeded generator over Kafka's request schemas (kafka.protocol's, at every version the gateway decodes: random
field values, extremes, strings at and over 32,767 bytes, nulls where the spec allows none), then are cut,
padded, resized, given unknown or unserved APIs and versions, or have bytes and length fields corrupted.
`--writers` connections at a time send them: most at once, some byte by byte (slow writers), some many in
one connection; every `--burst-every` frames `--burst` connections open at once.

Meanwhile, through the gateway: a librdkafka consumer process (a static member) reads a topic a kafka-python
producer writes to, and a kafka-python admin client lists and describes groups. Printed: frames sent, the gateway's
resident memory (before, peak, after; sampled every 0.5 s), tracebacks in its log, whether it still answers, the
records the consumer lost or saw twice, and the admin client's answers, failures and slowest answer.
With `--duration`, the soak: hostile frames go on until that many seconds have passed, whatever their number, and
the gateway's memory and the clients' answers are printed over time as well.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient, KafkaProducer
from kafka.protocol.api_key import ApiKey

from chaos_harness.real_consumer import ConsumerProcess
from coordinator_job.broker import create_topics
from kafka_gateway.apis import GROUP_APIS, request_class
from kafka_gateway.codec import body_to_message
from kafka_jvm.embedded import broker_or_embedded

from .measuring import command_parser, log

# The requests the gateway decodes (the group APIs, the ones it answers itself, Produce for its acks), and a
# few it forwards untouched.
DECODED_APIS = (*GROUP_APIS, ApiKey.ApiVersions, ApiKey.FindCoordinator, ApiKey.Metadata, ApiKey.Produce)
FORWARDED_APIS = (ApiKey.Fetch, ApiKey.ListOffsets, ApiKey.CreateTopics, ApiKey.DescribeConfigs)
# Keys no gateway serves: unknown, KIP-848, share groups, SASL, DescribeCluster, broker-to-broker.
UNSERVED_API_KEYS = (-1, 999, 32767, 68, 69, 76, 17, 36, 60, 4, 7)
MAX_STRING = 0x7FFF
GROUPS = [f"fuzz-{i}" for i in range(5)]
# Plausible values by field name, drawn most of the time so that requests meet in the same groups and get past
# the coordinator's checks into its states (a static member with a 32,767-byte instance id, a rebalance timeout
# of 0, the DescribeGroups v0 of its group...); the rest of the time the field gets any value of its type.
PLAUSIBLE: dict[str, list[Any]] = {
    "group_id": GROUPS, "groups": GROUPS, "key": GROUPS, "coordinator_keys": GROUPS,
    "member_id": ["", "", "m-1"], "group_instance_id": [None, "i-1", "i-2", "i" * MAX_STRING],
    "session_timeout_ms": [6_000, 10_000, 30_000], "rebalance_timeout_ms": [0, 1, 500, 5_000, 30_000],
    "protocol_type": ["consumer"], "name": ["range", "roundrobin", "t0", "t1"], "metadata": ["AAAAAAABAAJ0MAAAAAA="],
    "generation_id": [-1, 0, 1, 2], "generation_id_or_member_epoch": [-1, 0, 1, 2], "key_type": [0, 1, 2],
    "partition_index": [0, 1, 2], "committed_offset": [0, 1, 100], "states_filter": ["Stable", "Empty"],
}
PARTITIONS = 3
TRACEBACK = "Traceback (most recent call last)"


# ---- frames ---------------------------------------------------------------------------------------------------

def _random_string(rng: random.Random, flexible: bool) -> str:
    roll = rng.random()
    if roll < 0.02:  # at the limit, or past it where the length's encoding allows it (compact strings)
        return "s" * rng.choice([MAX_STRING, MAX_STRING + 1 if flexible else MAX_STRING])
    if roll < 0.05:
        return "".join(chr(rng.randrange(0x20, 0x2FFF)) for _ in range(rng.randint(1, 40)))
    return rng.choice(["", "g", "group-1", "topic", "consumer", "range", "m-1", "i-1"]) + str(rng.randrange(100))


def _random_scalar(rng: random.Random, type_str: str, flexible: bool) -> Any:
    if type_str in ("int8", "int16", "int32", "int64", "uint16"):
        bits = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint16": 16}[type_str]
        low, high = (0, 2**bits - 1) if type_str == "uint16" else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        return rng.choice([0, 1, -1 if low < 0 else 0, low, high, rng.randint(low, high), rng.randint(0, 10_000)])
    if type_str == "float64":
        return rng.uniform(-1e9, 1e9)
    if type_str == "bool":
        return rng.random() < 0.5
    if type_str == "uuid":
        return str(uuid.UUID(int=rng.getrandbits(128)))
    if type_str == "string":
        return _random_string(rng, flexible)
    if type_str in ("bytes", "records"):
        return base64.b64encode(rng.randbytes(rng.choice([0, 1, 8, 64, rng.randint(0, 2_000)]))).decode()
    if type_str == "bitfield":
        return rng.randint(-(2**31), 2**31 - 1)
    raise ValueError(f"no random value for a {type_str} field")


def random_body(fields: Mapping[str, Any], version: int, rng: random.Random, flexible: bool,
                depth: int = 0) -> dict[str, Any]:
    """A request body (the envelopes' JSON naming) with random values for every field of `version`: extremes,
    long strings, nulls where nullable, and now and then a null where the spec allows none."""
    body: dict[str, Any] = {}
    for name, spec in fields.items():
        if not spec.for_version_q(version):
            continue
        may_be_null = spec.nullable_for_version_q(version) or rng.random() < 0.03
        plausible = PLAUSIBLE.get(name) if rng.random() < 0.85 else None
        if may_be_null and rng.random() < 0.3 and (spec.is_array() or spec.is_struct()
                                                   or spec.type_str in ("string", "bytes", "records")):
            body[name] = None
        elif plausible is not None and spec.is_array() and not spec.is_struct_array():
            body[name] = rng.sample(plausible, rng.randint(1, 2))
        elif plausible is not None and not spec.is_array() and not spec.is_struct():
            body[name] = rng.choice(plausible)
        elif spec.is_struct_array():
            count = 0 if depth > 2 else rng.choice([0, 1, 1, 2, 3, 50])
            body[name] = [random_body(spec.fields, version, rng, flexible, depth + 1) for _ in range(count)]
        elif spec.is_struct():
            body[name] = random_body(spec.fields, version, rng, flexible, depth + 1)
        elif spec.is_array():
            body[name] = [_random_scalar(rng, spec.array_of.type_str, flexible) for _ in range(rng.randint(0, 3))]
        else:
            body[name] = _random_scalar(rng, spec.type_str, flexible)
    return body


def random_request(rng: random.Random, correlation_id: int) -> bytes:
    """A request of an API the gateway serves, at a version its spec defines, with random field values, framed
    (some do not encode as asked, e.g. a string too long for an int16 length: then an empty-bodied request)."""
    api_key = rng.choice(DECODED_APIS + FORWARDED_APIS)
    message_class = request_class(api_key) if api_key in DECODED_APIS else None
    if message_class is None:
        header = int(api_key).to_bytes(2, "big") + rng.randrange(0, 12).to_bytes(2, "big")
        body = correlation_id.to_bytes(4, "big") + b"\x00\x04fuzz" + rng.randbytes(rng.randint(0, 60))
        return len(header + body).to_bytes(4, "big") + header + body
    version = rng.randint(0, message_class.max_version)
    flexible = message_class.flexible_version_q(version)
    try:
        message = body_to_message(message_class, version, random_body(message_class.fields, version, rng, flexible))
        message.with_header(correlation_id=correlation_id, client_id=rng.choice(["fuzz", None, "c" * 200]))
        return bytes(message.encode(header=True, framed=True))
    except Exception:  # a random value this version cannot carry (kafka.protocol refuses it): an empty body
        message = message_class[version]()
        message.with_header(correlation_id=correlation_id, client_id="fuzz")
        return bytes(message.encode(header=True, framed=True))


def hostile(frame: bytes, rng: random.Random) -> bytes:
    """`frame` (framed) as a hostile client might send it: intact (2 in 5: its values are hostile enough), or cut,
    padded, resized, re-keyed, flipped."""
    data = bytearray(frame)
    kind = rng.randrange(14)
    if kind == 0:  # bytes flipped after the size
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(4, len(data))] = rng.randrange(256)
    elif kind == 1 and len(data) > 5:  # body cut short, size consistent
        cut = rng.randint(1, len(data) - 5)
        data = bytearray((len(data) - 4 - cut).to_bytes(4, "big") + data[4:len(data) - cut])
    elif kind == 2:  # garbage inside the frame
        extra = rng.randbytes(rng.randint(1, 64))
        data = bytearray((len(data) - 4 + len(extra)).to_bytes(4, "big") + data[4:] + extra)
    elif kind == 3:  # a size that lies: huge, negative, zero, a little off
        size = rng.choice([2**31 - 1, 2**30, 104_857_601, -1, -(2**31), 0, len(data) - 4 + rng.randint(-3, 3)])
        data[0:4] = size.to_bytes(4, "big", signed=True)
    elif kind == 4:  # an API no gateway serves
        data[4:6] = rng.choice(UNSERVED_API_KEYS).to_bytes(2, "big", signed=True)
    elif kind == 5:  # a version out of range
        data[6:8] = rng.choice([-1, 99, 32767, 17]).to_bytes(2, "big", signed=True)
    elif kind == 6 and len(data) > 16:  # a length field (string, array, bytes) corrupted: 2 or 4 bytes
        width = rng.choice([2, 4])
        at = rng.randrange(12, len(data) - width + 1)
        largest = 2 ** (8 * width - 1) - 1
        value = rng.choice([-2, -1, MAX_STRING, largest, rng.randrange(largest)])
        data[at:at + width] = value.to_bytes(width, "big", signed=True)
    elif kind == 7:  # noise
        data = bytearray(rng.randbytes(rng.randint(0, 64)))
    return bytes(data)  # kinds 8 and over: intact


def _request(api_key: ApiKey, version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
    message = body_to_message(request_class(api_key), version, body)
    message.with_header(correlation_id=correlation_id, client_id="fuzz")
    return bytes(message.encode(header=True, framed=True))


def scripted(rng: random.Random, next_id: Iterator[int]) -> list[bytes]:
    """Requests pipelined in one connection that once broke the gateway (issue 18): a static member whose member
    id fits no answer, then the DescribeGroups v0 of its group; a FindCoordinator v4 without keys behind a
    JoinGroup."""
    group = rng.choice(GROUPS)
    join = {"group_id": group, "session_timeout_ms": 10_000, "rebalance_timeout_ms": rng.choice([0, 500, 5_000]),
            "member_id": "", "group_instance_id": "i" * MAX_STRING, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": PLAUSIBLE["metadata"][0]}]}
    if rng.random() < 0.5:
        return [_request(ApiKey.JoinGroup, rng.choice([5, 9]), next(next_id), join),
                _request(ApiKey.DescribeGroups, 0, next(next_id), {"groups": [group]})]
    return [_request(ApiKey.JoinGroup, 5, next(next_id), {**join, "group_instance_id": "i-3"}),
            _request(ApiKey.FindCoordinator, 4, next(next_id), {"key_type": 0, "coordinator_keys": None})]


def frames_for_connection(rng: random.Random, next_id: Iterator[int]) -> list[bytes]:
    if rng.random() < 0.03:
        return scripted(rng, next_id)
    return [hostile(random_request(rng, next(next_id)), rng) for _ in range(rng.choice([1, 1, 2, 3, 20]))]


# ---- the gateway process ----------------------------------------------------------------------------------------

def rss_mib(pid: int) -> float | None:
    """Resident memory of process `pid` (Linux /proc), MiB; None where it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


LISTENER_LINE = re.compile(r"gateway listener \S+ on [^\s:]+:(?P<bootstrap>\d+) .* ports (?P<broker>\d+)\.\.")
"""The gateway's log line once it listens: its bootstrap port and its first broker port."""


class GatewayProcess:
    """`coordinator gateway --engine local` on the kernel's free loopback ports, its log in a file. A port chosen
    before the gateway starts could be taken before it binds it, and the one after it (its first broker port) too:
    the gateway picks them and says which in its log."""

    def __init__(self, bootstrap: str, settings: Sequence[str] = (), status_interval_s: float = 5) -> None:
        self.port = 0
        self.first_broker_port = 0
        self.log_path = Path(tempfile.mkstemp(prefix="gateway-", suffix=".log")[1])
        command = [sys.executable, "-m", "coordinator_cli", "gateway", "--listen", "127.0.0.1:0",
                   "--bootstrap-servers", bootstrap, "--engine", "local", "--status-interval", str(status_interval_s)]
        for setting in settings:
            command += ["--set", setting]
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT,
                                        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})

    @property
    def address(self) -> str:
        if not self.port:
            raise RuntimeError("the gateway's port is known once wait_ready returned")
        return f"127.0.0.1:{self.port}"

    def wait_ready(self, timeout_s: float = 60) -> None:
        """Until the gateway's log says where it listens and it answers ApiVersions there."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the gateway exited with {self.process.returncode}: {self.log()[-2000:]}")
            if not self.port and (listening := LISTENER_LINE.search(self.log())):
                self.port, self.first_broker_port = int(listening["bootstrap"]), int(listening["broker"])
            if self.port:
                with contextlib.suppress(OSError):
                    if api_versions_answered(self.address):
                        return
            time.sleep(0.2)
        raise TimeoutError(f"the gateway did not answer within {timeout_s} s: {self.log()[-2000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._log.close()
        return self.process.returncode


def api_versions_answered(address: str, timeout_s: float = 10) -> bool:
    """Whether `address` answers an ApiVersions v0 with error 0."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff")
        answer = b""
        while len(answer) < 10:
            data = sock.recv(65536)
            if not data:
                return False
            answer += data
        return answer[4:8] == b"\x00\x00\x00\x01" and answer[8:10] == b"\x00\x00"


# ---- the hostile connections ------------------------------------------------------------------------------------

@dataclass
class FuzzCounts:
    frames: int = 0
    connections: int = 0
    refused: int = 0  # connections the gateway did not accept (a burst's backlog full, for instance)
    closed_by_gateway: int = 0


async def _hostile_connection(port: int, frames: list[bytes], rng: random.Random, counts: FuzzCounts) -> None:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
    except (OSError, TimeoutError):
        counts.refused += 1
        return
    counts.connections += 1
    counts.frames += len(frames)
    payload = b"".join(frames)
    try:
        if rng.random() < 0.1:  # a slow writer: a few bytes at a time
            for start in range(0, min(len(payload), 400), rng.randint(1, 16)):
                writer.write(payload[start:start + 16])
                await writer.drain()
                await asyncio.sleep(rng.uniform(0.005, 0.05))
        else:
            writer.write(payload)
            await writer.drain()
        if rng.random() < 0.5:
            writer.write_eof()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(rng.choice([0.05, 0.5, 2.0])):
                while await reader.read(65536):
                    pass
                counts.closed_by_gateway += 1
    except (OSError, ConnectionError):
        counts.closed_by_gateway += 1
    finally:
        writer.close()
        with contextlib.suppress(OSError, ConnectionError):
            await writer.wait_closed()


async def _hostile_load(port: int, frames: int, writers: int, burst: int, burst_every: int, seed: int,
                        counts: FuzzCounts, deadline: float | None = None) -> None:
    """`frames` hostile frames, or as many as are sent until `deadline` (time.monotonic) when one is given."""
    rng = random.Random(seed)
    ids = iter(range(1, 2**31))
    budget = [frames]
    next_burst = [burst_every]

    def take(connection_rng: random.Random) -> list[bytes]:
        batch = frames_for_connection(connection_rng, ids)[:budget[0]]
        budget[0] -= len(batch)
        return batch

    async def burst_of_connections() -> None:
        batches = [take(rng) for _ in range(burst)]
        await asyncio.gather(*(_hostile_connection(port, batch, random.Random(rng.random()), counts)
                               for batch in batches))

    async def writer_loop(index: int) -> None:
        own = random.Random(seed * 1_000 + index)
        while budget[0] > 0 and (deadline is None or time.monotonic() < deadline):
            if index == 0 and frames - budget[0] >= next_burst[0]:
                next_burst[0] += burst_every
                await burst_of_connections()
                continue
            await _hostile_connection(port, take(own), own, counts)

    await asyncio.gather(*(writer_loop(i) for i in range(writers)))


# ---- the well-behaved clients -----------------------------------------------------------------------------------

@dataclass
class AdminFigures:
    answers: int = 0
    failures: int = 0
    slowest_s: float = 0.0
    errors: list[str] = field(default_factory=list)


class Bystanders:
    """A producer and an admin client through the gateway, each on a thread, until `stop`."""

    def __init__(self, address: str, topic: str, group: str) -> None:
        self.address, self.topic, self.group = address, topic, group
        self.produced: list[tuple[int, int]] = []  # (partition, offset) of every record the broker acknowledged
        self.produce_failures = 0
        self.admin = AdminFigures()
        self._stopping = threading.Event()
        self._threads = [threading.Thread(target=self._produce, name="fuzz-producer", daemon=True),
                         threading.Thread(target=self._describe, name="fuzz-admin", daemon=True)]

    def start(self) -> Bystanders:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(60)

    def _produce(self) -> None:
        producer = KafkaProducer(bootstrap_servers=self.address, acks="all", linger_ms=5, retries=5)
        sequence = 0
        try:
            while not self._stopping.wait(0.01):
                future = producer.send(self.topic, str(sequence).encode(), partition=sequence % PARTITIONS)
                future.add_callback(lambda metadata: self.produced.append((metadata.partition, metadata.offset)))
                future.add_errback(lambda _: self._failed_produce())
                sequence += 1
            producer.flush(60)
        finally:
            producer.close(10)

    def _failed_produce(self) -> None:
        self.produce_failures += 1

    def _describe(self) -> None:
        admin = KafkaAdminClient(bootstrap_servers=self.address, client_id="fuzz-admin", request_timeout_ms=30_000)
        try:
            while not self._stopping.wait(0.05):
                started = time.monotonic()
                try:
                    listed = {group["group_id"] for group in admin.list_groups()}
                    described = admin.describe_groups([self.group])[self.group]
                    if self.group not in listed or described["group_state"] != "Stable":
                        raise RuntimeError(f"{self.group}: listed {self.group in listed}, {described['group_state']}")
                    self.admin.answers += 1
                except Exception as exc:  # counted and shown: what a well-behaved client would have seen
                    self.admin.failures += 1
                    self.admin.errors.append(repr(exc)[:200])
                self.admin.slowest_s = max(self.admin.slowest_s, time.monotonic() - started)
        finally:
            admin.close()


# ---- the run ----------------------------------------------------------------------------------------------------

@dataclass
class Progress:
    """What the gateway and the clients beside it were at, `seconds` into the hostile load."""

    seconds: float
    frames: int
    rss_mib: float | None
    records_produced: int
    admin_answers: int
    admin_failures: int

    def line(self) -> str:
        rss = "unknown" if self.rss_mib is None else f"{self.rss_mib:.0f} MiB"
        return (f"  {self.seconds:6.0f} s  frames {self.frames:7d}  RSS {rss:>8}  produced {self.records_produced:6d}"
                f"  admin answers {self.admin_answers:5d}  failures {self.admin_failures}")


@dataclass
class FuzzReport:
    frames: int
    connections: int
    refused: int
    closed_by_gateway: int
    seconds: float
    rss_before_mib: float | None
    rss_peak_mib: float | None
    rss_after_mib: float | None
    rss_timeline_mib: list[float | None]
    tracebacks: int
    traceback_samples: list[str]
    gateway_answering: bool
    gateway_exit_code: int
    records_produced: int
    records_lost: int
    records_duplicated: int
    produce_failures: int
    admin_answers: int
    admin_failures: int
    admin_slowest_s: float
    admin_errors: list[str]
    status_line: str
    progress: list[Progress] = field(default_factory=list)  # every 5 s

    @property
    def rss_growth_mib(self) -> float | None:
        if self.rss_before_mib is None or self.rss_peak_mib is None:
            return None
        return self.rss_peak_mib - self.rss_before_mib

    def lines(self) -> list[str]:
        def mib(value: float | None) -> str:
            return "unknown" if value is None else f"{value:.0f} MiB"

        return [
            f"hostile frames: {self.frames} on {self.connections} connections in {self.seconds:.1f} s "
            f"({self.closed_by_gateway} closed by the gateway, {self.refused} not accepted)",
            f"gateway memory (RSS): before {mib(self.rss_before_mib)}, peak {mib(self.rss_peak_mib)}, "
            f"after {mib(self.rss_after_mib)} (growth {mib(self.rss_growth_mib)})",
            f"gateway: {self.tracebacks} tracebacks in its log, answering afterwards: {self.gateway_answering}, "
            f"exit code {self.gateway_exit_code}",
            f"librdkafka consumer: {self.records_produced} records produced through the gateway, "
            f"{self.records_lost} lost, {self.records_duplicated} seen twice ({self.produce_failures} sends failed)",
            f"admin client (ListGroups + DescribeGroups): {self.admin_answers} answers, {self.admin_failures} "
            f"failures, slowest {self.admin_slowest_s:.2f} s",
            *(f"  admin client failure: {error}" for error in self.admin_errors),
            f"gateway status: {self.status_line}",
            *self._progress_lines(),
            *self.traceback_samples,
        ]

    def _progress_lines(self, rows: int = 20) -> list[str]:
        """About `rows` lines of the progress, evenly spaced, the last always in."""
        if not self.progress:
            return []
        step = max(1, len(self.progress) // rows)
        shown = self.progress[::step]
        if shown[-1] is not self.progress[-1]:
            shown.append(self.progress[-1])
        return ["over time:", *(sample.line() for sample in shown)]


def traceback_samples(log_text: str, limit: int = 3) -> list[str]:
    """The first `limit` tracebacks of a log, each with the line before it (what the gateway was doing)."""
    lines = log_text.splitlines()
    samples: list[str] = []
    for index, line in enumerate(lines):
        if line.startswith(TRACEBACK) and len(samples) < limit:
            end = next((i for i in range(index + 1, len(lines)) if not lines[i].startswith((" ", TRACEBACK))),
                       len(lines))
            samples.append("\n".join(lines[max(index - 1, 0):end + 1]))
    return samples


def run_fuzz(bootstrap: str, frames: int = 10_000, writers: int = 48, burst: int = 150, burst_every: int = 2_000,
             seed: int = 20_240_610, settle_s: float = 3.0, duration_s: float | None = None) -> FuzzReport:
    """Runs a gateway process in front of `bootstrap`, the bystanders, and the hostile load; the figures. With
    `duration_s`, the load goes on for that long instead of stopping after `frames`."""
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"fuzz-topic-{suffix}", f"fuzz-group-{suffix}"
    create_topics(bootstrap, [(topic, PARTITIONS, False)])
    gateway = GatewayProcess(bootstrap, ["group.initial.rebalance.delay.ms=0"])
    consumer: ConsumerProcess | None = None
    bystanders: Bystanders | None = None
    timeline: list[float | None] = []
    sampling = threading.Event()
    counts = FuzzCounts()
    progress: list[Progress] = []

    def sample() -> None:
        """The gateway's memory every 0.5 s; every 5 s a line with it and what the clients got so far."""
        started = time.monotonic()
        while not sampling.wait(0.5):
            timeline.append(rss_mib(gateway.process.pid))
            if len(timeline) % 10 == 0 and bystanders is not None:
                progress.append(Progress(time.monotonic() - started, counts.frames, timeline[-1],
                                         len(bystanders.produced), bystanders.admin.answers,
                                         bystanders.admin.failures))
                log("fuzz:" + progress[-1].line())

    try:
        gateway.wait_ready()
        # librdkafka: kafka-python 3.0's consumer, under load, sometimes never applies a SyncGroup answer it read
        # (error NONE, its assignment) and sits unassigned; seen before any hostile frame was sent.
        consumer = ConsumerProcess("confluent", gateway.address, group, topic, "fuzz-good-1",
                                   session_timeout_ms=10_000, rebalance_timeout_ms=10_000, client_id="fuzz-good")
        if not consumer.wait_for(lambda events: any(e["event"] == "assigned" for e in events), 60):
            raise TimeoutError("the well-behaved consumer got no assignment within 60 s")
        bystanders = Bystanders(gateway.address, topic, group).start()
        time.sleep(settle_s)  # clients connected and warm: the baseline
        rss_before = rss_mib(gateway.process.pid)
        sampler = threading.Thread(target=sample, name="fuzz-rss", daemon=True)
        sampler.start()
        started = time.monotonic()
        amount = f"{frames} frames" if duration_s is None else f"frames for {duration_s:.0f} s"
        log(f"fuzz: {amount}, {writers} writers, bursts of {burst} every {burst_every} frames")
        deadline = None if duration_s is None else started + duration_s
        asyncio.run(_hostile_load(gateway.port, sys.maxsize if deadline else frames, writers, burst, burst_every, seed,
                                  counts, deadline))
        seconds = time.monotonic() - started
        log(f"fuzz: sent in {seconds:.1f} s; letting the bystanders run {settle_s} s more")
        time.sleep(settle_s)
        bystanders.stop()
        produced = set(bystanders.produced)
        if not consumer.wait_for(lambda events: produced <= {tuple(r) for e in events if e["event"] == "records"
                                                             for r in e["records"]}, 60):
            log("fuzz: the consumer did not get every record within 60 s")
        sampling.set()
        sampler.join()
        consumed = consumer.records()
        answering = gateway.process.poll() is None and api_versions_answered(gateway.address)
        rss_after = rss_mib(gateway.process.pid)
    finally:
        sampling.set()
        if bystanders is not None:
            bystanders.stop()
        if consumer is not None:
            consumer.stop()
        exit_code = gateway.stop()
    text = gateway.log()
    gateway.log_path.unlink(missing_ok=True)
    status = [line.split("gateway stopped: ", 1)[1] for line in text.splitlines() if "gateway stopped: " in line]
    samples = [value for value in [rss_before, *timeline] if value is not None]
    return FuzzReport(
        frames=counts.frames, connections=counts.connections, refused=counts.refused,
        closed_by_gateway=counts.closed_by_gateway, seconds=seconds, rss_before_mib=rss_before,
        rss_peak_mib=max(samples) if samples else None, rss_after_mib=rss_after, rss_timeline_mib=timeline,
        tracebacks=text.count(TRACEBACK), traceback_samples=traceback_samples(text), gateway_answering=answering,
        gateway_exit_code=exit_code,
        records_produced=len(produced), records_lost=len(produced - set(consumed)),
        records_duplicated=len(consumed) - len(set(consumed)), produce_failures=bystanders.produce_failures,
        admin_answers=bystanders.admin.answers, admin_failures=bystanders.admin.failures,
        admin_slowest_s=bystanders.admin.slowest_s, admin_errors=bystanders.admin.errors[:5],
        status_line=status[-1] if status else "(no status line)", progress=progress)


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser("coordinator_lab.gateway_fuzz", __doc__, "start a broker of its own (recommended)",
                            "an existing broker (it gets fuzzed too)")
    parser.add_argument("--frames", type=int, default=10_000, help="hostile frames to send; default %(default)s")
    parser.add_argument("--writers", type=int, default=48, help="connections at a time; default %(default)s")
    parser.add_argument("--burst", type=int, default=150, help="connections opened at once in a burst; "
                                                               "default %(default)s")
    parser.add_argument("--burst-every", type=int, default=2_000, metavar="FRAMES",
                        help="frames between bursts; default %(default)s")
    parser.add_argument("--duration", type=float, metavar="SECONDS",
                        help="the soak: send hostile frames for this long (their number unbounded, --frames ignored) "
                             "and print memory and answers over time")
    parser.add_argument("--seed", type=int, default=20_240_610, help="the generator's seed; default %(default)s")
    parser.add_argument("--json", action="store_true", help="the figures as one JSON line on stdout")
    args = parser.parse_args(argv)
    with broker_or_embedded(args.bootstrap_servers) as bootstrap:
        report = run_fuzz(bootstrap, args.frames, args.writers, args.burst, args.burst_every, args.seed,
                          duration_s=args.duration)
    if args.json:
        print(json.dumps({**asdict(report), "rss_growth_mib": report.rss_growth_mib}))
    else:
        print("\n".join(report.lines()))
    healthy = (report.tracebacks == 0 and report.gateway_answering and report.records_lost == 0
               and report.admin_failures == 0)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
