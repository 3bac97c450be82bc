"""JoinGroup cases beyond the shared scenarios: SEMANTICS.md sections 4, 5, 12 and 14."""

from __future__ import annotations

import re

import pytest

from .harness import Env

UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


@pytest.mark.parametrize(("version", "present", "absent", "protocol_name"), [
    (0, {"generation_id", "protocol_name", "leader", "member_id", "members"}, {"protocol_type", "skip_assignment"}, ""),
    (6, {"protocol_name"}, {"protocol_type", "skip_assignment"}, ""),
    (7, {"protocol_type", "protocol_name"}, {"skip_assignment"}, None),
    (9, {"protocol_type", "protocol_name", "skip_assignment"}, set(), None),
])
def test_error_bodies_carry_exactly_the_fields_of_their_version(version: int, present: set[str], absent: set[str],
                                                                  protocol_name: str | None) -> None:
    env = Env()
    body = env.body(env.join("a", member_id="nobody", version=version))
    assert body["error"] == "UNKNOWN_MEMBER_ID" and body["member_id"] == "nobody"
    assert present <= body.keys() and not absent & body.keys()
    assert body["protocol_name"] == protocol_name and body["generation_id"] == -1 and body["leader"] == ""


def test_second_join_while_parked_answers_the_older_one_rebalance_in_progress() -> None:
    env = Env()
    a = env.body(env.join("a"))["member_id"]
    first = env.join("a", a)
    second = env.join("a", a)
    old = env.body(first)
    assert (old["error"], old["member_id"], old["generation_id"]) == ("REBALANCE_IN_PROGRESS", a, -1)
    assert env.pending(second)
    env.sleep(3001)
    assert env.body(second)["error"] == "NONE" and env.body(second)["generation_id"] == 1


def test_initial_delay_extends_while_members_keep_arriving() -> None:
    """SEMANTICS.md 12's example: D = 3000, R = 10000, a new member every 3 s; completes at 10000."""
    env = Env()
    start = env.now
    keys = [env.join("a", instance="ia", rebalance=10000)]
    for client in ["b", "c", "d"]:
        env.sleep(2999)
        keys.append(env.join(client, instance=f"i{client}", rebalance=10000))
        env.sleep(1)
    env.sleep(10000 - 3 * 3000 - 1)
    assert all(env.pending(k) for k in keys)
    env.sleep(1)
    assert {env.answer(k)["timestamp_ms"] - start for k in keys} == {10000}
    assert env.describe()["generation_id"] == 1 and len(env.describe()["members"]) == 4


def test_protocol_selection_by_votes_and_smallest_name_on_a_tie() -> None:
    env = Env()
    env.join("a", instance="ia", protocols=[("roundrobin", "a"), ("range", "a")])
    env.join("b", instance="ib", protocols=[("range", "b"), ("roundrobin", "b")])
    env.sleep(6001)
    assert env.describe()["protocol_name"] == "range"  # one vote each: the smaller name wins
    env2 = Env()
    for client in "abc":
        env2.join(client, instance=f"i{client}", protocols=[("sticky", client), ("range", client)])
    env2.join("d", instance="id", protocols=[("range", "d"), ("sticky", "d")])
    env2.sleep(6001)
    assert env2.describe()["protocol_name"] == "sticky"


def test_join_with_a_pending_id_and_an_instance_id_is_an_internal_error_that_changes_nothing() -> None:
    env = Env()
    pending = env.body(env.join("a"))["member_id"]
    body = env.body(env.join("a", pending, instance="ia"))
    assert (body["error"], body["member_id"]) == ("UNKNOWN_SERVER_ERROR", "")
    assert env.describe()["pending_members"] == [pending] and env.describe()["members"] == []


