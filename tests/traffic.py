"""Recorded-traffic files for the end-to-end tests: simulated consumers, a silent group, hostile records.

Built from the chaos harness's simulated clients (real GroupMembers on the engine), so the traffic is
what a client would really send: joins, MEMBER_ID_REQUIRED rejoins, syncs, heartbeats, a static member
down for longer than its session, ticks. An admin and a simple consumer add the offsets and listing
APIs (commits, one of them expiring, fetches, describes) and the admin deletions (an offset, a group); simulated
Kafka Streams clients a streams group (coordinator_lab.streams_traffic), so that classic and streams groups mix.
Hostile records are mixed in, a ListGroups among them (no single group holds its answer: a dead letter on the
request topic); each line is one record.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from chaos_harness import run_chaos
from coordinator_lab.streams_traffic import Population
from coordinator_state import Api, request_envelope, to_json

HOSTILE = [
    b"not json at all",
    b"\xff\xfe\x00binary",
    b"[1, 2, 3]",
    json.dumps({"api": "Heartbeat", "version": 99, "correlation_id": 1, "reply_to": "hostile",
                "timestamp_ms": 1_700_000_000_500, "body": {}}).encode(),
    json.dumps({"api": "SyncGroup", "version": 5, "correlation_id": 2, "reply_to": "hostile",
                "timestamp_ms": 1_700_000_000_600, "body": {"group_id": "orders", "generation_id": "1"}}).encode(),
    json.dumps({"api": "JoinGroup", "junk": "x" * 100_000}).encode(),
    json.dumps({"api": "ListGroups", "version": 5, "correlation_id": 3, "reply_to": "hostile",
                "timestamp_ms": 1_700_000_000_700, "body": {"states_filter": [], "types_filter": []}}).encode(),
]


def chaos_lines(group_id: str, scenario: str, membership: str, members: int, seed: int,
                settle_ms: int = 15000) -> list[dict]:
    """A simulated run's traffic in log order, its `reply_to`s prefixed with the group (unique across runs)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "traffic.jsonl"
        run_chaos({"scenario": scenario, "membership": membership, "members": members, "seed": seed,
                   "group_id": group_id, "settle_ms": settle_ms}, traffic=path)
        records = [json.loads(line) for line in path.read_text().splitlines()]
    for record in records:
        if "reply_to" in record:
            record["reply_to"] = f"{group_id}/{record['reply_to']}"
    return records


def build_traffic(size: str = "full") -> list[bytes]:
    """A traffic file's lines: `full` (two simulated groups, a silent one, hostile records) or `short`."""
    if size == "short":
        records = chaos_lines("orders", "crash", "static", 2, seed=3)[:40]
    else:
        records = (chaos_lines("orders", "crash-longer-than-session", "static", 4, seed=1)
                   + chaos_lines("payments", "rolling-bounce", "dynamic", 3, seed=2))
    start = min(r["timestamp_ms"] for r in records)
    records += silent_group(start + 150)
    if size == "full":
        records += offsets_and_listing(start + 200)
        records += streams_lines(start + 300)
    records.sort(key=lambda r: r["timestamp_ms"])  # stable: each source keeps its own order
    lines = [to_json(r).encode() for r in records]
    step = max(1, len(lines) // (len(HOSTILE) + 1))
    for index, hostile in enumerate(HOSTILE if size == "full" else HOSTILE[:3]):
        lines.insert((index + 1) * step, hostile)
    return lines


def streams_lines(t: int) -> list[dict]:
    """Four Kafka Streams clients of group "streams-0" (two static, standbys; engine defaults) from `t`: the admin's
    commit makes it a classic group first, which the first streams join converts."""
    population = Population(1, 4, static_share=0.5, seed=5, config={"group.streams.num.standby.replicas": 1},
                            start_ms=t)
    return population.run(30, step_ms=500).requests


def silent_group(t: int) -> list[dict]:
    """One static member of group "quiet" that joins (v4, no MEMBER_ID_REQUIRED for static) and goes silent."""
    body = {"group_id": "quiet", "session_timeout_ms": 6000, "rebalance_timeout_ms": 6000, "member_id": "",
            "group_instance_id": "quiet-0", "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": ""}]}
    return [request_envelope(Api.JOIN_GROUP, body, version=5, correlation_id=1, client_id="quiet", reply_to="quiet-1",
                             timestamp_ms=t)]


def offsets_and_listing(t: int) -> list[dict]:
    """A simple consumer committing to group "ledger" (one offset with a 20 s retention, so it expires during
    the traffic), fetching it back before and after, and an admin describing and fetching "orders"; and group
    "archive": two offsets committed, one deleted (OffsetDelete), then the group deleted with the other
    (DeleteGroups: tombstones on the snapshot and offsets topics), while a delete of the live "orders" is
    refused NON_EMPTY_GROUP."""
    def envelope(api: str, version: int, correlation_id: int, at: int, body: dict) -> dict:
        return {"api": api, "version": version, "correlation_id": correlation_id, "client_id": "admin",
                "client_host": "/10.0.0.99", "reply_to": "admin-1", "timestamp_ms": at, "body": body}

    def commit(version: int, correlation_id: int, at: int, partition: int, offset: int, group: str = "ledger",
               **extra: object) -> dict:
        body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", **extra,
                "topics": [{"name": "ledger-topic", "partitions": [
                    {"partition_index": partition, "committed_offset": offset, "committed_metadata": "admin"}]}]}
        return envelope("OffsetCommit", version, correlation_id, at, body)

    fetch = {"groups": [{"group_id": "ledger", "member_id": None, "member_epoch": -1, "topics": None}],
             "require_stable": False}
    return [
        commit(9, 101, t, 0, 42),
        commit(3, 102, t + 100, 1, 7, retention_time_ms=20_000),
        envelope("OffsetFetch", 9, 103, t + 200, fetch),
        envelope("DescribeGroups", 5, 104, t + 1000, {"groups": ["orders"], "include_authorized_operations": True}),
        envelope("OffsetFetch", 5, 105, t + 1100, {"group_id": "orders", "topics": None}),
        envelope("OffsetFetch", 8, 106, t + 30_000, fetch),
        commit(9, 107, t + 300, 0, 1, group="archive"),
        commit(9, 108, t + 400, 1, 2, group="archive"),
        envelope("OffsetDelete", 0, 109, t + 500, {"group_id": "archive", "topics": [
            {"name": "ledger-topic", "partitions": [{"partition_index": 0}]}]}),
        envelope("DeleteGroups", 2, 110, t + 600, {"groups_names": ["archive"]}),
        envelope("DeleteGroups", 1, 111, t + 1200, {"groups_names": ["orders"]}),
    ]


def write_traffic(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path
