"""Properties of streams groups through the whole engine (LocalCoordinator, and `run_group` with the state stored
between calls) over random static and dynamic Kafka Streams clients (coordinator_lab.streams_traffic: joins,
heartbeats, commits, -1 and -2 leaves, restarts, crashes, standbys, each group first a classic group holding an
admin's offsets): every request gets exactly one answer, both engine paths give the same answers and the same
groups, no active task is owned by two members at once, epochs only grow, and a -2 member keeps its tasks (nobody
else gets them) for as long as it is in the group."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_lab.streams_traffic import CONFIG, Population, Trace
from coordinator_state import TICK, response_key
from coordinator_state.codec import stored_value
from coordinator_state.envelope import API, TIMESTAMP_MS
from coordinator_state.output import orjson_writes_alike

from ..paths import StoredStateCoordinator
from ..test_properties import assert_micro_batches_answer_alike

RUNS = st.tuples(st.integers(1, 2), st.integers(1, 6), st.sampled_from([0.0, 0.5, 1.0]), st.integers(0, 2**16),
                 st.integers(10, 120), st.sampled_from([0, 1]))


def _population(groups: int, members: int, static_share: float, seed: int, steps: int,
                standbys: int) -> Population:
    return Population(groups, members, static_share, seed, {**CONFIG, "group.streams.num.standby.replicas": standbys})


def _run(groups: int, members: int, static_share: float, seed: int, steps: int, standbys: int) -> Trace:
    return _population(groups, members, static_share, seed, steps, standbys).run(steps)


def _active_owners(snapshot: dict[str, Any]) -> list[tuple[str, int]]:
    return [(entry["subtopology_id"], p) for m in snapshot["members"]
            for lists in (m["assigned_tasks"], m["tasks_pending_revocation"])
            for entry in lists["active_tasks"] for p in entry["partitions"]]


def _check_invariants(trace: Trace) -> None:
    group_epochs: dict[str, tuple[int, int]] = {}
    member_epochs: dict[tuple[str, str], int] = {}
    parked: dict[tuple[str, str], Any] = {}  # a -2 member's active tasks when it left
    for _, snapshot in trace.snapshots:
        group = snapshot["group_id"]
        if snapshot.get("group_type") != "streams":
            group_epochs.pop(group, None)  # a classic group: a later streams group starts again at 1
            continue
        owned = _active_owners(snapshot)
        assert len(owned) == len(set(owned)), f"an active task owned twice in {group}: {sorted(owned)}"
        epochs = (snapshot["group_epoch"], snapshot["assignment_epoch"])
        before = group_epochs.get(group, (0, 0))
        assert epochs[0] >= before[0] and epochs[1] >= before[1], f"{group}: epochs {before} -> {epochs}"
        group_epochs[group] = epochs
        present = set()
        for member in snapshot["members"]:
            key = (group, member["member_id"])
            present.add(key)
            epoch = member["member_epoch"]
            if epoch == -2:
                tasks = member["assigned_tasks"]["active_tasks"]
                assert parked.setdefault(key, tasks) == tasks, f"{key}: a -2 member's tasks changed"
                continue
            parked.pop(key, None)
            assert epoch >= member_epochs.get(key, 0), f"{key}: member epoch went back to {epoch}"
            member_epochs[key] = epoch
        for key in [k for k in parked if k[0] == group and k not in present]:
            del parked[key]


@settings(max_examples=25, deadline=None)
@given(RUNS)
def test_every_request_gets_one_answer_and_the_invariants_hold(run: tuple[int, int, float, int, int, int]) -> None:
    population = _population(*run)
    trace = population.run(run[4])
    requests = [r for r in trace.requests if r[API] != TICK]
    keys = [response_key(r) for r in requests]
    assert len(set(keys)) == len(keys)
    assert sorted(trace.answers, key=str) == sorted(keys, key=str)
    assert all(len(answers) == 1 for answers in trace.answers.values())
    _check_invariants(trace)
    for group in population.coordinator.groups.values():
        assert orjson_writes_alike(stored_value(group)), "the stored state holds only what codec.encode_group writes"


@settings(max_examples=10, deadline=None)
@given(RUNS)
def test_the_stored_state_path_answers_the_traffic_as_the_local_engine(
        run: tuple[int, int, float, int, int, int]) -> None:
    population = _population(*run)
    trace = population.run(run[4])
    other = StoredStateCoordinator({**CONFIG, "group.streams.num.standby.replicas": run[5]})
    answers: list[dict[str, Any]] = []
    for record in trace.requests:
        answers += other.advance_to(record[TIMESTAMP_MS]) if record[API] == TICK else other.handle(record)
    assert {response_key(a): a for a in answers} == {key: got[0] for key, got in trace.answers.items()}
    for group in sorted({m.group for m in population.members}):
        assert other.describe(group) == population.coordinator.describe(group)


def test_the_invariant_check_finds_a_task_owned_twice_and_a_moved_parked_task() -> None:
    trace = _run(1, 3, 1.0, 7, 0, 0)
    last = trace.snapshots[-1][1]
    spoiled = [m for m in last["members"] if m["assigned_tasks"]["active_tasks"]]
    twice = {**last, "members": [*last["members"], {**spoiled[0], "member_id": "intruder"}]}
    with pytest.raises(AssertionError, match="owned twice"):
        _check_invariants(Trace(snapshots=[(0, twice)]))
    parked = {**spoiled[0], "member_epoch": -2}
    moved = {**parked, "assigned_tasks": {**parked["assigned_tasks"], "active_tasks": []}}
    with pytest.raises(AssertionError, match="-2 member's tasks changed"):
        _check_invariants(Trace(snapshots=[(0, {**last, "members": [parked]}), (1, {**last, "members": [moved]})]))


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**16), st.integers(1, 5), st.lists(st.integers(1, 12), min_size=1, max_size=5),
       st.sampled_from([0, 2000]))
def test_run_group_over_micro_batches_answers_as_the_record_by_record_replay(
        seed: int, members: int, batch_sizes: list[int], lateness: int) -> None:
    """The Spark job's step over micro-batches of any sizes, under the watermark they set, answers one streams
    group's traffic (the admin's classic commit included) as the local replay does, and ends with the same group."""
    trace = Population(1, members, 0.5, seed, CONFIG).run(60)
    requests = [r for r in trace.requests if r[API] != TICK]
    assert_micro_batches_answer_alike(requests, {**CONFIG, "coordinator.lateness.ms": lateness}, batch_sizes,
                                      group_id="streams-0")
