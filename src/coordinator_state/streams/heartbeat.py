"""StreamsGroupHeartbeat (PROTOCOL.md section 10): the request checks, joins and heartbeats, leaves (-1, -2).

Theory of operation, in Kafka's order (GroupCoordinatorService's checks, then
GroupMetadataManager.streamsGroupHeartbeat): the request's topics go into the group's view first; the checks that
need no group; the group (a join creates it), its size, the member (static members by instance id), its epoch and
the topology; then the updated member, the topology configured against the view, the group epoch bump, the target
assignment (or ASSIGNMENT_DELAYED) and the member's reconciliation. Every check comes before the first store, so a
refused request (`_Refused`, or a topology `configure_topics` refuses) changes nothing but the view.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from ..config import EngineConfig
from ..errors import Error
from ..records import StreamsGroupHeartbeat, TaskIds, Topology
from .answers import endpoint_entry, heartbeat_body, leave_body
from .group import INITIAL_TIMER, REBALANCE_TIMER, SESSION_TIMER, StreamsGroup
from .member import StreamsMember, epoch_relevant_change, new_member, updated_member
from .reconciliation import MemberState, reconcile
from .tasks import NO_ASSIGNED_TASKS, TaskId, owned_tasks
from .topics import ConfiguredTopology, Status, TopologyRefused, configure_topics

__all__ = ["HeartbeatOutcome", "request_check", "steady_heartbeat", "streams_heartbeat"]

LEAVE_EPOCH, TEMPORARY_LEAVE_EPOCH = -1, -2


@dataclass(slots=True)
class HeartbeatOutcome:
    """The group afterwards (None: there is none), the answer's body and the internal topics to create."""

    group: StreamsGroup | None
    body: dict[str, Any]
    create_topics: list[dict[str, Any]] | None = None


class _Refused(Exception):
    def __init__(self, error: Error, message: str) -> None:
        super().__init__(message)
        self.error = error


def request_check(req: StreamsGroupHeartbeat) -> tuple[Error, str] | None:
    """The checks before any group is looked at (throwIfStreamsGroupHeartbeatRequestIsUsingUnsupportedFeatures,
    throwIfStreamsGroupHeartbeatRequestIsInvalid, throwIfInvalidTopology), in their order."""
    invalid = Error.INVALID_REQUEST
    if req.topology is not None and any(s.source_topic_regex for s in req.topology.subtopologies):
        return invalid, "Regular expressions for source topics are not supported yet."
    if not (req.member_id.strip() and req.group_id.strip() and (req.instance_id is None or req.instance_id.strip())
            and (req.rack_id is None or req.rack_id.strip())):
        name = next(name for name, value in (("MemberId", req.member_id), ("GroupId", req.group_id),
                                             ("InstanceId", req.instance_id), ("RackId", req.rack_id))
                    if value is not None and not value.strip())
        return invalid, f"{name} can't be empty."
    lists = (req.active_tasks, req.standby_tasks, req.warmup_tasks)
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            return invalid, "RebalanceTimeoutMs must be provided in first request."
        if any(tasks is None or tasks for tasks in lists):
            return invalid, "ActiveTasks, StandbyTasks and WarmupTasks must be empty when (re-)joining."
        if req.topology is None:
            return invalid, "Topology must be non-null when (re-)joining."
        for subtopology in req.topology.subtopologies:
            for changelog in subtopology.state_changelog_topics:
                if changelog.partitions != 0:
                    return Error.STREAMS_INVALID_TOPOLOGY, (
                        f"Changelog topic {changelog.name} must have an undefined partition count, "
                        f"but it is set to {changelog.partitions}.")
    elif req.member_epoch == TEMPORARY_LEAVE_EPOCH and req.instance_id is None:
        return invalid, "InstanceId can't be null."
    elif req.member_epoch < TEMPORARY_LEAVE_EPOCH:
        return invalid, f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2."
    if any(tasks is None for tasks in lists) and any(tasks is not None for tasks in lists):
        return invalid, "If one task-type is non-null, all must be non-null."
    if req.member_epoch != 0 and req.topology is not None:
        return invalid, "Topology can only be provided when (re-)joining."
    return None


