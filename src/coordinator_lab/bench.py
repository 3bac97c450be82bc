"""`coordinator bench`: engine speed figures, printed (never asserted): measure, don't guess.

Figures are CPU time of this process (`time.process_time`), not wall time: the machines this runs on are
shared, and the engine is single-threaded pure Python, so its CPU time is what it costs. Set-up (building
the Stable groups) is linear in the number of members and not measured.
"""

from __future__ import annotations

import argparse
import base64
import json
import struct
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from coordinator_state import SIMULATION_EPOCH_MS as EPOCH_MS
from coordinator_state import (
    Api,
    EngineConfig,
    LocalCoordinator,
    encode_group,
    group_requests,
    request_envelope,
    run_group,
    to_json,
)
from coordinator_state.envelope import TOPIC_METADATA
from coordinator_state.streams.assignor import AssignorMember, SubtopologyTasks, assign

from .bench_spark import add_spark_bench_arguments, spark_bench_main

META = base64.b64encode(b"consumer-metadata").decode()
CONFIG = {"group.initial.rebalance.delay.ms": 3000}
COMMIT_TOPIC = "events"
STREAMS_MEMBERS = 1000
STREAMS_CONFIG = {"group.streams.initial.rebalance.delay.ms": 3000, "group.streams.assignment.interval.ms": 0}
GROUP_STEP_CALLS = 2000


def _subscription(topic: str) -> str:
    """A real ConsumerProtocol v0 subscription to `topic`, so that Stable groups know what they consume."""
    raw = struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", -1)
    return base64.b64encode(raw).decode()


def _join(group: str, client: str, instance: str | None, t: int, metadata: str = META) -> dict[str, Any]:
    body = {"group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 60000, "member_id": "",
            "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": metadata}], "reason": None}
    return request_envelope(Api.JOIN_GROUP, body, version=9, correlation_id=1, client_id=client, reply_to=client,
                            timestamp_ms=t)


def _sync(group: str, client: str, member: str, generation: int, t: int,
          assignments: list[dict[str, str]]) -> dict[str, Any]:
    body = {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": None,
            "protocol_type": "consumer", "protocol_name": "range", "assignments": assignments}
    return request_envelope(Api.SYNC_GROUP, body, version=5, correlation_id=2, client_id=client, reply_to=client,
                            timestamp_ms=t)


class JoinRound:
    """Every member of the groups joins (static, v9); at the end of the initial delay every group completes."""

    def __init__(self, coord: LocalCoordinator, members: dict[str, list[str]], t: int, metadata: str = META) -> None:
        self.coord = coord
        self.members = members  # group -> clients
        self.t = t
        self.joins = [_join(group, client, f"{client}-i{index}", t, metadata)
                      for group, clients in members.items() for index, client in enumerate(clients)]

    def join(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Sends the joins, completes the join phase; returns group -> client -> JoinGroup response body."""
        for request in self.joins:
            self.coord.handle(request)
        bodies: dict[str, dict[str, dict[str, Any]]] = {group: {} for group in self.members}
        for response in self.coord.advance_to(self.t + 10_000):
            bodies[response["group_id"]][response["reply_to"]] = response["body"]
        return bodies

    def sync(self, bodies: dict[str, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
        """The leader's SyncGroup (with everyone's assignment), then the followers'; returns their answers."""
        answers = []
        t = self.t + 10_001
        for group, by_client in bodies.items():
            leader = next(client for client, body in by_client.items() if body["leader"] == body["member_id"])
            assignments = [{"member_id": body["member_id"], "assignment": META} for body in by_client.values()]
            answers += self.coord.handle(_sync(group, leader, by_client[leader]["member_id"], 1, t, assignments))
            for client, body in by_client.items():
                if client != leader:
                    answers += self.coord.handle(_sync(group, client, body["member_id"], 1, t, []))
        return answers


def stable_groups(coord: LocalCoordinator, groups: int, members: int, t: int,
                  metadata: str = META) -> dict[str, list[tuple[str, str]]]:
    """Builds `groups` Stable groups of `members` static members; returns group -> [(client, member id)]."""
    layout = {f"group-{g}": [f"group-{g}-c{m}" for m in range(members)] for g in range(groups)}
    round_ = JoinRound(coord, layout, t, metadata)
    bodies = round_.join()
    answers = round_.sync(bodies)
    refused = sum(a["body"]["error_code"] != 0 for a in answers)
    if refused or len(answers) != groups * members:
        raise RuntimeError(f"set-up failed: {len(answers)} SyncGroup answers, {refused} refused")
    return {group: [(client, body["member_id"]) for client, body in by_client.items()]
            for group, by_client in bodies.items()}


