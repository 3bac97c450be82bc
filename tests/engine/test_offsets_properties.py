"""Properties over random static and dynamic clients that join, sync, heartbeat, leave, restart and commit.

A fenced or stale member's commit never changes a committed offset, and a fetch always returns the last
accepted commit of every partition. And `run_group` over random micro-batches, as the Spark job calls
it, gives the same answers and the same offsets topic as the record-by-record replay, expiry included.

"Fenced or stale" is judged from the group's snapshot just before the commit (the clock has already been
advanced, so no timer is due in between): the member id is not a member, the instance id maps to
another member, or the generation is not the group's. Every commit carries a fresh offset value, so a
change is always visible.
"""

from __future__ import annotations

import base64
import random
import struct
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_state import (
    EngineConfig,
    LocalCoordinator,
    ReplayDriver,
    decode_group,
    parse_request,
    run_group,
    snapshot_of,
)
from coordinator_state.envelope import SIMULATION_EPOCH_MS, Api, request_envelope

from .harness import b64

CLIENTS = ["a", "b", "c"]
# Real consumer-protocol subscriptions, so that a Stable group knows its topics: with client a in the
# group the committed topic "t" is subscribed and kept, without it "t" can expire (offsets.retention).
SUBSCRIPTIONS = {"a": ("t",), "b": ("u",), "c": ("u", "v")}


def subscription(topics: tuple[str, ...]) -> str:
    raw = struct.pack(">hi", 0, len(topics)) + b"".join(struct.pack(">h", len(t)) + t.encode() for t in topics)
    return base64.b64encode(raw + struct.pack(">i", -1)).decode()


PARTITIONS = [0, 1, 2]
MODES = ["current", "current", "stale_generation", "stale_id", "other_instance", "simple", "without_instance"]


class Client:
    def __init__(self, name: str, static: bool) -> None:
        self.name = name
        self.instance = f"i-{name}" if static else None
        self.member_id = ""
        self.generation = -1
        self.old_ids: list[str] = []
        self.synced = False
        self.incarnation = 0


class World:
    def __init__(self, rng: random.Random, static: list[bool]) -> None:
        self.rng = rng
        self.coord = LocalCoordinator({"group.initial.rebalance.delay.ms": 0})
        self.clients = {name: Client(name, s) for name, s in zip(CLIENTS, static, strict=True)}
        self.now = SIMULATION_EPOCH_MS
        self.correlation = 0
        self.next_offset = 0
        self.committed: dict[int, int] = {}  # partition -> the last accepted offset
        self.commits = self.refused_stale = 0
        self.requests: list[dict[str, Any]] = []

    def send(self, api: str, client: Client, body: dict[str, Any], version: int) -> list[dict[str, Any]]:
        self.correlation += 1
        request = request_envelope(api, {"group_id": "g", **body}, version=version, correlation_id=self.correlation,
                                   client_id=f"client-{client.name}", reply_to=f"{client.name}#{client.incarnation}",
                                   timestamp_ms=self.now)
        self.requests.append(request)
        responses = self.coord.handle(request)
        self.learn(responses)
        return [r for r in responses if r["correlation_id"] == self.correlation]

    def learn(self, responses: list[dict[str, Any]]) -> None:
        for r in responses:
            name, incarnation = r["reply_to"].split("#")
            client = self.clients[name]
            if int(incarnation) != client.incarnation:
                continue
            body = r["body"]
            if r["api"] == "JoinGroup" and body.get("member_id"):
                if client.member_id and client.member_id != body["member_id"]:
                    client.old_ids.append(client.member_id)
                client.member_id, client.generation, client.synced = body["member_id"], body["generation_id"], False
            elif r["api"] == "SyncGroup":
                client.synced = body["error"] == "NONE"
            if body["error"] in ("UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID", "ILLEGAL_GENERATION",
                                 "REBALANCE_IN_PROGRESS") and r["api"] in ("SyncGroup", "Heartbeat"):
                client.generation = -1

    def step(self) -> None:
        client = self.clients[self.rng.choice(CLIENTS)]
        roll = self.rng.random()
        if roll < 0.45:
            self.natural(client)
        elif roll < 0.7:
            self.commit(client, self.rng.choice(MODES))
        elif roll < 0.8:
            self.now += self.rng.choice([100, 3000, 11000, 31000, 65000])
            self.learn(self.coord.advance_to(self.now))
        elif roll < 0.85:
            client.incarnation += 1  # a crash and restart: the new process knows no member id
            if client.member_id:
                client.old_ids.append(client.member_id)
            client.member_id, client.generation, client.synced = "", -1, False
        elif roll < 0.9 and client.member_id:
            self.send(Api.LEAVE_GROUP, client, {"members": [
                {"member_id": client.member_id, "group_instance_id": client.instance, "reason": None}]}, 5)
        self.check_fetch()

    def natural(self, client: Client) -> None:
        if not client.member_id or client.generation < 0:
            body = {"session_timeout_ms": 10000, "rebalance_timeout_ms": 20000, "member_id": client.member_id,
                    "group_instance_id": client.instance, "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": subscription(SUBSCRIPTIONS[client.name])}],
                    "reason": None}
            self.send(Api.JOIN_GROUP, client, body, 9)
        elif not client.synced:
            snapshot = self.coord.describe("g")
            members = [] if snapshot is None else [m["member_id"] for m in snapshot["members"]]
            self.send(Api.SYNC_GROUP, client, {
                "generation_id": client.generation, "member_id": client.member_id,
                "group_instance_id": client.instance, "protocol_type": "consumer", "protocol_name": "range",
                "assignments": [{"member_id": m, "assignment": b64(m)} for m in members]}, 5)
        else:
            self.send(Api.HEARTBEAT, client, {"generation_id": client.generation, "member_id": client.member_id,
                                              "group_instance_id": client.instance}, 4)

    def commit(self, client: Client, mode: str) -> None:
        member_id, instance, generation, version = client.member_id, client.instance, client.generation, 9
        if mode == "stale_generation":
            generation = max(generation, 0) + self.rng.choice([-1, 1, 2])
        elif mode == "stale_id" and client.old_ids:
            member_id = self.rng.choice(client.old_ids)
        elif mode == "other_instance":
            instance = self.rng.choice([f"i-{c}" for c in CLIENTS])
        elif mode == "simple":
            member_id, instance, generation = "", None, -1
        elif mode == "without_instance":
            instance, version = None, 6
        partitions = self.rng.sample(PARTITIONS, self.rng.randint(1, len(PARTITIONS)))
        offsets = {}
        for p in partitions:
            self.next_offset += 1
            offsets[p] = self.next_offset
        before = self.coord.describe("g")
        stale = generation >= 0 and (
            before is None
            or generation != before["generation_id"]
            or member_id not in {m["member_id"] for m in before["members"]}
            or (instance is not None and {m["group_instance_id"]: m["member_id"]
                                          for m in before["members"]}.get(instance) != member_id))
        [answer] = self.send(Api.OFFSET_COMMIT, client, {
            "generation_id_or_member_epoch": generation, "member_id": member_id, "group_instance_id": instance,
            "topics": [{"name": "t", "partitions": [{"partition_index": p, "committed_offset": o}
                                                    for p, o in offsets.items()]}]}, version)
        [topic] = answer["body"]["topics"]
        errors = {p["partition_index"]: p["error"] for p in topic["partitions"]}
        assert set(errors) == set(offsets)
        if stale:
            assert answer["body"]["error"] != "NONE" and set(errors.values()) == {answer["body"]["error"]}, answer
            self.refused_stale += 1
        for p, error in errors.items():
            if error == "NONE":
                self.committed[p] = offsets[p]
                self.commits += 1

    def check_fetch(self) -> None:
        client = self.clients[CLIENTS[0]]
        [answer] = self.send(Api.OFFSET_FETCH, client, {"topics": [{"name": "t", "partition_indexes": PARTITIONS}]}, 7)
        [topic] = answer["body"]["topics"] or [{"partitions": []}]
        fetched = {p["partition_index"]: p["committed_offset"] for p in topic["partitions"]}
        assert fetched == {p: self.committed.get(p, -1) for p in PARTITIONS}, (fetched, self.committed)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.lists(st.booleans(), min_size=3, max_size=3), st.integers(20, 200))
