"""The streams group type's events are atomic: a heartbeat that raises after changing its group (the fault is
injected after the real heartbeat ran) leaves the group exactly as it was, timers and answers included."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator_state.config import EngineConfig
from coordinator_state.envelope import Response
from coordinator_state.output import to_json
from coordinator_state.records import Reply, StreamsGroupHeartbeat, Subtopology, TopicInfo, Topology
from coordinator_state.streams import group_type
from coordinator_state.streams.group import SESSION_TIMER, StreamsGroup
from coordinator_state.streams.heartbeat import HeartbeatOutcome, streams_heartbeat
from coordinator_state.timers import TimerFailed

CONFIG = EngineConfig.from_mapping({"group.streams.initial.rebalance.delay.ms": 0,
                                    "group.streams.assignment.interval.ms": 0,
                                    "group.streams.num.standby.replicas": 1})
TOPOLOGY = Topology(0, (Subtopology("s", ("in",), state_changelog_topics=(TopicInfo("c"),)),))
VIEW = (("in", 4), ("c", 4))


def _hb(member: str, epoch: int, t: int, instance: str | None = None, process: str = "p1",
        owned: tuple[Any, ...] | None = None, reply_to: str = "r") -> StreamsGroupHeartbeat:
    join = epoch == 0
    lists = () if join else owned
    return StreamsGroupHeartbeat(
        Reply("StreamsGroupHeartbeat", 0, t, "client", reply_to), t, "/h", "g", member, epoch, 0, instance, None,
        30000 if join else -1, TOPOLOGY if join else None, lists, lists, lists, process if join else None, None,
        None, None, None, False, VIEW if join else ())


def _send(group: StreamsGroup | None, request: StreamsGroupHeartbeat) -> StreamsGroup:
    if group is None:
        assert group_type.absent_group(request, request.timestamp_ms) is None
        group = group_type.create(request.group_id, request.timestamp_ms, CONFIG)
    group_type.handle(group, request, request.timestamp_ms)
    group.drain_into([], [])
    return group


def _state(group: StreamsGroup) -> str:
    return to_json([group_type.encode(group), group_type.snapshot(group), group.out])


class InjectedFault(RuntimeError):
    pass


@pytest.fixture
def faulty(monkeypatch: pytest.MonkeyPatch) -> None:
    def run_then_fail(*args: Any) -> HeartbeatOutcome:
        outcome = streams_heartbeat(*args)
        if args[1].reply.reply_to == "faulty":
            raise InjectedFault("after the heartbeat")
        return outcome
    monkeypatch.setattr(group_type, "streams_heartbeat", run_then_fail)


STEPS = {
    "new member": _hb("b1", 0, 2000, process="p2", reply_to="faulty"),
    "revocation": _hb("a1", 2, 2500, instance="i1", owned=(("s", (0, 1, 2, 3)),), reply_to="faulty"),
    "temporary leave": _hb("a1", -2, 2500, instance="i1", reply_to="faulty"),
    "leave": _hb("b1", -1, 2500, reply_to="faulty"),
}


@pytest.mark.usefixtures("faulty")
@pytest.mark.parametrize("step", sorted(STEPS))
def test_a_heartbeat_that_raises_changes_nothing(step: str) -> None:
    group = _send(None, _hb("a1", 0, 1000, instance="i1"))
    if step != "new member":
        group = _send(group, _hb("b1", 0, 2000, process="p2"))
    before = _state(group)
    with pytest.raises(InjectedFault):
        group_type.handle(group, STEPS[step], STEPS[step].timestamp_ms)
    assert _state(group) == before
    # and the group goes on as if the failed request had never come
    group_type.handle(group, STEPS[step]._replace(reply=STEPS[step].reply._replace(reply_to="r")), 2600)
    answers: list[Response] = []
    group.drain_into(answers, [])
    assert answers[0]["body"]["error_code"] == 0


def test_a_refused_join_creates_no_group() -> None:
    refused = _hb("a1", 0, 1000)._replace(rebalance_timeout_ms=-1)
    answer = group_type.absent_group(refused, 1000)
    assert answer is not None and answer["body"]["error"] == "INVALID_REQUEST"


def test_a_timer_that_raises_changes_nothing_and_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    group = _send(None, _hb("a1", 0, 1000, instance="i1"))
    group = _send(group, _hb("b1", 0, 2000, process="p2"))
    before = group_type.snapshot(group)

    def fence_then_fail(self: StreamsGroup, member_id: str, t: int) -> None:
        original_fence(self, member_id, t)
        raise InjectedFault("after fencing")
    original_fence = StreamsGroup.fence
    monkeypatch.setattr(StreamsGroup, "fence", fence_then_fail)
    with pytest.raises(TimerFailed) as failed:
        group_type.fire_due(group, 46000)  # a1's session (b1's is due at 47000)
    assert isinstance(failed.value.__cause__, InjectedFault)
    monkeypatch.undo()
    assert group_type.snapshot(group) == before  # nothing changed...
    assert group.timers.get(SESSION_TIMER, "a1") is None  # ...but the failed timer is dropped
    group_type.fire_due(group, 47000)
    assert list(group.members) == ["a1"] and group.group_epoch == 4
