"""Prometheus metrics of `coordinator run` (PROTOCOL.md section 11), and the group series the gateway shares.

`GroupCensus` folds group snapshots (PROTOCOL.md section 4) into `coordinator_groups{state}` and
`coordinator_rebalances_total` (generation increments: a classic group's `generation_id`, a streams group's
`group_epoch`); the gateway feeds it from its engine or the snapshot topic, the job from the snapshots its
operator writes. `JobMetrics` turns the streaming query's progress reports (Spark's, read on the driver: no pass
over the data of its own) and the job's counters into the `coordinator_job_*` series. `serve_metrics` serves a
registry on `coordinator.metrics.listen` (`MetricsEndpoint`).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from coordinator_state import ClassicGroupState

# Section 11's buckets, shared by the gateway's request durations and the job's batch durations.
BUCKETS = (.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60)
# The groups whose snapshot the job's operator wrote, each with its latest (state, generation) (None: removed).
ChangedGroups = dict[str, tuple[str, int] | None]
# Every state a group can be in, so that each state's series exists (at 0) before any group reaches it.
CLASSIC_STATES = tuple(state.value for state in ClassicGroupState)


def epoch_of(snapshot: Mapping[str, Any]) -> int:
    """The generation a snapshot names: a classic group's `generation_id`, a streams group's `group_epoch`."""
    value = snapshot.get("generation_id", snapshot.get("group_epoch", 0))
    return value if isinstance(value, int) else 0


class GroupCensus:
    """Groups by state and generation increments, from the groups' latest (state, generation). Generations only
    grow within a group's life, so the increments seen between two looks are the rebalances in between (a group
    removed and created again between two looks loses its earlier ones)."""

    def __init__(self) -> None:
        self._groups: dict[str, tuple[str, int]] = {}
        self._lock = threading.Lock()
        self.rebalances = 0

    def update(self, changed: ChangedGroups, count: bool = True) -> None:
        """Groups that changed: their (state, generation), None for a removed group; without `count`, their
        generations so far are not counted as rebalances (groups as they were when the counting began)."""
        with self._lock:
            for group_id, now in changed.items():
                before = self._groups.pop(group_id, None)
                if now is None:
                    continue
                self._groups[group_id] = now
                if count:
                    self.rebalances += max(0, now[1] - (before[1] if before is not None else 0))

    def replace(self, groups: Mapping[str, tuple[str, int]]) -> None:
        """Every group there is now (those absent are gone)."""
        with self._lock:
            gone = {group_id: None for group_id in self._groups if group_id not in groups}
        self.update({**gone, **groups})

    def families(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        with self._lock:
            states = Counter(state for state, _ in self._groups.values())
            rebalances = self.rebalances
        groups = GaugeMetricFamily("coordinator_groups", "Groups by state", labels=["state"])
        for state in sorted({*CLASSIC_STATES, *states}):
            groups.add_metric([state], states[state])
        yield groups
        yield CounterMetricFamily("coordinator_rebalances", "Generation increments of every group", rebalances)


def census_entry(snapshot: Mapping[str, Any] | None) -> tuple[str, int] | None:
    """A snapshot (None: a tombstone) as the census keeps it."""
    return None if snapshot is None else (str(snapshot.get("state")), epoch_of(snapshot))


class _Collected(Collector):
    """Series read when scraped."""

    def __init__(self, metrics: JobMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterable[Any]:
        yield from self.metrics.census.families()
        with self.metrics.lock:
            totals = dict(self.metrics.totals)
            gauges = dict(self.metrics.gauges)
            lag = dict(self.metrics.lag)
        for name, help_text in (("batches", "Micro-batches completed"), ("input_rows", "Rows read from Kafka"),
                                ("dead_letters", "Records written to the dead-letter topic"),
                                ("late_requests", "Requests processed after the watermark had passed them")):
            yield CounterMetricFamily(f"coordinator_job_{name}", help_text, totals.get(name, 0))
        for name, help_text in (("input_rows_per_second", "Input rate of the last micro-batch"),
                                ("processed_rows_per_second", "Processing rate of the last micro-batch")):
            yield GaugeMetricFamily(f"coordinator_job_{name}", help_text, gauges.get(name, 0.0))
        family = GaugeMetricFamily("coordinator_job_input_lag_records",
                                   "Latest minus processed offsets, summed over the topic's partitions",
                                   labels=["topic"])
        for topic, records in sorted(lag.items()):
            family.add_metric([topic], records)
        yield family


def _offsets(value: Any) -> dict[str, int]:
    """A source's offsets in a progress report ({"partition": offset}, as a dict or its JSON)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return {str(k): int(v) for k, v in value.items()} if isinstance(value, dict) else {}


def input_lag(latest: Any, processed: Any) -> int:
    """Records the source had and the query had not processed yet: latest minus end offsets, over partitions."""
    done = _offsets(processed)
    return sum(max(0, offset - done.get(partition, 0)) for partition, offset in _offsets(latest).items())


class JobMetrics:
    """The job's series, fed on the driver by `LiveStatus` with every new progress report."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.registry = CollectorRegistry()
        self.census = GroupCensus()
        self.lock = threading.Lock()
        self.totals: Counter[str] = Counter()
        self.gauges: dict[str, float] = {}
        self.lag: dict[str, int] = {topic: 0}
        self.batch_duration = Histogram("coordinator_job_batch_duration_seconds", "Micro-batch duration",
                                        buckets=BUCKETS, registry=self.registry)
        self.registry.register(_Collected(self))

    def progress(self, progress: Mapping[str, Any], dead_letters: int) -> None:
        """One new progress report of the query, and the dead letters its observed metrics counted."""
        duration_ms = (progress.get("durationMs") or {}).get("triggerExecution")
        if duration_ms is not None:
            self.batch_duration.observe(int(duration_ms) / 1000)
        lag = sum(input_lag(source.get("latestOffset"), source.get("endOffset"))
                  for source in progress.get("sources") or [])
        with self.lock:
            self.totals["batches"] += 1
            self.totals["input_rows"] += int(progress.get("numInputRows") or 0)
            self.totals["dead_letters"] += dead_letters
            self.gauges["input_rows_per_second"] = float(progress.get("inputRowsPerSecond") or 0.0)
            self.gauges["processed_rows_per_second"] = float(progress.get("processedRowsPerSecond") or 0.0)
            self.lag[self.topic] = lag

    def late_requests(self, total: int) -> None:
        with self.lock:
            self.totals["late_requests"] = total


LISTEN_KEY = "coordinator.metrics.listen"


def metrics_address(text: str) -> tuple[str, int]:
    """`coordinator.metrics.listen`'s `HOST:PORT` (`[IPv6]:PORT`; port 0: any free port) as a pair; ValueError
    naming the key when it is not one."""
    host, _, port = text.strip().rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{LISTEN_KEY}: expected HOST:PORT, got {text.strip()!r}")
    return host.strip("[]"), int(port)


class MetricsEndpoint:
    """`GET /metrics` of a registry on a daemon thread (prometheus_client's server) until `close`."""

    def __init__(self, registry: CollectorRegistry, listen: tuple[str, int]) -> None:
        self._server, self._thread = start_http_server(listen[1], listen[0], registry=registry)
        self.host, self.port = listen[0], int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
