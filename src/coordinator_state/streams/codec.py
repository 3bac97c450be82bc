"""A streams group's stored state as JSON values (the engine's codec adds the format and the group type).

Everything a group needs to go on exactly as it would have: members (task offsets included), targets, epochs,
topology, topic view, timers with their sequence numbers, the time of the last assignment and the shutdown request.
The configured topology is not stored: it is configured again from the topology and the view it was configured
with (configure_topics depends on nothing else), so it can never disagree with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import EngineConfig
from ..offsets import OffsetStore
from ..records import Endpoint, TaskOffset
from ..timers import Timers
from .group import StreamsGroup
from .member import StreamsMember
from .parsing import parse_topology
from .reconciliation import MemberState
from .tasks import NO_ASSIGNED_TASKS, AssignedTasks, TaskId, TaskSets
from .topics import configure_topics
from .views import topology_to_json

__all__ = ["decode_streams_group", "encode_streams_group"]


def encode_streams_group(group: StreamsGroup) -> dict[str, Any]:
    return {
        "group_id": group.group_id,
        "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
        "topology": None if group.topology is None else topology_to_json(group.topology),
        "configured": group.configured is not None, "configured_view": sorted(group.configured_view.items()),
        "validated_topology_epoch": group.validated_topology_epoch, "topic_view": sorted(group.topic_view.items()),
        "endpoint_information_epoch": group.endpoint_information_epoch,
        "members": [_member_to_json(m) for _, m in sorted(group.members.items())],
        "targets": [[member_id, _tasks(t.active), _tasks(t.standby), _tasks(t.warmup)]
                    for member_id, t in sorted(group.targets.items())],
        "last_assignment_ms": group.last_assignment_ms, "standby_replicas_at_bump": group.standby_replicas_at_bump,
        "shutdown_requested": group.shutdown_requested, "timers": group.timers.to_json(),
        "clock": group.clock, "version": group.version, "changed_at": group.changed_at,
        "offsets": group.offsets.to_json(),
    }


def decode_streams_group(data: Mapping[str, Any], config: EngineConfig) -> StreamsGroup:
    group = StreamsGroup(data["group_id"], data["clock"], config)
    group.group_epoch, group.assignment_epoch = data["group_epoch"], data["assignment_epoch"]
    group.topology = None if data["topology"] is None else parse_topology(data["topology"], "topology")
    group.configured_view = dict(data["configured_view"])
    if data["configured"] and group.topology is not None:
        group.configured = configure_topics(group.topology, group.configured_view)
    group.validated_topology_epoch = data["validated_topology_epoch"]
    group.topic_view = dict(data["topic_view"])
    group.endpoint_information_epoch = data["endpoint_information_epoch"]
    for member in map(_member_from_json, data["members"]):
        group.members[member.member_id] = member
        if member.instance_id is not None:
            group.static_members[member.instance_id] = member.member_id
    group.targets = {member_id: TaskSets(_task_set(a), _task_set(s), _task_set(w))
                     for member_id, a, s, w in data["targets"]}
    group.last_assignment_ms = data["last_assignment_ms"]
    group.standby_replicas_at_bump = data["standby_replicas_at_bump"]
    group.shutdown_requested = data["shutdown_requested"]
    group.timers = Timers.from_json(data["timers"])
    group.version, group.changed_at = data["version"], data["changed_at"]
    group.offsets = OffsetStore.from_json(data["offsets"])
    return group


# A group's tasks are read and written at every call of the Spark job's step: the conversions run as map()s of
# builtins, with no Python frame per task.

def _tasks(tasks: frozenset[TaskId]) -> list[list[Any]]:
    return list(map(list, sorted(tasks)))


def _task_set(data: list[list[Any]]) -> frozenset[TaskId]:
    return frozenset(map(tuple, data))  # [subtopology id, partition] pairs


def _assigned_to_json(tasks: AssignedTasks) -> list[Any]:
    if tasks.is_empty():  # most members' tasks pending revocation
        return [[], [], []]
    return [[[s, p, e] for (s, p), e in sorted(tasks.active.items())], _tasks(tasks.standby), _tasks(tasks.warmup)]


def _assigned_from_json(data: list[Any]) -> AssignedTasks:
    active, standby, warmup = data
    if not (active or standby or warmup):
        return NO_ASSIGNED_TASKS  # immutable, as the reconciliation shares it too
    return AssignedTasks({(s, p): e for s, p, e in active}, _task_set(standby), _task_set(warmup))


def _offsets(offsets: tuple[TaskOffset, ...]) -> list[list[Any]]:
    return list(map(list, offsets))


def _member_to_json(m: StreamsMember) -> list[Any]:
    return [m.member_id, m.member_epoch, m.previous_member_epoch, m.state, m.instance_id, m.rack_id,
            m.client_id, m.client_host, m.rebalance_timeout_ms, m.topology_epoch, m.process_id,
            None if m.user_endpoint is None else list(m.user_endpoint), list(map(list, m.client_tags)),
            _assigned_to_json(m.assigned), _assigned_to_json(m.pending_revocation), _offsets(m.task_offsets),
            _offsets(m.task_end_offsets)]


def _member_from_json(d: list[Any]) -> StreamsMember:
    return StreamsMember(
        d[0], d[1], d[2], _MEMBER_STATES[d[3]], d[4], d[5], d[6], d[7], d[8], d[9], d[10],
        None if d[11] is None else Endpoint._make(d[11]), tuple(map(tuple, d[12])),
        _assigned_from_json(d[13]), _assigned_from_json(d[14]),
        tuple(map(TaskOffset._make, d[15])), tuple(map(TaskOffset._make, d[16])))


_MEMBER_STATES: dict[str, MemberState] = {state.value: state for state in MemberState}  # a lookup: no enum call
