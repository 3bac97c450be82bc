"""The chaos harness's simulated backend: the engine in memory on a simulated clock.

`SimBackend` is a `group_client.Transport` and a chaos `Backend`. It writes every request to a request
log, with a Tick every `tick_interval_ms` of simulated time, and feeds the log to the engine's
`ReplayDriver`, which applies PROTOCOL.md section 5's clock rule: so the log, saved as a `.jsonl` file,
replays to exactly the responses the run saw. No record in it is older than one before it (none is late), so
the streaming job replays it to the same responses at any micro-batch size.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from coordinator_state import SIMULATION_EPOCH_MS, ReplayDriver, ResponseKey, response_key, tick_envelope

from .latency import LatencyLog


class SimBackend:
    """An in-memory transport on the engine's `ReplayDriver`, with a simulated clock and a request log.

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
        start_ms: int = SIMULATION_EPOCH_MS,
        tick_interval_ms: int = 1000,
        duplicate_probability: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.driver = ReplayDriver({**coordinator_config, "coordinator.lateness.ms": lateness_ms})
        self.now_ms = start_ms
        self.tick_interval_ms = tick_interval_ms
        self.traffic: list[dict[str, Any]] = []  # every record the request log holds, in log order
        self.responses: list[dict[str, Any]] = []  # every response the engine decided, in that order
        self.duplicates_delivered = 0
        self.latency = LatencyLog()
        self._duplicate_probability = duplicate_probability
        self._rng = random.Random(seed)
        self._next_tick = start_ms + tick_interval_ms
        self._latest_ms = start_ms  # the newest record in the log: none may come older
        self._fed = 0  # records of the log the engine has taken
        self._mailboxes: dict[str, list[dict[str, Any]]] = {}
        self._backlog: list[dict[str, Any]] | None = None  # not None while the coordinator is down
        self._outstanding: Counter[ResponseKey] = Counter()  # requests not answered yet

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
                self._write(tick_envelope(self._next_tick))
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
        return self.driver.coordinator.describe(group_id)

    def write_traffic(self, path: str | Path) -> None:
        """Saves the request log (ticks included) as JSON lines, for a replay through a fresh engine."""
        with Path(path).open("w", encoding="utf-8") as out:
            for record in self.traffic:
                out.write(json.dumps(record, separators=(",", ":")) + "\n")

    def _write(self, record: dict[str, Any]) -> None:
        if record["timestamp_ms"] < self._latest_ms:
            # Late at lateness 0 (PROTOCOL.md section 5): the log would replay differently at different
            # micro-batch boundaries.
            raise ValueError(f"a {record['api']} stamped {record['timestamp_ms']} after a record stamped "
                             f"{self._latest_ms}: the request log would hold a late record")
        self._latest_ms = record["timestamp_ms"]
        self.traffic.append(record)
        key = response_key(record)
        if record.get("api") != "Tick" and key is not None:
            self._outstanding[key] += 1
            self.latency.sent(record, self.now_ms)
        if self._backlog is not None:
            self._backlog.append(record)
        else:
            self._deliver(self._feed(record))

    def _feed(self, record: dict[str, Any]) -> list[dict[str, Any]]:
        """The next record of the log into the engine; its source is its line in the traffic file."""
        self._fed += 1
        return self.driver.feed(record, f"file:{self._fed}").responses

    def _deliver(self, responses: list[dict[str, Any]]) -> None:
        for response in responses:
            self.responses.append(response)
            self.latency.answered(response, self.now_ms)
            key = response_key(response)
            if key is not None and self._outstanding[key] > 1:
                self._outstanding[key] -= 1
            elif key is not None:
                self._outstanding.pop(key, None)
            box = self._mailboxes.setdefault(response["reply_to"], [])
            box.append(response)
            if self._duplicate_probability and self._rng.random() < self._duplicate_probability:
                box.append(response)
                self.duplicates_delivered += 1