def _timed_happy_path(coord: LocalCoordinator, requests: list[dict[str, Any]], what: str) -> float:
    """CPU seconds `coord` takes to handle `requests`; an error if any was refused (then the figure would not be
    the happy path's)."""
    errors = 0
    start = time.process_time()
    for request in requests:
        for response in coord.handle(request):
            errors += response["body"]["error_code"] != 0
    elapsed = time.process_time() - start
    if errors:
        raise RuntimeError(f"{errors} {what} were refused: the benchmark is not measuring the happy path")
    return elapsed


def bench_heartbeats(groups: int, members: int, rounds: int) -> dict[str, float]:
    coord = LocalCoordinator(CONFIG)
    ids = stable_groups(coord, groups, members, EPOCH_MS)
    t0 = EPOCH_MS + 11_000
    requests = []
    for r in range(rounds):
        t = t0 + r * 3000
        for group, clients in ids.items():
            for client, member in clients:
                body = {"group_id": group, "generation_id": 1, "member_id": member, "group_instance_id": None}
                requests.append(request_envelope(Api.HEARTBEAT, body, version=4, correlation_id=10 + r,
                                                 client_id=client, reply_to=client, timestamp_ms=t))
    elapsed = _timed_happy_path(coord, requests, "heartbeats")
    return {"heartbeat_requests_per_s": len(requests) / elapsed, "heartbeat_requests": len(requests)}


def bench_commits(groups: int, members: int, partitions: int, rounds: int) -> dict[str, float]:
    """Every member of Stable consumer groups commits its `partitions` partitions (one OffsetCommit v9 each),
    `rounds` times: the commit path, the offsets store and the expiry bookkeeping of a Stable group."""
    coord = LocalCoordinator(CONFIG)
    ids = stable_groups(coord, groups, members, EPOCH_MS, _subscription(COMMIT_TOPIC))
    t0 = EPOCH_MS + 11_000
    requests = []
    for r in range(rounds):
        t = t0 + r * 5000
        for group, clients in ids.items():
            for index, (client, member) in enumerate(clients):
                owned = range(index * partitions, (index + 1) * partitions)
                body = {"group_id": group, "generation_id_or_member_epoch": 1, "member_id": member,
                        "group_instance_id": f"{client}-i{index}", "topics": [{"name": COMMIT_TOPIC, "partitions": [
                            {"partition_index": p, "committed_offset": 1000 * r + p, "committed_leader_epoch": 0,
                             "committed_metadata": ""} for p in owned]}]}
                requests.append(request_envelope(Api.OFFSET_COMMIT, body, version=9, correlation_id=100 + r,
                                                 client_id=client, reply_to=client, timestamp_ms=t))
    elapsed = _timed_happy_path(coord, requests, "commits")
    changes = len(coord.drain_offset_changes())
    if changes != len(requests) * partitions:
        raise RuntimeError(f"{changes} offsets stored of {len(requests) * partitions}: the benchmark is not "
                           "measuring the happy path")
    return {"commits_per_s": len(requests) / elapsed, "committed_partitions_per_s": changes / elapsed,
            "commit_requests": len(requests)}


def bench_join_round(members: int) -> dict[str, float]:
    """One group of `members` static members: every JoinGroup, the join phase completing, every SyncGroup."""
    coord = LocalCoordinator(CONFIG)
    round_ = JoinRound(coord, {"big": [f"c{m}" for m in range(members)]}, EPOCH_MS)
    start = time.process_time()
    bodies = round_.join()
    answers = round_.sync(bodies)
    elapsed = time.process_time() - start
    if len(bodies["big"]) != members or sum(a["body"]["error_code"] == 0 for a in answers) != members:
        raise RuntimeError("the join round did not complete: the benchmark is broken")
    return {f"join_round_{members}_members_ms": elapsed * 1000}


def _streams_heartbeat(body: dict[str, Any], correlation_id: int, at: int) -> dict[str, Any]:
    client = str(body["member_id"])
    return request_envelope(Api.STREAMS_GROUP_HEARTBEAT, body, version=0, correlation_id=correlation_id,
                            client_id=client, reply_to=client, timestamp_ms=at)