def test_stale_commits_change_nothing_and_fetch_returns_the_last_accepted(
        seed: int, static: list[bool], length: int) -> None:
    world = World(random.Random(seed), static)
    for _ in range(length):
        world.step()


def test_the_walk_does_commit_and_does_refuse_stale_commits() -> None:
    """The property above is not vacuous: over a few walks, commits are both accepted and refused as stale."""
    commits = refused = 0
    for seed in range(20):
        world = World(random.Random(seed), [seed % 2 == 0, True, False])
        for _ in range(150):
            world.step()
        commits += world.commits
        refused += world.refused_stale
    assert commits > 50 and refused > 50, (commits, refused)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32), st.lists(st.booleans(), min_size=3, max_size=3),
       st.lists(st.integers(1, 8), min_size=1, max_size=20), st.sampled_from([0, 2000]))
def test_micro_batches_give_the_same_answers_and_offsets_topic(
        seed: int, static: list[bool], batch_sizes: list[int], lateness: int) -> None:
    world = World(random.Random(seed), static)
    for _ in range(120):
        world.step()
    requests = world.requests
    config = {"group.initial.rebalance.delay.ms": 0, "offsets.retention.minutes": 1,
              "coordinator.lateness.ms": lateness}
    local = ReplayDriver(config)
    expected: dict[tuple[str, int], dict[str, Any]] = {}
    for number, request in enumerate(requests, start=1):
        expected.update(((r["reply_to"], r["correlation_id"]), r) for r in local.feed(request, f"n:{number}").responses)
    finished = local.finish()
    expected.update(((r["reply_to"], r["correlation_id"]), r) for r in finished.responses)

    engine = EngineConfig.from_mapping(config)
    state: bytes | None = None
    deadline: int | None = None
    actual: dict[tuple[str, int], dict[str, Any]] = {}
    offsets: dict[str, dict[str, Any]] = {}
    watermark, position = 0, 0
    sizes = iter(batch_sizes * (len(requests) + 1))
    final_watermark = max(r["timestamp_ms"] for r in requests) - lateness
    while position < len(requests) or (deadline is not None and deadline <= watermark):
        batch = requests[position:position + next(sizes)]
        position += len(batch)
        # A micro-batch runs under the watermark the batches before it set, as in Spark.
        outcome = run_group(state, watermark, [parse_request(r) for r in batch], engine)  # type: ignore[misc]
        state, deadline = outcome.state, outcome.next_deadline
        actual.update(((r["reply_to"], r["correlation_id"]), r) for r in outcome.responses)
        offsets.update((c.key, c.line()) for c in outcome.offset_changes)
        if batch:
            watermark = max(watermark, max(r["timestamp_ms"] for r in batch) - lateness)
    assert watermark == final_watermark
    assert actual == expected
    assert offsets == finished.offsets
    final = None if state is None else snapshot_of(decode_group(state, engine))
    assert final == local.coordinator.describe("g")
