"""The sticky task assignor: Kafka's StickyTaskAssignorTest examples, section 10's tie-breaks, and properties.

Examples keep the names of the Kafka tests they come from (member ids and processes as there; Kafka's
TopologyDescriberImpl(n, stateful, subtopologies) is `_topology`). Properties: every active task assigned once,
no process holding a task twice, each stateful task with min(S, processes - 1) standbys, balance, stickiness and
determinism whatever order the members come in.
"""

from __future__ import annotations

import math
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from coordinator_state.streams.assignor import (
    AssignorMember,
    MemberTasks,
    SubtopologyTasks,
    assign,
)
from coordinator_state.streams.tasks import TaskId


def _tasks(subtopology: str, *partitions: int) -> frozenset[TaskId]:
    return frozenset((subtopology, p) for p in partitions)


def _member(member_id: str, process: str, active: frozenset[TaskId] = frozenset(),
            standby: frozenset[TaskId] = frozenset(), instance_id: str | None = None) -> AssignorMember:
    return AssignorMember(member_id, instance_id, process, active, standby)


def _topology(tasks: int, stateful: bool, *subtopologies: str) -> list[SubtopologyTasks]:
    return [SubtopologyTasks(s, tasks, stateful) for s in subtopologies]


def _active(result: dict[str, MemberTasks], *members: str) -> list[TaskId]:
    return sorted(task for m in members for task in result[m].active)


def _standby(result: dict[str, MemberTasks], *members: str) -> list[TaskId]:
    return sorted(task for m in members for task in result[m].standby)


T = "test-subtopology"


def test_should_assign_one_active_task_to_each_process_when_task_count_same_as_process_count() -> None:
    result = assign([_member(f"member{i}", f"process{i}") for i in (1, 2, 3)], _topology(3, False, T), 0)
    assert all(len(result[f"member{i}"].active) == 1 for i in (1, 2, 3))
    assert _active(result, "member1", "member2", "member3") == sorted(_tasks(T, 0, 1, 2))


def test_should_assign_topic_group_id_evenly_across_clients_with_no_standby_tasks() -> None:
    members = [_member(f"member{p}_{i}", f"process{p}") for p in (1, 2, 3) for i in (1, 2)]
    result = assign(members, _topology(3, False, "test-subtopology1", "test-subtopology2"), 0)
    assert [len(result[m.member_id].active) for m in members] == [1] * 6
    expected = _tasks("test-subtopology1", 0, 1, 2) | _tasks("test-subtopology2", 0, 1, 2)
    assert _active(result, *result) == sorted(expected)


def test_should_not_migrate_active_task_to_other_process() -> None:
    result = assign([_member("member1", "process1", _tasks(T, 0)), _member("member2", "process2", _tasks(T, 1))],
                    _topology(3, False, T), 0)
    assert (T, 0) in result["member1"].active and (T, 1) in result["member2"].active
    assert len(result["member1"].active) + len(result["member2"].active) == 3
    # flip the previous active tasks around
    result = assign([_member("member2", "process2", _tasks(T, 1)), _member("member3", "process1", _tasks(T, 2))],
                    _topology(3, False, T), 0)
    assert (T, 1) in result["member2"].active and (T, 2) in result["member3"].active


def test_should_migrate_active_tasks_to_new_process_without_changing_all_assignments() -> None:
    result = assign([_member("member1", "process1", _tasks(T, 0, 2)), _member("member2", "process2", _tasks(T, 1)),
                     _member("member3", "process3")], _topology(3, False, T), 0)
    assert result["member2"].active == _tasks(T, 1)
    assert len(result["member1"].active) == len(result["member3"].active) == 1
    assert result["member1"].active | result["member3"].active == _tasks(T, 0, 2)


def test_should_assign_based_on_capacity() -> None:
    result = assign([_member("member1", "process1"), _member("member2_1", "process2"),
                     _member("member2_2", "process2")], _topology(3, False, T), 0)
    assert [len(result[m].active) for m in ("member1", "member2_1", "member2_2")] == [1, 1, 1]


