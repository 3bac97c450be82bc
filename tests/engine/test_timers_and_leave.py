"""Timers (SEMANTICS.md 2, 13) and LeaveGroup corners (8, 14.5)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_state.timers import TimerKind, Timers

from .harness import Env


def test_a_timer_due_exactly_at_a_requests_time_fires_before_it() -> None:
    env = Env()
    ids = env.stable_group(["a", "b"])
    # b never heartbeats; its session (10 s from its sync) ends exactly when a's heartbeat arrives.
    env.heartbeat("a", ids["a"], 1)
    expiry = env.coord.groups["g"].timers.get(TimerKind.HEARTBEAT, ids["b"])
    assert expiry is not None
    env.now = expiry.deadline
    body = env.body(env.heartbeat("a", ids["a"], 1))
    assert body["error"] == "REBALANCE_IN_PROGRESS"  # b expired first, at the same instant


def test_empty_group_is_removed_after_retention_and_can_start_again() -> None:
    env = Env(config={"group.initial.rebalance.delay.ms": 3000, "coordinator.empty.group.retention.ms": 60000})
    ids = env.stable_group(["a"])
    env.leave("a", [(ids["a"], None)])
    assert env.describe()["state"] == "Empty" and env.describe()["generation_id"] == 2
    env.sleep(59999)
    assert env.coord.describe("g") is not None
    env.sleep(1)
    assert env.coord.describe("g") is None
    assert env.error(env.heartbeat("a", ids["a"], 2)) == "UNKNOWN_MEMBER_ID"
    env.join("a", instance="ia")
    assert env.describe()["generation_id"] == 0 and env.describe()["state"] == "PreparingRebalance"


def test_heartbeating_dynamic_member_that_does_not_rejoin_is_removed_at_the_rebalance_timeout() -> None:
    env = Env()
    ids = env.stable_group(["a", "b"])
    leader = next(c for c in "ab" if ids[c] == env.describe()["leader"])
    other = "b" if leader == "a" else "a"
    rejoin = env.join(leader, ids[leader])
    for _ in range(9):  # 27 s of heartbeats, within the 30 s rebalance timeout
        env.sleep(3000)
        assert env.error(env.heartbeat(other, ids[other], 1)) == "REBALANCE_IN_PROGRESS"
    env.sleep(3001)
    assert env.body(rejoin)["generation_id"] == 2
    assert [m["member_id"] for m in env.describe()["members"]] == [ids[leader]]


def test_leave_of_a_member_with_a_parked_sync_answers_it_unknown_member() -> None:
    env = Env()
    for client in "ab":
        env.join(client, instance=f"i-{client}")
    env.sleep(6001)
    members = {m["group_instance_id"][2:]: m["member_id"] for m in env.describe()["members"]}
    follower = next(c for c in "ab" if members[c] != env.describe()["leader"])
    parked = env.sync(follower, members[follower], 1, f"i-{follower}")
    leave = env.leave("admin", [("", f"i-{follower}")])
    assert env.error(parked) == "UNKNOWN_MEMBER_ID"
    assert env.body(leave)["members"][0]["error"] == "NONE"
    assert len(env.describe()["members"]) == 1


def test_leave_during_the_initial_rebalance_does_not_complete_it_early() -> None:
    env = Env()
    a = env.join("a", instance="ia")
    b = env.join("b", instance="ib")
    env.leave("b", [("", "ib")])
    assert env.error(b) == "UNKNOWN_MEMBER_ID" and env.pending(a)
    env.sleep(6001)  # b's arrival extended the initial delay once
    assert env.body(a)["error"] == "NONE" and env.body(a)["members"][0]["group_instance_id"] == "ia"


def test_pending_sync_expiry_removes_members_that_never_sync() -> None:
    env = Env()
    for client in "abc":
        env.join(client, instance=f"i-{client}")
    env.sleep(6001)
    members = {m["group_instance_id"][2:]: m["member_id"] for m in env.describe()["members"]}
    leader = next(c for c in "abc" if members[c] == env.describe()["leader"])
    env.sync(leader, members[leader], 1, f"i-{leader}", {m: "x" for m in members.values()})
    # Until 33 s (the pending-sync timeout is at 36 s) everyone heartbeats; only the leader synced.
    for _ in range(9):
        env.sleep(3000)
        for client in "abc":
            env.heartbeat(client, members[client], 1, f"i-{client}")
    assert len(env.describe()["members"]) == 3
    env.sleep(3000)
    assert [m["member_id"] for m in env.describe()["members"]] == [members[leader]]
    assert env.describe()["state"] == "PreparingRebalance"  # waiting for the leader to rejoin


# Timer operations: (op, target, deadline); the model is a dict fired in (deadline, scheduling order).
_timer_ops = st.lists(st.tuples(st.sampled_from(["schedule", "cancel", "fire"]), st.sampled_from("abcd"),
                                st.integers(0, 20)), max_size=60)


@settings(max_examples=300, deadline=None)
@given(_timer_ops)
def test_timers_fire_in_deadline_then_scheduling_order_whatever_was_moved_or_cancelled(
        ops: list[tuple[str, str, int]]) -> None:
    """The lazy heap (timers moved later in place, stale entries skipped) fires what a plain dict would."""
    timers = Timers()
    model: dict[str, tuple[int, int]] = {}  # target -> (deadline, scheduling order)
    for order, (op, target, deadline) in enumerate(ops):
        if op == "schedule":
            timers.schedule(TimerKind.HEARTBEAT, target, deadline)
            model[target] = (deadline, order)
        elif op == "cancel":
            timers.cancel(TimerKind.HEARTBEAT, target)
            model.pop(target, None)
        else:  # fire everything due by `deadline`
            fired = []
            while (timer := timers.pop_due(deadline)) is not None:
                fired.append((timer.target, timer.deadline))
            due = sorted((at, target) for target, at in model.items() if at[0] <= deadline)
            assert fired == [(target, at[0]) for at, target in due]
            for _, target in due:
                del model[target]
            assert timers.next_deadline() == min((at[0] for at in model.values()), default=None)