def stable_streams_group(members: int, partitions: int) -> tuple[LocalCoordinator, list[tuple[str, int]], int]:
    """A Stable streams group "g" of `members` members (each a process of its own) on one topic of `partitions`
    partitions; returns the coordinator, each member's (id, epoch) and the time reached."""
    # Every member joins within the initial delay: one target assignment when it ends, not one per join.
    coord = LocalCoordinator(STREAMS_CONFIG)
    topology = {"epoch": 0, "subtopologies": [{"subtopology_id": "s", "source_topics": ["in"]}]}
    t = EPOCH_MS
    for i in range(members):
        join = _streams_heartbeat({"group_id": "g", "member_id": f"m{i}", "member_epoch": 0,
                                   "rebalance_timeout_ms": 30000, "topology": topology, "active_tasks": [],
                                   "standby_tasks": [], "warmup_tasks": [], "process_id": f"p{i}"}, 1, t)
        join[TOPIC_METADATA] = {"topics": [{"name": "in", "partitions": partitions}]}
        coord.handle(join)
    t += 3000
    coord.advance_to(t)
    for round_ in range(3):  # every member reports its tasks until all are Stable
        for member_id, epoch, owned in _streams_members(coord.describe("g")):
            t += 1
            coord.handle(_streams_heartbeat({"group_id": "g", "member_id": member_id, "member_epoch": epoch,
                                             "active_tasks": owned, "standby_tasks": [], "warmup_tasks": []},
                                            2 + round_, t))
    snapshot = coord.describe("g")
    if snapshot is None or snapshot["state"] != "Stable":
        raise RuntimeError("the streams group did not become Stable: the benchmark is broken")
    return coord, [(member_id, epoch) for member_id, epoch, _ in _streams_members(snapshot)], t


def bench_streams_heartbeats(members: int, rounds: int) -> dict[str, float]:
    """Heartbeats of a Stable streams group of `members` members (each a process of its own, 1,000 tasks) through
    `LocalCoordinator.handle`: envelope, routing, parsing, the streams group type and the answer, as the classic
    heartbeats are measured."""
    coord, ids, t = stable_streams_group(members, 1000)
    requests = [_streams_heartbeat({"group_id": "g", "member_id": member_id, "member_epoch": epoch}, 10 + r, t + 1 + r)
                for r in range(rounds) for member_id, epoch in ids]
    elapsed = _timed_happy_path(coord, requests, "streams heartbeats")
    return {"streams_heartbeats_per_s": len(requests) / elapsed, "streams_heartbeats": len(requests)}


def _timed_group_step(state: bytes, calls: list[list[dict[str, Any]]], config: Mapping[str, Any], what: str) -> float:
    """CPU microseconds per call of the engine's per-group step as the Spark job makes it: the call's raw records
    parsed, then `run_group` on the group's stored state (decoded, the requests handled, encoded again), the state
    carried to the next call; an error if any request was refused."""
    engine = EngineConfig.from_mapping(config)
    raws = [[to_json(request).encode() for request in call] for call in calls]
    errors = 0
    start = time.process_time()
    for call in raws:
        requests = group_requests([(raw, None) for raw in call], None)
        outcome = run_group(state, requests[0].timestamp_ms - 1, requests, engine)
        if outcome.state is None:
            raise RuntimeError("the group is gone: the benchmark is broken")
        state = outcome.state
        errors += sum(response["body"]["error_code"] != 0 for response in outcome.responses)
    elapsed = time.process_time() - start
    if errors:
        raise RuntimeError(f"{errors} {what} were refused: the benchmark is not measuring the happy path")
    return elapsed / len(raws) * 1e6


def bench_group_step(members: int) -> dict[str, float]:
    """The Spark job's per-group call (`run_group`, PROTOCOL.md section 7) with 2 heartbeats each: a Stable group
    of `members` static classic members, and a Stable streams group of `members` members with 10 tasks each;
    every member heartbeats every 3 s."""
    coord = LocalCoordinator(CONFIG)
    ids = stable_groups(coord, 1, members, EPOCH_MS)["group-0"]
    t0 = EPOCH_MS + 11_000
    heartbeats = []
    for i in range(2 * GROUP_STEP_CALLS):
        (client, member), at = ids[i % members], t0 + i // members * 3000 + i % members
        body = {"group_id": "group-0", "generation_id": 1, "member_id": member, "group_instance_id": None}
        heartbeats.append(request_envelope(Api.HEARTBEAT, body, version=4, correlation_id=10 + i, client_id=client,
                                           reply_to=client, timestamp_ms=at))
    classic = _timed_group_step(encode_group(coord.groups["group-0"]), _pairs(heartbeats), CONFIG, "heartbeats")
    streams_coord, streams_ids, t = stable_streams_group(members, 10 * members)
    heartbeats = []
    for i in range(2 * GROUP_STEP_CALLS):
        (member_id, epoch), at = streams_ids[i % members], t + 1 + i // members * 3000 + i % members
        heartbeats.append(_streams_heartbeat({"group_id": "g", "member_id": member_id, "member_epoch": epoch},
                                             10 + i, at))
    streams = _timed_group_step(encode_group(streams_coord.groups["g"]), _pairs(heartbeats), STREAMS_CONFIG,
                                "streams heartbeats")
    return {"group_step_classic_us_per_call": classic, "group_step_streams_us_per_call": streams}


