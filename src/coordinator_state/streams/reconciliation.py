"""Reconciliation of a member toward its target assignment: Kafka 4.4's streams CurrentAssignmentBuilder.

Theory of operation. A member is Stable, UnrevokedTasks (it must first give up tasks it no longer has in its
target) or UnreleasedTasks (tasks of its target are still owned elsewhere). Tasks it keeps keep their epoch;
tasks it must give up go pending revocation, and the member stays at its epoch until a heartbeat reports all three
owned lists without them; only then, at epoch + 1, is it reconciled again. A task of the target is granted (with
the target epoch) only when nobody else holds it: an active task while any process holds it as active (pending
revocations included) or another member of this process holds it as standby or warm-up; a standby or warm-up task
while this process holds it in any role through another member. A role change of the member's own task happens in
place: active to standby and standby to warm-up (or back) at once, standby or warm-up to active as soon as the
active task is granted (the standby or warm-up is kept until then).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from .tasks import NO_ASSIGNED_TASKS, NO_TASKS, AssignedTasks, TaskId, TaskSets

__all__ = ["CurrentOwners", "MemberState", "Reconciliation", "reconcile"]


class MemberState(StrEnum):
    """A streams member's reconciliation state (Kafka's MemberState, as the snapshot names it)."""

    STABLE = "Stable"
    UNREVOKED_TASKS = "UnrevokedTasks"
    UNRELEASED_TASKS = "UnreleasedTasks"


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """The part of a member that reconciliation reads and writes."""

    member_epoch: int
    previous_member_epoch: int
    state: MemberState = MemberState.STABLE
    assigned: AssignedTasks = NO_ASSIGNED_TASKS
    pending_revocation: AssignedTasks = NO_ASSIGNED_TASKS


@dataclass(frozen=True, slots=True)
class CurrentOwners:
    """Which process currently holds each task, from every member's assigned and pending-revocation tasks
    (StreamsGroup's currentActiveTaskProcessId / currentStandbyTaskProcessIds / currentWarmupTaskProcessIds)."""

    active: Mapping[TaskId, str] = field(default_factory=dict)
    standby: Mapping[TaskId, frozenset[str]] = field(default_factory=dict)
    warmup: Mapping[TaskId, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, members: Iterable[tuple[str, AssignedTasks, AssignedTasks]]) -> CurrentOwners:
        """From (process id, assigned tasks, tasks pending revocation) of each member."""
        active: dict[TaskId, str] = {}
        standby: dict[TaskId, set[str]] = {}
        warmup: dict[TaskId, set[str]] = {}
        for process_id, assigned, pending in members:
            for tasks in (assigned, pending):
                for task in tasks.active:
                    active[task] = process_id
                for task in tasks.standby:
                    standby.setdefault(task, set()).add(process_id)
                for task in tasks.warmup:
                    warmup.setdefault(task, set()).add(process_id)
        return cls(active, {task: frozenset(p) for task, p in standby.items()},
                   {task: frozenset(p) for task, p in warmup.items()})


def reconcile(member: Reconciliation, process_id: str, target_epoch: int, target: TaskSets,
              owners: CurrentOwners, owned: TaskSets | None) -> Reconciliation:
    """The member's next state toward `target` at `target_epoch` (CurrentAssignmentBuilder.build).

    `owned` is what the heartbeat reports owning (None when it reports nothing: null task lists).
    """
    builder = _Builder(member, process_id, target_epoch, target, owners, owned)
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return builder.next_assignment(member.member_epoch)
    if member.state is MemberState.UNREVOKED_TASKS:
        if builder.has_not_released(member.pending_revocation):
            return member
        return builder.next_assignment(member.member_epoch + 1)
    return builder.next_assignment(member.member_epoch)


class _Builder:
    def __init__(self, member: Reconciliation, process_id: str, target_epoch: int, target: TaskSets,
                 owners: CurrentOwners, owned: TaskSets | None) -> None:
        self.member, self.process_id = member, process_id
        self.target_epoch, self.target = target_epoch, target
        self.owners, self.owned = owners, owned

    def has_not_released(self, tasks: AssignedTasks) -> bool:
        """Revocation is acknowledged only by a report of all three lists without the tasks."""
        return self.owned is None or self.owned.contains_any(tasks)

    # ------------------------------------------------------------------ who holds a task elsewhere

    def held_by_another_member_here(self, holders: Mapping[TaskId, frozenset[str]], mine: frozenset[TaskId],
                                    task: TaskId) -> bool:
        return self.process_id in holders.get(task, NO_TASKS) and task not in mine

    def unreleased_active(self, task: TaskId) -> bool:
        assigned = self.member.assigned
        return (task in self.owners.active
                or self.held_by_another_member_here(self.owners.standby, assigned.standby, task)
                or self.held_by_another_member_here(self.owners.warmup, assigned.warmup, task))

    def unreleased_standby(self, task: TaskId) -> bool:
        assigned = self.member.assigned
        run_here_by_another = self.owners.active.get(task) == self.process_id and task not in assigned.active
        return (run_here_by_another or self.process_id in self.owners.standby.get(task, NO_TASKS)
                or self.held_by_another_member_here(self.owners.warmup, assigned.warmup, task))

    def unreleased_warmup(self, task: TaskId) -> bool:
        assigned = self.member.assigned
        return (self.owners.active.get(task) == self.process_id
                or self.held_by_another_member_here(self.owners.standby, assigned.standby, task)
                or self.process_id in self.owners.warmup.get(task, NO_TASKS))

    # ------------------------------------------------------------------ the next state

    def next_assignment(self, member_epoch: int) -> Reconciliation:
        """CurrentAssignmentBuilder.computeNextAssignment."""
        current, target = self.member.assigned, self.target
        kept_active = {task: epoch for task, epoch in current.active.items() if task in target.active}
        revoke_active = {task: epoch for task, epoch in current.active.items() if task not in target.active}
        wanted_active = [task for task in target.active if task not in kept_active]
        grant_active = {task: self.target_epoch for task in wanted_active if not self.unreleased_active(task)}

        kept_standby, revoke_standby = set(current.standby & target.standby), set(current.standby - target.standby)
        wanted_standby = target.standby - current.standby
        grant_standby = {task for task in wanted_standby if not self.unreleased_standby(task)}

        kept_warmup, revoke_warmup = set(current.warmup & target.warmup), set(current.warmup - target.warmup)
        wanted_warmup = target.warmup - current.warmup
        grant_warmup = {task for task in wanted_warmup if not self.unreleased_warmup(task)}

        has_unreleased = (len(grant_active) < len(wanted_active) or len(grant_standby) < len(wanted_standby)
                          or len(grant_warmup) < len(wanted_warmup))

        # Role changes in place: an own active task demoted to standby is granted as standby at once (the active
        # task stays pending revocation); a standby converted to warm-up, or back, needs no revocation at all.
        for task in current.active.keys() & grant_standby:
            grant_standby.discard(task)
            kept_standby.add(task)
        for task in current.standby & grant_warmup:
            grant_warmup.discard(task)
            kept_warmup.add(task)
            revoke_standby.discard(task)
        for task in current.warmup & grant_standby:
            grant_standby.discard(task)
            kept_standby.add(task)
            revoke_warmup.discard(task)

        # A standby or warm-up promoted to active is never revoked; it is kept until the active task is granted.
        revoke_standby -= target.active
        revoke_warmup -= target.active
        pending = AssignedTasks(revoke_active, frozenset(revoke_standby), frozenset(revoke_warmup))
        must_revoke = not pending.is_empty() and self.has_not_released(pending)
        for task in current.standby & target.active:
            if must_revoke or task not in grant_active:
                kept_standby.add(task)
        for task in current.warmup & target.active:
            if must_revoke or task not in grant_active:
                kept_warmup.add(task)

        kept = AssignedTasks(kept_active, frozenset(kept_standby), frozenset(kept_warmup))
        if must_revoke:
            return self._moved(member_epoch, MemberState.UNREVOKED_TASKS, kept, pending)
        granted = AssignedTasks(grant_active, frozenset(grant_standby), frozenset(grant_warmup))
        if not granted.is_empty():
            merged = AssignedTasks({**kept_active, **grant_active}, kept.standby | granted.standby,
                                   kept.warmup | granted.warmup)
            state = MemberState.UNRELEASED_TASKS if has_unreleased else MemberState.STABLE
            return self._moved(self.target_epoch, state, merged, NO_ASSIGNED_TASKS)
        state = MemberState.UNRELEASED_TASKS if has_unreleased else MemberState.STABLE
        return self._moved(self.target_epoch, state, kept, NO_ASSIGNED_TASKS)

    def _moved(self, epoch: int, state: MemberState, assigned: AssignedTasks,
               pending: AssignedTasks) -> Reconciliation:
        """StreamsGroupMember.Builder.updateMemberEpoch: the previous epoch is the one the member had."""
        return replace(self.member, member_epoch=epoch, previous_member_epoch=self.member.member_epoch,
                       state=state, assigned=assigned, pending_revocation=pending)
