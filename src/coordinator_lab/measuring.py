"""What the benchmarks share: their progress lines on stderr, and Spark's progress reports of a session with
the per-stage figures summed from them."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
from typing import Any


def command_parser(module: str, description: str | None, embedded_help: str,
                   servers_help: str) -> argparse.ArgumentParser:
    """A lab command's parser: its module docstring as the description, and where the broker is (`--embedded`
    or `--bootstrap-servers`, one of them required)."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--embedded", action="store_true", help=embedded_help)
    where.add_argument("--bootstrap-servers", metavar="HOST:PORT", help=servers_help)
    return parser


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)



class ProgressLog:
    """Every progress report of every query of the session, as parsed JSON, via a query listener."""

    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []
        self.terminated = 0  # queries ended since `attach`
        self.changed = threading.Condition()

    def attach(self, spark: Any) -> None:
        from pyspark.sql.streaming.listener import StreamingQueryListener

        log = self

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                with log.changed:
                    log.reports.append(json.loads(event.progress.json))
                    log.changed.notify_all()

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                with log.changed:
                    log.terminated += 1
                    log.changed.notify_all()

        spark.streams.addListener(Listener())

    def since(self, mark: int) -> list[dict[str, Any]]:
        with self.changed:
            return list(self.reports[mark:])

    def mark(self) -> int:
        with self.changed:
            return len(self.reports)

    def await_reports(self, count: int, timeout_s: float) -> None:
        """Waits until `count` progress reports have arrived since `attach`."""
        with self.changed:
            if not self.changed.wait_for(lambda: len(self.reports) >= count, timeout_s):
                raise TimeoutError(f"fewer than {count} progress reports within {timeout_s:g} s")

    def ended(self) -> int:
        with self.changed:
            return self.terminated

    def await_end(self, ended_before: int, timeout_s: float = 30.0) -> None:
        """Waits until a query ended after `ended()` said `ended_before`. Spark's listener bus delivers a query's
        events in order, so by then every progress report of that query is here."""
        with self.changed:
            if not self.changed.wait_for(lambda: self.terminated > ended_before, timeout_s):
                raise TimeoutError(f"no query-terminated event within {timeout_s:g} s")


DURATION_KEYS = ("latestOffset", "getBatch", "queryPlanning", "addBatch", "walCommit", "commitOffsets",
                 "triggerExecution")


def breakdown(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Spark's own per-stage figures summed over the reports: where each micro-batch's time went."""
    totals = dict.fromkeys(DURATION_KEYS, 0)
    state: dict[str, float] = {}
    for report in reports:
        for key in DURATION_KEYS:
            totals[key] += int((report.get("durationMs") or {}).get(key, 0))
        for operator in report.get("stateOperators") or []:
            for key in ("allUpdatesTimeMs", "allRemovalsTimeMs", "commitTimeMs"):
                state[key] = state.get(key, 0) + float(operator.get(key) or 0)
            for key, value in (operator.get("customMetrics") or {}).items():
                if key in ("rocksdbCommitFlushLatency", "rocksdbCommitCompactLatency", "rocksdbCommitFileSyncLatencyMs",
                           "rocksdbCommitCheckpointLatency", "rocksdbGetLatency", "rocksdbPutLatency"):
                    state[key] = state.get(key, 0) + float(value or 0)
    last_state = ((reports[-1].get("stateOperators") or [{}])[0]) if reports else {}
    return {"batches": len(reports), "duration_ms": totals, "state_store_ms": state,
            "state_rows": last_state.get("numRowsTotal"), "state_memory_bytes": last_state.get("memoryUsedBytes"),
            "state_sst_bytes": (last_state.get("customMetrics") or {}).get("rocksdbSstFileSize")}


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank percentile (q in 0..100) of `values`, None if there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))])


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                found += [int(c) for c in fh.read().split()]
    except OSError:
        pass
    return found


def _cpu_ticks(pid: int) -> int:
    """User + system time of `pid` and of its children it has reaped, in clock ticks."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return sum(int(f) for f in fields[11:15])


def process_cpu_seconds(pid: int) -> float:
    """CPU time of process `pid` (and of the children it has reaped) so far."""
    return _cpu_ticks(pid) / CLOCK_TICKS


def tree_cpu_seconds() -> float:
    """CPU time of this process and every descendant (the JVM, its Python workers): contention on a shared
    machine stretches wall time, much less CPU time."""
    total, frontier = 0, [os.getpid()]
    while frontier:
        pid = frontier.pop()
        total += _cpu_ticks(pid)
        frontier += children(pid)
    return total / CLOCK_TICKS
