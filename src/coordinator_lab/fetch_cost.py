"""Fetch cost against log size, per fetch setting, on the embedded broker: printed, never asserted.

`python -m coordinator_lab.fetch_cost` fills one partition of a fresh embedded Tansu broker in steps with
one-record batches (as a load of many small clients writes them), and at each step, for each fetch setting,
times with kafka-python:
- tail read: reading the last `--read` offsets (what a source task does every micro-batch); a read that
  does not finish within `--timeout` is a stall (the figure then is how many records it got);
- end fetch: one fetch at the log end with no new data (what the planner's offset lookup and a
  consumer's prefetch after its last record cost).

The batches are written by Tansu's own `perf` producer (kafka-python writes ~800 batches/s, too slow to
fill 10^5-10^6). Its batches claim one offset more than they hold (`last_offset_delta` = batch size), so a
one-record batch spans two offsets; Tansu's fetch walks past such a batch only when a well-formed batch
follows, so each step ends with one kafka-python record.

Tansu's in-memory store lists every stored batch of the partition on each fetch and stops listing when
the fetch's `max_wait_ms` has passed, returning no records if it had not reached the fetch offset by then.
Apache Kafka answers a fetch as soon as `fetch_min_bytes` are there (its index lookup does not grow with the
log), and waits `fetch_max_wait_ms` only at the log end.

`--under-load` measures the source's own read path instead (`coordinator_job.kafka_source`: its planner's end offset
lookups, then, `--read-delay-ms` later, its readers over each partition's new range, every `--trigger-ms`, one after
the other in this process),
on `--partitions` partitions filled to each `--batches` size, while a librdkafka producer writes `--rate` records a
second across them in `--linger-ms` batches (as the live benchmark's load does): the broker's CPU per micro-batch, and
the lookup's and the reads' times. A Tansu fetch below the high watermark lists every batch of the partition, and
lists again for records that arrived meanwhile, as long as its byte limit lasts: what the source asks for decides how
often that happens.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from coordinator_job.broker import (
    READER_FETCH_MAX_WAIT_MS,
    Consumer,
    EmbeddedBroker,
    EndOffsetLookups,
    create_topics,
    log_end_offsets,
)

from .measuring import process_cpu_seconds

TOPIC = "fetch-cost"
PERF_OFFSETS_PER_BATCH = 2  # a one-record batch of Tansu's perf producer spans two offsets
# Named kafka-python consumer settings; the defaults are kafka-python's (fetch_min_bytes 1, fetch_max_bytes
# 50 MiB, max_partition_fetch_bytes 1 MiB, fetch_max_wait_ms 500).
SETTINGS: dict[str, dict[str, int]] = {
    "wait 5 ms": {"fetch_max_wait_ms": 5},
    "wait 100 ms": {"fetch_max_wait_ms": 100},
    "wait 500 ms": {"fetch_max_wait_ms": 500},
    "wait 5 ms, min 64 KiB": {"fetch_max_wait_ms": 5, "fetch_min_bytes": 65536},
    "wait 500 ms, partition 64 KiB": {"fetch_max_wait_ms": 500, "max_partition_fetch_bytes": 65536},
}


def fill(broker: EmbeddedBroker, topic: str, partition: int, batches: int, record_bytes: int = 200) -> tuple[int, int]:
    """Appends one-record batches to the partition until it holds at least `batches`: (batches, log end offset)."""
    planner = Consumer(bootstrap_servers=broker.bootstrap_servers, fetch_max_wait_ms=5)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=1)
    try:
        end = log_end_offsets(planner, topic)[str(partition)]
        while end // PERF_OFFSETS_PER_BATCH < batches:
            # The perf producer runs for a duration: short runs (it writes ~5,000 batches/s), overshooting little.
            seconds = max(1, min(10, (batches - end // PERF_OFFSETS_PER_BATCH) // 10_000))
            subprocess.run([str(broker.binary), "perf", "--broker", f"tcp://{broker.bootstrap_servers}", topic,
                            "produce", "--partition", str(partition), "--batch-size", "1",
                            "--record-size", str(record_bytes), "--producers", "4", "--duration", f"{seconds}s"],
                           check=True, capture_output=True)
            producer.send(topic, b"x" * record_bytes, partition=partition)
            producer.flush()
            end = log_end_offsets(planner, topic, refresh_metadata=False)[str(partition)]
    finally:
        planner.close()
        producer.close()
    return end // PERF_OFFSETS_PER_BATCH, end


def _consumer(bootstrap: str, setting: Mapping[str, int], offset: int) -> tuple[KafkaConsumer, TopicPartition]:
    tp = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="none", **setting)
    consumer.assign([tp])
    consumer.seek(tp, offset)
    return consumer, tp


def tail_read(bootstrap: str, setting: Mapping[str, int], start: int, end: int, timeout_s: float) -> dict[str, Any]:
    """Reads offsets [start, end) of partition 0 with `setting`: milliseconds, polls without records, offsets read."""
    consumer, tp = _consumer(bootstrap, setting, start)
    try:
        empty = 0
        started = time.monotonic()
        while consumer.position(tp) < end and time.monotonic() - started < timeout_s:
            empty += not consumer.poll(timeout_ms=200).get(tp)
        return {"tail_read_ms": round((time.monotonic() - started) * 1000), "empty_polls": empty,
                "offsets_read": min(consumer.position(tp), end) - start, "stalled": consumer.position(tp) < end}
    finally:
        consumer.close()


def end_fetch_ms(bootstrap: str, setting: Mapping[str, int], end: int) -> float:
    """The mean duration of fetches at the log end (no new data), over a second or three of them."""
    consumer, _ = _consumer(bootstrap, setting, end)
    try:
        consumer.poll(timeout_ms=max(1000, 3 * setting.get("fetch_max_wait_ms", 500)))
        return round(float(consumer.metrics()["consumer-fetch-manager-metrics"]["fetch-latency-avg"]), 1)
    finally:
        consumer.close()


def measure(steps: Sequence[int], settings: Mapping[str, Mapping[str, int]], read: int, record_bytes: int,
            timeout_s: float) -> list[dict[str, Any]]:
    rows = []
    with EmbeddedBroker() as broker:
        create_topics(broker.bootstrap_servers, [(TOPIC, 1, False)])
        for step in steps:
            batches, end = fill(broker, TOPIC, 0, step, record_bytes)
            for name, setting in settings.items():
                row = {"batches": batches, "setting": name,
                       **tail_read(broker.bootstrap_servers, setting, end - read, end, timeout_s),
                       "end_fetch_ms": end_fetch_ms(broker.bootstrap_servers, setting, end)}
                rows.append(row)
                tail = (f"STALLED after {row['offsets_read']} of {read} offsets" if row["stalled"]
                        else f"{row['tail_read_ms']:>6} ms")
                print(f"{batches:>8} batches  {name:<30} tail read {tail:<32} polls without records "
                      f"{row['empty_polls']:>3}   end fetch {row['end_fetch_ms']:>6} ms", flush=True)
    return rows


def _steady_load(bootstrap: str, topic: str, rate: float, linger_ms: int, record_bytes: int,
                 stop: threading.Event) -> None:
    """Writes `rate` records a second, keyed at random over the partitions, until `stop`."""
    from confluent_kafka import Producer

    from coordinator_job import kafka_source

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms})
    value, started, sent = b"v" * record_bytes, time.monotonic(), 0
    while not stop.is_set():
        ahead = started + sent / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
        kafka_source.produce_queued(producer, topic, value, f"group-{random.randrange(10**6)}")
        sent += 1
    producer.flush(10)


def read_path_under_load(steps: Sequence[int], partitions: int, rate: float, linger_ms: int, record_bytes: int,
                         duration_s: float, trigger_s: float, read_delay_s: float) -> list[dict[str, Any]]:
    """The source's lookups and reads every `trigger_s` for `duration_s` at each log size of `steps`."""
    # Imported here: the CLI imports this module (for `fill`) for every command, and kafka_source imports Spark.
    from coordinator_job import kafka_source

    rows = []
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        create_topics(bootstrap, [(TOPIC, partitions, False)])
        pid = broker.pid
        for step in steps:
            for partition in range(partitions):
                fill(broker, TOPIC, partition, step, record_bytes)
            stop = threading.Event()
            load = threading.Thread(target=_steady_load, args=(bootstrap, TOPIC, rate, linger_ms, record_bytes, stop),
                                    daemon=True)
            load.start()
            planner = kafka_source.planner_consumer(bootstrap)
            lookups = EndOffsetLookups(TOPIC)
            try:
                time.sleep(2)  # the load under way
                ends = lookups.lookup(planner, refresh_metadata=True)
                lookup_s = read_s = 0.0
                micro_batches = records = 0
                cpu_before, started = process_cpu_seconds(pid), time.monotonic()
                while time.monotonic() - started < duration_s:
                    tick = time.monotonic()
                    new_ends = lookups.lookup(planner, refresh_metadata=False)
                    lookup_s += time.monotonic() - tick
                    time.sleep(read_delay_s)
                    read_started = time.monotonic()
                    for partition_id, end in new_ends.items():
                        if end > ends[partition_id]:
                            part = kafka_source.KafkaOffsetRange(bootstrap, TOPIC, int(partition_id),
                                                                 ends[partition_id], end, 60_000,
                                                                 READER_FETCH_MAX_WAIT_MS)
                            records += sum(batch.num_rows for batch in kafka_source.read_offset_range(part))
                    read_s += time.monotonic() - read_started
                    ends, micro_batches = new_ends, micro_batches + 1
                    time.sleep(max(0.0, trigger_s - (time.monotonic() - tick)))
                wall_s, broker_s = time.monotonic() - started, process_cpu_seconds(pid) - cpu_before
            finally:
                stop.set()
                load.join()
                planner.close()
                kafka_source.close_clients()
            row = {"batches": step, "micro_batches": micro_batches, "records_read_per_s": round(records / wall_s),
                   "broker_cores": round(broker_s / wall_s, 2),
                   "broker_ms_per_micro_batch": round(1000 * broker_s / micro_batches),
                   "lookup_ms": round(1000 * lookup_s / micro_batches), "read_ms": round(1000 * read_s / micro_batches)}
            rows.append(row)
            print(f"{step:>8} batches a partition: {micro_batches} micro-batches, "
                  f"{row['records_read_per_s']} records/s read; the broker {row['broker_cores']} cores, "
                  f"{row['broker_ms_per_micro_batch']} ms a micro-batch; lookup {row['lookup_ms']} ms, "
                  f"reads {row['read_ms']} ms a micro-batch", flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coordinator_lab.fetch_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", default="10000,50000,150000,300000",
                        help="log sizes to measure at, in batches of the partition (comma-separated)")
    parser.add_argument("--record-bytes", type=int, default=200, help="bytes per record")
    parser.add_argument("--read", type=int, default=1000, help="offsets read at the tail")
    parser.add_argument("--timeout", type=float, default=10, help="seconds before a tail read counts as stalled")
    parser.add_argument("--under-load", action="store_true",
                        help="measure the source's read path under a steady load instead (see above)")
    parser.add_argument("--partitions", type=int, default=3, help="--under-load: partitions (default: 3)")
    parser.add_argument("--rate", type=float, default=2000, help="--under-load: records written a second")
    parser.add_argument("--linger-ms", type=int, default=5, help="--under-load: the producer's linger.ms (default: 5)")
    parser.add_argument("--duration", type=float, default=30, help="--under-load: seconds at each log size")
    parser.add_argument("--trigger-ms", type=int, default=500, help="--under-load: micro-batch interval")
    parser.add_argument("--read-delay-ms", type=int, default=50,
                        help="--under-load: time between a lookup and the reads (a Spark task starts some tens of "
                             "ms after its micro-batch is planned: records arrive past the range meanwhile)")
    parser.add_argument("--setting", action="append", metavar="NAME:KEY=VALUE,...",
                        help="a kafka-python fetch setting to measure instead of the built-in ones (repeatable), "
                             "e.g. 'long:fetch_max_wait_ms=500,fetch_min_bytes=1'")
    args = parser.parse_args(argv)
    settings: dict[str, dict[str, int]] = dict(SETTINGS)
    if args.setting:
        settings = {}
        for item in args.setting:
            name, _, pairs = item.partition(":")
            settings[name] = {k.strip(): int(v) for k, v in (p.split("=", 1) for p in pairs.split(",") if p)}
    steps = sorted(int(s) for s in args.batches.split(","))
    if args.under_load:
        rows = read_path_under_load(steps, args.partitions, args.rate, args.linger_ms, args.record_bytes,
                                    args.duration, args.trigger_ms / 1000, args.read_delay_ms / 1000)
        print(json.dumps({"under_load": vars(args), "rows": rows}))
        return 0
    rows = measure(steps, settings, args.read, args.record_bytes, args.timeout)
    print(json.dumps({"read": args.read, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
