"""Property tests: random clients against the engine, and the invariants that must hold throughout.

One leader when members exist, generations never go back, the static map and the member map agree,
the derived counters match the members, every request is answered exactly once once time has
passed, state survives serialisation, and the same input gives the same output whatever the
micro-batch boundaries (the Spark job's contract).
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_state import (
    EngineConfig,
    LocalCoordinator,
    ReplayDriver,
    decode_group,
    encode_group,
    parse_request,
    run_group,
    snapshot_of,
)
from coordinator_state.classic import ClassicGroup
from coordinator_state.classic.model import ClassicGroupState
from coordinator_state.codec import stored_value
from coordinator_state.output import orjson_writes_alike

from .harness import EPOCH_MS, b64

CLIENTS = ["a", "b", "c", "d"]
CONFIG = {"group.initial.rebalance.delay.ms": 3000, "group.max.size": 3,
          "coordinator.empty.group.retention.ms": 120000}


def random_walk(seed: int, length: int) -> list[tuple[Any, ...]]:
    """Mostly well-behaved clients (so that groups do reach Stable), mixed with every kind of misbehaviour."""
    rng = random.Random(seed)
    steps: list[tuple[Any, ...]] = []
    for _ in range(length):
        client = rng.choice(CLIENTS)
        roll = rng.random()
        if roll < 0.55:
            steps.append(("next", client))
        elif roll < 0.75:
            steps.append(("sleep", rng.choice([0, 100, 1000, 3000, 4000, 11000, 31000])))
        elif roll < 0.82:
            steps.append(("join", client, rng.choice(["known", "empty", "stale"]),
                          rng.choice([("range",), ("range", "roundrobin"), ("roundrobin",)]), rng.choice([3, 4, 9])))
        elif roll < 0.87:
            steps.append(("sync", client, rng.random() < 0.5, rng.choice([2, 5])))
        elif roll < 0.91:
            steps.append(("heartbeat", client, rng.random() < 0.7, rng.choice([2, 4])))
        elif roll < 0.96:
            steps.append(("leave", client, rng.choice(["self", "instance", "stale"]), rng.choice([1, 5])))
        else:
            steps.append(("restart", client))
    return steps


walks = st.builds(random_walk, st.integers(0, 2**32), st.integers(10, 250))


Timeouts = dict[str, tuple[int, int]]  # client -> (session, rebalance) timeout of its joins
DEFAULT_TIMEOUTS: Timeouts = dict.fromkeys(CLIENTS, (10000, 20000))


class Clients:
    """Turns random actions into plausible (and implausible) requests, remembering what each client was told."""

    def __init__(self, static: dict[str, bool], timeouts: Timeouts = DEFAULT_TIMEOUTS) -> None:
        self.static = static
        self.timeouts = timeouts
        self.member_id = dict.fromkeys(CLIENTS, "")
        self.stale_id = dict.fromkeys(CLIENTS, "gone")
        self.generation = dict.fromkeys(CLIENTS, -1)
        self.incarnation = dict.fromkeys(CLIENTS, 0)
        self.synced = dict.fromkeys(CLIENTS, False)
        self.waiting: dict[str, set[int]] = {c: set() for c in CLIENTS}
        self.leader: dict[str, str] = {}
        self.protocol: dict[str, str | None] = {}
        self.correlation = 0
        self.now = EPOCH_MS

    def learn(self, responses: list[dict[str, Any]]) -> None:
        for r in responses:
            client = r["reply_to"].split("#")[0]
            if r["reply_to"] != self._reply_to(client):
                continue
            body = r["body"]
            self.waiting[client].discard(r["correlation_id"])
            if r["api"] == "JoinGroup" and body.get("member_id"):
                if self.member_id[client] and self.member_id[client] != body["member_id"]:
                    self.stale_id[client] = self.member_id[client]
                self.member_id[client] = body["member_id"]
                self.generation[client] = body["generation_id"]
                self.leader[client] = body["leader"]
                self.protocol[client] = body["protocol_name"]
                self.synced[client] = False
            elif r["api"] == "SyncGroup":
                self.synced[client] = body["error"] == "NONE"
            if body["error"] in ("REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION") and r["api"] != "JoinGroup":
                self.generation[client] = -1
            if body["error"] in ("UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID") and r["api"] != "LeaveGroup":
                self.member_id[client] = ""

    def _reply_to(self, client: str) -> str:
        return f"{client}#{self.incarnation[client]}"

    def natural_next(self, client: str) -> tuple[Any, ...]:
        """What a well-behaved consumer would send now: join, then sync, then heartbeat."""
        if self.waiting[client]:
            return ("sleep", 100)
        if not self.member_id[client] or self.generation[client] < 0:
            return ("join", client, "known", ("range",), 9)
        if not self.synced[client]:
            return ("sync", client, self.leader.get(client) == self.member_id[client], 5)
        return ("heartbeat", client, True, 4)

    def request(self, step: tuple[Any, ...]) -> dict[str, Any] | None:
        if step[0] == "next":
            step = self.natural_next(step[1])
        kind, client = step[0], step[1] if len(step) > 1 else ""
        if kind == "sleep":
            self.now += step[1]
            return None
        if kind == "restart":
            self.incarnation[client] += 1
            self.member_id[client] = ""
            self.generation[client] = -1
            self.waiting[client] = set()
            return None
        self.correlation += 1
        instance = f"i-{client}" if self.static[client] else None
        member_id = self.member_id[client]
        body: dict[str, Any] = {"group_id": "g"}
        version = 9
        if kind == "join":
            _, _, which, protocols, version = step
            chosen = {"known": member_id, "empty": "", "stale": self.stale_id[client]}[which]
            session, rebalance = self.timeouts[client]
            body.update(session_timeout_ms=session, rebalance_timeout_ms=rebalance, member_id=chosen,
                        group_instance_id=instance, protocol_type="consumer",
                        protocols=[{"name": p, "metadata": b64(client + p)} for p in protocols])
        elif kind == "sync":
            _, _, as_leader, version = step
            body.update(generation_id=self.generation[client], member_id=member_id, group_instance_id=instance,
                        protocol_type="consumer", protocol_name=self.protocol.get(client),
                        assignments=[{"member_id": m, "assignment": b64(m)} for m in self.member_id.values() if m]
                        if as_leader else [])
        elif kind == "heartbeat":
            _, _, current, version = step
            body.update(generation_id=self.generation[client] if current else self.generation[client] - 1,
                        member_id=member_id, group_instance_id=instance)
        else:
            _, _, which, version = step
            if version <= 2:
                body.update(member_id=self.stale_id[client] if which == "stale" else member_id)
            else:
                entry = {"self": (member_id, instance), "instance": ("", instance),
                         "stale": (self.stale_id[client], None)}[which]
                body.update(members=[{"member_id": entry[0], "group_instance_id": entry[1]}])
            api = "LeaveGroup"
        api = {"join": "JoinGroup", "sync": "SyncGroup", "heartbeat": "Heartbeat", "leave": "LeaveGroup"}[kind]
        self.waiting[client].add(self.correlation)
        return {"api": api, "version": version, "correlation_id": self.correlation, "client_id": f"client-{client}",
                "reply_to": self._reply_to(client), "timestamp_ms": self.now, "body": body}


def check_invariants(group: ClassicGroup, last_generation: int) -> int:
    members = group.members
    assert group.generation_id >= last_generation, "generations never go back"
    assert (group.leader is None) == (not members), "a leader exactly when there are members"
    assert group.leader is None or group.leader in members
    assert group.static_members == {m.group_instance_id: mid for mid, m in members.items()
                                    if m.group_instance_id is not None}, "static map agrees with members"
    assert group.awaiting_join == sum(m.join_waiter is not None for m in members.values())
    counts: dict[str, int] = {}
    for m in members.values():
        for name in {p.name for p in m.protocols}:
            counts[name] = counts.get(name, 0) + 1
    assert group.protocol_counts == counts
    assert not set(group.pending_members) & set(members), "a pending id is not a member"
    if group.state is ClassicGroupState.EMPTY:
        assert not members and group.protocol_name is None
    if group.state is not ClassicGroupState.COMPLETING_REBALANCE:
        assert all(m.sync_waiter is None for m in members.values()), "only CompletingRebalance parks syncs"
    if group.state is not ClassicGroupState.PREPARING_REBALANCE:
        assert group.awaiting_join == 0, "only PreparingRebalance parks joins"
    assert encode_group(decode_group(encode_group(group), group.config)) == encode_group(group)
    assert orjson_writes_alike(stored_value(group)), "the stored state holds only what codec.encode_group writes"
    return group.generation_id


def play(steps: list[tuple[Any, ...]], static: dict[str, bool], timeouts: Timeouts = DEFAULT_TIMEOUTS,
         config: dict[str, Any] = CONFIG) -> tuple[list[dict[str, Any]], list[dict[str, Any]], LocalCoordinator]:
    """Runs the steps against a LocalCoordinator, checking invariants; returns (requests, responses)."""
    coordinator = LocalCoordinator(config)
    clients = Clients(static, timeouts)
    requests: list[dict[str, Any]] = []
    responses: list[dict[str, Any]] = []
    generation = 0
    last_group = None
    for step in steps:
        request = clients.request(step)
        if request is None:
            out = coordinator.advance_to(clients.now)
        else:
            requests.append(request)
            out = coordinator.handle(request)
        responses += out
        clients.learn(out)
        group = coordinator.groups.get("g")
        if group is not last_group:  # removed, or removed and created again: a new generation sequence
            generation, last_group = 0, group
        generation = 0 if group is None else check_invariants(group, generation)
    responses += coordinator.advance_to(clients.now + 10**8)
    return requests, responses, coordinator


def keyed(responses: list[dict[str, Any]]) -> dict[tuple[str, int], str]:
    out: dict[tuple[str, int], str] = {}
    for r in responses:
        key = (r["reply_to"], r["correlation_id"])
        assert key not in out, f"answered twice: {key}"
        out[key] = json.dumps(r, sort_keys=True)
    return out


STATIC = st.fixed_dictionaries({c: st.booleans() for c in CLIENTS})


@settings(max_examples=150, deadline=None)
@given(walks, STATIC)
def test_invariants_hold_and_every_request_is_answered_exactly_once(steps: list[tuple[Any, ...]],
                                                                    static: dict[str, bool]) -> None:
    requests, responses, _ = play(steps, static)
    answered = keyed(responses)
    assert set(answered) == {(r["reply_to"], r["correlation_id"]) for r in requests}


@settings(max_examples=60, deadline=None)
@given(walks, STATIC)
def test_the_same_input_gives_the_same_output(steps: list[tuple[Any, ...]], static: dict[str, bool]) -> None:
    _, first, one = play(steps, static)
    _, second, two = play(steps, static)
    assert first == second and one.describe("g") == two.describe("g")


@settings(max_examples=80, deadline=None)
@given(walks, STATIC, st.lists(st.integers(1, 6), min_size=1, max_size=30),
       st.sampled_from([0, 2000]))
def test_micro_batch_boundaries_do_not_change_any_answer(steps: list[tuple[Any, ...]], static: dict[str, bool],
                                                         batch_sizes: list[int], lateness: int) -> None:
    """`run_group` over random micro-batches, as the Spark job calls it, equals the record-by-record replay."""
    requests, _, _ = play(steps, static)
    assert_micro_batches_answer_alike(requests, {**CONFIG, "coordinator.lateness.ms": lateness}, batch_sizes)


def assert_micro_batches_answer_alike(requests: list[dict[str, Any]], config: dict[str, Any],
                                      batch_sizes: list[int], group_id: str = "g") -> None:
    """`run_group` over micro-batches of the given sizes (in turn) answers as the record-by-record replay (all
    `requests` of the group `group_id`)."""
    lateness = int(config["coordinator.lateness.ms"])
    local = ReplayDriver(config)
    expected: list[dict[str, Any]] = []
    for number, request in enumerate(requests, start=1):
        expected += local.feed(request, f"script:{number}").responses

    engine = EngineConfig.from_mapping(config)
    state: bytes | None = None
    deadline: int | None = None
    actual: list[dict[str, Any]] = []
    watermark = 0
    position = 0
    sizes = iter(batch_sizes * (len(requests) + 1))
    while position < len(requests) or (deadline is not None and deadline <= watermark):
        batch = requests[position:position + next(sizes)]
        position += len(batch)
        if batch or (deadline is not None and deadline <= watermark):
            outcome = run_group(state, watermark, [parse_request(r) for r in batch], engine)  # type: ignore[misc]
            state, deadline = outcome.state, outcome.next_deadline
            actual += outcome.responses
        if batch:
            watermark = max(watermark, max(r["timestamp_ms"] for r in batch) - lateness)
    assert keyed(actual) == keyed(expected)
    final = None if state is None else snapshot_of(decode_group(state, engine))
    assert final == local.coordinator.describe(group_id)
