"""The source's range reader on a real broker: exact ranges, a deadline for the whole range, reads that do not
freeze on a long embedded-broker log, and (with Spark) a task past its deadline retried, then the batch failed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import KafkaProducer
from kafka.errors import KafkaError
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from coordinator_job import kafka_source
from coordinator_job.broker import Consumer, EmbeddedBroker, create_topics, free_loopback_port
from coordinator_job.kafka_source import KafkaOffsetRange, KafkaRanges, RangeReadTimeout, read_offset_range, read_ranges
from coordinator_lab.fetch_cost import fill
from tests.kafka_threads import kafka_network_threads_since
from tests.streaming.fetch_recorder import FetchRecorder

pytestmark = pytest.mark.kafka


@pytest.fixture(autouse=True)
def _no_cached_readers() -> Iterator[None]:
    """The readers this process cached (one per partition, as in a Spark worker) closed after each test."""
    yield
    kafka_source.close_clients()


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for value in values:
            producer.send(topic, value=value, partition=0)
        producer.flush()
    finally:
        producer.close()


def _offsets(part: KafkaOffsetRange) -> list[int]:
    return [offset for batch in read_offset_range(part) for offset in batch.column("offset").to_pylist()]


def _read(bootstrap: str, topic: str, start: int, end: int, timeout_ms: int = 20_000) -> list[tuple[int, bytes]]:
    rows = [row for batch in read_offset_range(KafkaOffsetRange(bootstrap, topic, 0, start, end, timeout_ms))
            for row in batch.to_pylist()]
    assert all(row["topic"] == topic and row["partition"] == 0 and row["timestamp"] is not None for row in rows)
    return [(row["offset"], row["value"]) for row in rows]


def test_consecutive_and_repeated_ranges_read_exactly_their_records(
        kafka_bootstrap: str, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("t")
    create_topics(kafka_bootstrap, [(topic, 1, False)])
    _produce(kafka_bootstrap, topic, [f"v{i}".encode() for i in range(30)])
    # Consecutive ranges continue from what the worker's consumer fetched ahead; a retried or earlier range seeks.
    for start, end in [(0, 7), (7, 20), (20, 30), (5, 9), (9, 10)]:
        assert _read(kafka_bootstrap, topic, start, end) == [(i, f"v{i}".encode()) for i in range(start, end)]


def test_a_readers_fetch_asks_for_about_the_bytes_left_in_its_range(
        kafka_bootstrap: str, unique_topic: Callable[[str], str]) -> None:
    """Once it has read records, a reader's fetch asks for about the rest of its range: a fetch with Kafka's 50 MiB
    limit makes the embedded broker list the partition again and again while records keep coming."""
    topic = unique_topic("budget")
    create_topics(kafka_bootstrap, [(topic, 1, False)])
    _produce(kafka_bootstrap, topic, [bytes([65 + i % 26]) * 500 for i in range(200)])
    with FetchRecorder(kafka_bootstrap) as proxy:
        for start, end in [(0, 20), (100, 150)]:
            assert _offsets(KafkaOffsetRange(proxy.bootstrap_servers, topic, 0, start, end, 20_000)) == list(
                range(start, end))
    asked = [fetch.request_max_bytes for fetch in proxy.fetches if fetch.fetch_offset == 100]
    assert asked and all(50 * 500 < max_bytes < 50 * 500 * 1.5 for max_bytes in asked)


def test_a_task_sends_every_range_s_first_fetch_before_it_reads_the_first(
        tansu_bootstrap: str, unique_topic: Callable[[str], str]) -> None:
    """A task reads its ranges one after the other, but the broker gets all their fetches at once. On Tansu, where a
    fetch lists the partition's batches and takes its time. On Apache Kafka a new reader's first poll goes to its
    connection and to validating the position it was given (OffsetForLeaderEpoch) and its fetch follows in `read`:
    Kafka answers a fetch from its index at once, so nothing is gained there by sending it sooner."""
    topic = unique_topic("task")
    create_topics(tansu_bootstrap, [(topic, 3, False)])
    producer = KafkaProducer(bootstrap_servers=tansu_bootstrap, acks="all")
    for partition in range(3):
        for i in range(10):
            producer.send(topic, value=f"{partition}-{i}".encode(), partition=partition)
    producer.close()
    with FetchRecorder(tansu_bootstrap) as proxy:
        batches = read_ranges(KafkaRanges(tuple(KafkaOffsetRange(proxy.bootstrap_servers, topic, partition, 2, 9,
                                                                 20_000) for partition in range(3))))
        first = next(batches)
        assert {fetch.partition for fetch in proxy.fetches} == {0, 1, 2}
        rows = [row for batch in [first, *batches] for row in batch.to_pylist()]
    assert [(row["partition"], row["offset"], row["value"]) for row in rows] == [
        (partition, offset, f"{partition}-{offset}".encode()) for partition in range(3) for offset in range(2, 9)]


def test_a_consumer_that_cannot_bootstrap_leaves_no_thread_behind() -> None:
    """A worker retries a task whose reader found no broker: each failed reader must not leave its network thread."""
    threads_before = set(threading.enumerate())
    for _ in range(3):
        with pytest.raises(KafkaError):
            Consumer(bootstrap_servers=f"127.0.0.1:{free_loopback_port()}", bootstrap_timeout_ms=200)
    assert kafka_network_threads_since(threads_before) == []


@pytest.fixture
def trickle(kafka_bootstrap: str, unique_topic: Callable[[str], str]) -> Iterator[str]:
    """A topic that gets one record every 100 ms for 30 s (or until the test ends)."""
    topic = unique_topic("trickle")
    create_topics(kafka_bootstrap, [(topic, 1, False)])
    stop = threading.Event()

    def drip() -> None:
        producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=0)
        deadline = time.monotonic() + 30
        while not stop.wait(0.1) and time.monotonic() < deadline:
            producer.send(topic, value=b"drop", partition=0)
        producer.close()

    thread = threading.Thread(target=drip, daemon=True)
    thread.start()
    yield topic
    stop.set()
    thread.join()


def test_a_trickle_fails_the_task_at_its_deadline(kafka_bootstrap: str, trickle: str) -> None:
    """Records keep coming, too few: the read fails when its time is up, not when they stop."""
    started = time.monotonic()
    read = 0
    with pytest.raises(RangeReadTimeout, match=r"of the 1000 records .* within pollTimeoutMs=2000 ms") as failure:
        for batch in read_offset_range(KafkaOffsetRange(kafka_bootstrap, trickle, 0, 0, 1000, 2000)):
            read += batch.num_rows
    assert 3 <= read < 1000  # it did read the trickle
    assert time.monotonic() - started < 6
    assert f"read {read} of the 1000 records" in str(failure.value)


@pytest.fixture(scope="module")
def long_log() -> Iterator[tuple[str, int]]:
    """An embedded broker whose partition holds 15,000 one-record batches: (bootstrap servers, log end offset).

    Tansu lists every batch of the partition on each fetch and answers with no records when the fetch's wait runs
    out first: 5 ms lists ~10^4 batches on a quiet machine, a few thousand on a busy one."""
    with EmbeddedBroker() as broker:
        create_topics(broker.bootstrap_servers, [("long", 1, False)])
        _, end = fill(broker, "long", 0, 15_000)
        yield broker.bootstrap_servers, end


def test_reads_the_tail_of_a_long_embedded_broker_log(long_log: tuple[str, int]) -> None:
    bootstrap, end = long_log
    offsets = [offset for offset, _ in _read(bootstrap, "long", end - 500, end)]
    assert offsets[-1] == end - 1 and offsets == sorted(set(offsets))


def test_a_fetch_wait_too_short_for_the_log_widens_until_the_broker_answers(
        long_log: tuple[str, int], caplog: pytest.LogCaptureFixture) -> None:
    """A wait like the reader's before (5 ms) froze on a long log: the broker answered every fetch with nothing."""
    bootstrap, end = long_log
    part = KafkaOffsetRange(bootstrap, "long", 0, end - 500, end, 30_000, fetch_max_wait_ms=1)
    with caplog.at_level("WARNING", logger=kafka_source.__name__):
        offsets = _offsets(part)
    assert offsets[-1] == end - 1 and offsets == sorted(set(offsets))
    assert "return nothing below the high watermark" in caplog.text and "fetch wait now 2 ms" in caplog.text


