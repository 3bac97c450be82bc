"""`coordinator bench`: engine speed figures, printed (never asserted): measure, don't guess."""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from collections.abc import Mapping
from typing import Any

from coordinator_state import LocalCoordinator

from .bench_spark import add_spark_bench_arguments, spark_bench_main

EPOCH_MS = 1_700_000_000_000
META = base64.b64encode(b"consumer-metadata").decode()


def _join(group: str, client: str, instance: str | None, t: int, correlation_id: int) -> dict[str, Any]:
    return {"api": "JoinGroup", "version": 9, "correlation_id": correlation_id, "client_id": client,
            "reply_to": client, "timestamp_ms": t,
            "body": {"group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 60000,
                     "member_id": "", "group_instance_id": instance, "protocol_type": "consumer",
                     "protocols": [{"name": "range", "metadata": META}], "reason": None}}


def _sync(group: str, client: str, member: str, instance: str | None, generation: int, t: int,
          assignments: list[dict[str, str]]) -> dict[str, Any]:
    return {"api": "SyncGroup", "version": 5, "correlation_id": 2, "client_id": client, "reply_to": client,
            "timestamp_ms": t,
            "body": {"group_id": group, "generation_id": generation, "member_id": member,
                     "group_instance_id": instance, "protocol_type": "consumer", "protocol_name": "range",
                     "assignments": assignments}}


def _stable_groups(coord: LocalCoordinator, groups: int, members: int, t: int) -> dict[str, list[tuple[str, str]]]:
    """Builds `groups` Stable groups of static members; returns group -> [(client, member id)]."""
    ids: dict[str, list[tuple[str, str]]] = {}
    for g in range(groups):
        group = f"group-{g}"
        for m in range(members):
            coord.handle(_join(group, f"{group}-c{m}", f"{group}-i{m}", t, 1))
    responses = coord.advance_to(t + 10_000)
    for r in responses:
        ids.setdefault(r["group_id"], []).append((r["reply_to"], r["body"]["member_id"]))
    for group, clients in ids.items():
        for client, member in sorted(clients, key=lambda c: c[0] != clients[0][0]):
            leader = client == _leader_client(responses, group)
            assignments = [{"member_id": mid, "assignment": ""} for _, mid in clients] if leader else []
            coord.handle(_sync(group, client, member, None, 1, t + 10_001, assignments))
    return ids


def _leader_client(responses: list[dict[str, Any]], group: str) -> str:
    return next(str(r["reply_to"]) for r in responses
                if r["group_id"] == group and r["body"]["leader"] == r["body"]["member_id"])


def bench_heartbeats(groups: int, members: int, rounds: int) -> dict[str, float]:
    coord = LocalCoordinator({"group.initial.rebalance.delay.ms": 3000})
    ids = _stable_groups(coord, groups, members, EPOCH_MS)
    states = {coord.describe(g)["state"] for g in ids}  # type: ignore[index]
    if states != {"Stable"}:
        raise RuntimeError(f"setup failed: groups in states {states}")
    t0 = EPOCH_MS + 11_000
    requests = []
    for r in range(rounds):
        t = t0 + r * 3000
        for group, clients in ids.items():
            for client, member in clients:
                requests.append({"api": "Heartbeat", "version": 4, "correlation_id": 10 + r, "client_id": client,
                                 "reply_to": client, "timestamp_ms": t,
                                 "body": {"group_id": group, "generation_id": 1, "member_id": member,
                                          "group_instance_id": None}})
    errors = 0
    start = time.perf_counter()
    for request in requests:
        for response in coord.handle(request):
            errors += response["body"]["error_code"] != 0
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{errors} heartbeats were refused: the benchmark is not measuring the happy path")
    return {"heartbeat_requests_per_s": len(requests) / elapsed, "heartbeat_requests": len(requests)}


def bench_join_round(members: int) -> dict[str, float]:
    coord = LocalCoordinator({"group.initial.rebalance.delay.ms": 3000})
    joins = [_join("big", f"c{m}", f"i{m}", EPOCH_MS + m, 1) for m in range(members)]
    start = time.perf_counter()
    for request in joins:
        coord.handle(request)
    joined = coord.advance_to(EPOCH_MS + 20_000)
    by_client = {r["reply_to"]: r["body"] for r in joined}
    leader_client = next(c for c, b in by_client.items() if b["leader"] == b["member_id"])
    assignments = [{"member_id": b["member_id"], "assignment": META} for b in by_client.values()]
    t = EPOCH_MS + 20_001
    synced = coord.handle(_sync("big", leader_client, by_client[leader_client]["member_id"], None, 1, t, assignments))
    for client, body in by_client.items():
        if client != leader_client:
            synced += coord.handle(_sync("big", client, body["member_id"], None, 1, t, []))
    elapsed = time.perf_counter() - start
    if len(joined) != members or sum(r["body"]["error_code"] == 0 for r in synced) != members:
        raise RuntimeError("the join round did not complete: the benchmark is broken")
    return {"join_round_1000_members_ms" if members == 1000 else f"join_round_{members}_members_ms":
            elapsed * 1000}


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", choices=["local", "spark", "both"], default="local",
                        help="local: the pure-Python engine alone; spark: the streaming job (replay and live paths); "
                             "both: the streaming job and the local engine on the same traffic, and their ratio")
    parser.add_argument("--groups", type=int, default=10_000, help="groups (local: Stable groups for the heartbeats)")
    parser.add_argument("--members", type=int, default=10, help="members per group")
    parser.add_argument("--rounds", type=int, default=3, help="heartbeats per member")
    parser.add_argument("--join-members", type=int, default=1000, help="members in the join round")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line on stdout")
    add_spark_bench_arguments(parser)


def bench_main(args: argparse.Namespace, settings: Mapping[str, Any]) -> int:
    if args.engine != "local":
        spark_figures = spark_bench_main(args, settings)
        print(json.dumps(spark_figures) if args.json else json.dumps(spark_figures, indent=2))
        return 0
    print(f"building {args.groups} Stable groups x {args.members} members...", file=sys.stderr)
    figures: dict[str, Any] = {"engine": args.engine}
    figures.update(bench_heartbeats(args.groups, args.members, args.rounds))
    print(f"heartbeats: {figures['heartbeat_requests_per_s']:,.0f}/s", file=sys.stderr)
    print(f"join round of {args.join_members} static members...", file=sys.stderr)
    figures.update(bench_join_round(args.join_members))
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key}: {value:,.1f}" if isinstance(value, float) else f"{key}: {value}")
    return 0
