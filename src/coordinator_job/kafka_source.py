"""Kafka source and sink for Spark, as a PySpark Python data source named ``coordinator_kafka``.

Spark's JVM Kafka connector is not available here, so Kafka is read and written through
``pyspark.sql.datasource``: read with kafka-python, written with librdkafka (confluent-kafka, `SinkProducer`).

Streaming read options:
  ``kafka.bootstrap.servers`` (required), ``subscribe`` (required, one topic),
  ``startingOffsets`` (``earliest`` | ``latest``, default ``earliest``; only for a fresh checkpoint),
  ``maxRecordsPerBatch`` (optional cap on offsets per micro-batch, enforced through PySpark 4.2+
  admission control: ``getDefaultReadLimit`` returns ``ReadMaxRows`` and Spark passes it back to
  ``latestOffset(start, limit)``),
  ``pollTimeoutMs`` (default 60000: how long a task may take to read its whole offset range; past that
  it fails, and Spark retries it),
  ``fetchMaxWaitMs`` (default 500: how long the broker may hold a task's fetch, see broker.READER_FETCH_MAX_WAIT_MS;
  a task doubles it, up to 8 s, while the broker answers with nothing below its high watermark),
  ``taskMetricsAccumulator`` (optional: the id of the job's task-metrics accumulator, to which each task adds the
  time it took to read its range; see task_metrics).

Offsets (stored by Spark in the checkpoint) are ``{"<partition>": <next offset>}``; partition ids
are strings because the offsets round-trip through JSON. Partitions that appear later start at 0.

Write options (streaming and batch): ``kafka.bootstrap.servers``, ``taskMetricsAccumulator`` (as for reading: the
time each task took to produce and to flush its records). Input rows need ``topic string``
and ``value binary|string`` (null = tombstone) and may have ``key binary|string``. They are written by librdkafka
(`SinkProducer`); keys are placed as the Java client's default partitioner places them (murmur2). Delivery is
at-least-once: a retried task re-sends its rows.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from kafka import KafkaConsumer, TopicPartition
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import BinaryType, StringType, StructType

from . import task_metrics
from .broker import END_LOOKUP_SETTINGS, FETCH_MAX_WAIT_MS, READER_FETCH_MAX_WAIT_MS, Consumer, EndOffsetLookups
from .file_source import SCHEMA, source_batch
from .worker_heap import freeze_long_lived_objects

log = logging.getLogger(__name__)

SOURCE_NAME = "coordinator_kafka"
READ_SCHEMA = SCHEMA  # the file source's (a replay reads the records a live job reads); built by source_batch

Offsets = dict[str, int]
"""Next offset to read per partition id (as a string: the checkpoint stores offsets as JSON)."""

_STARTING_OFFSETS = ("earliest", "latest")


def _required(options: Mapping[str, str], name: str) -> str:
    """Return a mandatory option or fail with the option's name."""
    value = options.get(name)
    if not value:
        raise ValueError(f"{SOURCE_NAME}: option '{name}' is required")
    return value


def _positive_int(options: Mapping[str, str], name: str) -> int | None:
    """Parse an optional positive integer option (None when absent)."""
    raw = options.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{SOURCE_NAME}: option '{name}' must be a positive integer, got {raw!r}")
    return value


@dataclass(frozen=True)
class ReaderOptions:
    """Validated streaming-read options (see the module docstring)."""

    bootstrap_servers: str
    topic: str
    starting_offsets: str = "earliest"
    max_records_per_batch: int | None = None
    poll_timeout_ms: int = 60_000
    fetch_max_wait_ms: int = READER_FETCH_MAX_WAIT_MS
    metrics_accumulator: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReaderOptions:
        """Build from Spark's case-insensitive option map, failing fast on bad values."""
        topic = _required(options, "subscribe")
        if "," in topic:
            raise ValueError(f"{SOURCE_NAME}: 'subscribe' takes exactly one topic, got {topic!r}")
        starting = options.get("startingOffsets", "earliest").lower()
        if starting not in _STARTING_OFFSETS:
            raise ValueError(f"{SOURCE_NAME}: 'startingOffsets' must be one of {_STARTING_OFFSETS}")
        return cls(
            bootstrap_servers=_required(options, "kafka.bootstrap.servers"),
            topic=topic.strip(),
            starting_offsets=starting,
            max_records_per_batch=_positive_int(options, "maxRecordsPerBatch"),
            poll_timeout_ms=_positive_int(options, "pollTimeoutMs") or cls.poll_timeout_ms,
            fetch_max_wait_ms=_positive_int(options, "fetchMaxWaitMs") or cls.fetch_max_wait_ms,
            metrics_accumulator=options.get(task_metrics.ACCUMULATOR_OPTION),
        )


