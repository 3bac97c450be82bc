"""The per-record cost of the job's Kafka sink and source, in one process: printed, never asserted.

`python -m coordinator_lab.sink_cost --embedded` writes `--records` responses (JSON of `--value-bytes`, keyed by
the `reply_to`s of the live load's 6,000 members, as `coordinator bench --live` at 2,000 requests/s has them) to a
fresh topic of `--partitions` partitions through the sink's `produce_batches`, then reads them back through the
source's `read_ranges` over the offset ranges the planner would hand out, `--rounds` times in a row with the same
worker-side Kafka clients (as Spark's reused Python workers keep them). Each side runs the way a Spark Python worker
runs it, Spark's conversions included:
- sink: Arrow batches of the rows (what the JVM sends; pyspark's `write_into_data_source` hands them to an Arrow
  writer as they are) -> `produce_batches` (send loop, flush);
- source: `read_ranges` of each task (pack_ranges) -> Arrow batches (pyspark's own `records_to_arrow_batches`).

It prints per round and side microseconds per record: wall time, this process's CPU time (the Kafka clients' I/O
threads included, librdkafka's among them), the CPU time of the thread running the task's code alone, the broker's
CPU time (when embedded), and the sink's split as the job's task metrics have it (upstream = waiting for the
batches, produce = the send loop, flush). The first round pays for new clients and metadata; the summary is the
mean of the others. `--profile` adds a round under cProfile and prints its functions by own time.
`--librdkafka-reader` also reads each round's records through librdkafka consumers (confluent-kafka), to compare
the CPU per record. Its latency is another matter: a source reader on librdkafka kept across tasks, tried, took
~235 ms instead of ~8 ms for a range of 30 records on the embedded broker (`--records 30`): its background fetch at
the log end, sent as soon as a range is read, is answered by Tansu only when about half its wait is over, and a
shorter wait stalls on a long Tansu log (broker.READER_FETCH_MAX_WAIT_MS).
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Sequence

import pyarrow as pa
from kafka import KafkaConsumer
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from pyspark.sql.worker.plan_data_source_read import records_to_arrow_batches

from coordinator_job import kafka_source, task_metrics
from coordinator_job.broker import (
    END_LOOKUP_SETTINGS,
    FETCH_MAX_WAIT_MS,
    READER_FETCH_MAX_WAIT_MS,
    create_topics,
    log_end_offsets,
)
from coordinator_job.file_source import source_batch
from kafka_jvm.embedded import broker_or_embedded

from .measuring import command_parser, tree_cpu_seconds

# The job's output rows (job.OUTPUT_SCHEMA) and the source's (kafka_source.READ_SCHEMA): parsing DDL needs Spark.
SINK_SCHEMA = StructType([StructField("topic", StringType()), StructField("key", StringType()),
                          StructField("value", StringType())])
SOURCE_SCHEMA = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                            StructField("topic", StringType()), StructField("partition", IntegerType()),
                            StructField("offset", LongType()), StructField("timestamp", TimestampType())])
# Spark's spark.sql.execution.arrow.maxRecordsPerBatch default: the rows per Arrow batch between JVM and worker.
ARROW_BATCH_ROWS = 10_000
# The live load at 2,000 requests/s: 600 groups of 10 static members, each its own client (and reply_to).
GROUPS, MEMBERS = 600, 10


def responses(topic: str, count: int, value_bytes: int) -> list[pa.RecordBatch]:
    """`count` response rows (topic, reply_to key, JSON value padded to `value_bytes`) as Arrow batches."""
    keys, values = [], []
    for i in range(count):
        reply_to = f"group-{i // MEMBERS % GROUPS}-c{i % MEMBERS}"
        answer = {"api": "Heartbeat", "version": 4, "correlation_id": 100_000 + i, "reply_to": reply_to,
                  "timestamp_ms": 1_790_000_000_000 + i, "body": {"throttle_time_ms": 0, "error_code": 0}}
        text = json.dumps(answer, separators=(",", ":"))
        keys.append(reply_to)
        values.append(text + " " * max(0, value_bytes - len(text)))
    schema = pa.schema([("topic", pa.string()), ("key", pa.string()), ("value", pa.string())])
    table = pa.table([pa.array([topic] * count), pa.array(keys), pa.array(values)], schema=schema)
    batches: list[pa.RecordBatch] = table.to_batches(max_chunksize=ARROW_BATCH_ROWS)
    return batches


class Clock:
    """Wall time, this process's CPU time, its calling thread's (without the Kafka clients' I/O threads, whose share
    varies with how busy the machine is) and the broker's (the CPU time of this process's children)."""

    def __init__(self) -> None:
        self.wall, self.cpu, self.thread = time.perf_counter(), time.process_time(), time.thread_time()
        self.tree = tree_cpu_seconds()

    def us_per(self, records: int) -> dict[str, float]:
        wall, cpu, thread = (time.perf_counter() - self.wall, time.process_time() - self.cpu,
                             time.thread_time() - self.thread)
        broker = max(0.0, tree_cpu_seconds() - self.tree - cpu)
        return {name: seconds / records * 1e6
                for name, seconds in (("wall", wall), ("cpu", cpu), ("thread_cpu", thread), ("broker_cpu", broker))}


def sink(bootstrap: str, batches: Sequence[pa.RecordBatch], records: int) -> dict[str, float]:
    metrics = task_metrics.local_task_metrics()
    clock = Clock()
    kafka_source.produce_batches(bootstrap, iter(batches), kafka_source.SinkColumns.of(SINK_SCHEMA), metrics)
    figures = clock.us_per(records)
    split = metrics.value
    for name, key in (("upstream", task_metrics.SINK_UPSTREAM_MS), ("produce", task_metrics.SINK_PRODUCE_MS),
                      ("flush", task_metrics.SINK_FLUSH_MS)):
        figures[name] = split[key] * 1000 / records
    return figures


def source(bootstrap: str, topic: str, start: dict[str, int], end: dict[str, int]) -> dict[str, float]:
    records = sum(end[p] - start.get(p, 0) for p in end)
    ranges = [kafka_source.KafkaOffsetRange(bootstrap, topic, int(p), start.get(p, 0), end[p], 60_000)
              for p in sorted(end, key=int) if end[p] > start.get(p, 0)]
    clock = Clock()
    read = 0
    for task in kafka_source.pack_ranges(ranges, kafka_source.RECORDS_PER_TASK):
        for batch in records_to_arrow_batches(kafka_source.read_ranges(task), ARROW_BATCH_ROWS, SOURCE_SCHEMA,
                                              kafka_source.KafkaDataSource({})):
            read += batch.num_rows
    if read != records:
        raise RuntimeError(f"read {read} records of {records}")
    return clock.us_per(records)


def librdkafka_read(bootstrap: str, topic: str, start: dict[str, int], end: dict[str, int]) -> dict[str, float]:
    """For comparison: the same ranges read by librdkafka consumers (confluent-kafka, in C) into the same Arrow
    batches. A consumer a partition, made and closed within the timing: a kept one fetches ahead in its own threads,
    outside of it (a bound from above: its connection and first fetch are in)."""
    from confluent_kafka import Consumer, TopicPartition

    records = sum(end[p] - start.get(p, 0) for p in end)
    clock = Clock()
    read = 0
    for p in sorted(end, key=int):
        partition, position, last = int(p), start.get(p, 0), end[p]
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sink-cost", "enable.auto.commit": False,
                             "auto.offset.reset": "error", "fetch.wait.max.ms": READER_FETCH_MAX_WAIT_MS,
                             "log_level": 4})
        consumer.assign([TopicPartition(topic, partition, position)])
        keys, values, offsets, stamps = [], [], [], []
        deadline = time.monotonic() + 60
        while position < last and time.monotonic() < deadline:
            for message in consumer.consume(last - position, 0.2):
                offset = message.offset()
                if message.error() is not None or offset is None:
                    raise RuntimeError(f"librdkafka: {message.error()}")
                if offset >= last:
                    break
                keys.append(message.key())
                values.append(message.value())
                offsets.append(offset)
                stamps.append(message.timestamp()[1] * 1000)
                position = offset + 1
        consumer.close()
        read += source_batch(keys, values, topic, partition, offsets, stamps).num_rows
    if read != records:
        raise RuntimeError(f"librdkafka read {read} records of {records}")
    return clock.us_per(records)


def _profiled(run: Callable[[], dict[str, float]], top: int) -> dict[str, float]:
    profile = cProfile.Profile()
    figures = profile.runcall(run)
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(top)
    print(out.getvalue())
    return figures


def _line(side: str, label: str, figures: dict[str, float]) -> str:
    return f"{side:<7} {label:<9} " + "  ".join(f"{name} {value:6.1f}" for name, value in figures.items())


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser("coordinator_lab.sink_cost", __doc__,
                            "start an embedded broker (Apache Kafka 4.4; Tansu without Maven)",
                            "an existing broker (a fresh topic is created on it)")
    parser.add_argument("--records", type=int, default=20_000, help="records per round")
    parser.add_argument("--value-bytes", type=int, default=300, help="bytes per response value")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of the topic")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (the first one is not in the summary)")
    parser.add_argument("--profile", action="store_true", help="one more round under cProfile, printed")
    parser.add_argument("--top", type=int, default=25, help="functions printed per profile")
    parser.add_argument("--librdkafka-reader", action="store_true",
                        help="also read the records back through librdkafka consumers (confluent-kafka), to compare")
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (the first round is not in the summary)")

    with broker_or_embedded(args.bootstrap_servers) as bootstrap:
        topic = f"sink-cost-{os.getpid()}-{int(time.time())}"
        create_topics(bootstrap, [(topic, args.partitions, False)])
        batches = responses(topic, args.records, args.value_bytes)
        planner = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                fetch_max_wait_ms=FETCH_MAX_WAIT_MS, **END_LOOKUP_SETTINGS)
        results: dict[str, list[dict[str, float]]] = {"sink": [], "source": [], "rdkafka": []}

        def round_trip(profile: bool) -> tuple[dict[str, float], dict[str, float]]:
            start = log_end_offsets(planner, topic)
            wrote = sink(bootstrap, batches, args.records) if not profile else _profiled(
                lambda: sink(bootstrap, batches, args.records), args.top)
            end = log_end_offsets(planner, topic, refresh_metadata=False)
            wrote_records = sum(end.values()) - sum(start.values())
            if wrote_records != args.records:
                raise RuntimeError(f"the sink wrote {wrote_records} of {args.records} records")
            read = source(bootstrap, topic, start, end) if not profile else _profiled(
                lambda: source(bootstrap, topic, start, end), args.top)
            if args.librdkafka_reader and not profile:
                results["rdkafka"].append(librdkafka_read(bootstrap, topic, start, end))
            return wrote, read

        print(f"{args.records} records of {args.value_bytes} bytes, {args.partitions} partitions, "
              f"microseconds per record", flush=True)
        try:
            for n in range(args.rounds):
                wrote, read = round_trip(profile=False)
                print(_line("sink", f"round {n + 1}", wrote), flush=True)
                print(_line("source", f"round {n + 1}", read), flush=True)
                if args.librdkafka_reader:
                    print(_line("rdkafka", f"round {n + 1}", results["rdkafka"][-1]), flush=True)
                if n:
                    results["sink"].append(wrote)
                    results["source"].append(read)
                else:
                    results["rdkafka"].clear()
            summary = {side: {name: round(statistics.fmean(r[name] for r in rounds), 1) for name in rounds[0]}
                       for side, rounds in results.items() if rounds}
            for side, figures in summary.items():
                print(_line(side, "mean", figures))
            if args.profile:
                round_trip(profile=True)
        finally:
            planner.close()
    print(json.dumps({"records": args.records, "value_bytes": args.value_bytes, "partitions": args.partitions,
                      "us_per_record": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