def test_full_stable_group_refuses_a_static_member_restarting_with_an_empty_id() -> None:
    env = Env(config={"group.initial.rebalance.delay.ms": 3000, "group.max.size": 2})
    ids = env.stable_group(["a", "b"], static=True)
    body = env.body(env.join("a2", instance="i-a"))
    assert (body["error"], body["member_id"]) == ("GROUP_MAX_SIZE_REACHED", "")
    assert {m["member_id"] for m in env.describe()["members"]} == set(ids.values())


def test_known_member_rejoining_after_max_others_wait_is_refused_and_removed() -> None:
    env = Env(config={"group.initial.rebalance.delay.ms": 3000, "group.max.size": 2})
    ids = env.stable_group(["a", "b"])
    leader = next(c for c in "ab" if ids[c] == env.describe()["leader"])
    follower = "b" if leader == "a" else "a"
    env.join(leader, ids[leader])  # rebalance; one JoinGroup waiting
    newcomer = env.join("c", instance="ic")  # 1 < max: accepted, two waiting
    refused = env.body(env.join(follower, ids[follower]))
    assert (refused["error"], refused["member_id"]) == ("GROUP_MAX_SIZE_REACHED", "")
    assert ids[follower] not in {m["member_id"] for m in env.describe()["members"]}
    env.sleep(30001)
    assert env.body(newcomer)["generation_id"] == 2 and len(env.describe()["members"]) == 2


def test_static_replacement_in_completing_rebalance_fences_the_old_sync_and_rebalances() -> None:
    env = Env()
    for client in "ab":
        env.join(client, instance=f"i-{client}")
    env.sleep(6001)
    snapshot = env.describe()
    ids = {m["group_instance_id"][2:]: m["member_id"] for m in snapshot["members"]}
    follower = next(c for c in "ab" if ids[c] != snapshot["leader"])
    parked = env.sync(follower, ids[follower], 1, f"i-{follower}")
    assert env.pending(parked)
    rejoin = env.join(follower + "2", instance=f"i-{follower}")
    assert env.error(parked) == "FENCED_INSTANCE_ID"
    assert env.describe()["state"] == "PreparingRebalance" and env.pending(rejoin)
    leader = next(c for c in "ab" if c != follower)
    env.join(leader, ids[leader], instance=f"i-{leader}")
    body = env.body(rejoin)
    assert body["error"] == "NONE" and body["generation_id"] == 2 and body["member_id"] != ids[follower]


def test_static_replacement_in_stable_that_changes_the_protocol_rebalances() -> None:
    env = Env()
    for client in "ab":
        env.join(client, instance=f"i-{client}", protocols=[("range", client), ("roundrobin", client)])
    env.sleep(6001)
    ids = {m["group_instance_id"][2:]: m["member_id"] for m in env.describe()["members"]}
    leader = env.describe()["leader"]
    for client in sorted("ab", key=lambda c: ids[c] != leader):
        env.sync(client, ids[client], 1, f"i-{client}", {m: "x" for m in ids.values()} if ids[client] == leader else {})
    assert env.describe()["protocol_name"] == "range"
    key = env.join("b2", instance="i-b", protocols=[("roundrobin", "b2")])
    assert env.pending(key) and env.describe()["state"] == "PreparingRebalance"


def test_member_ids_never_repeat_within_a_group_and_have_kafkas_form() -> None:
    env = Env()
    ids = env.stable_group(["a", "b"], static=True)
    seen = list(ids.values())
    for i in range(10):
        seen.append(env.body(env.join(f"c{i}", version=4))["member_id"])  # MEMBER_ID_REQUIRED ids
        seen.append(env.body(env.join(f"a{i}", instance="i-a"))["member_id"])  # Stable static restarts
    assert len(set(seen)) == len(seen) == 22
    assert all(re.fullmatch(rf"(client-c\d+|i-a|i-b)-{UUID}", m) for m in seen)


def test_same_input_gives_the_same_member_ids() -> None:
    first, second = Env(), Env()
    for env in (first, second):
        env.join("a")
        env.join("b", instance="ib")
    assert [r["body"]["member_id"] for r in first.responses] == [r["body"]["member_id"] for r in second.responses]
