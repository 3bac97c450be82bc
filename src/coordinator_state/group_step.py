"""The per-group step both shells share: `LocalCoordinator` and the Spark job (`run_group`).

`handle_in_group` is the one place where a request meets its group: the checks that need no group,
the answers for a group that does not exist, group creation, the event-time rules of PROTOCOL.md
section 5 and the boundary where an engine bug becomes an UNKNOWN_SERVER_ERROR answer instead of an
exception, with the group left exactly as it was before the request (journal.py). `fire_due` is the
same boundary for timers: a timer whose event fails is logged and dropped, the others fire. `run_group`
is what the Spark job calls once per group and micro-batch. A group is reached only through its type's
interface (group_types.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .codec import decode_group, encode_group
from .config import EngineConfig
from .envelope import Response
from .errors import Error
from .group_types import GROUP_TYPES, Group, GroupType, type_for_absent_group, type_of
from .no_group_answers import error_response, names_no_partition, nothing_to_commit
from .offsets import OffsetChange
from .records import (
    DeleteGroups,
    DescribeGroups,
    JoinGroup,
    OffsetCommit,
    OffsetFetch,
    Request,
    StreamsGroupDescribe,
    StreamsGroupHeartbeat,
    SyncGroup,
)
from .timers import TimerFailed

log = logging.getLogger(__name__)

# The APIs for which "" is a group id like any other: Kafka's GroupCoordinatorService refuses only a null
# group id there, "for backwards compatibility" (docs/OFFSETS_AND_LISTING.md 12 row 4; DeleteGroups likewise).
# The streams APIs check their group ids themselves (PROTOCOL.md section 10).
_EMPTY_GROUP_ID_ALLOWED = (OffsetCommit, OffsetFetch, DescribeGroups, DeleteGroups, StreamsGroupHeartbeat,
                           StreamsGroupDescribe)


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


def fire_due(group: Group, now: int, kind: GroupType | None = None, before_request: bool = False) -> None:
    """Fires the group's timers due at or before `now` (GroupType.fire_due); a timer whose event fails (an engine
    bug) is logged and dropped, with the group as it was before that event, and the others fire."""
    if kind is None:
        kind = type_of(group)
    while True:
        try:
            kind.fire_due(group, now, before_request)
            return
        except TimerFailed:
            _timer_failed(group)


def _timer_failed(group: Group) -> None:
    log.exception("engine error in a timer of group %r; the timer is dropped", group.group_id)


def handle_in_group(
    group: Group | None, req: Request, now: int, config: EngineConfig, changes: list[OffsetChange] | None = None,
) -> tuple[Group | None, list[Response]]:
    """Processes one request at `now` (its time, or later if the coordinator's clock is past it).

    Returns the group afterwards (None when it does not exist or was removed) and every response the
    call decided, timers that came due first included; the offset changes it made are appended to
    `changes`, in order.
    """
    if type(req) is OffsetCommit and names_no_partition(req):
        return group, [nothing_to_commit(req, now)]  # answered before any group is looked at
    offset_changes = [] if changes is None else changes
    responses: list[Response] = []
    # What the group's events decide stays in the group until drained, in order: the timers' answers (fired
    # first, SEMANTICS.md T2) come before the request's.
    if group is not None:
        kind = GROUP_TYPES[group.group_type]
        if now < group.clock:  # the group's clock never goes back
            now = group.clock
        try:  # `fire_due`, without a call on the way of every request
            kind.fire_due(group, now, True)  # timers due at or before the request fire first (SEMANTICS.md T2)
        except TimerFailed:
            _timer_failed(group)
            fire_due(group, now, kind, before_request=True)
        if group.removed:
            group.drain_into(responses, offset_changes)
            group = None
    error = _precheck(req, config)
    if error is not None:
        if group is not None:
            group.drain_into(responses, offset_changes)
        responses.append(error_response(req, now, error))
        return group, responses
    replaced = None
    try:  # the one boundary where an engine bug becomes an answer, never a crash
        if group is None:
            kind = type_for_absent_group(req)
            absent = kind.absent_group(req, now)
            if absent is not None:
                responses.append(absent)
                return None, responses
            group = kind.create(req.group_id, now, config)
        elif req.reply.api not in kind.HANDLES:  # a request of another group type's API (PROTOCOL.md 10)
            kind = type_for_absent_group(req)
            outcome = kind.from_other_group(group, req, now, config)
            group.drain_into(responses, offset_changes)
            if isinstance(outcome, dict):
                responses.append(outcome)
                return group, responses
            replaced, group = group, outcome  # converted: a new group of the request's type replaces it
        kind.handle(group, req, now)  # atomic: if it raises, the group is as it was
    except Exception:
        log.exception("engine error on %s for group %r; the group is left as it was", req.reply.api,
                      req.group_id)
        if group is not None:
            group.drain_into(responses, offset_changes)
        responses.append(error_response(req, now, Error.UNKNOWN_SERVER_ERROR))
        return (group if replaced is None else replaced), responses  # a failed conversion keeps the old group
    group.drain_into(responses, offset_changes)
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
        fire_due(group, watermark_ms)
        group.drain_into(responses, changes)
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
    kind = type_of(group)
    return GroupOutcome(
        encode_group(group),
        responses,
        snapshot=kind.snapshot(group) if changed else None,
        next_deadline=kind.next_deadline(group),
        late_requests=late,
        offset_changes=changes,
    )
