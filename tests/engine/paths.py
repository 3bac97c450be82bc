"""The two ways the engine runs, behind PROTOCOL.md section 7's interface, for one suite over both.

`LocalCoordinator` keeps every group in memory. `StoredStateCoordinator` is the Spark job's path without
Spark: each group lives only as the bytes `run_group` returns (encoded after every call, decoded before
the next), and its timers run as the job's event-time timeouts do: a group's timeout is its next
deadline minus one, and the group is called when the watermark is past it. ListGroups, which no group's
step can answer, is answered from every group's state, the way a gateway answers it from the snapshot
topic, after calling each group whose timers are due by the request's time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from coordinator_state import (
    EngineConfig,
    Invalid,
    ListGroups,
    LocalCoordinator,
    Tick,
    answer_list_groups,
    decode_group,
    invalid_response,
    parse_request,
    run_group,
    snapshot_of,
)


class StoredStateCoordinator:
    """`handle` / `advance_to` / `describe` over `run_group` and encoded group states."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.config = EngineConfig.from_mapping(config)
        self.states: dict[str, bytes] = {}
        self.timeouts: dict[str, int] = {}  # group -> the job's timeout: next deadline - 1
        self.watermark = 0
        self.counters: Counter[str] = Counter()

    def handle(self, request: Any) -> list[dict[str, Any]]:
        parsed = parse_request(request)
        if isinstance(parsed, Tick):
            return []
        if isinstance(parsed, Invalid):
            response = invalid_response(parsed)
            return [] if response is None else [response]
        if isinstance(parsed, ListGroups):
            return self._list_groups(parsed)
        return self._call(parsed.group_id, [parsed])

    def _list_groups(self, req: ListGroups) -> list[dict[str, Any]]:
        t = max(req.timestamp_ms, self.watermark)
        responses: list[dict[str, Any]] = []
        for group_id in sorted(self.timeouts, key=lambda g: (self.timeouts[g], g)):
            if t > self.timeouts[group_id]:
                responses += self._call(group_id, [], watermark=t)
        snapshots = [snapshot_of(decode_group(state, self.config)) for state in self.states.values()]
        return [*responses, answer_list_groups(req, snapshots, t)]

    def advance_to(self, ts_ms: int) -> list[dict[str, Any]]:
        """Every group whose timeout the watermark has passed is called, earliest timeout first."""
        self.watermark = max(self.watermark, ts_ms)
        responses: list[dict[str, Any]] = []
        for group_id in sorted(self.timeouts, key=lambda g: (self.timeouts[g], g)):
            if self.watermark > self.timeouts[group_id]:
                responses += self._call(group_id, [])
        return responses

    def describe(self, group_id: str) -> dict[str, Any] | None:
        state = self.states.get(group_id)
        return None if state is None else snapshot_of(decode_group(state, self.config))

    def _call(self, group_id: str, requests: list[Any], watermark: int | None = None) -> list[dict[str, Any]]:
        watermark = self.watermark if watermark is None else watermark
        outcome = run_group(self.states.get(group_id), watermark, requests, self.config)
        self.counters["late_requests"] += outcome.late_requests
        self.timeouts.pop(group_id, None)
        if outcome.state is None:
            self.states.pop(group_id, None)
        else:
            self.states[group_id] = outcome.state
            if outcome.next_deadline is not None:
                # As the job does: Spark times a key out once the watermark is strictly past its timeout.
                self.timeouts[group_id] = max(outcome.next_deadline - 1, watermark, 1)
        return outcome.responses


PATHS = {"local": LocalCoordinator, "stored-state": StoredStateCoordinator}
