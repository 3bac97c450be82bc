"""The per-group step both shells share: `LocalCoordinator` and the Spark job (`run_group`).

`handle_in_group` is the one place where a request meets its group: the checks that need no group,
the answers for a group that does not exist, group creation, the event-time rules of PROTOCOL.md
section 5 and the boundary where an engine bug becomes an UNKNOWN_SERVER_ERROR answer instead of an
exception, with the group left exactly as it was before the request (journal.py). `run_group` is what
the Spark job calls once per group and micro-batch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .codec import decode_group, encode_group
from .config import EngineConfig
from .envelope import Response, response_envelope
from .errors import Error
from .group import Group
from .handlers import ABSENT_GROUP_ANSWERS, apply_request, offset_commit
from .offsets import OffsetChange
from .records import DescribeGroups, JoinGroup, LeaveGroup, OffsetCommit, OffsetFetch, Request, SyncGroup
from .responses import error_response_body, leave_body

log = logging.getLogger(__name__)

# The APIs for which "" is a group id like any other: Kafka's GroupCoordinatorService refuses only a null
# group id there, "for backwards compatibility" (docs/OFFSETS_AND_LISTING.md 12 row 4).
_EMPTY_GROUP_ID_ALLOWED = (OffsetCommit, OffsetFetch, DescribeGroups)


def _precheck(req: Request, config: EngineConfig) -> Error | None:
    """The checks that come before the group is looked at (SEMANTICS.md 5.2, 6.1, 7, 8.2)."""
    # `type(...) is`: the records are final, and a failing isinstance walks the class's bases (every request).
    if type(req) is SyncGroup and req.reply.version >= 5 and (
            req.protocol_type is None or req.protocol_name is None):
        return Error.INCONSISTENT_GROUP_PROTOCOL
    if req.group_id == "" and not isinstance(req, _EMPTY_GROUP_ID_ALLOWED):
        return Error.INVALID_GROUP_ID
    if type(req) is JoinGroup and not (
            config.min_session_timeout_ms <= req.session_timeout_ms <= config.max_session_timeout_ms):
        return Error.INVALID_SESSION_TIMEOUT
    return None


def _error_response(req: Request, t: int, error: Error) -> Response:
    member_id = req.member_id if isinstance(req, JoinGroup) and error is not Error.UNKNOWN_SERVER_ERROR else ""
    return response_envelope(req.reply, req.group_id, t,
                             error_response_body(req.reply.api, req.reply.version, error, member_id))


def _absent_group_response(req: Request, t: int) -> Response | None:
    """The answer to a request for a group that does not exist, or None when the request creates it."""
    own_answer = ABSENT_GROUP_ANSWERS.get(req.reply.api)
    if own_answer is not None:
        return own_answer(req, t)
    if isinstance(req, JoinGroup) and req.member_id == "":
        return None
    if isinstance(req, LeaveGroup):
        entries = [(e.member_id, e.group_instance_id, Error.UNKNOWN_MEMBER_ID) for e in req.members]
        top = Error.NONE if req.reply.version >= 3 else Error.UNKNOWN_MEMBER_ID
        return response_envelope(req.reply, req.group_id, t, leave_body(req.reply.version, top, entries))
    return _error_response(req, t, Error.UNKNOWN_MEMBER_ID)


def handle_in_group(
    group: Group | None, req: Request, now: int, config: EngineConfig, changes: list[OffsetChange] | None = None,
) -> tuple[Group | None, list[Response]]:
    """Processes one request at `now` (its time, or later if the coordinator's clock is past it).

    Returns the group afterwards (None when it does not exist or was removed) and every response the
    call decided, timers that came due first included; the offset changes it made are appended to
    `changes`, in order.
    """
    if type(req) is OffsetCommit and offset_commit.names_no_partition(req):
        return group, [offset_commit.nothing_to_commit(req, now)]  # answered before any group is looked at
    offset_changes = [] if changes is None else changes
    responses: list[Response] = []
    if group is not None:
        if now < group.clock:  # the group's clock never goes back
            now = group.clock
        group.fire_due(now)  # timers due at or before the request fire first (SEMANTICS.md T2)
        if group.out:
            responses = group.drain()
        if group.offset_changes:
            offset_changes += group.drain_offset_changes()
        if group.removed:
            group = None
    error = _precheck(req, config)
    if error is None and group is None:
        absent = _absent_group_response(req, now)
        if absent is not None:
            responses.append(absent)
            return None, responses
        group = Group.create(req.group_id, now, config)
    if error is not None:
        responses.append(_error_response(req, now, error))
        return group, responses
    assert group is not None
    group.begin()
    try:
        apply_request(group, req, now)
    except Exception:  # the one boundary where an engine bug becomes an answer, never a crash
        log.exception("engine error on %s for group %r; the group is left as it was", req.reply.api,
                      req.group_id)
        group.undo()
        responses.append(_error_response(req, now, Error.UNKNOWN_SERVER_ERROR))
        return group, responses
    group.commit()
    if group.out:
        responses += group.drain()
    if group.offset_changes:
        offset_changes += group.drain_offset_changes()
    return (None if group.removed else group), responses


@dataclass
class GroupOutcome:
    """What one call for one group produced: the Spark job writes each part to its place."""

    state: bytes | None
    responses: list[Response] = field(default_factory=list)
    snapshot: dict[str, Any] | None = None
    tombstone: bool = False
    next_deadline: int | None = None
    late_requests: int = 0
    offset_changes: list[OffsetChange] = field(default_factory=list)  # for the offsets topic, in order


def run_group(
    state: bytes | None,
    watermark_ms: int,
    requests: Iterable[Request],
    config: EngineConfig,
) -> GroupOutcome:
    """One group's step in a micro-batch: fire its timers due by the watermark, then its requests in log order.

    `requests` must all belong to one group. A request older than the watermark is late: it is still
    processed, at the group's clock, and counted.
    """
    group = None if state is None else decode_group(state, config)
    start_version = -1 if group is None else group.version
    existed = group is not None
    responses: list[Response] = []
    changes: list[OffsetChange] = []
    late = 0
    if group is not None:
        group.fire_due(watermark_ms)
        responses += group.drain()
        changes += group.drain_offset_changes()
        if group.removed:
            group = None
    for req in requests:
        now = req.timestamp_ms
        if now < watermark_ms:
            late += 1
            now = watermark_ms
        before = group
        group, out = handle_in_group(group, req, now, config, changes)
        responses += out
        if group is not None and group is not before:
            existed = True
            start_version = -1  # a group created in this call is new whatever its version
    if group is None:
        return GroupOutcome(None, responses, tombstone=existed, late_requests=late, offset_changes=changes)
    changed = group.version != start_version
    return GroupOutcome(
        encode_group(group),
        responses,
        snapshot=group.snapshot() if changed else None,
        next_deadline=group.next_deadline(),
        late_requests=late,
        offset_changes=changes,
    )
