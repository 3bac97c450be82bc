"""The live job: the coordinator's topics, the streaming query on Kafka, the tick writer, its status.

`LiveJob` is the one runner of the live job: `coordinator run` starts it, shows `status_line()` and
stops it draining; the chaos harness's Spark backend also stops and restarts it mid-run on the same
checkpoint. A monitor thread totals the query's progress once a second (Spark keeps only its last 100
progress reports), across restarts, and hands each new report to the job's metrics (`metrics.py`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError
from py4j.protocol import Py4JError
from pyspark import Accumulator, AccumulatorParam
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from coordinator_metrics import ChangedGroups, census_entry
from coordinator_state import tick_envelope, to_json

from .broker import create_topics, read_compacted
from .metrics import JobMetrics
from .settings import ROOT, SettingsError
from .spark_session import use_checkpoint
from .task_metrics import ACCUMULATOR_OPTION, Breakdown, Metrics, TaskMetrics, task_metrics

log = logging.getLogger(__name__)

# How often the monitor totals the query's progress.
MONITOR_INTERVAL_S = 1.0
# The status line's breakdown covers the batches of this many of the monitor's readings.
RECENT_READINGS = 5


def topic_specs(settings: Mapping[str, Any]) -> list[tuple[str, int, bool]]:
    """(name, partitions, compacted) of the coordinator's topics (PROTOCOL.md sections 1 and 8)."""
    requests = int(settings["coordinator.requests.partitions"])
    responses = int(settings["coordinator.responses.partitions"])
    return [
        (str(settings["coordinator.requests.topic"]), requests, False),
        (str(settings["coordinator.responses.topic"]), responses, False),
        (str(settings["coordinator.snapshots.topic"]), requests, True),
        (str(settings["coordinator.dead.letters.topic"]), 1, False),
        (str(settings["coordinator.offsets.topic"]), requests, True),
    ]


def ensure_topics(settings: Mapping[str, Any]) -> None:
    """Creates the coordinator's topics that do not exist yet."""
    create_topics(str(settings["bootstrap.servers"]), topic_specs(settings))


def checkpoint_dir(settings: Mapping[str, Any], override: str | Path | None = None) -> Path:
    """`checkpoints/<query name>` under the project by default."""
    if override is not None:
        return Path(override)
    root = Path(settings["coordinator.checkpoint.root"])
    return (root if root.is_absolute() else ROOT / root) / str(settings["coordinator.query.name"])