def streams_heartbeat(group: StreamsGroup | None, req: StreamsGroupHeartbeat, t: int,
                      config: EngineConfig) -> HeartbeatOutcome:
    """One StreamsGroupHeartbeat at `t` against the streams group of its id (None: there is none)."""
    if group is not None:
        group.set_view(req.topic_metadata, t)
    try:
        refusal = request_check(req)
        if refusal is not None:
            raise _Refused(*refusal)
        if req.member_epoch < 0:
            return _leave(group, req, t)
        return _Heartbeat(group, req, t, config).run()
    except _Refused as refused:
        return HeartbeatOutcome(group, heartbeat_body(refused.error, message=str(refused)))
    except TopologyRefused as refused:
        return HeartbeatOutcome(group, heartbeat_body(refused.error, message=str(refused)))


def steady_heartbeat(group: StreamsGroup, req: StreamsGroupHeartbeat, t: int) -> HeartbeatOutcome | None:
    """The most frequent heartbeat, answered without the general procedure: a known member, Stable at the
    assignment epoch of a group with no pending bump, reporting nothing and changing nothing. None: any other
    (`streams_heartbeat` answers it). Its one change, the member's session timer, comes last, after everything that
    could raise: the event needs no undo journal."""
    if group.fresh or req.topology is not None or req.topic_metadata or req.member_epoch < 0 \
            or req.active_tasks is not None or req.shutdown_application \
            or req.endpoint_information_epoch != group.endpoint_information_epoch or request_check(req) is not None:
        return None
    member = group.members.get(req.member_id)
    configured, topology = group.configured, group.topology
    if (member is None or member.member_epoch != req.member_epoch or member.state is not MemberState.STABLE
            or member.member_epoch != group.assignment_epoch or group.group_epoch != group.assignment_epoch
            or configured is None or topology is None or updated_member(member, req) is not member
            or (req.instance_id is not None and group.static_members.get(req.instance_id) != member.member_id)
            or group.standby_replicas_at_bump != group.settings.num_standby_replicas):
        return None
    settings = group.settings
    body = heartbeat_body(
        Error.NONE, member_id=member.member_id, member_epoch=member.member_epoch,
        heartbeat_interval_ms=settings.heartbeat_interval_ms, task_offset_interval_ms=settings.task_offset_interval_ms,
        statuses=_statuses(member, topology, False, configured, group.shutdown_requested),
        endpoint_information_epoch=group.endpoint_information_epoch)
    outcome = HeartbeatOutcome(group, body, _create_topics(configured))
    group.timers.schedule(SESSION_TIMER, member.member_id, t + settings.session_timeout_ms)
    return outcome


def _statuses(member: StreamsMember, topology: Topology, delayed: bool, configured: ConfiguredTopology,
              shutdown: bool) -> list[tuple[Status, str]]:
    """An answer's statuses, in section 10's order."""
    statuses: list[tuple[Status, str]] = []
    if member.topology_epoch < topology.epoch:
        statuses.append((Status.STALE_TOPOLOGY, f"The member's topology epoch {member.topology_epoch} is "
                                                f"behind the group's topology epoch {topology.epoch}."))
    if delayed:
        statuses.append((Status.ASSIGNMENT_DELAYED, "The assignment is delayed."))
    if configured.status is not None:
        statuses.append((configured.status, configured.status_detail))
    if shutdown:
        statuses.append((Status.SHUTDOWN_APPLICATION, "A member of the group requested the shutdown of the "
                                                      "whole application."))
    return statuses


def _create_topics(configured: ConfiguredTopology) -> list[dict[str, Any]] | None:
    """The internal topics an answer asks to create (MISSING_INTERNAL_TOPICS), by name."""
    if configured.status is not Status.MISSING_INTERNAL_TOPICS:
        return None
    return [topic.to_create() for topic in configured.topics_to_create]


