"""`LocalCoordinator`: the engine with no Spark, for tests, conformance suites and local replay (PROTOCOL.md 7)."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Mapping
from typing import Any

from .config import EngineConfig
from .envelope import Response, answer_list_groups
from .group_step import fire_due, handle_in_group
from .group_types import GROUP_TYPES, Group, snapshot_of, type_of
from .offsets import OffsetChange
from .parsing import parse_request
from .records import Invalid, ListGroups, Parsed, Tick
from .responses import invalid_response


class LocalCoordinator:
    """Every group in memory; `handle` moves one group's clock, `advance_to` everyone's."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.config = EngineConfig.from_mapping(config)
        self.groups: dict[str, Group] = {}
        self.counters: Counter[str] = Counter()
        self.invalid: list[Invalid] = []
        self.offset_changes: list[OffsetChange] = []  # every committed offset set or expired, in order
        self._clock = 0
        # Each group's earliest deadline, lazily: an entry is live while it equals _queued[group_id], which is a
        # lower bound of the group's next deadline (a deadline moved later leaves it be).
        self._queue: list[tuple[int, int, str]] = []
        self._queued: dict[str, int] = {}
        self._queue_seq = 0

    def handle(self, request: Any) -> list[Response]:
        """Processes one request envelope; never raises, whatever `request` is."""
        return self.process(parse_request(request))

    def process(self, parsed: Parsed) -> list[Response]:
        """Processes a record already validated by `parse_request` or `parse_raw`."""
        if isinstance(parsed, Tick):
            return []
        if isinstance(parsed, Invalid):
            self.counters["invalid_records"] += 1
            self.invalid.append(parsed)
            response = invalid_response(parsed)
            return [] if response is None else [response]
        self.counters["requests"] += 1
        now = parsed.timestamp_ms
        if now < self._clock:
            self.counters["late_requests"] += 1
            now = self._clock
        if isinstance(parsed, ListGroups):
            return self._list_groups(parsed)
        group_id = parsed.group_id
        group, responses = handle_in_group(self.groups.get(group_id), parsed, now, self.config, self.offset_changes)
        self._store(group_id, group)
        return responses

    def drain_offset_changes(self) -> list[OffsetChange]:
        changes, self.offset_changes = self.offset_changes, []
        return changes

    def _list_groups(self, req: ListGroups) -> list[Response]:
        """Every group as it is at the request's time: each group's timers due by then fire first."""
        t = max(req.timestamp_ms, self._clock)
        responses = self._fire_until(t)
        responses.append(answer_list_groups(req, (snapshot_of(g) for g in self.groups.values()), t))
        return responses

    def advance_to(self, ts_ms: int) -> list[Response]:
        """Fires every timer with deadline <= ts_ms, across groups in deadline order."""
        self._clock = max(self._clock, ts_ms)
        return self._fire_until(ts_ms)

    def _fire_until(self, ts_ms: int) -> list[Response]:
        responses: list[Response] = []
        queue = self._queue
        while queue and queue[0][0] <= ts_ms:
            deadline, _, group_id = heapq.heappop(queue)
            if self._queued.get(group_id) != deadline:
                continue
            del self._queued[group_id]
            group = self.groups[group_id]
            due = type_of(group).next_deadline(group)
            if due is not None and due <= ts_ms:
                fire_due(group, due)
                group.drain_into(responses, self.offset_changes)
            self._store(group_id, None if group.removed else group)
        return responses

    def describe(self, group_id: str) -> dict[str, Any] | None:
        group = self.groups.get(group_id)
        return None if group is None else snapshot_of(group)

    def _store(self, group_id: str, group: Group | None) -> None:
        if group is None:
            if self.groups.pop(group_id, None) is not None:
                self.counters["groups_removed"] += 1
            self._queued.pop(group_id, None)
            return
        self.groups[group_id] = group
        queued = self._queued.get(group_id)
        kind = GROUP_TYPES[group.group_type]
        if queued is not None:
            bound = kind.deadline_lower_bound(group)
            if bound is None or bound >= queued:
                return  # the queued entry still comes first: the next deadline need not be looked for
        deadline = kind.next_deadline(group)
        if deadline is not None and (queued is None or deadline < queued):
            self._queued[group_id] = deadline
            self._queue_seq += 1
            heapq.heappush(self._queue, (deadline, self._queue_seq, group_id))