# The planner looks partitions up again at most this often: a forced metadata refresh costs about 40 ms, once per
# micro-batch otherwise (kafka-python, embedded broker).
METADATA_REFRESH_S = 5.0


def _consumer(bootstrap_servers: str, client_id: str, fetch_max_wait_ms: int, **settings: int | bool) -> KafkaConsumer:
    """A group-less, non-committing consumer: positions are driven only by Spark's offsets."""
    return Consumer(
        bootstrap_servers=bootstrap_servers,
        client_id=client_id,
        group_id=None,
        enable_auto_commit=False,
        # Never skip silently past data that retention removed: fail the task instead.
        auto_offset_reset="none",
        fetch_max_wait_ms=fetch_max_wait_ms,
        **settings,
    )


def planner_consumer(bootstrap_servers: str) -> KafkaConsumer:
    """The consumer a planner looks log ends up with (broker.EndOffsetLookups)."""
    # Its fetches are for their high watermark: a byte, so that brokers send one batch (KIP-74: a first batch larger
    # than the limit still comes), not the next micro-batch's records. Tansu heeds only the request's limit, and lists
    # the partition again for every record that arrives while it lists, while the limit lasts (broker.py).
    return _consumer(bootstrap_servers, f"{SOURCE_NAME}-planner", FETCH_MAX_WAIT_MS, max_partition_fetch_bytes=1,
                     fetch_max_bytes=1, **END_LOOKUP_SETTINGS)


