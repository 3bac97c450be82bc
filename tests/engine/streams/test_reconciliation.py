"""Reconciliation (Kafka 4.4's streams CurrentAssignmentBuilder), from CurrentAssignmentBuilderTest.

Each Kafka test is parameterized by task role as there (active, standby, warm-up); the owner functions Kafka's tests
pass as lambdas are `_everywhere` (every task) or explicit maps. Kafka's builder seeds members with
`setPreviousMemberEpoch(memberEpoch)`, so do these. Role changes in place come from the code's comments.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

import pytest

from coordinator_state.streams.reconciliation import CurrentOwners, MemberState, Reconciliation, reconcile
from coordinator_state.streams.tasks import NO_ASSIGNED_TASKS, AssignedTasks, TaskId, TaskSets

S1, S2 = "subtopology1", "subtopology2"
PROCESS = "process_id"
EPOCH = 10
ROLES = ["active", "standby", "warmup"]
_V = TypeVar("_V")


class _Everywhere(Mapping[TaskId, _V]):
    """Every task maps to one value (Kafka's tests' `(subtopologyId, partitionId) -> PROCESS_ID`)."""

    def __init__(self, value: _V) -> None:
        self.value = value

    def __getitem__(self, task: TaskId) -> _V:
        return self.value

    def __contains__(self, task: object) -> bool:
        return True

    def __iter__(self) -> Iterator[TaskId]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _everywhere(active: str | None = None, standby: frozenset[str] = frozenset(),
                warmup: frozenset[str] = frozenset()) -> CurrentOwners:
    return CurrentOwners(_Everywhere(active) if active else {}, _Everywhere(standby), _Everywhere(warmup))


def _tasks(s1: tuple[int, ...], s2: tuple[int, ...] = ()) -> frozenset[TaskId]:
    return frozenset([(S1, p) for p in s1] + [(S2, p) for p in s2])


def _target(role: str, s1: tuple[int, ...] = (), s2: tuple[int, ...] = ()) -> TaskSets:
    return TaskSets(**{role: _tasks(s1, s2)})


def _assigned(role: str, epoch: int, s1: tuple[int, ...] = (), s2: tuple[int, ...] = ()) -> AssignedTasks:
    if role == "active":
        return AssignedTasks(dict.fromkeys(_tasks(s1, s2), epoch))
    return AssignedTasks(**{role: _tasks(s1, s2)})


def _member(state: MemberState, epoch: int, assigned: AssignedTasks,
            pending: AssignedTasks = NO_ASSIGNED_TASKS, previous: int | None = None) -> Reconciliation:
    return Reconciliation(epoch, epoch if previous is None else previous, state, assigned, pending)


def _run(member: Reconciliation, target_epoch: int, target: TaskSets, owners: CurrentOwners,
         owned: TaskSets | None = None, process: str = PROCESS) -> Reconciliation:
    return reconcile(member, process, target_epoch, target, owners, owned)


STABLE, UNREVOKED, UNRELEASED = MemberState.STABLE, MemberState.UNREVOKED_TASKS, MemberState.UNRELEASED_TASKS


@pytest.mark.parametrize("role", ROLES)
def test_stable_to_stable(role: str) -> None:
    member = _member(STABLE, EPOCH, _assigned(role, EPOCH, (1, 2), (3, 4)))
    result = _run(member, EPOCH + 1, _target(role, (1, 2), (3, 4)), _everywhere(PROCESS))
    assert result == _member(STABLE, EPOCH + 1, _assigned(role, EPOCH, (1, 2), (3, 4)), previous=EPOCH)


@pytest.mark.parametrize("role", ROLES)
def test_stable_to_stable_at_target_epoch(role: str) -> None:
    member = _member(STABLE, EPOCH, _assigned(role, EPOCH, (1, 2), (3, 4)))
    assert _run(member, EPOCH, _target(role, (1, 2), (3, 4)), _everywhere(PROCESS)) == member


@pytest.mark.parametrize("role", ROLES)
def test_stable_to_stable_with_new_tasks(role: str) -> None:
    epochs: dict[TaskId, int] = {(S1, 1): 9, (S1, 2): 8, (S2, 3): 9, (S2, 4): 8}
    assigned = AssignedTasks(epochs) if role == "active" else _assigned(role, 0, (1, 2), (3, 4))
    result = _run(_member(STABLE, EPOCH, assigned), EPOCH + 1, _target(role, (1, 2, 4), (3, 4, 7)), _everywhere())
    expected = (AssignedTasks({**epochs, (S1, 4): EPOCH + 1, (S2, 7): EPOCH + 1}) if role == "active"
                else _assigned(role, 0, (1, 2, 4), (3, 4, 7)))
    assert result == _member(STABLE, EPOCH + 1, expected, previous=EPOCH)


@pytest.mark.parametrize("role", ROLES)
def test_stable_to_unrevoked_tasks(role: str) -> None:
    member = _member(STABLE, EPOCH, _assigned(role, EPOCH, (1, 2), (3, 4)))
    result = _run(member, EPOCH + 1, _target(role, (2, 3), (4, 5)), _everywhere())
    assert result == _member(UNREVOKED, EPOCH, _assigned(role, EPOCH, (2,), (4,)), _assigned(role, EPOCH, (1,), (3,)))


@pytest.mark.parametrize("role", ROLES)
def test_stable_to_unrevoked_with_empty_assignment(role: str) -> None:
    member = _member(STABLE, EPOCH, _assigned(role, EPOCH, (1, 2), (3, 4)))
    result = _run(member, EPOCH + 1, TaskSets(), _everywhere(PROCESS))
    assert result == _member(UNREVOKED, EPOCH, NO_ASSIGNED_TASKS, _assigned(role, EPOCH, (1, 2), (3, 4)))


@pytest.mark.parametrize("role", ROLES)
def test_stable_to_unreleased_tasks(role: str) -> None:
    member = _member(STABLE, EPOCH, _assigned(role, EPOCH, (1, 2), (3, 4)))
    result = _run(member, EPOCH + 1, _target(role, (1, 2, 4), (3, 4, 7)), _everywhere(PROCESS))
    assert result == _member(UNRELEASED, EPOCH + 1, _assigned(role, EPOCH, (1, 2), (3, 4)), previous=EPOCH)


@pytest.mark.parametrize("role", ROLES)
def test_stable_to_unreleased_tasks_with_owned_tasks_not_having_revoked_tasks(role: str) -> None:
    member = _member(STABLE, EPOCH, _assigned(role, EPOCH, (1, 2), (3, 4)))
    owners = CurrentOwners({(S2, p): PROCESS for p in range(10)})
    result = _run(member, EPOCH + 1, _target(role, (1, 2), (3, 5)), owners, owned=TaskSets())
    assert result == _member(UNRELEASED, EPOCH + 1, _assigned(role, EPOCH, (1, 2), (3,)), previous=EPOCH)


@pytest.mark.parametrize("role", ROLES)
def test_unrevoked_tasks_to_stable(role: str) -> None:
    member = _member(UNREVOKED, EPOCH, _assigned(role, EPOCH, (2, 3), (5, 6)), _assigned(role, EPOCH, (1,), (4,)))
    result = _run(member, EPOCH + 1, _target(role, (2, 3), (5, 6)), _everywhere(),
                  owned=_target(role, (2, 3), (5, 6)))
    assert result == _member(STABLE, EPOCH + 1, _assigned(role, EPOCH, (2, 3), (5, 6)), previous=EPOCH)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("owned", [None, ((1, 2, 3), (5, 6)), ((2, 3), (4, 5, 6))])
def test_remains_in_unrevoked_tasks(role: str, owned: Any) -> None:
    member = _member(UNREVOKED, EPOCH, _assigned(role, EPOCH, (2, 3), (5, 6)), _assigned(role, EPOCH, (1,), (4,)))
    reported = None if owned is None else _target(role, *owned)
    assert _run(member, EPOCH + 2, _target(role, (3,), (6,)), _everywhere(), owned=reported) == member


@pytest.mark.parametrize("role", ROLES)
def test_unrevoked_tasks_to_unrevoked_tasks(role: str) -> None:
    member = _member(UNREVOKED, EPOCH, _assigned(role, EPOCH, (2, 3), (5, 6)), _assigned(role, EPOCH, (1,), (4,)))
    result = _run(member, EPOCH + 2, _target(role, (3,), (6,)), _everywhere(), owned=_target(role, (2, 3), (5, 6)))
    assert result == _member(UNREVOKED, EPOCH + 1, _assigned(role, EPOCH, (3,), (6,)),
                             _assigned(role, EPOCH, (2,), (5,)), previous=EPOCH)


@pytest.mark.parametrize("role", ROLES)
def test_unrevoked_tasks_to_unreleased_tasks(role: str) -> None:
    epoch = 11
    member = _member(UNREVOKED, epoch, _assigned(role, epoch, (2, 3), (5, 6)), _assigned(role, epoch, (1,), (4,)),
                     previous=epoch - 1)
    result = _run(member, epoch, _target(role, (2, 3, 4), (5, 6, 7)), _everywhere(PROCESS),
                  owned=_target(role, (2, 3), (5, 6)))
    assert result == _member(UNRELEASED, epoch, _assigned(role, epoch, (2, 3), (5, 6)))


@pytest.mark.parametrize("role", ROLES)
def test_unreleased_tasks_to_stable(role: str) -> None:
    epoch = 11
    member = _member(UNRELEASED, epoch, _assigned(role, epoch, (2, 3), (5, 6)))
    result = _run(member, epoch + 1, _target(role, (2, 3), (5, 6)),
                  _everywhere(PROCESS, frozenset({PROCESS}), frozenset({PROCESS})), process="process1")
    assert result == _member(STABLE, epoch + 1, _assigned(role, epoch, (2, 3), (5, 6)), previous=epoch)


@pytest.mark.parametrize("role", ROLES)
def test_unreleased_tasks_to_stable_with_new_tasks(role: str) -> None:
    epoch = 11
    member = _member(UNRELEASED, epoch, _assigned(role, epoch, (2, 3), (5, 6)))
    result = _run(member, epoch, _target(role, (2, 3, 4), (5, 6, 7)), _everywhere(), process="process1")
    assert result == _member(STABLE, epoch, _assigned(role, epoch, (2, 3, 4), (5, 6, 7)))


@pytest.mark.parametrize("role", ROLES)
def test_unreleased_tasks_to_unreleased_tasks(role: str) -> None:
    epoch = 11
    member = _member(UNRELEASED, epoch, _assigned(role, epoch, (2, 3), (5, 6)))
    owners = _everywhere(PROCESS, frozenset({PROCESS}), frozenset({PROCESS}))
    assert _run(member, epoch, _target(role, (2, 3, 4), (5, 6, 7)), owners) == member


@pytest.mark.parametrize("role", ROLES)
def test_unreleased_tasks_to_unreleased_tasks_other_unreleased_task_role(role: str) -> None:
    # the unreleased task is held in another role by another member of this process
    epoch = 11
    member = _member(UNRELEASED, epoch, _assigned(role, epoch, (2, 3), (5, 6)))
    here = frozenset({PROCESS})
    owners = _everywhere(None, frozenset(), here) if role == "standby" else _everywhere(None, here, frozenset())
    assert _run(member, epoch, _target(role, (2, 3, 4), (5, 6, 7)), owners) == member


def test_unreleased_tasks_to_unreleased_tasks_any_active_owner() -> None:
    epoch = 11
    member = _member(UNRELEASED, epoch, _assigned("active", epoch, (2, 3), (5, 6)))
    result = _run(member, epoch, _target("active", (2, 3, 4), (5, 6, 7)), CurrentOwners({(S1, 4): "anyOtherProcess"}))
    assert result == _member(UNRELEASED, epoch, _assigned("active", epoch, (2, 3), (5, 6, 7)))


@pytest.mark.parametrize("role", ROLES)
def test_unreleased_tasks_to_unrevoked_tasks(role: str) -> None:
    epoch = 11
    member = _member(UNRELEASED, epoch, _assigned(role, epoch, (2, 3), (5, 6)), _assigned(role, epoch, (4,), (7,)))
    result = _run(member, epoch + 1, _target(role, (3,), (6,)), _everywhere(PROCESS), process="process1")
    assert result == _member(UNREVOKED, epoch, _assigned(role, epoch, (3,), (6,)), _assigned(role, epoch, (2,), (5,)))


# ---------------------------------------------------------------------- role changes in place


def test_demoted_active_task_is_a_standby_at_once_and_its_active_role_pending_revocation() -> None:
    member = _member(STABLE, EPOCH, _assigned("active", EPOCH, (1, 2)))
    result = _run(member, EPOCH + 1, TaskSets(active=_tasks((1,)), standby=_tasks((2,))),
                  CurrentOwners({(S1, 1): PROCESS, (S1, 2): PROCESS}), owned=TaskSets(active=_tasks((1, 2))))
    assert result == _member(UNREVOKED, EPOCH, AssignedTasks({(S1, 1): EPOCH}, standby=_tasks((2,))),
                             _assigned("active", EPOCH, (2,)))


def test_promoted_standby_is_kept_until_the_active_task_is_released() -> None:
    member = _member(STABLE, EPOCH, AssignedTasks(standby=_tasks((1,))))
    target = TaskSets(active=_tasks((1,)))
    waiting = _run(member, EPOCH + 1, target, CurrentOwners({(S1, 1): "elsewhere"}), owned=TaskSets())
    assert waiting == _member(UNRELEASED, EPOCH + 1, AssignedTasks(standby=_tasks((1,))), previous=EPOCH)
    promoted = _run(waiting, EPOCH + 1, target, CurrentOwners(standby={(S1, 1): frozenset({PROCESS})}),
                    owned=TaskSets(standby=_tasks((1,))))
    assert promoted == _member(STABLE, EPOCH + 1, _assigned("active", EPOCH + 1, (1,)))


def test_standby_converted_to_warmup_needs_no_revocation() -> None:
    member = _member(STABLE, EPOCH, AssignedTasks(standby=_tasks((1,))))
    result = _run(member, EPOCH + 1, TaskSets(warmup=_tasks((1,))),
                  CurrentOwners(standby={(S1, 1): frozenset({PROCESS})}), owned=TaskSets(standby=_tasks((1,))))
    assert result == _member(STABLE, EPOCH + 1, AssignedTasks(warmup=_tasks((1,))), previous=EPOCH)


def test_current_owners_count_pending_revocations_and_every_role() -> None:
    owners = CurrentOwners.of([
        ("p1", _assigned("active", 3, (1,)), _assigned("active", 3, (2,))),
        ("p2", AssignedTasks(standby=_tasks((1,)), warmup=_tasks((2,))), NO_ASSIGNED_TASKS),
        ("p3", AssignedTasks(standby=_tasks((1,))), NO_ASSIGNED_TASKS),
    ])
    assert owners.active == {(S1, 1): "p1", (S1, 2): "p1"}
    assert owners.standby == {(S1, 1): frozenset({"p2", "p3"})} and owners.warmup == {(S1, 2): frozenset({"p2"})}
