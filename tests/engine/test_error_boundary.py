"""The error boundary is atomic: a handler that raises after changing its group leaves the group as it was.

The fault is injected into the real handler (it runs, changes the group, then raises), the way Spark's
own tests kill a UDF mid-way; the request is answered UNKNOWN_SERVER_ERROR and nothing it changed stays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_state import Api, LocalCoordinator, classic, encode_group, request_envelope, streams
from coordinator_state.classic.data import GROUP, ClassicGroup
from coordinator_state.classic.handlers import HANDLERS
from coordinator_state.config import EngineConfig
from coordinator_state.group_step import fire_due
from coordinator_state.group_types import GROUP_TYPES
from coordinator_state.records import Request

from .harness import Env
from .test_properties import CLIENTS, CONFIG, STATIC, Clients, check_invariants, walks

FAULTY = "faulty"


class InjectedFault(RuntimeError):
    pass


@pytest.fixture
def fault_after_handler(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every handler runs as usual, then raises for a request whose reply_to is FAULTY."""
    for api, handler in list(HANDLERS.items()):
        monkeypatch.setitem(HANDLERS, api, _failing_after(handler))
    yield


def _failing_after(handler: Callable[[Any, Any, int], None]) -> Callable[[Any, Request, int], None]:
    def run(group: Any, request: Request, t: int) -> None:
        handler(group, request, t)
        if request.reply.reply_to == FAULTY:
            raise InjectedFault(f"after {request.reply.api}")
    return run


@pytest.mark.usefixtures("fault_after_handler")
@pytest.mark.parametrize("kind", ["leader rejoin", "new member", "leave", "heartbeat", "sync", "static replacement",
                                  "pending member joins"])
def test_a_failed_handler_leaves_the_group_exactly_as_before(kind: str) -> None:
    env = Env()
    if kind == "sync":  # CompletingRebalance, b's SyncGroup parked: the leader's would complete everyone's
        keys = {c: env.join(c, version=3) for c in ("a", "b")}
        env.sleep(10_000)
        ids = {c: env.body(key)["member_id"] for c, key in keys.items()}
        leader = next(c for c, m in ids.items() if m == env.describe()["leader"])
        follower = "b" if leader == "a" else "a"
        env.sync(follower, ids[follower], 1, version=3)
    else:
        ids = env.stable_group(["a", "b", "c"], static=kind == "static replacement")
        leader = next(c for c, m in ids.items() if m == env.describe()["leader"])
        if kind == "pending member joins":
            ids["d"] = env.body(env.join("d"))["member_id"]  # MEMBER_ID_REQUIRED: d is a pending id
    before = encode_group(env.coord.groups["g"])
    answered = len(env.responses)

    def send(reply_to: str | None = None) -> tuple[str, int]:
        if kind == "leader rejoin":  # starts a rebalance
            return env.join(leader, ids[leader], version=3, reply_to=reply_to)
        if kind == "new member":  # adds a member, starts a rebalance
            return env.join("d", version=3, reply_to=reply_to)
        if kind == "leave":  # removes two members, starts a rebalance
            return env.leave("a", [(ids["a"], None), (ids["b"], None)], reply_to=reply_to)
        if kind == "heartbeat":  # moves a session deadline
            return env.heartbeat("a", ids["a"], 1, reply_to=reply_to)
        if kind == "static replacement":  # a new member id in a's place (join order kept), no rebalance
            return env.join("a", instance="i-a", reply_to=reply_to)
        if kind == "pending member joins":  # the pending id becomes a member, a rebalance starts
            return env.join("d", ids["d"], reply_to=reply_to)
        assignments = {m: f"assignment-{c}" for c, m in ids.items()}
        return env.sync(leader, ids[leader], 1, assignments=assignments, version=3, reply_to=reply_to)

    assert env.error(send(FAULTY)) == "UNKNOWN_SERVER_ERROR"
    assert encode_group(env.coord.groups["g"]) == before
    assert [r["reply_to"] for r in env.responses[answered:]] == [FAULTY], "nothing else was decided"
    send()  # the same request, not faulted, does change the group: the test above could fail
    assert encode_group(env.coord.groups["g"]) != before


