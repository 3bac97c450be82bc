"""The sticky task assignor: Kafka 4.4's StickyTaskAssignor with every tie fixed (PROTOCOL.md section 10).

Theory of operation. Members are ordered (static ones by instance id, then dynamic ones by member id) and
processes by process id; a process's load is the tasks given to its members so far over its member count, compared
exactly (as fractions, where Kafka compares doubles). Two quotas bound stickiness: q over active tasks and Q over
all tasks (active plus standby replicas of stateful tasks), each ceil(total / members), lowered as members reach
them (`_Quota`). Active tasks go (1) to their previous active owner while it is below q, (2) to the best previous
standby holder while below q, (3) to the least-loaded process's least-loaded member. Standby replicas of stateful
tasks go to the previous active owner, then to the best previous standby holder, each while below Q and on a
process that lacks the task; the rest go to the least-loaded process lacking the task, or are dropped.

Kafka leaves the order open wherever a HashMap or a PriorityQueue breaks a tie; here every such tie is broken by
the member or process order above, so the same input always gives the same assignment.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from .tasks import NO_TASKS, TaskId

__all__ = ["AssignorMember", "MemberTasks", "SubtopologyTasks", "assign", "member_order"]


@dataclass(frozen=True, slots=True)
class AssignorMember:
    """A member as the assignor sees it: its identity, process and current (not target) tasks."""

    member_id: str
    instance_id: str | None
    process_id: str
    active: frozenset[TaskId] = NO_TASKS
    standby: frozenset[TaskId] = NO_TASKS


@dataclass(frozen=True, slots=True)
class SubtopologyTasks:
    """A configured subtopology: its tasks are partitions 0..task_count-1; stateful if it has changelog topics."""

    subtopology_id: str
    task_count: int
    stateful: bool


@dataclass(frozen=True, slots=True)
class MemberTasks:
    active: frozenset[TaskId] = NO_TASKS
    standby: frozenset[TaskId] = NO_TASKS


def member_order(member: AssignorMember) -> tuple[int, str]:
    """Static members by instance id first, then dynamic ones by member id (section 10's member order)."""
    return (0, member.instance_id) if member.instance_id is not None else (1, member.member_id)


def assign(members: Iterable[AssignorMember], subtopologies: Iterable[SubtopologyTasks],
           standby_replicas: int) -> dict[str, MemberTasks]:
    """The target assignment of every member (StickyTaskAssignor.assign); no members, no assignment."""
    state = _Assignment(sorted(members, key=member_order), list(subtopologies), standby_replicas)
    if not state.members:
        return {}
    state.assign_active()
    if standby_replicas > 0:
        state.assign_standby()
    return {member.member_id: MemberTasks(frozenset(state.active[rank]), frozenset(state.standby[rank]))
            for rank, member in enumerate(state.members)}


class _Quota:
    """Tasks per member, ceil(total / members); a member reaching it leaves the pool (maybeUpdate*TasksPerMember)."""

    def __init__(self, total: int, members: int) -> None:
        self.total, self.members = total, members
        self.value = _ceil_div(total, members)

    def on_count(self, count: int) -> None:
        if count == self.value:
            self.members -= 1
            self.total -= count
            self.value = _ceil_div(self.total, self.members)


def _ceil_div(total: int, members: int) -> int:
    return -(-total // members) if members > 0 else 0


class _Assignment:
    """One run of the assignor (Kafka's LocalState and ProcessState), members and processes by rank."""

    def __init__(self, members: Sequence[AssignorMember], subtopologies: Sequence[SubtopologyTasks],
                 standby_replicas: int) -> None:
        self.members = members
        self.standby_replicas = standby_replicas
        process_ids = sorted({member.process_id for member in members})
        process_rank = {process_id: rank for rank, process_id in enumerate(process_ids)}
        self.process_of = [process_rank[member.process_id] for member in members]
        self.process_members: list[list[int]] = [[] for _ in process_ids]
        for rank, process in enumerate(self.process_of):
            self.process_members[process].append(rank)
        self.process_task_count = [0] * len(process_ids)
        self.process_tasks: list[set[TaskId]] = [set() for _ in process_ids]
        self.count = [0] * len(members)
        self.active: list[set[TaskId]] = [set() for _ in members]
        self.standby: list[set[TaskId]] = [set() for _ in members]

        self.active_tasks = [(s.subtopology_id, p) for s in subtopologies for p in range(s.task_count)]
        self.stateful_tasks = [(s.subtopology_id, p) for s in subtopologies if s.stateful
                               for p in range(s.task_count)]
        self.quota = _Quota(len(self.active_tasks), len(members))
        self.total_quota = _Quota(len(self.active_tasks) + standby_replicas * len(self.stateful_tasks), len(members))

        # The previous active owner of a task (the first in member order) and its previous standby holders.
        self.prev_active: dict[TaskId, int] = {}
        self.prev_standby: dict[TaskId, list[int]] = {}
        for rank, member in enumerate(members):
            for task in member.active:
                self.prev_active.setdefault(task, rank)
            for task in member.standby:
                self.prev_standby.setdefault(task, []).append(rank)

    # ------------------------------------------------------------------ loads and choices

    def load(self, process: int) -> Fraction:
        return Fraction(self.process_task_count[process], len(self.process_members[process]))

    def best_standby_holder(self, task: TaskId, lacking: bool) -> int | None:
        """The first previous standby holder in member order, replaced by a later one only if both its process
        load and its task count are strictly lower (findPrevMemberWithLeastLoad); with `lacking`, holders whose
        process already has the task are skipped."""
        best: int | None = None
        best_load, best_count = Fraction(0), 0
        for rank in self.prev_standby.get(task, ()):
            process = self.process_of[rank]
            if lacking and task in self.process_tasks[process]:
                continue
            load, count = self.load(process), self.count[rank]
            if best is None or (load < best_load and count < best_count):
                best, best_load, best_count = rank, load, count
        return best

    def process_heap(self) -> list[tuple[Fraction, int]]:
        heap = [(self.load(process), process) for process in range(len(self.process_members))]
        heapq.heapify(heap)
        return heap

    def member_heaps(self) -> list[list[tuple[int, int]]]:
        """Per process, its members by (task count, member order): the least-loaded member first."""
        heaps = [[(self.count[rank], rank) for rank in ranks] for ranks in self.process_members]
        for heap in heaps:
            heapq.heapify(heap)
        return heaps

    # ------------------------------------------------------------------ adding tasks

    def _add(self, rank: int, task: TaskId) -> None:
        process = self.process_of[rank]
        self.count[rank] += 1
        self.process_task_count[process] += 1
        self.process_tasks[process].add(task)

    def add_active(self, rank: int, task: TaskId) -> None:
        self._add(rank, task)
        self.active[rank].add(task)
        self.quota.on_count(self.count[rank])
        self.total_quota.on_count(self.count[rank])

    def add_standby(self, rank: int, task: TaskId) -> None:
        self._add(rank, task)
        self.standby[rank].add(task)
        self.total_quota.on_count(self.count[rank])

    def add_to_least_loaded_member(self, member_heaps: list[list[tuple[int, int]]], process: int,
                                   task: TaskId, active: bool) -> None:
        heap = member_heaps[process]
        _, rank = heapq.heappop(heap)
        if active:
            self.add_active(rank, task)
        else:
            self.add_standby(rank, task)
        heapq.heappush(heap, (self.count[rank], rank))

    # ------------------------------------------------------------------ the two passes

    def assign_active(self) -> None:
        """StickyTaskAssignor.assignActive: previous owners, previous standby holders, then by load."""
        left_over = []
        for task in sorted(self.active_tasks, key=_by_partition):
            owner = self.prev_active.get(task)
            if owner is not None and self.count[owner] < self.quota.value:
                self.add_active(owner, task)
            else:
                left_over.append(task)
        rest = []
        for task in left_over:
            holder = self.best_standby_holder(task, lacking=False)
            if holder is not None and self.count[holder] < self.quota.value:
                self.add_active(holder, task)
            else:
                rest.append(task)
        processes, member_heaps = self.process_heap(), self.member_heaps()
        for task in sorted(rest):
            _, process = heapq.heappop(processes)
            self.add_to_least_loaded_member(member_heaps, process, task, active=True)
            heapq.heappush(processes, (self.load(process), process))

    def assign_standby(self) -> None:
        """StickyTaskAssignor.assignStandby: sticky replicas first, the others by load, unplaceable ones dropped."""
        deferred: list[tuple[TaskId, int]] = []
        for task in sorted(self.stateful_tasks, key=_by_partition, reverse=True):
            for replica in range(self.standby_replicas):
                owner = self.prev_active.get(task)
                if (owner is not None and task not in self.process_tasks[self.process_of[owner]]
                        and self.count[owner] < self.total_quota.value):
                    self.add_standby(owner, task)
                    continue
                holder = self.best_standby_holder(task, lacking=True)
                if holder is not None and self.count[holder] < self.total_quota.value:
                    self.add_standby(holder, task)
                    continue
                deferred.append((task, self.standby_replicas - replica))
                break
        processes, member_heaps = self.process_heap(), self.member_heaps()
        for task, remaining in sorted(deferred, reverse=True):
            for _ in range(remaining):
                if not self.add_standby_to_least_loaded_process(processes, member_heaps, task):
                    break

    def add_standby_to_least_loaded_process(self, processes: list[tuple[Fraction, int]],
                                            member_heaps: list[list[tuple[int, int]]], task: TaskId) -> bool:
        """The least-loaded process lacking the task takes it (assignStandbyToMemberWithLeastLoad)."""
        passed = []
        placed = False
        while processes:
            entry = heapq.heappop(processes)
            process = entry[1]
            if task in self.process_tasks[process]:
                passed.append(entry)
                continue
            self.add_to_least_loaded_member(member_heaps, process, task, active=False)
            heapq.heappush(processes, (self.load(process), process))
            placed = True
            break
        for entry in passed:
            heapq.heappush(processes, entry)
        return placed


def _by_partition(task: TaskId) -> tuple[int, str]:
    """(partition, subtopology): Kafka sorts so, assuming the previous assignment paired equal partitions."""
    return (task[1], task[0])