def _pairs(requests: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [requests[i:i + 2] for i in range(0, len(requests), 2)]


def _streams_members(snapshot: Mapping[str, Any] | None) -> list[tuple[str, int, list[dict[str, Any]]]]:
    """Each member of a streams group's snapshot: its id, epoch and assigned active tasks (as a heartbeat reports
    them)."""
    assert snapshot is not None
    return [(m["member_id"], m["member_epoch"], m["assigned_tasks"]["active_tasks"]) for m in snapshot["members"]]


def bench_streams_assignment(members: int, tasks: int, standby_replicas: int) -> dict[str, float]:
    """One target assignment of the streams sticky assignor: `members` members (half static, four to a process)
    and `tasks` tasks in ten subtopologies (half stateful), `standby_replicas` standbys; then the same group
    again from that assignment (the sticky path a rebalance takes)."""
    subtopologies = [SubtopologyTasks(f"s{i}", tasks // 10, i % 2 == 0) for i in range(10)]
    group = [AssignorMember(f"m{i}", f"i{i}" if i % 2 else None, f"p{i // 4}") for i in range(members)]
    start = time.process_time()
    first = assign(group, subtopologies, standby_replicas)
    fresh = time.process_time() - start
    again = [AssignorMember(m.member_id, m.instance_id, m.process_id, first[m.member_id].active,
                            first[m.member_id].standby) for m in group]
    start = time.process_time()
    second = assign(again, subtopologies, standby_replicas)
    sticky = time.process_time() - start
    if sum(len(t.active) for t in second.values()) != tasks // 10 * 10 or second != first:
        raise RuntimeError("the assignment is not complete or not sticky: the benchmark is broken")
    key = f"streams_assignment_{members}_members_{tasks}_tasks_{standby_replicas}_standby"
    return {f"{key}_ms": fresh * 1000, f"{key}_sticky_ms": sticky * 1000}


def _sizes(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", choices=["local", "spark", "both"], default="local",
                        help="local: the pure-Python engine alone; spark: the streaming job (replay and live paths); "
                             "both: the streaming job and the local engine on the same traffic, and their ratio")
    parser.add_argument("--groups", type=int, default=10_000, help="groups (local: Stable groups for the heartbeats)")
    parser.add_argument("--members", type=int, default=10, help="members per group")
    parser.add_argument("--rounds", type=int, default=3, help="heartbeats (and commits) per member")
    parser.add_argument("--partitions", type=int, default=6, help="partitions each member commits per OffsetCommit")
    parser.add_argument("--join-members", type=_sizes, default=[1000, 10_000], metavar="N[,N...]",
                        help="members in each measured join round (default 1000,10000)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line on stdout")
    add_spark_bench_arguments(parser)


def bench_main(args: argparse.Namespace, settings: Mapping[str, Any],
               show: Callable[[str], None] = lambda line: None) -> int:
    """The figures of `args.engine` (with `--live`, the live path on Spark); `show` gets the live path's status
    line."""
    if args.engine != "local" or args.live:
        spark_figures = spark_bench_main(args, settings, show)
        print(json.dumps(spark_figures) if args.json else json.dumps(spark_figures, indent=2))
        return 0
    print(f"building {args.groups} Stable groups x {args.members} members...", file=sys.stderr)
    figures: dict[str, Any] = {"engine": args.engine, "clock": "process_time"}
    figures.update(bench_heartbeats(args.groups, args.members, args.rounds))
    print(f"heartbeats: {figures['heartbeat_requests_per_s']:,.0f}/s", file=sys.stderr)
    print(f"building {args.groups} Stable consumer groups x {args.members} members for commits of "
          f"{args.partitions} partitions...", file=sys.stderr)
    figures.update(bench_commits(args.groups, args.members, args.partitions, args.rounds))
    print(f"commits: {figures['commits_per_s']:,.0f}/s", file=sys.stderr)
    print(f"streams heartbeats of one Stable group of {STREAMS_MEMBERS} members...", file=sys.stderr)
    figures.update(bench_streams_heartbeats(STREAMS_MEMBERS, args.rounds))
    print(f"streams heartbeats: {figures['streams_heartbeats_per_s']:,.0f}/s", file=sys.stderr)
    print(f"the Spark job's per-group call, 2 heartbeats each, Stable groups of {args.members} members...",
          file=sys.stderr)
    figures.update(bench_group_step(args.members))
    print(f"per-group call: classic {figures['group_step_classic_us_per_call']:,.0f} us, "
          f"streams {figures['group_step_streams_us_per_call']:,.0f} us", file=sys.stderr)
    print("streams assignment of 1000 members x 1000 tasks, 1 standby...", file=sys.stderr)
    figures.update(bench_streams_assignment(1000, 1000, 1))
    join_members: Sequence[int] = args.join_members
    for members in join_members:
        print(f"join round of {members} static members...", file=sys.stderr)
        figures.update(bench_join_round(members))
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key}: {value:,.1f}" if isinstance(value, float) else f"{key}: {value}")
    return 0
