"""End-to-end tests of the ``coordinator_kafka`` data source against a real broker and Spark."""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.partitioner.default import murmur2
from pyspark import cloudpickle
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.datasource import ReadMaxRows
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from coordinator_job.broker import EndOffsetLookups, create_topics, log_end_offsets
from coordinator_job.kafka_source import (
    FetchBudget,
    KafkaDataSource,
    KafkaOffsetRange,
    KafkaStreamReader,
    ReaderOptions,
    SinkColumns,
    cap_offsets,
    close_clients,
    pack_ranges,
    planner_consumer,
    produce_batches,
)

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

# (partition, offset) -> (key, value, timestamp ms)
Produced = dict[tuple[int, int], tuple[bytes | None, bytes | None, int]]


def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes | None]]) -> Produced:
    """Produce records with kafka-python and return where each one landed."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        sent = [(key, value, producer.send(topic, key=key, value=value)) for key, value in records]
        producer.flush()
        produced: Produced = {}
        for key, value, future in sent:
            meta = future.get(timeout=10)
            produced[(meta.partition, meta.offset)] = (key, value, meta.timestamp)
        return produced
    finally:
        producer.close()


def consume(bootstrap: str, topic: str, expected: int, timeout_s: float = 20.0) -> list[Any]:
    """Read a topic from the beginning until ``expected`` records arrived (or fail at the deadline)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        records: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while len(records) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend(batch)
        assert len(records) == expected, f"got {len(records)} of {expected} records from {topic}"
        return records
    finally:
        consumer.close()


def await_available_now(query: StreamingQuery) -> None:
    """Wait for an availableNow query to finish (re-raising its failure); never leave it running."""
    try:
        assert query.awaitTermination(timeout=60), "availableNow query did not finish within 60 s"
    finally:
        query.stop()


def run_available_now(
    spark: SparkSession, bootstrap: str, topic: str, checkpoint: Path, starting: str = "earliest"
) -> list[list[Any]]:
    """Run the source with availableNow and maxRecordsPerBatch=50; return the rows of each batch."""
    batches: list[list[Any]] = []

    def collect(df: DataFrame, batch_id: int) -> None:
        batches.append(df.collect())

    stream = (
        spark.readStream.format("coordinator_kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", starting)
        .option("maxRecordsPerBatch", 50)
        .load()
        .selectExpr("key", "value", "partition", "offset", "unix_millis(timestamp) AS ts_ms")
    )
    query = (
        stream.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    await_available_now(query)
    return batches


def assert_read_exactly(batches: list[list[Any]], produced: Produced) -> None:
    """Every produced record read once, with its key/value/timestamp, in offset order per partition."""
    rows = [row for batch in batches for row in batch]
    got = {(r.partition, r.offset): (r.key, r.value, r.ts_ms) for r in rows}
    assert len(rows) == len(got), "a record was read twice"
    assert got == produced
    per_partition: dict[int, list[int]] = defaultdict(list)
    for r in rows:
        per_partition[r.partition].append(r.offset)
    for offsets in per_partition.values():
        assert offsets == sorted(offsets)


def test_stream_read_is_capped_exactly_once_and_resumes(
    spark: SparkSession, kafka_bootstrap: str, unique_topic: Callable[[str], str], tmp_path: Path
) -> None:
    topic = unique_topic("in")
    create_topics(kafka_bootstrap, [(topic, 3, False)])
    first = produce(kafka_bootstrap, topic, [(f"k{i}".encode(), f"v{i}".encode()) for i in range(300)])
    assert {p for p, _ in first} == {0, 1, 2}

    batches = run_available_now(spark, kafka_bootstrap, topic, tmp_path / "ckpt")
    assert_read_exactly(batches, first)
    assert len(batches) >= 6 and all(len(b) <= 50 for b in batches)

    # Restart on the same checkpoint: only the new records, including a null key and a tombstone.
    more = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(300, 360)]
    second = produce(kafka_bootstrap, topic, [*more, (None, b"no-key"), (b"k0", None)])
    assert_read_exactly(run_available_now(spark, kafka_bootstrap, topic, tmp_path / "ckpt"), second)


