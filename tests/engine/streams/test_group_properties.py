"""Property tests of the streams group over random static and dynamic clients (joins, heartbeats, -1 and -2
leaves, restarts with new member ids, crashes, standbys): no active task owned by two members at once, the group's
epochs only grow and so does each member's (the -2 marker aside), a -2 member's tasks go to nobody else while it
is in the group, and the state survives its codec between any two events (same answers, same snapshots)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_state.config import EngineConfig
from coordinator_state.output import from_json, to_json
from coordinator_state.records import Reply, StreamsGroupHeartbeat, Subtopology, TopicInfo, Topology
from coordinator_state.streams import heartbeat
from coordinator_state.streams.codec import decode_streams_group, encode_streams_group
from coordinator_state.streams.group import StreamsGroup
from coordinator_state.streams.heartbeat import streams_heartbeat
from coordinator_state.streams.tasks import TaskId, tasks_to_wire
from coordinator_state.streams.views import snapshot

CONFIG = EngineConfig.from_mapping({"group.streams.initial.rebalance.delay.ms": 0,
                                       "group.streams.assignment.interval.ms": 0,
                                       "group.streams.session.timeout.ms": 10000,
                                       "group.streams.num.standby.replicas": 1})
TOPOLOGY = Topology(0, (Subtopology("s", ("in",), state_changelog_topics=(TopicInfo("s-changelog"),)),
                        Subtopology("t", ("in2",))))
VIEW = (("in", 6), ("in2", 3), ("s-changelog", 6))
CLIENTS = 5  # 0-2 static (instance i0..i2), 3-4 dynamic
ACTIONS = ["join", "heartbeat", "heartbeat", "quiet_heartbeat", "quiet_heartbeat", "leave", "temporary_leave",
           "restart", "advance"]


@dataclass
class _Client:
    index: int
    incarnation: int = 0
    epoch: int | None = None  # None: not in the group (must join)
    owned: dict[str, list[TaskId]] = field(default_factory=dict)

    @property
    def member_id(self) -> str:
        return f"c{self.index}-{self.incarnation}"

    @property
    def instance_id(self) -> str | None:
        return f"i{self.index}" if self.index < 3 else None


def _request(client: _Client, epoch: int, t: int, correlation: int, quiet: bool) -> StreamsGroupHeartbeat:
    """A join, or a heartbeat reporting the client's tasks (quiet: reporting none, as when they are unchanged)."""
    joining = epoch == 0
    owned = {role: tuple((s, tuple(p["partitions"])) for p in tasks_to_wire(client.owned.get(role, ()))
                         for s in [p["subtopology_id"]]) for role in ("active", "standby", "warmup")}
    return StreamsGroupHeartbeat(
        Reply("StreamsGroupHeartbeat", 0, correlation, f"client-{client.index}", f"r{client.index}"), t, "/h",
        "g", client.member_id, epoch, 0, client.instance_id, None, 5000 if joining else -1,
        TOPOLOGY if joining else None,
        *(() if joining else None if quiet else owned[role] for role in ("active", "standby", "warmup")),
        f"p{client.index % 3}" if joining else None, None, None, None, None, False, VIEW if joining else ())


def _apply_answer(client: _Client, body: dict[str, Any], epoch_sent: int) -> None:
    if body["error_code"] != 0 or epoch_sent < 0:
        client.epoch, client.owned = None, {}
        return
    client.epoch = body["member_epoch"]
    for role in ("active", "standby", "warmup"):
        if body[f"{role}_tasks"] is not None:
            client.owned[role] = [(e["subtopology_id"], p) for e in body[f"{role}_tasks"] for p in e["partitions"]]


