"""Recorded-traffic files for the end-to-end tests: simulated consumers, a silent group, hostile records.

Built from the chaos harness's simulated clients (real GroupMembers on the engine), so the traffic is
what a client would really send: joins, MEMBER_ID_REQUIRED rejoins, syncs, heartbeats, a static member
down for longer than its session, ticks. Hostile records are mixed in; each line is one record.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from chaos_harness import run_chaos
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
]


def _chaos_lines(group_id: str, scenario: str, membership: str, members: int, seed: int) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "traffic.jsonl"
        run_chaos({"scenario": scenario, "membership": membership, "members": members, "seed": seed,
                   "group_id": group_id, "settle_ms": 15000}, traffic=path)
        records = [json.loads(line) for line in path.read_text().splitlines()]
    for record in records:
        if "reply_to" in record:
            record["reply_to"] = f"{group_id}/{record['reply_to']}"
    return records


def build_traffic(size: str = "full") -> list[bytes]:
    """A traffic file's lines: `full` (two simulated groups, a silent one, hostile records) or `short`."""
    if size == "short":
        records = _chaos_lines("orders", "crash", "static", 2, seed=3)[:40]
    else:
        records = (_chaos_lines("orders", "crash-longer-than-session", "static", 4, seed=1)
                   + _chaos_lines("payments", "rolling-bounce", "dynamic", 3, seed=2))
    start = min(r["timestamp_ms"] for r in records)
    records += silent_group(start + 150)
    records.sort(key=lambda r: r["timestamp_ms"])  # stable: each source keeps its own order
    lines = [to_json(r).encode() for r in records]
    step = max(1, len(lines) // (len(HOSTILE) + 1))
    for index, hostile in enumerate(HOSTILE if size == "full" else HOSTILE[:3]):
        lines.insert((index + 1) * step, hostile)
    return lines


def silent_group(t: int) -> list[dict]:
    """One static member of group "quiet" that joins (v4, no MEMBER_ID_REQUIRED for static) and goes silent."""
    body = {"group_id": "quiet", "session_timeout_ms": 6000, "rebalance_timeout_ms": 6000, "member_id": "",
            "group_instance_id": "quiet-0", "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": ""}]}
    return [request_envelope(Api.JOIN_GROUP, body, version=5, correlation_id=1, client_id="quiet", reply_to="quiet-1",
                             timestamp_ms=t)]


def write_traffic(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path