class TickWriter:
    """Writes a Tick stamped with the wall clock to every request partition every tick interval.

    Event time only moves when records arrive; ticks let sessions expire while every client is silent.
    """

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.topic = str(settings["coordinator.requests.topic"])
        self.interval_s = int(settings["coordinator.tick.interval.ms"]) / 1000
        self.producer = KafkaProducer(bootstrap_servers=settings["bootstrap.servers"], acks="all",
                                      client_id="coordinator-ticks")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tick-writer", daemon=True)
        self.ticks = 0

    def start(self) -> TickWriter:
        self._thread.start()
        return self

    def tick(self) -> None:
        """Writes one tick to every partition, stamped with the wall clock."""
        now = time.time_ns() // 1_000_000
        value = to_json(tick_envelope(now)).encode()
        for partition in sorted(self.producer.partitions_for(self.topic)):
            self.producer.send(self.topic, value=value, partition=partition)
        self.producer.flush()
        self.ticks += 1

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.tick()
            except Exception as exc:  # a broker hiccup must not end the ticks for good
                log.warning("tick not written (%s); trying again in %.1f s", exc, self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.producer.close(timeout=5)


class LatestPerGroup(AccumulatorParam[ChangedGroups]):
    """An accumulator of `ChangedGroups`, the later entry of a group winning: micro-batches run one after the other
    and each calls a group at most once, so on the driver it holds every group's latest entry (a retried task
    writes the same entries again)."""

    def zero(self, value: ChangedGroups) -> ChangedGroups:
        return {}

    def addInPlace(self, value1: ChangedGroups, value2: ChangedGroups) -> ChangedGroups:
        value1.update(value2)
        return value1


@dataclass
class LiveStatus:
    """Totals over the query's progress reports, for the status line and the closing summary."""

    batches: int = 0
    input_rows: int = 0
    metrics: dict[str, int] = field(default_factory=dict)
    batch_ms: list[int] = field(default_factory=list)
    last_watermark: str = ""
    late_requests: int = 0
    seen: set[str] = field(default_factory=set)
    job_metrics: JobMetrics | None = None  # told of every new progress report
    # Where the time of the batches went, over the last few readings (see `task_metrics`).
    recent: list[Breakdown] = field(default_factory=list)
    task_metrics: Metrics = field(default_factory=dict)

    def update(self, query: StreamingQuery, task_metrics: Metrics) -> None:
        """Counts the progress reports of `query` not counted yet; `task_metrics` is the accumulator's sum now."""
        reading = Breakdown()
        reading.add_tasks(self.task_metrics, task_metrics)
        self.task_metrics = dict(task_metrics)
        for progress in query.recentProgress:
            key = f"{progress['id']}:{progress['batchId']}"
            if key in self.seen:
                continue
            self.seen.add(key)
            reading.add_reports([progress])
            self.batches += 1
            self.input_rows += int(progress.get("numInputRows") or 0)
            duration = (progress.get("durationMs") or {}).get("triggerExecution")
            if duration is not None:
                self.batch_ms.append(int(duration))
            self.last_watermark = (progress.get("eventTime") or {}).get("watermark", self.last_watermark)
            observed = (progress.get("observedMetrics") or {}).get("coordinator")
            counted = {} if observed is None else {name: int(value or 0) for name, value in observed.asDict().items()}
            for name, value in counted.items():
                self.metrics[name] = self.metrics.get(name, 0) + value
            if self.job_metrics is not None:
                self.job_metrics.progress(progress, counted.get("dead_letters", 0))
        self.recent = [*self.recent[-(RECENT_READINGS - 1):], reading]

    def breakdown(self) -> Breakdown:
        """The breakdown of the batches of the last few readings."""
        total = Breakdown()
        for reading in self.recent:
            total.merge(reading)
        return total

    def line(self) -> str:
        recent = self.batch_ms[-20:]
        mean = sum(recent) / len(recent) if recent else 0.0
        return (f"batches {self.batches}  records {self.input_rows}  requests {self.metrics.get('requests', 0)}  "
                f"dead letters {self.metrics.get('dead_letters', 0)}  late {self.late_requests}  "
                f"ticks {self.metrics.get('ticks', 0)}  "
                f"batch {mean:.0f} ms  watermark {self.last_watermark or '-'}  |  {self.breakdown().line()}")

    def summary(self) -> dict[str, Any]:
        ordered = sorted(self.batch_ms)
        return {
            "batches": self.batches,
            "records": self.input_rows,
            **self.metrics,
            "late_requests": self.late_requests,
            "batch_ms_median": ordered[len(ordered) // 2] if ordered else None,
            "batch_ms_p95": ordered[int(len(ordered) * 0.95)] if ordered else None,
        }


# Beside Spark's files in a checkpoint: the job's own settings that its state depends on.
STATE_LAYOUT_FILE = "coordinator-state.json"
PINNED_SETTINGS = ("coordinator.state.buckets", "coordinator.shuffle.partitions")


def pin_state_layout(settings: Mapping[str, Any], checkpoint: Path) -> None:
    """Records in a fresh checkpoint what its groups' state keys depend on (how many keys they share, over how many
    shuffle partitions those are spread: state_buckets), and refuses to start a query on a checkpoint started with
    other values: its groups would be looked for under other keys, and lost."""
    layout = {setting: int(settings[setting]) for setting in PINNED_SETTINGS}
    marker = checkpoint / STATE_LAYOUT_FILE
    if marker.exists():
        pinned = json.loads(marker.read_text())
        if set(pinned) != set(layout):
            raise SettingsError(f"checkpoint {checkpoint} was written by a version of the job that placed its groups' "
                                f"state under other keys ({marker.name}: {pinned}): start on a fresh checkpoint")
        for setting, value in layout.items():
            if pinned[setting] != value:
                raise SettingsError(f"checkpoint {checkpoint} keeps its groups under {setting}={pinned[setting]}, "
                                    f"this run has {value}: set it back to {pinned[setting]}, or start on a fresh "
                                    f"checkpoint")
        return
    if (checkpoint / "offsets").exists():
        raise SettingsError(f"checkpoint {checkpoint} was written by a version of the job whose state this one cannot "
                            f"read (before groups shared state keys): start on a fresh checkpoint")
    checkpoint.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(layout) + "\n")


def start_query(spark: SparkSession, settings: Mapping[str, Any], checkpoint: Path, *, available_now: bool = False,
                late_requests: Accumulator[int] | None = None,
                changed_groups: Accumulator[ChangedGroups] | None = None,
                metrics: TaskMetrics | None = None) -> StreamingQuery:
    """Starts the production query: Kafka in, Kafka out, offsets and state in `checkpoint`.

    `late_requests`, a Spark accumulator, if given, counts the requests that arrived after the watermark;
    `changed_groups` (a `LatestPerGroup` accumulator) collects the groups' latest states; `metrics` gets the tasks'
    times (task_metrics).
    """
    from .job import build_pipeline

    pin_state_layout(settings, checkpoint)
    # On a thread other than the session's, the sink's `coordinator_kafka` is looked up through the JVM
    # thread's active session, which is unset there (ClassNotFoundException coordinator_kafka.DefaultSource);
    # PySpark's own createDataFrame sets it the same way.
    jvm: Any = spark.sparkContext._jvm
    jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
    bootstrap = settings["bootstrap.servers"]
    metrics_option = {} if metrics is None else {ACCUMULATOR_OPTION: str(metrics.aid)}
    records = (spark.readStream.format("coordinator_kafka").options(**metrics_option)
               .option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", settings["coordinator.requests.topic"])
               .option("startingOffsets", settings["coordinator.starting.offsets"])
               .option("maxRecordsPerBatch", str(settings["coordinator.max.records.per.batch"]))
               .option("fetchMaxWaitMs", str(settings["coordinator.source.fetch.max.wait.ms"]))
               .load())
    output = build_pipeline(records, settings, live=True, late_requests=late_requests, changed_groups=changed_groups,
                            metrics=metrics)
    writer = (output.writeStream.format("coordinator_kafka").options(**metrics_option)
              .option("kafka.bootstrap.servers", bootstrap)
              .option("checkpointLocation", str(checkpoint))
              .queryName(str(settings["coordinator.query.name"])))
    use_checkpoint(spark, checkpoint)
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{int(settings['coordinator.trigger.interval.ms'])} milliseconds")
    return writer.start()


class LiveJob:
    """The query and its tick writer on one checkpoint, which can be stopped and started again.

    `start` creates the topics on first use, starts the tick writer and the query; `stop` stops both,
    first answering what was already read when `drain` is set. `close` stops the monitor too. `metrics` holds the
    job's Prometheus series (served by whoever runs the job).
    """

    def __init__(self, spark: SparkSession, settings: Mapping[str, Any], checkpoint: Path) -> None:
        self.spark = spark
        self.settings = settings
        self.checkpoint = checkpoint
        self.metrics = JobMetrics(str(settings["coordinator.requests.topic"]))
        self.status = LiveStatus(job_metrics=self.metrics)
        self.starts = 0
        self._late_requests = spark.sparkContext.accumulator(0)
        # The latest state of every group changed since this driver started.
        self._changed_groups = spark.sparkContext.accumulator({}, LatestPerGroup())
        self.task_metrics = task_metrics(spark.sparkContext)
        self._queries: list[StreamingQuery] = []
        self._ticks: TickWriter | None = None
        self._lock = threading.Lock()  # the monitor and the caller both total the progress
        self._closed = threading.Event()
        self._monitor = threading.Thread(target=self._watch, name="live-job-monitor", daemon=True)
        self._monitor.start()

    def start(self) -> None:
        """Starts the tick writer and the query on the checkpoint."""
        if self.starts == 0:
            ensure_topics(self.settings)
            self._count_groups_so_far()
        self._ticks = TickWriter(self.settings).start()
        self._queries.append(start_query(self.spark, self.settings, self.checkpoint,
                                         late_requests=self._late_requests, changed_groups=self._changed_groups,
                                         metrics=self.task_metrics))
        self.starts += 1

    def _count_groups_so_far(self) -> None:
        """The groups as the snapshot topic holds them when the job starts (a checkpoint's groups are counted
        before they change again); without it, only groups changed since are."""
        topic = str(self.settings["coordinator.snapshots.topic"])
        try:
            snapshots = read_compacted(str(self.settings["bootstrap.servers"]), topic, "coordinator-metrics")
        except (KafkaError, TimeoutError, ValueError) as exc:
            log.warning("the metrics count only the groups that change from now on: reading %s failed (%r)",
                        topic, exc)
            return
        self.metrics.census.update({group_id: census_entry(snapshot) for group_id, snapshot in snapshots.items()},
                                   count=False)

    def stop(self, *, drain: bool = False) -> None:
        """Stops the tick writer, then the query (with `drain`, after it has processed what it can read)."""
        ticks, self._ticks = self._ticks, None
        if ticks is not None:
            ticks.stop()
        query = self._queries[-1] if self._queries else None
        if query is not None and query.isActive:
            if drain and query.exception() is None:
                query.processAllAvailable()  # answer what the clients sent last; stop between batches
            query.stop()
        self.refresh()

    def wait_ready(self, timeout_s: float) -> None:
        """Blocks until the latest query has finished a micro-batch; RuntimeError if it failed, TimeoutError if
        it takes longer than `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        query = self._queries[-1]
        while query.lastProgress is None:
            if query.exception() is not None:
                raise RuntimeError(f"the query failed at start: {query.exception()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the query finished no micro-batch within {timeout_s:.0f} s")
            time.sleep(0.2)

    def failure(self) -> str | None:
        """Why the latest query stopped, if it failed."""
        failure = self._queries[-1].exception() if self._queries else None
        return None if failure is None else str(failure)

    def failures(self) -> list[str]:
        """Every query's failure, first line each."""
        found = []
        for query in self._queries:
            failure = query.exception()
            if failure is not None:
                found.append(f"query {query.runId} failed: {str(failure).splitlines()[0]}")
        return found

    def refresh(self) -> None:
        """Totals the progress reported since the last call."""
        with self._lock:
            for query in self._queries:
                self.status.update(query, self.task_metrics.value)
            self.status.late_requests = int(self._late_requests.value)
            self.metrics.late_requests(self.status.late_requests)
            # Copied at once: task results are merged on another thread. Entries seen before change nothing.
            self.metrics.census.update(dict(self._changed_groups.value))

    def status_line(self) -> str:
        """Batches, records, requests, dead letters, late requests, ticks, batch time, watermark."""
        return self.status.line()

    def summary(self) -> dict[str, Any]:
        """The status totals plus every batch duration (in ms), the starts and the failures."""
        self.refresh()
        return {**self.status.summary(), "batch_ms_max": max(self.status.batch_ms, default=None),
                "batch_ms": list(self.status.batch_ms), "starts": self.starts, "failures": self.failures()}

    def close(self, *, drain: bool = False) -> None:
        """Stops the job if it runs and the monitor; idempotent."""
        if self._closed.is_set():
            return
        self.stop(drain=drain)
        self._closed.set()
        self._monitor.join()

    def _watch(self) -> None:
        while not self._closed.wait(MONITOR_INTERVAL_S):
            # A call to the JVM can fail for a moment (py4j's connection reset under load, seen in `./dev demo`): the
            # status goes on at the next interval instead of freezing with this thread.
            try:
                self.refresh()
            except Py4JError as exc:
                log.warning("the job's status could not be read this time (%s); trying again", exc)
