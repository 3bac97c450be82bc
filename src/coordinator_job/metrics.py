"""Prometheus metrics of `coordinator run` (PROTOCOL.md section 11).

`JobMetrics` turns the streaming query's progress reports (Spark's, read on the driver: no pass over the data of
its own), the job's counters and its groups (`coordinator_metrics.GroupCensus`) into the `coordinator_job_*`
series and the group series; `coordinator run` serves its registry with `coordinator_metrics.MetricsEndpoint`.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from coordinator_metrics import BUCKETS, GroupCensus


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