def test_should_assign_tasks_evenly_with_unequal_topic_group_sizes() -> None:
    previous = _tasks("test-subtopology1", 0, 1, 2, 3, 4, 5) | _tasks("test-subtopology2", 0)
    topology = [SubtopologyTasks("test-subtopology1", 6, False), SubtopologyTasks("test-subtopology2", 1, False)]
    result = assign([_member("member1", "process1", previous), _member("member2", "process2")], topology, 0)
    assert len(result["member1"].active) == 4 and len(result["member2"].active) == 3
    assert result["member1"].active | result["member2"].active == previous


def test_should_keep_active_task_stickiness_when_more_client_than_active_tasks() -> None:
    result = assign([_member("member1", "process1", _tasks(T, 0)), _member("member2", "process2", _tasks(T, 2)),
                     _member("member3", "process3", _tasks(T, 1)), _member("member4", "process4"),
                     _member("member5", "process5")], _topology(3, False, T), 0)
    assert [result[f"member{i}"].active for i in range(1, 6)] == [
        _tasks(T, 0), _tasks(T, 2), _tasks(T, 1), frozenset(), frozenset()]
    # change up the assignment and make sure it is still sticky
    result = assign([_member("member1", "process1"), _member("member2", "process2", _tasks(T, 0)),
                     _member("member3", "process3"), _member("member4", "process4", _tasks(T, 2)),
                     _member("member5", "process5", _tasks(T, 1))], _topology(3, False, T), 0)
    assert [result[f"member{i}"].active for i in range(1, 6)] == [
        frozenset(), _tasks(T, 0), frozenset(), _tasks(T, 2), _tasks(T, 1)]


def test_should_assign_tasks_to_client_with_previous_standby_tasks() -> None:
    result = assign([_member("member1", "process1", standby=_tasks(T, 2)),
                     _member("member2", "process2", standby=_tasks(T, 1)),
                     _member("member3", "process3", standby=_tasks(T, 0))], _topology(3, False, T), 0)
    assert [result[f"member{i}"].active for i in (1, 2, 3)] == [_tasks(T, 2), _tasks(T, 1), _tasks(T, 0)]


def test_should_not_assign_standby_tasks_to_client_with_previous_standby_tasks_and_current_active_tasks() -> None:
    result = assign([_member("member1", "process1", standby=_tasks(T, 0)),
                     _member("member2", "process2", standby=_tasks(T, 1))], _topology(2, True, T), 1)
    assert (result["member1"].active, result["member1"].standby) == (_tasks(T, 0), _tasks(T, 1))
    assert (result["member2"].active, result["member2"].standby) == (_tasks(T, 1), _tasks(T, 0))


def test_should_assign_based_on_capacity_when_multiple_client_have_standby_tasks() -> None:
    result = assign([_member("member1", "process1", _tasks(T, 0), _tasks(T, 1)),
                     _member("member2_1", "process2", _tasks(T, 2), _tasks(T, 1)),
                     _member("member2_2", "process2")], _topology(3, False, T), 0)
    assert [result[m].active for m in ("member1", "member2_1", "member2_2")] == [
        _tasks(T, 0), _tasks(T, 2), _tasks(T, 1)]


def test_should_assign_standby_tasks_to_different_client_than_corresponding_active_task_is_assigned_to() -> None:
    members = [_member(f"member{i}", f"process{i}", _tasks(T, i - 1)) for i in (1, 2, 3, 4)]
    result = assign(members, _topology(4, True, T), 1)
    for i in (1, 2, 3, 4):
        assert (T, i - 1) not in result[f"member{i}"].standby
        assert len(result[f"member{i}"].standby) <= 2
    assert sum(1 for i in (1, 2, 3, 4) if result[f"member{i}"].standby) >= 3
    assert _standby(result, *result) == sorted(_tasks(T, 0, 1, 2, 3))


def test_should_assign_multiple_replicas_of_standby_task() -> None:
    members = [_member(f"member{i}", f"process{i}", _tasks(T, i - 1)) for i in (1, 2, 3)]
    result = assign(members, _topology(3, True, T), 2)
    assert [result[f"member{i}"].standby for i in (1, 2, 3)] == [_tasks(T, 1, 2), _tasks(T, 0, 2), _tasks(T, 0, 1)]


