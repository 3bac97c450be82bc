"""Request-topic traffic for the record/replay tests: built like a client would send it, produced as records."""

from __future__ import annotations

import base64
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka import KafkaProducer

from coordinator_job.replay import replay_local
from coordinator_job.settings import load_settings
from coordinator_state import (
    SIMULATION_EPOCH_MS,
    Api,
    ResponseKey,
    request_envelope,
    response_key,
    tick_envelope,
    to_json,
)


@dataclass(frozen=True)
class TrafficRecord:
    """One request-topic record as produced, and the line the live job reads it as."""

    key: bytes | None
    value: bytes | None  # None: a tombstone
    timestamp_ms: int
    partition: int | None
    line: bytes


@dataclass
class Traffic:
    """Clients' requests and the job's ticks, in log order, each record stamped 10 ms after the previous one.

    Member ids come from replaying the traffic so far, so later requests can use them.
    """

    group: str = "orders"
    partitions: int = 3
    now: int = SIMULATION_EPOCH_MS
    records: list[TrafficRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._correlation = itertools.count(1)

    def lines(self) -> list[bytes]:
        return [r.line for r in self.records]

    def write(self, path: Path) -> Path:
        path.write_bytes(b"".join(line + b"\n" for line in self.lines()))
        return path

    def send(self, api: Api, client: str, body: dict[str, Any], version: int, *,
             stamped: bool = True) -> ResponseKey:
        """A request; unstamped, its value has no timestamp_ms and the record's timestamp stands in."""
        self.now += 10

        def envelope(timestamp_ms: int | None) -> dict[str, Any]:
            return request_envelope(api, {"group_id": self.group, **body}, version=version,
                                    correlation_id=correlation_id, client_id=client, client_host="/10.0.0.1",
                                    reply_to=f"{client}-r", timestamp_ms=timestamp_ms)

        correlation_id = next(self._correlation)
        line = to_json(envelope(self.now)).encode()
        value = line if stamped else to_json(envelope(None)).encode()
        self.records.append(TrafficRecord(self.group.encode(), value, self.now, None, line))
        key = response_key(envelope(self.now))
        assert key is not None
        return key

    def join(self, client: str) -> ResponseKey:
        return self.send(Api.JOIN_GROUP, client, {
            "session_timeout_ms": 10000, "rebalance_timeout_ms": 30000, "member_id": "",
            "group_instance_id": f"i-{client}", "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": base64.b64encode(client.encode()).decode()}]}, 9)

    def sync(self, client: str, member_id: str, generation: int, assignments: dict[str, str]) -> ResponseKey:
        return self.send(Api.SYNC_GROUP, client, {
            "generation_id": generation, "member_id": member_id, "group_instance_id": f"i-{client}",
            "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": m, "assignment": base64.b64encode(a.encode()).decode()}
                            for m, a in assignments.items()]}, 5)

    def heartbeat(self, client: str, member_id: str, generation: int, *, stamped: bool = True) -> ResponseKey:
        return self.send(Api.HEARTBEAT, client, {"generation_id": generation, "member_id": member_id,
                                               "group_instance_id": f"i-{client}"}, 4, stamped=stamped)

    def ticks(self, ms: int) -> None:
        """A tick on every partition each second, as the live job writes them."""
        for _ in range(ms // 1000):
            self.now += 1000
            line = to_json(tick_envelope(self.now)).encode()
            self.records += [TrafficRecord(None, line, self.now, p, line) for p in range(self.partitions)]

    def hostile(self, raw: bytes) -> None:
        self.now += 10
        self.records.append(TrafficRecord(None, raw, self.now, 0, raw))

    def answer(self, key: ResponseKey) -> dict[str, Any]:
        """The response to a request, from a local replay of the traffic so far."""
        responses = [json.loads(r) for r in replay_local(self.lines(), load_settings()).responses]
        found = [r for r in responses if response_key(r) == key]
        assert len(found) == 1, f"expected one response to {key}, got {found}"
        return found[0]


def stable_group_traffic() -> Traffic:
    """Two static members join, sync and heartbeat (one heartbeat unstamped), a hostile record, ticks."""
    traffic = Traffic()
    joins = {client: traffic.join(client) for client in ("a", "b")}
    traffic.ticks(8000)
    answers = {client: traffic.answer(key)["body"] for client, key in joins.items()}
    ids = {client: body["member_id"] for client, body in answers.items()}
    generation, leader = answers["a"]["generation_id"], answers["a"]["leader"]
    for client in sorted(ids, key=lambda c: ids[c] != leader):
        assignments = {m: f"partitions-of-{c}" for c, m in ids.items()} if ids[client] == leader else {}
        traffic.sync(client, ids[client], generation, assignments)
    traffic.heartbeat("a", ids["a"], generation)
    traffic.heartbeat("b", ids["b"], generation, stamped=False)
    traffic.hostile(b'{"api": "Heartbeat", "correlation_id": ')
    traffic.ticks(3000)
    return traffic


def produce(bootstrap: str, topic: str, records: list[TrafficRecord]) -> None:
    """Produces records with their keys, partitions and timestamps, and waits for the acks."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        futures = [producer.send(topic, key=r.key, value=r.value, partition=r.partition, timestamp_ms=r.timestamp_ms)
                   for r in records]
        producer.flush()
        for future in futures:
            future.get(timeout=10)
    finally:
        producer.close()