def _run(steps: list[tuple[str, int, int]], through_codec: bool, shortcut: bool = True) -> list[Any]:
    group: StreamsGroup | None = None
    clients = [_Client(i) for i in range(CLIENTS)]
    t, seen = 1_700_000_000_000, []
    last_epochs: dict[str, int] = {}
    group_epochs = (0, 0)
    for n, (action, index, delta) in enumerate(steps):
        client = clients[index]
        t += delta
        if group is not None:
            group.fire_due(t)
            if group.removed:
                group = None
        if action == "advance":
            continue
        if action == "restart":  # a crash and a new incarnation: new member id, same instance id
            client.incarnation += 1
            client.epoch, client.owned = None, {}
            action = "join"
        epoch = {"join": 0, "leave": -1, "temporary_leave": -2 if client.instance_id else -1}.get(
            action, client.epoch if client.epoch is not None else 0)
        request = _request(client, epoch, t, n, quiet=action == "quiet_heartbeat")
        steady = None if group is None or not shortcut else heartbeat.steady_heartbeat(group, request, t)
        outcome = steady or streams_heartbeat(group, request, t, CONFIG)
        group = outcome.group
        _apply_answer(client, outcome.body, epoch)
        seen.append(outcome.body)
        if group is None:
            continue
        if through_codec:
            group = decode_streams_group(from_json(to_json(encode_streams_group(group)).encode()), CONFIG)
        seen.append(snapshot(group))
        group_epochs = _check_invariants(group, last_epochs, group_epochs)
    return seen


def _check_invariants(group: StreamsGroup, last_epochs: dict[str, int], before: tuple[int, int]) -> tuple[int, int]:
    # no active task owned by two members at once (assigned or pending revocation)
    owners = Counter(task for m in group.members.values()
                     for task in (*m.assigned.active, *m.pending_revocation.active))
    assert all(count == 1 for count in owners.values()), owners
    # a -2 member's tasks go to nobody else while it is in the group
    for member in group.members.values():
        if member.member_epoch == -2:
            others = {task for m in group.members.values() if m is not member for task in m.assigned.active}
            assert not (set(member.assigned.active) & others)
    # the group's epochs only grow; so do members' epochs, the -2 marker aside
    assert group.group_epoch >= before[0] and group.assignment_epoch >= before[1]
    assert group.assignment_epoch <= group.group_epoch
    for member_id, member in group.members.items():
        previous = last_epochs.get(member_id)
        if previous is not None and previous != -2 and member.member_epoch != -2:
            assert member.member_epoch >= previous, (member_id, previous, member.member_epoch)
        last_epochs[member_id] = member.member_epoch
    return group.group_epoch, group.assignment_epoch


_steps = st.lists(st.tuples(st.sampled_from(ACTIONS), st.integers(0, CLIENTS - 1), st.integers(0, 6000)),
                  min_size=1, max_size=60)


@settings(max_examples=150)
@given(_steps)
def test_invariants_hold_and_the_codec_changes_nothing(steps: list[tuple[str, int, int]]) -> None:
    assert _run(steps, through_codec=False) == _run(steps, through_codec=True)


@settings(max_examples=100)
@given(_steps)
def test_the_steady_heartbeat_shortcut_answers_as_the_general_procedure(steps: list[tuple[str, int, int]]) -> None:
    assert _run(steps, through_codec=False, shortcut=False) == _run(steps, through_codec=False)


def test_a_rolling_bounce_of_static_members_moves_no_task_and_bumps_no_epoch() -> None:
    steps = [("join", i, 100) for i in range(3)] + [("heartbeat", i, 100) for i in range(3) for _ in range(3)]
    warm = _run(steps, through_codec=False)
    settled = warm[-1]
    bounce = steps + [step for i in range(3) for step in (("temporary_leave", i, 100), ("restart", i, 500),
                                                          ("heartbeat", i, 100))]
    after = _run(bounce, through_codec=False)[-1]
    assert after["group_epoch"] == settled["group_epoch"]
    assert {m["instance_id"]: m["assigned_tasks"] for m in after["members"]} == {
        m["instance_id"]: m["assigned_tasks"] for m in settled["members"]}