@pytest.mark.usefixtures("fault_after_handler")
@settings(max_examples=60, deadline=None)
@given(walks, STATIC, st.sets(st.integers(0, 120), min_size=1, max_size=12))
def test_any_request_that_fails_leaves_the_group_as_before(steps: list[tuple[Any, ...]], static: dict[str, bool],
                                                           faulty: set[int]) -> None:
    """Random clients; a few requests fail after their handler ran; the group never keeps their changes."""
    coordinator = LocalCoordinator(CONFIG)
    clients = Clients(static)
    generation = 0
    last_group = None
    for number, step in enumerate(steps):
        request = clients.request(step)
        if request is None:
            clients.learn(coordinator.advance_to(clients.now))
            continue
        if number in faulty:
            request = {**request, "reply_to": FAULTY}
            group = coordinator.groups.get("g")
            if group is not None:  # what handle does first: the group's clock, its due timers
                fire_due(group, max(request["timestamp_ms"], group.clock))
            before = None if group is None else encode_group(group)
            out = coordinator.handle(request)
            mine = [r for r in out if r["reply_to"] == FAULTY]
            after = coordinator.groups.get("g")
            if mine[0]["body"]["error"] == "UNKNOWN_SERVER_ERROR" and before is not None:
                assert after is not None and encode_group(after) == before
            clients.learn([r for r in out if r["reply_to"] != FAULTY])
        else:
            clients.learn(coordinator.handle(request))
        group = coordinator.groups.get("g")
        if group is not last_group:  # removed, or removed and created again: a new generation sequence
            generation, last_group = 0, group
        generation = 0 if group is None else check_invariants(group, generation)
    assert set(clients.member_id) == set(CLIENTS)


def test_a_failed_request_that_created_its_group_leaves_it_created_and_empty(fault_after_handler: None) -> None:
    env = Env()
    key = env.join("a", version=3, reply_to=FAULTY)
    assert env.error(key) == "UNKNOWN_SERVER_ERROR"
    snapshot = env.describe()
    assert (snapshot["state"], snapshot["members"], snapshot["version"]) == ("Empty", [], 1)


def test_the_group_types_handle_every_api() -> None:
    # ListGroups belongs to no group: LocalCoordinator answers it from every group's snapshot.
    handled = {api for kind in GROUP_TYPES.values() for api in kind.HANDLES}
    assert handled == set(Api) - {Api.LIST_GROUPS}
    assert set(HANDLERS) | streams.APIS == handled


def test_the_journal_saves_every_field_of_a_group_but_its_identity_and_attached_ones() -> None:
    """A field declared so that the journal leaves it out would keep a failed request's change."""
    assert set(ClassicGroup.__slots__) - set(GROUP.journaled) == {"group_type", "group_id", "created_ms", "config",
                                                                  "journal"}
    group = classic.create("g", 0, EngineConfig.from_mapping(None))
    values = {name: {name: 1} for name in GROUP.journaled}
    for name, value in values.items():
        setattr(group, name, value)
    saved = GROUP.before_image(group)
    for name in values:
        setattr(group, name, None)
    GROUP.restore(group, saved)
    assert {name: getattr(group, name) for name in values} == values


@pytest.mark.parametrize("failing", ["deciding", "converted"])
def test_a_failed_request_that_converts_its_group_leaves_the_old_group(monkeypatch: pytest.MonkeyPatch,
                                                                      failing: str) -> None:
    """A streams join on an Empty classic group holding offsets converts it (PROTOCOL.md 10); an engine error in
    that join, while deciding whether it may convert the group or in the converted group, answers
    UNKNOWN_SERVER_ERROR and keeps the classic group with its offsets, not an empty streams one."""
    coordinator = LocalCoordinator({"group.streams.initial.rebalance.delay.ms": 0})
    commit = {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
        {"name": "in", "partitions": [{"partition_index": 0, "committed_offset": 7, "committed_metadata": ""}]}]}
    coordinator.handle(request_envelope(Api.OFFSET_COMMIT, commit, version=9, correlation_id=1, reply_to="admin",
                                        timestamp_ms=1000))
    before = coordinator.describe("g")

    heartbeat = streams.group_type.streams_heartbeat

    def fails_once(group: Any, *rest: Any) -> Any:
        if (group is None) == (failing == "converted"):  # None: deciding whether the join may convert the group
            return heartbeat(group, *rest)
        raise InjectedFault("in the streams heartbeat")
    monkeypatch.setattr(streams.group_type, "streams_heartbeat", fails_once)
    join = {"group_id": "g", "member_id": "m1", "member_epoch": 0, "rebalance_timeout_ms": 1000, "process_id": "p",
            "topology": {"epoch": 0, "subtopologies": [{"subtopology_id": "s", "source_topics": ["in"]}]},
            "active_tasks": [], "standby_tasks": [], "warmup_tasks": []}
    [answer] = coordinator.handle(request_envelope(Api.STREAMS_GROUP_HEARTBEAT, join, version=0, correlation_id=2,
                                                   reply_to=FAULTY, timestamp_ms=2000))
    assert answer["body"]["error"] == "UNKNOWN_SERVER_ERROR"
    assert coordinator.describe("g") == before and before is not None and "group_type" not in before
    assert coordinator.groups["g"].offsets.get("in", 0) is not None