def cap_offsets(start: Offsets, end: Offsets, max_records: int) -> Offsets:
    """Advance from ``start`` towards ``end`` by at most ``max_records`` offsets in total.

    The budget is water-filled: partitions with small backlogs are drained, the rest is split
    evenly (the remainder going to the lowest partition ids), so no partition starves.
    """
    backlog = {p: max(end[p] - start.get(p, 0), 0) for p in end}
    take = dict.fromkeys(end, 0)
    remaining = max_records
    by_backlog = sorted(end, key=lambda p: (backlog[p], int(p)))
    for i, p in enumerate(by_backlog):
        take[p] = min(backlog[p], remaining // (len(by_backlog) - i))
        remaining -= take[p]
    for p in sorted(end, key=int):
        extra = min(backlog[p] - take[p], remaining)
        take[p] += extra
        remaining -= extra
    return {p: start.get(p, 0) + take[p] for p in end}


@dataclass(frozen=True)
class KafkaOffsetRange(InputPartition):
    """Offsets [start, end) of one Kafka partition: a task reads one or more (KafkaRanges)."""

    bootstrap_servers: str
    topic: str
    partition: int
    start: int
    end: int
    poll_timeout_ms: int
    fetch_max_wait_ms: int = READER_FETCH_MAX_WAIT_MS


# A micro-batch's ranges go to one task until it holds this many records: an idle batch (ticks) or a light load's is
# read and parsed by one task instead of one per Kafka partition (each task costs scheduling and the round trips of
# two Python workers, measured by `coordinator bench --live`); a larger batch still gets a task per partition, parsed
# in parallel.
RECORDS_PER_TASK = 5_000


@dataclass(frozen=True)
class KafkaRanges(InputPartition):
    """One Spark input partition: offset ranges of distinct Kafka partitions, read one after the other in partition
    order (so the rows come in (partition, offset) order, as the stateful operator expects them)."""

    ranges: tuple[KafkaOffsetRange, ...]
    metrics_accumulator: str | None = None


def pack_ranges(ranges: Sequence[KafkaOffsetRange], records_per_task: int,
                metrics_accumulator: str | None = None) -> list[KafkaRanges]:
    """`ranges` (in partition order) in tasks: consecutive ones together while a task holds at most
    `records_per_task` records; a larger range alone."""
    tasks: list[KafkaRanges] = []
    current: list[KafkaOffsetRange] = []
    size = 0
    for part in ranges:
        if current and size + part.end - part.start > records_per_task:
            tasks.append(KafkaRanges(tuple(current), metrics_accumulator))
            current, size = [], 0
        current.append(part)
        size += part.end - part.start
    if current:
        tasks.append(KafkaRanges(tuple(current), metrics_accumulator))
    return tasks


def _records_batch(records: Sequence[Any], part: KafkaOffsetRange) -> pa.RecordBatch:
    """kafka-python's records of `part`'s partition, those before `part.end`, as one Arrow batch of READ_SCHEMA.

    Spark takes an Arrow batch as it is; the tuples of a row each went through pyspark's checks and converters, field
    by field (a fifth of a record's read: `python -m coordinator_lab.sink_cost --profile`)."""
    keys, values, offsets, timestamps = [], [], [], []
    end = part.end
    for rec in records:
        if rec.offset >= end:  # offsets can have gaps (compaction, transaction markers)
            break
        keys.append(rec.key)
        values.append(rec.value)
        offsets.append(rec.offset)
        timestamps.append(rec.timestamp * 1000 if rec.timestamp >= 0 else None)
    return source_batch(keys, values, part.topic, part.partition, offsets, timestamps)


class RangeReadTimeout(TimeoutError):
    """A source task did not read its offset range within ``pollTimeoutMs``: Spark fails and retries the task."""


# The longest a reader's fetch wait grows to (kafka-python needs it below its request timeout, 305 s).
MAX_FETCH_MAX_WAIT_MS = 8_000
# What a record adds to a fetch beyond its key and value, counted as if it were alone in its batch (a batch's 61-byte
# header, ~10 bytes of the record's own framing): more than batched records take, so that a fetch asked for the rest
# of a range ends a little past it rather than short of it (short costs another fetch: on Tansu, another listing).
RECORD_OVERHEAD_BYTES = 71
KAFKA_PYTHON_FETCH_MAX_BYTES = 52_428_800  # kafka-python's default fetch_max_bytes, the most a fetch asks for


@dataclass
class FetchBudget:
    """How many bytes a reader's fetch asks for: about the rest of its range, learned from the records it read.

    Tansu's fetch does not stop at what was there when it came: as long as records keep arriving while it lists the
    partition's batches (a listing takes ~0.1 s at 10^5 batches), it lists again for them, until its byte limit is
    spent, so a fetch with Kafka's 50 MiB limit, under a steady load of small batches, listed a partition several times
    over for one range (`python -m coordinator_lab.fetch_cost --under-load`). Kafka answers the same fetch with what
    its index finds, and asking for about a range's bytes costs it nothing either.
    """

    key_value_bytes_per_record: float | None = None  # None until the first records are read

    def for_records(self, count: int) -> int:
        """The byte limit of a fetch for `count` more records (kafka-python's default before any were read)."""
        if self.key_value_bytes_per_record is None:
            return KAFKA_PYTHON_FETCH_MAX_BYTES
        per_record = self.key_value_bytes_per_record + RECORD_OVERHEAD_BYTES
        return max(1, min(KAFKA_PYTHON_FETCH_MAX_BYTES, math.ceil(count * per_record)))

    def learn(self, batch: pa.RecordBatch) -> None:
        """Take in the sizes of `batch`'s records (a moving mean: the topic's requests change with its traffic)."""
        if batch.num_rows == 0:
            return
        key_value_bytes = sum(pc.sum(pc.binary_length(batch.column(name))).as_py() or 0 for name in ("key", "value"))
        mean = key_value_bytes / batch.num_rows
        last = self.key_value_bytes_per_record
        self.key_value_bytes_per_record = mean if last is None else 0.8 * last + 0.2 * mean


class PartitionReader:
    """A worker's consumer of one partition, the offset its last task read up to, and its fetch wait.

    The fetch wait doubles whenever the broker's fetches return nothing for two waits although its high watermark is
    past the position: Tansu's listing of the partition's batches ran out of time (Kafka returns such records at once).
    """

    def __init__(self, part: KafkaOffsetRange) -> None:
        self.bootstrap_servers = part.bootstrap_servers
        self.tp = TopicPartition(part.topic, part.partition)
        self.fetch_max_wait_ms = part.fetch_max_wait_ms
        self.consumer = self._assigned_consumer()
        self.next_offset: int | None = None
        self.budget = FetchBudget()
        self._started: tuple[KafkaOffsetRange, list[Any]] | None = None  # a range whose first fetch went out (start)

    def _assigned_consumer(self) -> KafkaConsumer:
        consumer = _consumer(self.bootstrap_servers, f"{SOURCE_NAME}-reader", self.fetch_max_wait_ms)
        consumer.assign([self.tp])
        return consumer

    def close(self) -> None:
        self.consumer.close()

    def start(self, part: KafkaOffsetRange) -> None:
        """Send ``part``'s first fetch now, without waiting for its answer (``read`` takes it): a task's ranges are
        read one after the other, so their fetches go out together and the broker works on them at once."""
        self._seek(part)
        self._started = (part, self._poll(part, timeout_ms=0))

    def read(self, part: KafkaOffsetRange) -> Iterator[pa.RecordBatch]:
        """Exactly the records in ``part``'s range, in offset order, as Arrow batches of READ_SCHEMA (one a poll);
        RangeReadTimeout if the range is not read within ``part.poll_timeout_ms``."""
        started_part, early = self._started or (None, [])
        self._started = None
        if started_part != part:
            self._seek(part)
            early = []
        started = fed = time.monotonic()
        while (position := self.consumer.position(self.tp)) < part.end or early:
            if time.monotonic() - started > part.poll_timeout_ms / 1000:
                raise RangeReadTimeout(self._late(part, position))
            records, early = early or self._poll(part, timeout_ms=200), []
            if records:
                fed = time.monotonic()
                batch = _records_batch(records, part)
                self.budget.learn(batch)
                yield batch
            elif time.monotonic() - fed > max(2 * self.fetch_max_wait_ms, 400) / 1000 and self._starved(position):
                self._widen_wait(position)
                fed = time.monotonic()
        self.next_offset = self.consumer.position(self.tp)

    def _seek(self, part: KafkaOffsetRange) -> None:
        if self.next_offset != part.start:
            self.consumer.seek(self.tp, part.start)  # a seek drops what was fetched ahead: only when elsewhere
            self.next_offset = part.start

    def _poll(self, part: KafkaOffsetRange, timeout_ms: int) -> list[Any]:
        """The rest of ``part``'s records that came within `timeout_ms` (none if the answer is not there yet)."""
        remaining = part.end - self.consumer.position(self.tp)
        # kafka-python reads its limit of the fetch it sends next from its fetcher's settings: this reader's
        # consumer fetches only this partition, so the request's limit is the partition's.
        self.consumer._fetcher.config["fetch_max_bytes"] = self.budget.for_records(remaining)
        # At most the rest of the range: records fetched beyond it stay buffered for the next task.
        records: list[Any] = self.consumer.poll(timeout_ms=timeout_ms, max_records=remaining).get(self.tp, [])
        return records

    def _starved(self, position: int) -> bool:
        high_watermark = self.consumer.highwater(self.tp)
        return high_watermark is not None and high_watermark > position

    def _widen_wait(self, position: int) -> None:
        if self.fetch_max_wait_ms >= MAX_FETCH_MAX_WAIT_MS:
            return
        self.fetch_max_wait_ms = min(2 * self.fetch_max_wait_ms, MAX_FETCH_MAX_WAIT_MS)
        log.warning("%s: fetches of %s at offset %d return nothing below the high watermark %s: fetch wait now %d ms "
                    "(the embedded Tansu broker lists every batch of the partition on each fetch; its log is long)",
                    SOURCE_NAME, self.tp, position, self.consumer.highwater(self.tp), self.fetch_max_wait_ms)
        self.consumer.close()
        self.consumer = self._assigned_consumer()
        self.consumer.seek(self.tp, position)

    def _late(self, part: KafkaOffsetRange, position: int) -> str:
        return (f"{SOURCE_NAME}: read {position - part.start} of the {part.end - part.start} records of "
                f"{self.tp.topic}-{self.tp.partition} (offsets {part.start} to {part.end}) within pollTimeoutMs="
                f"{part.poll_timeout_ms} ms; the broker's high watermark is {self.consumer.highwater(self.tp)}, the "
                f"fetch wait {self.fetch_max_wait_ms} ms. The broker answers too slowly (an embedded Tansu broker does "
                "once its log is very long: every fetch lists every stored batch of the partition; restart it on a "
                "fresh checkpoint, or run Apache Kafka). Spark retries the task; the query fails once the retries "
                "fail too.")


# Spark reuses its Python workers across tasks (spark.python.worker.reuse), so each worker keeps its Kafka clients:
# a new client per task costs a connection, metadata and, for the idempotent producer, a producer id (measured
# here: 27 ms for a new consumer's first fetch vs 6 ms reused, 41 ms vs 6 ms for a producer), paid by every task of
# every micro-batch, idle ones included. A client that failed is dropped, so the retried task starts with a fresh one.
Client = TypeVar("Client", PartitionReader, "SinkProducer")
ReaderKey = tuple[str, str, int, int]
"""Bootstrap servers, topic, partition, fetch wait."""
_READERS: dict[ReaderKey, PartitionReader] = {}
_WRITERS: dict[str, SinkProducer] = {}
Key = TypeVar("Key", str, ReaderKey)


def _cached_client(cache: dict[Key, Client], key: Key, create: Callable[[], Client]) -> Client:
    client = cache.get(key)
    if client is None:
        client = cache[key] = create()
    return client


def _drop_client(cache: dict[Key, Client], key: Key) -> None:
    client = cache.pop(key, None)
    if client is not None:
        client.close()


def _reader_key(part: KafkaOffsetRange) -> ReaderKey:
    return part.bootstrap_servers, part.topic, part.partition, part.fetch_max_wait_ms


def start_reading(part: KafkaOffsetRange) -> None:
    """Send the first fetch of ``part``'s range (PartitionReader.start), by the worker's reader of the partition."""
    key = _reader_key(part)
    try:
        _cached_client(_READERS, key, lambda: PartitionReader(part)).start(part)
    except BaseException:
        _drop_client(_READERS, key)
        raise


def read_offset_range(part: KafkaOffsetRange) -> Iterator[pa.RecordBatch]:
    """``part``'s records as Arrow batches (PartitionReader.read), by the worker's reader of the partition.

    Each partition has its own consumer in the worker: the fetch it sends after the range's last record (kafka-python
    fetches ahead) asks for the next micro-batch's first offsets of this partition, not of another one.
    """
    key = _reader_key(part)
    reader = _cached_client(_READERS, key, lambda: PartitionReader(part))
    try:
        yield from reader.read(part)
    except BaseException:
        _drop_client(_READERS, key)
        raise


def close_clients() -> None:
    """Close this process's cached readers and sink producers (a measurement's between its runs, a test's after it):
    their network threads would otherwise go on reconnecting to a broker that is gone."""
    for key in list(_READERS):
        _drop_client(_READERS, key)
    for bootstrap_servers in list(_WRITERS):
        _drop_client(_WRITERS, bootstrap_servers)


def read_ranges(task: KafkaRanges) -> Iterator[pa.RecordBatch]:
    """Every range of `task`, in order (read_offset_range); the time it took to the task metrics, if named."""
    freeze_long_lived_objects()
    started = time.perf_counter()
    for part in task.ranges[1:]:
        start_reading(part)
    for part in task.ranges:
        yield from read_offset_range(part)
    metrics = task_metrics.metrics_for_task(task.metrics_accumulator)
    if metrics is not None:
        metrics.add({task_metrics.SOURCE_READ_MS: task_metrics.since_ms(started), task_metrics.SOURCE_TASKS: 1})


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver-side planning of micro-batches over one topic; executors read via ``read``.

    ``maxRecordsPerBatch`` uses real admission control (PySpark >= 4.2): Spark asks
    ``getDefaultReadLimit`` once and passes the limit (or ``ReadAllAvailable`` when a trigger needs
    everything) to ``latestOffset(start, limit)``. With ``Trigger.AvailableNow`` the end offsets
    seen in ``prepareForTriggerAvailableNow`` bound the run, which still splits into capped batches.
    """

    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        self._consumer: KafkaConsumer | None = None
        self._available_now_target: Offsets | None = None
        self._ends = EndOffsetLookups(options.topic)
        self._metadata_refreshed_at = -math.inf

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the driver's live Kafka client."""
        return {**self.__dict__, "_consumer": None}

    def _end_offsets(self) -> Offsets:
        """Current log end offsets, via one long-lived driver-side consumer."""
        if self._consumer is None:
            self._consumer = planner_consumer(self.options.bootstrap_servers)
        now = time.monotonic()
        refresh = now - self._metadata_refreshed_at >= METADATA_REFRESH_S
        ends = self._ends.lookup(self._consumer, refresh_metadata=refresh)
        if refresh:
            self._metadata_refreshed_at = now
        return ends

    def initialOffset(self) -> Offsets:
        """Where a fresh checkpoint starts: partition starts (``earliest``) or ends (``latest``)."""
        if self.options.starting_offsets == "latest":
            return self._end_offsets()
        ends = self._end_offsets()
        assert self._consumer is not None
        tps = [TopicPartition(self.options.topic, int(p)) for p in ends]
        return {str(tp.partition): off for tp, off in self._consumer.beginning_offsets(tps).items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxRecordsPerBatch)`` if the option is set, else read everything."""
        if self.options.max_records_per_batch is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.options.max_records_per_batch)

    def prepareForTriggerAvailableNow(self) -> None:
        """Freeze the end of an AvailableNow run at the data available right now."""
        self._available_now_target = self._end_offsets()

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        """End offset of the next micro-batch: the log end, bounded by AvailableNow and ``limit``."""
        end = dict(start)
        for p, log_end in self._end_offsets().items():
            bound = log_end
            if self._available_now_target is not None:
                bound = min(bound, self._available_now_target.get(p, start.get(p, 0)))
            end[p] = max(start.get(p, 0), bound)  # never move backwards (e.g. recreated topic)
        if isinstance(limit, ReadMaxRows):
            return cap_offsets(start, end, limit.max_rows)
        if isinstance(limit, ReadAllAvailable):
            return end
        raise ValueError(f"{SOURCE_NAME}: unsupported read limit {limit!r}")

    def reportLatestOffset(self) -> Offsets | None:
        """The log end seen by the last offset lookup, for query progress reporting."""
        return self._ends.latest

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        """The Kafka partitions' non-empty [start, end) ranges, packed into tasks (pack_ranges)."""
        return pack_ranges([
            KafkaOffsetRange(
                bootstrap_servers=self.options.bootstrap_servers,
                topic=self.options.topic,
                partition=int(p),
                start=start.get(p, 0),
                end=end[p],
                poll_timeout_ms=self.options.poll_timeout_ms,
                fetch_max_wait_ms=self.options.fetch_max_wait_ms,
            )
            for p in sorted(end, key=int)
            if end[p] > start.get(p, 0)
        ], RECORDS_PER_TASK, self.options.metrics_accumulator)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one task's offset ranges on an executor, with the worker's consumers."""
        assert isinstance(partition, KafkaRanges)
        return read_ranges(partition)

    def stop(self) -> None:
        """Close the driver-side consumer when the query stops."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


@dataclass(frozen=True)
class KafkaCommitMessage(WriterCommitMessage):
    """What one write task produced: how many records Kafka acknowledged."""

    records: int


@dataclass(frozen=True)
class SinkColumns:
    """Where the sink's input rows hold a record's fields: the columns of Spark's Arrow batches, in the input
    schema's order."""

    topic: int
    value: int
    key: int | None

    @classmethod
    def of(cls, schema: StructType) -> SinkColumns:
        """The columns of `schema`; fail at planning time if its rows cannot be turned into Kafka records."""
        fields = {f.name: f.dataType for f in schema.fields}
        for name, required in (("topic", True), ("key", False), ("value", True)):
            allowed = (StringType,) if name == "topic" else (BinaryType, StringType)
            if name not in fields:
                if required:
                    raise ValueError(f"{SOURCE_NAME} sink: input needs a '{name}' column, has {list(fields)}")
            elif not isinstance(fields[name], allowed):
                raise ValueError(f"{SOURCE_NAME} sink: column '{name}' must be string or binary")
        names = schema.fieldNames()
        return cls(names.index("topic"), names.index("value"), names.index("key") if "key" in fields else None)


# The sink's producer fills few large batches (a produce request each): a task's flush sends the rest at once, so
# records wait at most the linger inside a task. Below the brokers' default batch limit (message.max.bytes, 1 MiB).
# Measured with `python -m coordinator_lab.sink_cost --embedded` on kafka-python's producer (which sent ~17 records
# a request at linger 0), medians of 4 runs: the worker's CPU per record 76 -> 51 us, the embedded broker's 7.2 -> 2.9.
SINK_LINGER_MS = 20
SINK_BATCH_BYTES = 512 * 1024
# How long the producer retries a record before its task fails (kafka-python's delivery timeout; librdkafka's
# default is 300 s).
SINK_DELIVERY_TIMEOUT_MS = 120_000


def produce_queued(producer: Producer, topic: str, value: str | bytes | None, key: str | bytes | None,
                   **options: Any) -> None:
    """Queue one record on a librdkafka producer, serving its delivery reports while its queue is full (librdkafka
    refuses a record then instead of waiting); `options` are `Producer.produce`'s (on_delivery, ...)."""
    while True:
        try:
            producer.produce(topic, value, key, **options)
            return
        except BufferError:
            producer.poll(0.01)


class SinkProducer:
    """A worker's producer for the sink (librdkafka, through confluent-kafka) and the delivery failures of its task.

    librdkafka builds and sends the records in C: the sink's CPU a record (its I/O threads included) 21.2 -> 2.2 us
    against kafka-python's producer, whose `send` runs ~40 Python calls a record (`python -m
    coordinator_lab.sink_cost --embedded`, medians of 4 runs each). Idempotent with acks=all: at-least-once, in order
    per partition. Keyed records go where the Java client's default partitioner
    puts them (`murmur2_random`: murmur2 of the key; a record without a key to a random partition). Delivery reports
    only of failures: no Python call a delivered record."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.failures: list[KafkaError] = []
        self.producer = Producer({
            "bootstrap.servers": bootstrap_servers,
            "client.id": f"{SOURCE_NAME}-writer",
            "enable.idempotence": True,
            "acks": "all",
            "partitioner": "murmur2_random",
            "linger.ms": SINK_LINGER_MS,
            "batch.size": SINK_BATCH_BYTES,
            "message.timeout.ms": SINK_DELIVERY_TIMEOUT_MS,
            "delivery.report.only.error": True,
            "on_delivery": self._failed,
            "log.connection.close": False,  # a broker closing an idle connection is no news (librdkafka reconnects)
        })

    def _failed(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.failures.append(error)

    def send(self, topic: str, key: str | bytes | None, value: str | bytes | None) -> None:
        produce_queued(self.producer, topic, value, key)

    def flush(self) -> None:
        """Wait until every queued record is acknowledged or failed; raise if any failed (Spark retries the task)."""
        self.producer.flush()
        if self.failures:
            failures, self.failures = self.failures, []
            raise KafkaException(failures[0], f"{SOURCE_NAME} sink: {len(failures)} records were not delivered, "
                                              f"the first: {failures[0]}. Spark retries the task.")

    def close(self) -> None:
        """Drop what is still queued (a failed task's retry sends it again) and close."""
        self.producer.purge()
        self.producer.close()


def produce_batches(bootstrap_servers: str, batches: Iterator[pa.RecordBatch], columns: SinkColumns,
                    metrics: task_metrics.TaskMetrics | None = None) -> KafkaCommitMessage:
    """Send every row of `batches` (as Spark gives a Python sink its rows: Arrow batches), wait until Kafka
    acknowledged all of them (acks=all), raise on any failure; add to `metrics` the time spent waiting for the rows
    (upstream: in a micro-batch, the shuffle read and the stateful operator), sending them and flushing."""
    freeze_long_lived_objects()
    producer = _cached_client(_WRITERS, bootstrap_servers, lambda: SinkProducer(bootstrap_servers))
    try:
        sent = 0
        waiting = sending = 0.0
        clock = time.perf_counter
        asked = clock()
        for batch in batches:
            got = clock()
            waiting += got - asked
            keys = [None] * batch.num_rows if columns.key is None else batch.column(columns.key).to_pylist()
            for topic, key, value in zip(batch.column(columns.topic).to_pylist(), keys,
                                         batch.column(columns.value).to_pylist(), strict=True):
                if not topic:
                    raise ValueError(f"{SOURCE_NAME} sink: row without a topic: key {key!r}, value {value!r}")
                producer.send(topic, key, value)
            sent += batch.num_rows
            asked = clock()
            sending += asked - got
        waiting += clock() - asked
        flushing = clock()
        producer.flush()
        if metrics is not None:
            metrics.add({task_metrics.SINK_UPSTREAM_MS: waiting * 1000, task_metrics.SINK_PRODUCE_MS: sending * 1000,
                         task_metrics.SINK_FLUSH_MS: task_metrics.since_ms(flushing), task_metrics.SINK_RECORDS: sent})
        return KafkaCommitMessage(records=sent)
    except BaseException:
        _drop_client(_WRITERS, bootstrap_servers)
        raise


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """Micro-batch sink: each task produces its rows and flushes before reporting success."""

    def __init__(self, bootstrap_servers: str, schema: StructType, metrics_accumulator: str | None = None) -> None:
        self.columns = SinkColumns.of(schema)
        self.bootstrap_servers = bootstrap_servers
        self.metrics_accumulator = metrics_accumulator

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        """Produce this task's rows (runs on an executor)."""
        return produce_batches(self.bootstrap_servers, iterator, self.columns,
                               task_metrics.metrics_for_task(self.metrics_accumulator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Log how much the micro-batch wrote; the records are already durable in Kafka."""
        freeze_long_lived_objects()  # this runs in a reused Python process of the driver
        total = sum(m.records for m in messages if isinstance(m, KafkaCommitMessage))
        log.info("%s sink: batch %d wrote %d records", SOURCE_NAME, batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Kafka cannot un-send: records of succeeded tasks stay and the retry re-sends them."""
        log.warning("%s sink: batch %d aborted; already-produced records remain", SOURCE_NAME, batchId)


class KafkaBatchWriter(DataSourceArrowWriter):
    """Batch sink (``df.write.format("coordinator_kafka").mode("append")``), same semantics."""

    def __init__(self, bootstrap_servers: str, schema: StructType) -> None:
        self.columns = SinkColumns.of(schema)
        self.bootstrap_servers = bootstrap_servers

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        """Produce this task's rows (runs on an executor)."""
        return produce_batches(self.bootstrap_servers, iterator, self.columns)


class KafkaDataSource(DataSource):
    """The ``coordinator_kafka`` data source: streaming reader, streaming and batch writers."""

    @classmethod
    def name(cls) -> str:
        """Short name used in ``format(...)``."""
        return SOURCE_NAME

    def schema(self) -> str:
        """Schema of rows read from Kafka."""
        return READ_SCHEMA

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        """Reader for ``spark.readStream.format("coordinator_kafka")``."""
        return KafkaStreamReader(ReaderOptions.parse(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> KafkaStreamWriter:
        """Writer for ``df.writeStream.format("coordinator_kafka")``."""
        freeze_long_lived_objects()  # created in a reused Python process of the driver, every micro-batch
        return KafkaStreamWriter(_required(self.options, "kafka.bootstrap.servers"), schema,
                                 self.options.get(task_metrics.ACCUMULATOR_OPTION))

    def writer(self, schema: StructType, overwrite: bool) -> KafkaBatchWriter:
        """Writer for ``df.write.format("coordinator_kafka")``."""
        return KafkaBatchWriter(_required(self.options, "kafka.bootstrap.servers"), schema)


def register(spark: SparkSession) -> None:
    """Make ``format("coordinator_kafka")`` available in ``spark``."""
    spark.dataSource.register(KafkaDataSource)