def test_latest_starting_offsets_skip_existing_records(
    spark: SparkSession, kafka_bootstrap: str, unique_topic: Callable[[str], str], tmp_path: Path
) -> None:
    topic = unique_topic("in")
    create_topics(kafka_bootstrap, [(topic, 2, False)])
    produce(kafka_bootstrap, topic, [(f"old{i}".encode(), b"old") for i in range(10)])
    skipped = run_available_now(spark, kafka_bootstrap, topic, tmp_path / "ckpt", starting="latest")
    assert [row for batch in skipped for row in batch] == []
    new = produce(kafka_bootstrap, topic, [(f"new{i}".encode(), b"new") for i in range(5)])
    batches = run_available_now(spark, kafka_bootstrap, topic, tmp_path / "ckpt", starting="latest")
    assert_read_exactly(batches, new)


def test_batch_write_to_two_topics_partitions_by_murmur2(
    spark: SparkSession, kafka_bootstrap: str, unique_topic: Callable[[str], str]
) -> None:
    topics = {unique_topic("a"): 3, unique_topic("b"): 2}
    create_topics(kafka_bootstrap, [(name, n, False) for name, n in topics.items()])
    rows = [(topic, f"key-{i}", f"value-{i}".encode()) for topic in topics for i in range(40)]
    rows.append((next(iter(topics)), "key-0", None))  # tombstone
    df = spark.createDataFrame(rows, "topic string, key string, value binary").repartition(2)
    writer = df.write.format("coordinator_kafka").option("kafka.bootstrap.servers", kafka_bootstrap)
    writer.mode("append").save()

    landed = set()
    for topic, partitions in topics.items():
        for rec in consume(kafka_bootstrap, topic, sum(1 for r in rows if r[0] == topic)):
            assert rec.partition == (murmur2(rec.key) & 0x7FFFFFFF) % partitions
            landed.add((topic, rec.key.decode(), rec.value))
    assert landed == set(rows)


@pytest.fixture(scope="module")
def placement(kafka_bootstrap: str) -> Iterator[tuple[str, str, KafkaProducer, KafkaConsumer]]:
    """A topic of 5 partitions for the sink, one for kafka-python's producer with its default partitioner, that
    producer, and a consumer; the sink's producer, cached in this process as in a Spark worker, closed at the end."""
    sink_topic, reference_topic = (f"placement-{name}.{uuid.uuid4().hex[:8]}" for name in ("sink", "reference"))
    create_topics(kafka_bootstrap, [(sink_topic, 5, False), (reference_topic, 5, False)])
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks=1)
    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=None, enable_auto_commit=False)
    yield sink_topic, reference_topic, producer, consumer
    producer.close()
    consumer.close()
    close_clients()


@settings(max_examples=10, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=20))
def test_the_sink_puts_a_key_where_kafka_pythons_default_partitioner_does(
        kafka_bootstrap: str, placement: tuple[str, str, KafkaProducer, KafkaConsumer], keys: list[bytes]) -> None:
    sink_topic, reference_topic, producer, consumer = placement
    expected = [future.get(timeout=10).partition
                for future in [producer.send(reference_topic, key=key, value=b"") for key in keys]]
    start = log_end_offsets(consumer, sink_topic)
    batch = pa.record_batch([pa.array([sink_topic] * len(keys)), pa.array(keys, pa.binary()),
                             pa.array([str(i).encode() for i in range(len(keys))], pa.binary())],
                            names=["topic", "key", "value"])
    columns = SinkColumns.of(StructType([StructField("topic", StringType()), StructField("key", BinaryType()),
                                         StructField("value", BinaryType())]))
    assert produce_batches(kafka_bootstrap, iter([batch]), columns).records == len(keys)
    end = log_end_offsets(consumer, sink_topic, refresh_metadata=False)
    placed: dict[int, int] = {}
    deadline = time.monotonic() + 20
    for partition in range(5):
        tp = TopicPartition(sink_topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, start[str(partition)])
        while consumer.position(tp) < end[str(partition)] and time.monotonic() < deadline:
            for record in consumer.poll(timeout_ms=1000).get(tp, []):
                placed[int(record.value)] = partition
    assert [placed.get(i) for i in range(len(keys))] == expected


