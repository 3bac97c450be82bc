"""The chaos harness's simulated backend: the engine in memory (`LocalCoordinator`) on a simulated clock.

`SimBackend` is a `group_client.Transport` and a chaos `Backend`. It records the traffic, ticks included,
so a run can be saved as a `.jsonl` file and replayed. It feeds the engine the way PROTOCOL.md section 5
describes a local replay: every record in log order, a Tick `{"api": "Tick", "timestamp_ms": T}` every
`tick_interval_ms` of simulated time, and after each record the watermark (largest event time so far minus
the lateness) is handed to `advance_to`.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from coordinator_state import LocalCoordinator

from .latency import LatencyLog

# Simulated clocks start at a realistic epoch, never near 0 (STYLE.md).
SIM_START_MS = 1_700_000_000_000


class SimBackend:
    """An in-memory transport on `LocalCoordinator`, with a simulated clock and a recording of the traffic.

    Time only moves through `advance_to`. `stop_coordinator` / `start_coordinator` model the streaming job
    being down: requests keep landing in the request log (`traffic`), no ticks are written, and at restart
    the backlog is processed in log order. `duplicate_probability` makes the mailbox deliver a response twice,
    as the at-least-once response sink may.
    """

    realtime = False

    def __init__(
        self,
        coordinator_config: Mapping[str, Any],
        *,
        lateness_ms: int = 0,
        start_ms: int = SIM_START_MS,
        tick_interval_ms: int = 1000,
        duplicate_probability: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.coordinator = LocalCoordinator(config=dict(coordinator_config))
        self.lateness_ms = lateness_ms
        self.now_ms = start_ms
        self.tick_interval_ms = tick_interval_ms
        self.traffic: list[dict[str, Any]] = []  # every record the request log holds, in log order
        self.responses: list[dict[str, Any]] = []  # every response the engine decided, in that order
        self.duplicates_delivered = 0
        self.latency = LatencyLog()
        self._duplicate_probability = duplicate_probability
        self._rng = random.Random(seed)
        self._next_tick = start_ms + tick_interval_ms
        self._max_event_ms: int | None = None
        self._watermark: int | None = None
        self._mailboxes: dict[str, list[dict[str, Any]]] = {}
        self._backlog: list[dict[str, Any]] | None = None  # not None while the coordinator is down
        self._outstanding: Counter[tuple[str, int]] = Counter()  # requests not answered yet

    # ------------------------------------------------------------------ Transport

    def send(self, request: Mapping[str, Any]) -> None:
        """Appends a request to the log; the engine processes it at once unless it is down."""
        if not isinstance(request.get("timestamp_ms"), int):
            raise ValueError("a simulated request needs an integer timestamp_ms")
        self._write(json.loads(json.dumps(request)))

    def receive(self, reply_to: str, timeout_ms: int = 0) -> list[dict[str, Any]]:
        """Everything delivered to `reply_to` so far (simulated time does not move while waiting)."""
        return self._mailboxes.pop(reply_to, [])

    def close(self) -> None:
        """Nothing to release in memory."""

    # ------------------------------------------------------------------ simulation

    @property
    def coordinator_up(self) -> bool:
        """Whether the engine is processing records."""
        return self._backlog is None

    def next_event_ms(self) -> int:
        """When the next Tick is due."""
        return self._next_tick

    def wait_until(self, target_ms: int) -> int:
        """Simulated time jumps: `advance_to(target_ms)`."""
        self.advance_to(target_ms)
        return target_ms

    def caught_up(self, sent_before_ms: int) -> bool:
        """Whether the engine is up: it takes each record as it is written, and a backlog at restart."""
        return self.coordinator_up

    def request_count(self) -> int:
        """Requests in the log (ticks not counted)."""
        return sum(1 for r in self.traffic if r.get("api") != "Tick")

    def advance_to(self, ts_ms: int) -> None:
        """Moves the clock to `ts_ms`, writing the ticks due on the way (none while the engine is down)."""
        while self._next_tick <= ts_ms:
            self.now_ms = self._next_tick
            if self.coordinator_up:
                self._write({"api": "Tick", "timestamp_ms": self._next_tick})
            self._next_tick += self.tick_interval_ms
        self.now_ms = max(self.now_ms, ts_ms)

    def stop_coordinator(self) -> None:
        """The streaming job stops: records wait in the request log."""
        if self._backlog is None:
            self._backlog = []

    def start_coordinator(self, redeliver: int = 0) -> None:
        """The job restarts with its state: it first re-delivers its last `redeliver` responses (the
        at-least-once sink repeating a batch it had not committed), then works through the backlog."""
        backlog, self._backlog = self._backlog or [], None
        if redeliver > 0:
            for response in self.responses[-redeliver:]:
                self._mailboxes.setdefault(response["reply_to"], []).append(response)
                self.duplicates_delivered += 1
        for record in backlog:
            self._deliver(self._feed(record))

    def unanswered(self) -> int:
        """Requests in the log with no response yet (matched by reply_to and correlation id)."""
        return sum(self._outstanding.values())

    def describe(self, group_id: str) -> dict[str, Any] | None:
        """The engine's snapshot of a group."""
        return self.coordinator.describe(group_id)

    def write_traffic(self, path: str | Path) -> None:
        """Saves the request log (ticks included) as JSON lines, for a replay through a fresh engine."""
        with Path(path).open("w", encoding="utf-8") as out:
            for record in self.traffic:
                out.write(json.dumps(record, separators=(",", ":")) + "\n")

    def _write(self, record: dict[str, Any]) -> None:
        self.traffic.append(record)
        if record.get("api") != "Tick":
            self._outstanding[_key(record)] += 1
            self.latency.sent(record, self.now_ms)
        if self._backlog is not None:
            self._backlog.append(record)
        else:
            self._deliver(self._feed(record))

    def _feed(self, record: dict[str, Any]) -> list[dict[str, Any]]:
        """One record into the engine, then the watermark (PROTOCOL.md section 5)."""
        responses = [] if record.get("api") == "Tick" else self.coordinator.handle(record)
        ts = record["timestamp_ms"]
        self._max_event_ms = ts if self._max_event_ms is None else max(self._max_event_ms, ts)
        watermark = self._max_event_ms - self.lateness_ms
        if self._watermark is None or watermark > self._watermark:
            self._watermark = watermark
            responses += self.coordinator.advance_to(watermark)
        return responses

    def _deliver(self, responses: list[dict[str, Any]]) -> None:
        for response in responses:
            self.responses.append(response)
            self.latency.answered(response, self.now_ms)
            key = _key(response)
            if self._outstanding[key] > 1:
                self._outstanding[key] -= 1
            else:
                del self._outstanding[key]
            box = self._mailboxes.setdefault(response["reply_to"], [])
            box.append(response)
            if self._duplicate_probability and self._rng.random() < self._duplicate_probability:
                box.append(response)
                self.duplicates_delivered += 1


def _key(envelope: Mapping[str, Any]) -> tuple[str, int]:
    reply_to = envelope.get("reply_to", envelope.get("client_id", ""))
    return (str(reply_to), int(envelope.get("correlation_id", 0)))