def _leave(group: StreamsGroup | None, req: StreamsGroupHeartbeat, t: int) -> HeartbeatOutcome:
    """streamsGroupLeave: -1 fences the member; a static member's -2 keeps it, its tasks and its state at epoch -2,
    with no pending revocation and active task epochs 0 (streamsGroupStaticMemberGroupLeave)."""
    if group is None:
        raise _Refused(Error.GROUP_ID_NOT_FOUND, f"Streams group {req.group_id} not found.")
    if req.instance_id is None:
        if req.member_id not in group.members:
            raise _Refused(Error.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of the group.")
        group.fence(req.member_id, t)
    else:
        member = _static_holder(group, req)
        if req.member_epoch == LEAVE_EPOCH:
            group.fence(member.member_id, t)
        else:
            group.put_member(replace(member, member_epoch=TEMPORARY_LEAVE_EPOCH, pending_revocation=NO_ASSIGNED_TASKS,
                                     assigned=member.assigned.with_active_epochs_reset()), t)
    if req.shutdown_application:
        group.shutdown_requested = bool(group.members)
    return HeartbeatOutcome(group, leave_body(req.member_id, req.member_epoch))


def _static_holder(group: StreamsGroup, req: StreamsGroupHeartbeat) -> StreamsMember:
    """The member holding the request's instance id, which must be the request's member (throwIfStaticMemberIsUnknown,
    throwIfInstanceIdIsFenced)."""
    assert req.instance_id is not None
    holder_id = group.static_members.get(req.instance_id)
    if holder_id is None:
        raise _Refused(Error.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
    if holder_id != req.member_id:
        raise _Refused(Error.FENCED_INSTANCE_ID, f"Static member {req.member_id} with instance id "
                                                 f"{req.instance_id} was fenced by member {holder_id}.")
    return group.members[holder_id]


class _Heartbeat:
    """A heartbeat of epoch >= 0: checks first (`_admit`), then the stores (`_apply`)."""

    def __init__(self, group: StreamsGroup | None, req: StreamsGroupHeartbeat, t: int, config: EngineConfig) -> None:
        self.req, self.t, self.settings = req, t, config.streams
        self.creating = group is None or group.fresh
        if group is None:
            if req.member_epoch != 0:
                raise _Refused(Error.GROUP_ID_NOT_FOUND, f"Streams group {req.group_id} not found.")
            group = StreamsGroup(req.group_id, t, config)
            group.set_view(req.topic_metadata, t)
        self.group = group

    def run(self) -> HeartbeatOutcome:
        member, replaced = self._member()
        updated = updated_member(member, self.req)
        topology = self._topology()
        new_topology = self.group.topology is None
        required = self.group.configured_view
        if new_topology or self.req.topic_metadata:  # the view changes only with topic_metadata
            required = {topic: self.group.topic_view.get(topic, -1) for topic in topology.required_topics()}
        metadata_changed = self.group.configured is not None and required != self.group.configured_view
        configured = (configure_topics(topology, self.group.topic_view)
                      if new_topology or metadata_changed or self.group.configured is None else self.group.configured)
        validated = topology.epoch if configured.ready else -1
        if configured.ready:
            self._check_owned_tasks(configured)
        known = member.member_id in self.group.members
        bump = (
            (not known and replaced is None)
            or (updated is not member and epoch_relevant_change(replaced or member, updated))
            or metadata_changed or new_topology
            or validated != self.group.validated_topology_epoch
            or self.group.standby_replicas_at_bump != self.settings.num_standby_replicas
        )
        return self._apply(member, replaced, updated, topology, configured, required, validated, bump)

    # ------------------------------------------------------------------ checks

    def _member(self) -> tuple[StreamsMember, StreamsMember | None]:
        """The member the heartbeat is for, and the static member it replaces, if any."""
        group, req = self.group, self.req
        joining = req.member_epoch == 0
        holder_id = group.static_members.get(req.instance_id) if req.instance_id is not None else None
        if joining and len(group.members) >= self.settings.max_size and req.member_id not in group.members \
                and holder_id is None:
            raise _Refused(Error.GROUP_MAX_SIZE_REACHED, "The streams group has reached its maximum capacity of "
                                                         f"{self.settings.max_size} members.")
        if req.instance_id is not None and joining:
            if holder_id is not None:
                holder = group.members[holder_id]
                if holder.member_epoch != TEMPORARY_LEAVE_EPOCH:
                    raise _Refused(Error.UNRELEASED_INSTANCE_ID, f"Static member {req.member_id} with instance id "
                                                                 f"{req.instance_id} cannot join the group because the "
                                                                 f"instance id is owned by member {holder_id}.")
                return replace(holder, member_id=req.member_id, member_epoch=0), holder
            return group.members.get(req.member_id) or new_member(req.member_id), None
        if req.instance_id is not None:
            member = _static_holder(group, req)
        elif req.member_id in group.members:
            member = group.members[req.member_id]
        elif joining:
            return new_member(req.member_id), None
        else:
            raise _Refused(Error.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of the group.")
        if not joining:
            self._check_epoch(member)
        return member, None

    def _check_epoch(self, member: StreamsMember) -> None:
        """throwIfStreamsGroupMemberEpochIsInvalid: the previous epoch is accepted with owned tasks all assigned."""
        req = self.req
        if req.member_epoch > member.member_epoch or (req.member_epoch < member.member_epoch and (
                req.member_epoch != member.previous_member_epoch
                or not _within(req.active_tasks, member.assigned.active)
                or not _within(req.standby_tasks, member.assigned.standby)
                or not _within(req.warmup_tasks, member.assigned.warmup))):
            raise _Refused(Error.FENCED_MEMBER_EPOCH, f"The member epoch {req.member_epoch} does not match the "
                                                      f"coordinator's ({member.member_epoch}); rejoin with epoch 0.")

    def _topology(self) -> Topology:
        """maybeUpdateTopology: the group's topology, or the request's for a group that has none."""
        current, sent = self.group.topology, self.req.topology
        if sent is None or (current is not None and current.epoch > sent.epoch):
            assert current is not None  # a group has a topology from its first join on
            return current
        if current is None:
            return sent
        if not current.same_as(sent):
            raise _Refused(Error.INVALID_REQUEST, "Topology updates are not supported yet.")
        return current

    def _check_owned_tasks(self, configured: ConfiguredTopology) -> None:
        """throwIfRequestContainsInvalidTasks: owned tasks must be tasks of the ready topology."""
        counts = {s.subtopology_id: s.task_count for s in configured.subtopologies or ()}
        for entries in (self.req.active_tasks, self.req.standby_tasks, self.req.warmup_tasks):
            for subtopology_id, partitions in entries or ():
                if subtopology_id not in counts:
                    raise _Refused(Error.INVALID_REQUEST, f"Subtopology {subtopology_id} does not exist in the "
                                                          "topology.")
                if any(not 0 <= p < counts[subtopology_id] for p in partitions):
                    raise _Refused(Error.INVALID_REQUEST, f"A task of subtopology {subtopology_id} is invalid. "
                                                          f"Number of tasks: {counts[subtopology_id]}")

    # ------------------------------------------------------------------ stores

    def _apply(self, member: StreamsMember, replaced: StreamsMember | None, updated: StreamsMember, topology: Topology,
               configured: ConfiguredTopology, required: dict[str, int], validated: int,
               bump: bool) -> HeartbeatOutcome:
        group, req, t, settings = self.group, self.req, self.t, self.settings
        was_empty = not group.members
        if replaced is not None:
            group.replace_member(replaced.member_id, updated, t)
        else:
            group.put_member(updated, t)
        if group.topology is None or validated != group.validated_topology_epoch or bump:
            group.changed(t)
        group.topology = topology
        group.configured, group.configured_view = configured, required
        group.validated_topology_epoch = validated
        if bump:
            group.bump_group_epoch()
        if req.member_epoch == 0 and was_empty and settings.initial_rebalance_delay_ms > 0 \
                and group.timers.get(INITIAL_TIMER) is None:
            group.timers.schedule(INITIAL_TIMER, "", t + settings.initial_rebalance_delay_ms)

        delayed = group.group_epoch > group.assignment_epoch and group.assignment_delayed(t)
        if group.group_epoch > group.assignment_epoch and not delayed:
            group.compute_targets(t)

        # The state derives from what the snapshot shows (members' epochs and states, the epochs, the validated
        # topology epoch), each store of which is a change already.
        reconciled = self._reconcile(updated)
        group.put_member(reconciled, t)
        group.timers.schedule(SESSION_TIMER, reconciled.member_id, t + settings.session_timeout_ms)

        statuses = _statuses(reconciled, topology, delayed, configured,
                             group.shutdown_requested or req.shutdown_application)
        if req.shutdown_application and not self.creating:
            group.shutdown_requested = True

        endpoint_epoch = self._endpoint_epoch(replaced or member, reconciled)
        partitions = None if endpoint_epoch == req.endpoint_information_epoch else _partitions_by_endpoint(group)
        before = (replaced or member).assigned
        body = heartbeat_body(
            Error.NONE, member_id=reconciled.member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            task_offset_interval_ms=settings.task_offset_interval_ms, statuses=statuses,
            assigned=reconciled.assigned if req.member_epoch == 0 or reconciled.assigned != before else None,
            endpoint_information_epoch=0 if self.creating else group.endpoint_information_epoch,
            partitions_by_user_endpoint=partitions)
        group.fresh = False
        return HeartbeatOutcome(group, body, _create_topics(configured))

    def _reconcile(self, member: StreamsMember) -> StreamsMember:
        """maybeReconcile: CurrentAssignmentBuilder toward the member's target; the rebalance timeout runs while a
        change leaves the member revoking."""
        group = self.group
        target_epoch = group.assignment_epoch
        if member.state is MemberState.STABLE and member.member_epoch == target_epoch:
            return member
        result = reconcile(member.reconciliation(), member.process_id, target_epoch, group.target(member.member_id),
                           group.owners(), owned_tasks(self.req.active_tasks, self.req.standby_tasks,
                                                       self.req.warmup_tasks))
        reconciled = member.reconciled(result)
        if reconciled != member:
            if reconciled.state is MemberState.UNREVOKED_TASKS:
                group.timers.schedule(REBALANCE_TIMER, member.member_id, self.t + member.rebalance_timeout_ms,
                                      (reconciled.member_epoch,))
            else:
                group.timers.cancel(REBALANCE_TIMER, member.member_id)
        return reconciled

    def _endpoint_epoch(self, before: StreamsMember, after: StreamsMember) -> int:
        """The group's endpoint information epoch rises when the member's endpoint changed (a new member's from
        none, a replacement's from the replaced member's), or its tasks while it has one; a group-creating
        heartbeat keeps 0 (4.4 discards the group object it ran on) but answers as if it had risen."""
        group = self.group
        rises = after.user_endpoint != before.user_endpoint or (
            after.user_endpoint is not None and after.assigned != before.assigned)
        if not rises:
            return group.endpoint_information_epoch
        if self.creating:
            return group.endpoint_information_epoch + 1
        group.endpoint_information_epoch += 1
        group.changed(self.t)
        return group.endpoint_information_epoch


def _within(entries: tuple[TaskIds, ...] | None, assigned: Iterable[TaskId]) -> bool:
    """areOwnedTasksContainedInAssignedTasks: a null list is not; each entry's subtopology must hold tasks."""
    if entries is None:
        return False
    tasks = set(assigned)
    subtopologies = {subtopology for subtopology, _ in tasks}
    return all(s in subtopologies and all((s, p) in tasks for p in partitions) for s, partitions in entries)


def _partitions_by_endpoint(group: StreamsGroup) -> list[dict[str, Any]]:
    """One entry per member with an endpoint: per source and repartition source topic, the partitions below the
    topic's count of its active tasks, resp. its standby and warm-up tasks (EndpointToPartitionsManager)."""
    subtopologies = group.configured.subtopologies if group.configured is not None else None
    topics = {s.subtopology_id: sorted({*s.source_topics, *(t.name for t in s.repartition_source_topics)})
              for s in subtopologies or ()}
    counts = dict(group.topic_view)

    def partitions(tasks: Iterable[TaskId]) -> list[dict[str, Any]]:
        by_subtopology: dict[str, list[int]] = {}
        for subtopology, partition in sorted(tasks):
            by_subtopology.setdefault(subtopology, []).append(partition)
        return [{"topic": topic, "partitions": [p for p in parts if p < counts.get(topic, 0)]}
                for subtopology, parts in by_subtopology.items() for topic in topics.get(subtopology, ())]

    return [endpoint_entry(m.user_endpoint, partitions(m.assigned.active),
                           partitions(m.assigned.standby | m.assigned.warmup))
            for _, m in sorted(group.members.items()) if m.user_endpoint is not None]