@pytest.mark.spark
def test_a_source_task_that_cannot_read_in_time_is_retried_then_fails_the_batch(
        spark: SparkSession, long_log: tuple[str, int], tmp_path: Path) -> None:
    bootstrap, _ = long_log
    # A 1 ms wait reads nothing from this log, and 300 ms are up before the reader widens it.
    records = (spark.readStream.format("coordinator_kafka").option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", "long").option("startingOffsets", "latest")
               .option("pollTimeoutMs", "300").option("fetchMaxWaitMs", "1").load())
    query = (records.writeStream.format("noop").option("checkpointLocation", str(tmp_path))
             .trigger(processingTime="200 milliseconds").start())
    try:
        deadline = time.monotonic() + 120
        while query.lastProgress is None and time.monotonic() < deadline:
            time.sleep(0.2)
        _produce(bootstrap, "long", [b"late"] * 50)  # the next micro-batch's range
        with pytest.raises(StreamingQueryException, match=r"RangeReadTimeout: coordinator_kafka: read 0 of the 50"):
            query.awaitTermination(timeout=120)
        tracker = spark.sparkContext.statusTracker()
        stages = [tracker.getStageInfo(stage) for job in tracker.getJobIdsForGroup(str(query.runId))
                  for stage in tracker.getJobInfo(job).stageIds]
        assert [stage.numFailedTasks for stage in stages if stage.numFailedTasks] == [4]  # local[2,4]: 4 attempts
    finally:
        query.stop()
