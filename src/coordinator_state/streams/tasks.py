"""Tasks and task sets (Kafka's TaskId, TasksTuple and TasksTupleWithEpochs).

A task is a (subtopology id, partition) pair. A member holds tasks in three roles: active, standby and warm-up;
its assigned active tasks carry the assignment epoch they were granted at. On the wire a role's tasks are a list
of {`subtopology_id`, `partitions`}, one entry per subtopology holding tasks, by subtopology id, partitions
ascending (PROTOCOL.md section 10).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

TaskId = tuple[str, int]
"""(subtopology id, partition)."""

NO_TASKS: frozenset[TaskId] = frozenset()


@dataclass(frozen=True, slots=True)
class TaskSets:
    """The tasks of the three roles (Kafka's TasksTuple): a target assignment, or what a member reports owning."""

    active: frozenset[TaskId] = NO_TASKS
    standby: frozenset[TaskId] = NO_TASKS
    warmup: frozenset[TaskId] = NO_TASKS

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def contains_any(self, other: TaskSets | AssignedTasks) -> bool:
        """Whether a task of `other` is here in the same role (TasksTuple.containsAny)."""
        active = other.active.keys() if isinstance(other, AssignedTasks) else other.active
        return (not self.active.isdisjoint(active) or not self.standby.isdisjoint(other.standby)
                or not self.warmup.isdisjoint(other.warmup))


EMPTY_TASKS = TaskSets()


@dataclass(frozen=True, slots=True)
class AssignedTasks:
    """A member's tasks with the epoch of each active task (Kafka's TasksTupleWithEpochs).

    A task granted toward assignment epoch E has epoch E; a kept task keeps its epoch; a static member's
    temporary leave (-2) resets them to 0 (StreamsGroupMember.resetAssignedTasksEpochsToZero).
    """

    active: Mapping[TaskId, int] = field(default_factory=dict)
    standby: frozenset[TaskId] = NO_TASKS
    warmup: frozenset[TaskId] = NO_TASKS

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def task_sets(self) -> TaskSets:
        return TaskSets(frozenset(self.active), self.standby, self.warmup)

    def with_active_epochs_reset(self) -> AssignedTasks:
        return AssignedTasks(dict.fromkeys(self.active, 0), self.standby, self.warmup)


NO_ASSIGNED_TASKS = AssignedTasks()


def tasks_to_wire(tasks: Iterable[TaskId]) -> list[dict[str, Any]]:
    """A role's tasks as the protocol lists them: by subtopology id, partitions ascending."""
    return [{"subtopology_id": subtopology, "partitions": [partition for _, partition in group]}
            for subtopology, group in groupby(sorted(tasks), key=lambda task: task[0])]


def tasks_from_wire(entries: Iterable[tuple[str, Iterable[int]]]) -> frozenset[TaskId]:
    """The tasks of (subtopology id, partitions) pairs, as a request carries them."""
    return frozenset((subtopology, partition) for subtopology, partitions in entries for partition in partitions)


def owned_tasks(active: Iterable[tuple[str, Iterable[int]]] | None, standby: Iterable[tuple[str, Iterable[int]]] | None,
                warmup: Iterable[tuple[str, Iterable[int]]] | None) -> TaskSets | None:
    """The tasks a heartbeat reports owning, or None when it reports none (any of its three lists null)."""
    if active is None or standby is None or warmup is None:
        return None
    return TaskSets(tasks_from_wire(active), tasks_from_wire(standby), tasks_from_wire(warmup))


def task_sets_to_wire(tasks: TaskSets | AssignedTasks) -> dict[str, list[dict[str, Any]]]:
    """{`active_tasks`, `standby_tasks`, `warmup_tasks`}, the form of assignments in answers and snapshots."""
    return {"active_tasks": tasks_to_wire(tasks.active), "standby_tasks": tasks_to_wire(tasks.standby),
            "warmup_tasks": tasks_to_wire(tasks.warmup)}


def active_epochs_to_wire(active: Mapping[TaskId, int]) -> dict[str, dict[str, int]]:
    """{subtopology: {"partition": epoch}} by subtopology and partition (the snapshot's `active_task_epochs`)."""
    by_subtopology: dict[str, dict[str, int]] = {}
    for (subtopology, partition), epoch in sorted(active.items()):
        by_subtopology.setdefault(subtopology, {})[str(partition)] = epoch
    return by_subtopology


def active_epochs_from_wire(value: Mapping[str, Mapping[str, int]]) -> dict[TaskId, int]:
    return {(subtopology, int(partition)): epoch
            for subtopology, epochs in value.items() for partition, epoch in epochs.items()}
