"""`coordinator run --demo`: static members bounced one by one, round after round, against the live job.

The demo is a chaos run (`ChaosRun`, the rolling-bounce scenario, static members) on a `LiveBackend`, in
a thread of its own, repeated until `stop()`. Each member in turn is closed without LeaveGroup and started
again (new process, new reply_to, same group.instance.id) `down_ms` later, well inside its session, so
the coordinator should keep the group as it is: the status line's rebalances stay at 0.
"""

from __future__ import annotations

import random
import secrets
import threading
from collections.abc import Mapping
from typing import Any

from group_client.realtime import wall_clock_ms

from .live import LiveBackend
from .run import ChaosRun, Progress, describe_progress
from .scenarios import normalize_config

# Real-time timings. Micro-batches take 0.5-3 s, and a timer (the initial rebalance delay) fires only once
# the watermark, `lateness` behind the newest record, has passed it, so a rebalance it completes is
# answered seconds after the event time it was decided at, when the members' sessions started: the session
# must cover that, the SyncGroup round trip and the first heartbeat.
SESSION_TIMEOUT_MS = 20000
HEARTBEAT_INTERVAL_MS = 2000
DOWN_MS = 3000  # how long a member is down: well under the session timeout
INTERVAL_MS = 5000  # from one member's bounce to the next
SETTLE_MS = 5000  # quiet between rounds
DRAIN_LIMIT_MS = 15000  # at stop, how long to wait for the last answers
# Keys of the report that `summary()` keeps (the timeline is left out).
SUMMARY_KEYS = ("stable_at_ms", "end_at_ms", "rebalances", "generations", "assignment_changes", "unassigned_ms",
                "fenced", "requests", "responses", "unanswered", "errors", "duplicates_delivered", "latency_ms",
                "final")


class Demo:
    """A group of `members` static members under rolling bounces, against the job `settings` describe."""

    def __init__(self, settings: Mapping[str, Any], members: int = 6) -> None:
        self.settings = settings
        seed = secrets.randbits(32)
        self.config = normalize_config({
            "scenario": "rolling-bounce", "members": members, "membership": "static", "engine": "spark",
            "seed": seed, "group_id": f"demo-{seed:08x}",
            "session_timeout_ms": SESSION_TIMEOUT_MS, "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS,
            "params": {"down_ms": DOWN_MS, "interval_ms": INTERVAL_MS},
            "settle_ms": SETTLE_MS, "drain_limit_ms": DRAIN_LIMIT_MS,
            "lateness_ms": int(settings["coordinator.lateness.ms"]),
            "tick_interval_ms": int(settings["coordinator.tick.interval.ms"]),
            "coordinator_config": {"group.initial.rebalance.delay.ms":
                                   int(settings["group.initial.rebalance.delay.ms"])},
        })
        self.progress: Progress | None = None
        self.report: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo", daemon=True)

    def start(self) -> Demo:
        """Starts the members (in the demo's thread) and returns at once."""
        self._thread.start()
        return self

    def status(self) -> str:
        """A short line: phase, generation, members stable, rebalances since first stable, unanswered."""
        if self.error is not None:
            return f"demo failed: {self.error}"
        if self.progress is None:
            return "demo starting"
        return f"demo {self.config['group_id']}: {describe_progress(self.progress)}"

    def stop(self) -> None:
        """Closes every member (without LeaveGroup) and waits for the last answers (each of the catch-up and
        the drain takes at most `DRAIN_LIMIT_MS`)."""
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict[str, Any]:
        """The run's figures once stopped (rebalances, generations, requests, unanswered...)."""
        if self.error is not None:
            return {"group_id": self.config["group_id"], "error": repr(self.error)}
        report = self.report or {}
        restarts = None if self.progress is None else self.progress.restarts
        return {"group_id": self.config["group_id"], "members": self.config["members"], "restarts": restarts,
                **{key: report[key] for key in SUMMARY_KEYS if key in report}}

    def _run(self) -> None:
        try:
            backend = LiveBackend.from_settings(self.settings, self.config["group_id"])
            try:
                self.config["start_ms"] = wall_clock_ms()
                run = ChaosRun(self.config, backend, random.Random(self.config["seed"]))

                def publish() -> None:
                    self.progress = run.progress()

                self.report = run.run(self._stop.is_set, repeat=True, on_instant=publish)
                publish()
            finally:
                backend.close()
        except Exception as exc:  # shown by status() and summary(): the job it demonstrates keeps running
            self.error = exc
