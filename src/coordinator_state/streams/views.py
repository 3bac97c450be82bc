"""What a streams group shows: its snapshot (PROTOCOL.md section 10, Snapshot) and its StreamsGroupDescribe entry
(GroupMetadataManager.streamsGroupDescribe, StreamsGroup.asDescribedGroup)."""

from __future__ import annotations

from typing import Any

from ..errors import Error
from ..records import Endpoint, Subtopology, TaskOffset, TopicInfo, Topology
from .answers import AUTHORIZED_OPERATIONS_OMITTED
from .group import StreamsGroup
from .member import StreamsMember
from .tasks import active_epochs_to_wire, task_sets_to_wire
from .topics import ConfiguredInternalTopic

__all__ = ["describe_entry", "not_found_entry", "snapshot", "topology_to_json"]


def snapshot(group: StreamsGroup) -> dict[str, Any]:
    return {
        "group_id": group.group_id,
        "group_type": "streams",
        "state": group.state.value,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "topology": None if group.topology is None else topology_to_json(group.topology),
        "validated_topology_epoch": group.validated_topology_epoch,
        "topic_metadata": {"topics": [{"name": name, "partitions": partitions}
                                      for name, partitions in sorted(group.topic_view.items())]},
        "endpoint_information_epoch": group.endpoint_information_epoch,
        "members": [_member_snapshot(group, member) for _, member in sorted(group.members.items())],
        "timestamp_ms": group.changed_at,
        "version": group.version,
    }


def _member_snapshot(group: StreamsGroup, member: StreamsMember) -> dict[str, Any]:
    return {
        "member_id": member.member_id,
        "member_epoch": member.member_epoch,
        "previous_member_epoch": member.previous_member_epoch,
        "member_state": member.state.value,
        "instance_id": member.instance_id,
        "rack_id": member.rack_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "rebalance_timeout_ms": member.rebalance_timeout_ms,
        "topology_epoch": member.topology_epoch,
        "process_id": member.process_id,
        "user_endpoint": _endpoint(member.user_endpoint),
        "client_tags": _key_values(member.client_tags),
        "assigned_tasks": task_sets_to_wire(member.assigned),
        "tasks_pending_revocation": task_sets_to_wire(member.pending_revocation),
        "target_assignment": task_sets_to_wire(group.target(member.member_id)),
        "active_task_epochs": active_epochs_to_wire(member.assigned.active),
    }


def describe_entry(group: StreamsGroup) -> dict[str, Any]:
    """The group's entry of a StreamsGroupDescribe answer: the topology as configured (with partition counts)
    when ready, else as received; members by id."""
    configured = group.configured
    if configured is not None and configured.ready and configured.subtopologies is not None:
        topology: dict[str, Any] | None = {"epoch": configured.epoch, "subtopologies": [{
            "subtopology_id": s.subtopology_id, "source_topics": list(s.source_topics),
            "source_topic_regex": list(s.source_topic_regex),
            "state_changelog_topics": [_topic_info(t) for t in s.state_changelog_topics],
            "repartition_sink_topics": list(s.repartition_sink_topics),
            "repartition_source_topics": [_topic_info(t) for t in s.repartition_source_topics],
        } for s in configured.subtopologies]}
    elif group.topology is not None:
        topology = {"epoch": group.topology.epoch, "subtopologies": [
            {key: value for key, value in _subtopology_to_json(s).items() if key != "copartition_groups"}
            for s in group.topology.subtopologies]}
    else:
        topology = None
    return {
        "error_code": 0, "error": "NONE", "error_message": None, "group_id": group.group_id,
        "group_state": group.state.value, "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch, "topology": topology,
        "members": [{
            "member_id": m.member_id, "member_epoch": m.member_epoch, "instance_id": m.instance_id,
            "rack_id": m.rack_id, "client_id": m.client_id, "client_host": m.client_host,
            "topology_epoch": m.topology_epoch, "process_id": m.process_id,
            "user_endpoint": _endpoint(m.user_endpoint), "client_tags": _key_values(m.client_tags),
            "task_offsets": _task_offsets(m.task_offsets), "task_end_offsets": _task_offsets(m.task_end_offsets),
            "assignment": task_sets_to_wire(m.assigned),
            "target_assignment": task_sets_to_wire(group.target(m.member_id)),
            "is_classic": False,
        } for _, m in sorted(group.members.items())],
        "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def not_found_entry(group_id: str) -> dict[str, Any]:
    """An absent or non-streams group's entry: GROUP_ID_NOT_FOUND, epochs 0, no topology, no members; the empty id's
    is INVALID_GROUP_ID with no message (GroupCoordinatorService.streamsGroupDescribe)."""
    error = Error.INVALID_GROUP_ID if group_id == "" else Error.GROUP_ID_NOT_FOUND
    return {
        "error_code": int(error), "error": error.name,
        "error_message": None if group_id == "" else f"Group {group_id} not found.", "group_id": group_id,
        "group_state": "",
        "group_epoch": 0, "assignment_epoch": 0, "topology": None, "members": [],
        "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def topology_to_json(topology: Topology) -> dict[str, Any]:
    """The topology in the request's form (the snapshot keeps it as first received)."""
    return {"epoch": topology.epoch, "subtopologies": [_subtopology_to_json(s) for s in topology.subtopologies]}


def _subtopology_to_json(s: Subtopology) -> dict[str, Any]:
    return {
        "subtopology_id": s.subtopology_id, "source_topics": list(s.source_topics),
        "source_topic_regex": list(s.source_topic_regex),
        "state_changelog_topics": [_topic_info(t) for t in s.state_changelog_topics],
        "repartition_sink_topics": list(s.repartition_sink_topics),
        "repartition_source_topics": [_topic_info(t) for t in s.repartition_source_topics],
        "copartition_groups": [{"source_topics": list(g.source_topics),
                                "source_topic_regex": list(g.source_topic_regex),
                                "repartition_source_topics": list(g.repartition_source_topics)}
                               for g in s.copartition_groups],
    }


def _topic_info(t: TopicInfo | ConfiguredInternalTopic) -> dict[str, Any]:
    return {"name": t.name, "partitions": t.partitions, "replication_factor": t.replication_factor,
            "topic_configs": _key_values(t.topic_configs)}


def _task_offsets(offsets: tuple[TaskOffset, ...]) -> list[dict[str, Any]]:
    return [{"subtopology_id": o.subtopology_id, "partition": o.partition, "offset": o.offset} for o in offsets]


def _endpoint(endpoint: Endpoint | None) -> dict[str, Any] | None:
    return None if endpoint is None else {"host": endpoint.host, "port": endpoint.port}


def _key_values(pairs: tuple[tuple[str, str], ...]) -> list[dict[str, str]]:
    return [{"key": key, "value": value} for key, value in pairs]