def test_should_not_assign_standby_task_replicas_when_no_client_available_without_having_the_task_assigned() -> None:
    result = assign([_member("member1", "process1")], _topology(1, True, T), 1)
    assert result["member1"] == MemberTasks(_tasks(T, 0), frozenset())


def test_should_assign_active_and_standby_tasks() -> None:
    result = assign([_member(f"member{i}", f"process{i}") for i in (1, 2, 3)], _topology(3, True, T), 1)
    assert _active(result, *result) == _standby(result, *result) == sorted(_tasks(T, 0, 1, 2))


def test_should_assign_at_least_one_task_to_each_client_if_possible() -> None:
    members = [_member(f"member1_{i}", "process1") for i in (1, 2, 3)]
    members += [_member("member2", "process2"), _member("member3", "process3")]
    result = assign(members, _topology(3, False, T), 0)
    assert len(_active(result, "member1_1", "member1_2", "member1_3")) == 1
    assert len(result["member2"].active) == len(result["member3"].active) == 1


def test_should_balance_active_and_standby_tasks_across_available_clients() -> None:
    result = assign([_member(f"member{i}", f"process{i}") for i in range(1, 7)], _topology(3, True, T), 1)
    assert all(len(r.active) + len(r.standby) == 1 for r in result.values())


def test_should_assign_more_tasks_to_client_with_more_capacity() -> None:
    result = assign([_member("member1", "process1"), _member("member2_1", "process2"),
                     _member("member2_2", "process2")],
                    _topology(3, False, *(f"test-subtopology{i}" for i in range(4))), 0)
    assert len(_active(result, "member2_1", "member2_2")) == 8 and len(result["member1"].active) == 4


def test_should_re_balance_tasks_across_clients_when_capacity_less_than_task_count() -> None:
    result = assign([_member("member1", "process1"), _member("member2", "process2"),
                     _member("member3", "process3", _tasks(T, 0, 1, 2, 3))], _topology(4, False, T), 0)
    assert [len(result[f"member{i}"].active) for i in (1, 2, 3)] == [1, 1, 2]


def test_should_move_minimal_number_of_tasks_when_previously_above_capacity_and_new_client_added() -> None:
    result = assign([_member("member1", "process1", _tasks(T, 0, 2)), _member("member2", "process2", _tasks(T, 1, 3)),
                     _member("member3", "process3")], _topology(4, False, T), 0)
    assert len(result["member3"].active) == 1
    moved = result["member3"].active
    assert result["member1"].active | moved == _tasks(T, 0, 2) or result["member2"].active | moved == _tasks(T, 1, 3)


# ---------------------------------------------------------------------- section 10's fixed ties


def test_member_order_static_by_instance_id_before_dynamic_by_member_id() -> None:
    # Three members of one process, no history: step (3) gives each task to the member with the fewest tasks,
    # ties by member order: static i1 (member "z"), static i2 ("y"), then dynamic "a".
    members = [_member("a", "p"), _member("y", "p", instance_id="i2"), _member("z", "p", instance_id="i1")]
    result = assign(members, _topology(3, False, "s"), 0)
    assert (result["z"].active, result["y"].active, result["a"].active) == (
        _tasks("s", 0), _tasks("s", 1), _tasks("s", 2))


def test_process_ties_by_process_id_and_tasks_by_subtopology_then_partition() -> None:
    result = assign([_member("m1", "p2"), _member("m2", "p1")], _topology(2, False, "b", "a"), 0)
    # equal loads: p1 first; the rest by (subtopology, partition): a0 p1, a1 p2, b0 p1, b1 p2
    assert result["m2"].active == {("a", 0), ("b", 0)} and result["m1"].active == {("a", 1), ("b", 1)}


def test_previous_active_owner_first_in_member_order_wins_a_task_reported_twice() -> None:
    members = [_member("b", "p2", _tasks("s", 0)), _member("a", "p1", _tasks("s", 0))]
    assert assign(members, _topology(2, False, "s"), 0)["a"].active == _tasks("s", 0)


