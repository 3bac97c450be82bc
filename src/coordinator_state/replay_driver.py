"""The local replay's clock rule (PROTOCOL.md section 5), written once.

Records are fed in log order, each with its source label (`file:LINE`, `topic:PARTITION:OFFSET`):
- a record that is not a valid request becomes a dead letter, plus its answer when it names a `reply_to`
  and a `correlation_id`; it carries no event time, so it does not move the watermark;
- a request is processed by its group (at its own time, or the group's clock if that is later: a request
  older than the coordinator's clock is late, processed all the same, and counted);
- a request or a Tick then moves the watermark (`Watermark`) to the largest event time so far minus
  `coordinator.lateness.ms`, and every timer due by it fires.
At the end, every group the input created is reported: its final snapshot, or a tombstone if it was
removed; and every committed offset the input touched: its final value, or a tombstone if it expired.
The Spark job reaches the same answers whatever its micro-batch boundaries, for input without late
requests; anything that replays or simulates traffic locally goes through this driver.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .config import config_int
from .envelope import Response, tombstone
from .local import LocalCoordinator
from .offsets import OffsetChange
from .output import reject, to_json
from .parsing import for_one_group, parse_raw, parse_request
from .records import Invalid, Parsed, Request, Tick

Record = bytes | str | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Fed:
    """What one record did: its kind, the responses decided meanwhile (its own and timers'), its dead letter."""

    kind: Literal["request", "tick", "invalid"]
    responses: list[Response]
    dead_letter: dict[str, Any] | None = None
    offset_changes: list[OffsetChange] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Finished:
    """The end of input: the last responses the final watermark decided, each group's final snapshot
    (group id -> snapshot, or the tombstone of section 4a), in the order the groups first appeared, and
    each committed offset's final line (`GROUP/TOPIC/PARTITION` -> value or tombstone line, by key)."""

    responses: list[Response]
    snapshots: dict[str, dict[str, Any]] = field(default_factory=dict)
    offsets: dict[str, dict[str, Any]] = field(default_factory=dict)


class Watermark:
    """The local replay's watermark over the records of traffic in log order: the largest event time so far minus
    the lateness. A request older than it is late (section 5): processed all the same, but a replay of traffic
    holding one depends on where its micro-batches end. Tools that read traffic without a coordinator (a
    recording, the Spark replay's summary) count late requests with it too."""

    def __init__(self, lateness_ms: int) -> None:
        self.lateness_ms = lateness_ms
        self.value: int | None = None
        self.late_requests = 0

    def see(self, record: Request | Tick) -> int:
        """Moves past one request or tick, counting it if it is a late request; returns the new watermark."""
        if self.value is not None and not isinstance(record, Tick) and record.timestamp_ms < self.value:
            self.late_requests += 1
        moved = record.timestamp_ms - self.lateness_ms
        self.value = moved if self.value is None else max(self.value, moved)
        return self.value

    def see_raw(self, raw: bytes) -> None:
        """One record as it is in a file or on the request topic; an invalid one carries no event time."""
        parsed = for_one_group(parse_raw(raw))
        if not isinstance(parsed, Invalid):
            self.see(parsed)


class ReplayDriver:
    """Feeds records to a `LocalCoordinator` and moves its clock as the local replay must."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.coordinator = LocalCoordinator(config)
        self.lateness_ms = config_int(config, "coordinator.lateness.ms")
        self.counts: Counter[str] = Counter()  # requests, ticks, dead_letters
        self.watermark: int | None = None
        self._watermark = Watermark(self.lateness_ms)
        self._groups: dict[str, None] = {}  # every group that existed, in order of appearance
        self._offsets: dict[str, dict[str, Any]] = {}  # every offset key written -> its latest line

    def feed(self, record: Record, source: str) -> Fed:
        """One record in log order: a raw value (bytes or text, as in a file or on a topic) or a decoded envelope."""
        if isinstance(record, Mapping):
            return self.feed_parsed(parse_request(dict(record)), source, record)
        return self.feed_parsed(parse_raw(record), source, record)

    def feed_parsed(self, parsed: Parsed, source: str, record: Record) -> Fed:
        """A record already parsed (`parse_raw` / `parse_request`); `record` is kept for its dead letter.

        Recorded traffic is the request topic's: a ListGroups there is invalid, as in the job.
        """
        parsed = for_one_group(parsed)
        if isinstance(parsed, Invalid):
            self.counts["dead_letters"] += 1
            letter, answer = reject(parsed, source, _raw_bytes(record))
            return Fed("invalid", [] if answer is None else [answer], letter)
        kind: Literal["request", "tick"] = "tick" if isinstance(parsed, Tick) else "request"
        self.counts[kind + "s"] += 1
        responses = self.coordinator.process(parsed)
        if not isinstance(parsed, Tick) and parsed.group_id in self.coordinator.groups:
            self._groups[parsed.group_id] = None
        self.watermark = self._watermark.see(parsed)
        responses += self.coordinator.advance_to(self.watermark)
        return Fed(kind, responses, offset_changes=self._offset_changes())

    def _offset_changes(self) -> list[OffsetChange]:
        changes = self.coordinator.drain_offset_changes()
        for change in changes:
            self._offsets[change.key] = change.line()
        return changes

    @property
    def late_requests(self) -> int:
        """Requests that arrived older than the watermark (processed at their group's clock)."""
        return self.coordinator.counters["late_requests"]

    def finish(self) -> Finished:
        """Fires every timer up to the final watermark and reports each group's final state."""
        responses = [] if self.watermark is None else self.coordinator.advance_to(self.watermark)
        self._offset_changes()
        snapshots: dict[str, dict[str, Any]] = {}
        for group_id in self._groups:
            snapshot = self.coordinator.describe(group_id)
            snapshots[group_id] = tombstone(group_id) if snapshot is None else snapshot
        return Finished(responses, snapshots, dict(sorted(self._offsets.items())))


def _raw_bytes(record: Record) -> bytes:
    if isinstance(record, bytes):
        return record
    if isinstance(record, str):
        return record.encode("utf-8", errors="surrogatepass")
    return to_json(record).encode("utf-8", errors="surrogatepass")