def test_stream_write_copies_a_topic(
    spark: SparkSession, kafka_bootstrap: str, unique_topic: Callable[[str], str], tmp_path: Path
) -> None:
    source, sink = unique_topic("src"), unique_topic("sink")
    create_topics(kafka_bootstrap, [(source, 2, False), (sink, 2, True)])
    produced = produce(kafka_bootstrap, source, [(f"k{i}".encode(), f"v{i}".encode()) for i in range(20)])
    query = (
        spark.readStream.format("coordinator_kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", source)
        .load()
        .selectExpr(f"'{sink}' AS topic", "key", "value")
        .writeStream.format("coordinator_kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    await_available_now(query)
    copied = {(r.key, r.value) for r in consume(kafka_bootstrap, sink, len(produced))}
    assert copied == {(k, v) for k, v, _ in produced.values()}


def test_cap_offsets_spreads_the_budget_without_exceeding_it() -> None:
    start = {"0": 0, "1": 10, "2": 5}
    end = {"0": 3, "1": 100, "2": 100, "3": 40}
    capped = cap_offsets(start, end, 50)
    assert sum(capped[p] - start.get(p, 0) for p in end) == 50
    assert capped["0"] == 3 and all(start.get(p, 0) <= capped[p] <= end[p] for p in end)
    assert cap_offsets(start, end, 1000) == end
    assert cap_offsets(start, {"0": 0, "1": 10, "2": 5}, 10) == {"0": 0, "1": 10, "2": 5}


@given(st.lists(st.integers(min_value=1, max_value=50), max_size=8), st.integers(min_value=1, max_value=60))
def test_pack_ranges_keeps_every_range_in_order_and_splits_only_past_the_task_size(sizes: list[int],
                                                                                   per_task: int) -> None:
    ranges = [KafkaOffsetRange("b", "t", p, 100, 100 + size, 1000) for p, size in enumerate(sizes)]
    tasks = pack_ranges(ranges, per_task, "7")
    assert [r for task in tasks for r in task.ranges] == ranges
    assert all(task.metrics_accumulator == "7" and task.ranges for task in tasks)
    records = [sum(r.end - r.start for r in task.ranges) for task in tasks]
    assert all(n <= per_task or len(task.ranges) == 1 for n, task in zip(records, tasks, strict=True))
    # A task is cut only where the next range would not fit.
    assert all(before + tasks[i + 1].ranges[0].end - tasks[i + 1].ranges[0].start > per_task
               for i, before in enumerate(records[:-1]))


def test_source_parts_pickle_even_after_use(kafka_bootstrap: str, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("t")
    create_topics(kafka_bootstrap, [(topic, 2, False)])
    options = {"kafka.bootstrap.servers": kafka_bootstrap, "subscribe": topic, "maxRecordsPerBatch": "7"}
    reader = KafkaStreamReader(ReaderOptions.parse(options))
    assert reader.initialOffset() == {"0": 0, "1": 0}  # opens the driver-side consumer
    assert reader.getDefaultReadLimit() == ReadMaxRows(7)
    try:
        part = pack_ranges([KafkaOffsetRange(kafka_bootstrap, topic, 0, 0, 5, 1000)], 10)[0]
        for obj in (KafkaDataSource(options), reader, part):
            assert type(cloudpickle.loads(cloudpickle.dumps(obj))) is type(obj)
    finally:
        reader.stop()
    with pytest.raises(ValueError, match="startingOffsets"):
        ReaderOptions.parse({**options, "startingOffsets": "yesterday"})


def _write_flushed(producer: KafkaProducer, topic: str, partition: int, count: int) -> None:
    """`count` one-byte records to `partition`, acknowledged (the producer's linger makes batches of several)."""
    for _ in range(count):
        producer.send(topic, b"x", partition=partition)
    producer.flush()


def test_log_end_offsets_from_known_ends_match_a_full_lookup(kafka_bootstrap: str,
                                                           unique_topic: Callable[[str], str]) -> None:
    """The planner's lookup (its consumer's: a byte a partition) from the ends it saw last: exact after new records
    (written in batches of several, whose end Tansu's ListOffsets misses), unchanged when nothing is new, and the
    broker's again past a log's end."""
    topic = unique_topic("ends")
    create_topics(kafka_bootstrap, [(topic, 2, False)])
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=50, acks="all")
    planner = planner_consumer(kafka_bootstrap)
    try:
        write = partial(_write_flushed, producer, topic)

        write(0, 5)
        write(1, 3)
        ends = log_end_offsets(planner, topic)
        assert ends == {"0": 5, "1": 3}
        assert log_end_offsets(planner, topic, refresh_metadata=False, known=ends) == ends
        write(0, 4)
        assert log_end_offsets(planner, topic, refresh_metadata=False, known=ends) == {"0": 9, "1": 3}
        assert log_end_offsets(planner, topic, refresh_metadata=False, known={"0": 50, "1": 3}) == {"0": 9, "1": 3}
    finally:
        producer.close()
        planner.close()


def test_a_lookup_from_the_same_ends_never_takes_the_last_lookups_answer(kafka_bootstrap: str,
                                                                          unique_topic: Callable[[str], str]) -> None:
    """kafka-python sends spare fetches as it polls and takes an answer for the fetch a partition awaits whenever it
    was sent from the same offset: a lookup from the ends the last one found must still see the records written
    between the two. A race (the spare answer and the seek's offset validation answered before the poll reads
    either): before the lookup dropped earlier fetches, 28 of 1,000 rounds saw the last lookup's ends."""
    topic = unique_topic("ends")
    create_topics(kafka_bootstrap, [(topic, 2, False)])
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=5, acks="all")
    planner = planner_consumer(kafka_bootstrap)
    try:
        ends = log_end_offsets(planner, topic)
        stale = 0
        for round_ in range(200):
            assert log_end_offsets(planner, topic, refresh_metadata=False, known=ends) == ends
            _write_flushed(producer, topic, round_ % 2, 3)
            expected = {**ends, str(round_ % 2): ends[str(round_ % 2)] + 3}
            stale += log_end_offsets(planner, topic, refresh_metadata=False, known=ends) != expected
            ends = expected
        assert stale == 0
    finally:
        producer.close()
        planner.close()


@pytest.mark.parametrize("broker", ["apache-kafka", "three-nodes", "tansu"])
def test_end_offset_lookups_match_a_full_lookup(request: pytest.FixtureRequest, unique_topic: Callable[[str], str],
                                                broker: str) -> None:
    """The planner's lookups: the ends a full lookup finds, after new records and again and again when nothing is new
    (on Apache Kafka an incremental fetch session leaves idle partitions out of its answers: the third lookup waited
    for an answer that never named them). Apache Kafka refuses a fetch past the log end, so the lookups fall back to
    fetching from the ends seen last (over three nodes: leaders on each); Tansu answers it with the end."""
    bootstrap = {"apache-kafka": lambda: request.getfixturevalue("kafka_bootstrap"),
                 "three-nodes": lambda: request.getfixturevalue("kafka_cluster3").bootstrap_servers,
                 "tansu": lambda: request.getfixturevalue("tansu_bootstrap")}[broker]()
    topic = unique_topic("ends")
    create_topics(bootstrap, [(topic, 2, False)])
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, acks="all")
    planner = planner_consumer(bootstrap)
    try:
        write = partial(_write_flushed, producer, topic)
        lookups = EndOffsetLookups(topic)
        write(0, 5)
        write(1, 3)
        assert lookups.lookup(planner, refresh_metadata=True) == {"0": 5, "1": 3}
        for _ in range(3):
            assert lookups.lookup(planner, refresh_metadata=False) == {"0": 5, "1": 3}
        write(0, 4)
        assert lookups.lookup(planner, refresh_metadata=False) == {"0": 9, "1": 3}
        assert lookups.lookup(planner, refresh_metadata=True) == {"0": 9, "1": 3}
        assert lookups.lookup(planner, refresh_metadata=False) == {"0": 9, "1": 3}
        assert log_end_offsets(planner, topic) == {"0": 9, "1": 3}
        assert lookups.past_end_refused == (broker != "tansu")
    finally:
        planner.close()
        producer.close()


def test_a_fetch_budget_is_about_the_bytes_of_the_records_asked_for() -> None:
    budget = FetchBudget()
    assert budget.for_records(10) == 52_428_800  # kafka-python's own limit until a record was read
    budget.learn(pa.RecordBatch.from_pydict({"key": [b"k" * 10] * 4, "value": [b"v" * 190] * 4},
                                            schema=pa.schema([("key", pa.binary()), ("value", pa.binary())])))
    assert 100 * 200 < budget.for_records(100) <= 100 * (200 + 71)
    budget.learn(pa.RecordBatch.from_pydict({"key": [None], "value": [b"v" * 1200]},
                                            schema=pa.schema([("key", pa.binary()), ("value", pa.binary())])))
    assert 100 * 400 < budget.for_records(100) < 100 * 600  # a moving mean: 0.8 x 200 + 0.2 x 1200
    assert budget.for_records(10**9) == 52_428_800