def test_standby_holder_replaced_only_when_both_load_and_count_are_lower() -> None:
    # "a" holds s:1 as standby and s:0 as active (process load 1); "b" holds s:1 as standby with nothing else:
    # only strictly lower load AND count replace the first holder, so "b" (0 < 1 on both) gets s:1.
    members = [_member("a", "p1", _tasks("s", 0), _tasks("s", 1)), _member("b", "p2", standby=_tasks("s", 1))]
    assert assign(members, _topology(2, False, "s"), 0)["b"].active == _tasks("s", 1)


def test_standby_holder_kept_when_only_its_process_load_is_higher() -> None:
    # After step (1) "a" (alone on p1) and "b" (p2, with "c") own one task each: loads 1 and 1/2, counts 1 and 1.
    # For s:2, held as standby by both, "b" has the lower load but not the lower count, so "a" keeps it.
    members = [_member("a", "p1", _tasks("s", 0), _tasks("s", 2)), _member("b", "p2", _tasks("s", 1), _tasks("s", 2)),
               _member("c", "p2")]
    assert ("s", 2) in assign(members, _topology(6, False, "s"), 0)["a"].active


# ---------------------------------------------------------------------- properties


@st.composite
def _groups(draw: st.DrawFn) -> tuple[list[AssignorMember], list[SubtopologyTasks], int]:
    subtopologies = [SubtopologyTasks(f"s{i}", draw(st.integers(0, 7)), draw(st.booleans()))
                     for i in range(draw(st.integers(1, 3)))]
    tasks = [(s.subtopology_id, p) for s in subtopologies for p in range(s.task_count)]
    count = draw(st.integers(1, 7))
    processes = draw(st.lists(st.sampled_from(["p0", "p1", "p2", "p3"]), min_size=count, max_size=count))
    owners = draw(st.lists(st.integers(-1, count - 1), min_size=len(tasks), max_size=len(tasks)))
    members = []
    for i in range(count):
        previous = frozenset(t for t, owner in zip(tasks, owners, strict=True) if owner == i)
        standby = frozenset(draw(st.sets(st.sampled_from(tasks), max_size=3))) - previous if tasks else frozenset()
        members.append(_member(f"m{i}", processes[i], previous, standby,
                               instance_id=f"i{i}" if draw(st.booleans()) else None))
    return members, subtopologies, draw(st.integers(0, 2))


@given(_groups(), st.randoms(use_true_random=False))
def test_assignment_invariants(group: tuple[list[AssignorMember], list[SubtopologyTasks], int],
                               rng: object) -> None:
    members, subtopologies, replicas = group
    result = assign(members, subtopologies, replicas)
    tasks = {(s.subtopology_id, p) for s in subtopologies for p in range(s.task_count)}
    stateful = {(s.subtopology_id, p) for s in subtopologies if s.stateful for p in range(s.task_count)}
    process_of = {m.member_id: m.process_id for m in members}

    # every member has an answer; every active task is assigned exactly once
    assert set(result) == set(process_of)
    active = Counter(task for r in result.values() for task in r.active)
    assert set(active) == tasks and set(active.values()) <= {1}

    # no process holds a task twice; each stateful task has min(S, processes - 1) standbys, stateless ones none
    held = Counter((process_of[m], task) for m, r in result.items() for task in r.active | r.standby)
    assert set(held.values()) <= {1}
    standbys = Counter(task for r in result.values() for task in r.standby)
    processes = len(set(process_of.values()))
    assert all(standbys[task] == min(replicas, processes - 1) for task in stateful)
    assert set(standbys) <= stateful

    # balance: nobody gets more than ceil(A / M) active tasks
    quota = math.ceil(len(tasks) / len(members))
    assert all(len(r.active) <= quota for r in result.values())

    # stickiness: a member that owned at most floor(A / M) tasks keeps them all
    for member in members:
        if len(member.active) <= len(tasks) // len(members):
            assert member.active <= result[member.member_id].active

    # determinism: the same members in another order get the same assignment
    shuffled = list(members)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    assert assign(shuffled, reversed(subtopologies), replicas) == result
