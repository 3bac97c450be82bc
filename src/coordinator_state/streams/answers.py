"""The bodies of the streams APIs' answers (PROTOCOL.md section 10): every field of the v0 response, Kafka's
defaults where a case sets nothing."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import Error
from ..records import Endpoint
from .tasks import AssignedTasks, task_sets_to_wire
from .topics import Status

__all__ = ["AUTHORIZED_OPERATIONS_OMITTED", "endpoint_entry", "heartbeat_body", "leave_body", "status_entries"]

_CODE_AND_NAME = {error: (int(error), error.name) for error in Error}
# StreamsGroupDescribe's authorized operations when they are not asked for (the spec default, Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


def status_entries(statuses: Iterable[tuple[Status, str]]) -> list[dict[str, Any]]:
    return [{"status_code": int(code), "status_detail": detail} for code, detail in statuses]


def heartbeat_body(error: Error, *, message: str | None = None, member_id: str = "", member_epoch: int = 0,
                   heartbeat_interval_ms: int = 0, task_offset_interval_ms: int = 0,
                   statuses: Sequence[tuple[Status, str]] = (), assigned: AssignedTasks | None = None,
                   endpoint_information_epoch: int = 0,
                   partitions_by_user_endpoint: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A StreamsGroupHeartbeat v0 body; `assigned` None leaves the three task lists null ("unchanged")."""
    code, name = _CODE_AND_NAME[error]
    body = {
        "error_code": code, "error": name, "throttle_time_ms": 0, "error_message": message,
        "member_id": member_id, "member_epoch": member_epoch, "heartbeat_interval_ms": heartbeat_interval_ms,
        # v0's recovery lag: 4.4 fills only v1's field (PROTOCOL.md section 10)
        "acceptable_recovery_lag_legacy": 0, "task_offset_interval_ms": task_offset_interval_ms,
        "status": status_entries(statuses) if statuses else [],
        "active_tasks": None, "standby_tasks": None, "warmup_tasks": None,
        "endpoint_information_epoch": endpoint_information_epoch,
        "partitions_by_user_endpoint": partitions_by_user_endpoint,
    }
    if assigned is not None:
        body.update(task_sets_to_wire(assigned))
    return body


def leave_body(member_id: str, member_epoch: int) -> dict[str, Any]:
    """The answer to a leave (-1, or a static member's -2): its id and epoch, defaults elsewhere."""
    return heartbeat_body(Error.NONE, member_id=member_id, member_epoch=member_epoch)


def endpoint_entry(endpoint: Endpoint, active: list[dict[str, Any]], standby: list[dict[str, Any]]) -> dict[str, Any]:
    return {"user_endpoint": {"host": endpoint.host, "port": endpoint.port},
            "active_partitions": active, "standby_partitions": standby}

