"""A real Kafka consumer process (kafka-python, librdkafka or the Java client) that reports what it does as JSON lines.

    python -m chaos_harness.real_consumer --library confluent --bootstrap-servers HOST:PORT --group G \\
        --topic T [--instance-id I] [--session-timeout-ms MS]

The Java consumer (kafka-clients 4.4, the classic protocol) is jvm/'s coordinator.jvm.ChaosConsumer, with the same
options and events; `ConsumerProcess("java", ...)` starts it.

It subscribes to one topic, and in a loop polls, prints the records it got, and commits them
synchronously. Every line on stdout is one event: `assigned` / `revoked` (partition lists), `records`
([partition, offset] pairs), `committed` ({partition: next offset}), `stopped`; each with `t` (wall
clock, seconds) and `instance`. SIGTERM or SIGINT stops it after the current batch is committed, then
the consumer is closed (no library sends LeaveGroup for a static member; each does for a dynamic one). Used by
the gateway's real-client tests, demo and chaos runs, which judge the group from these lines and from the
coordinator. What a process writes on stderr (its library's log: the Java client's at WARN) is kept as its `log`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, cast

from kafka_jvm.build import missing_tools

from .event_process import EventProcess

LIBRARIES = ("kafka-python", "confluent", "java")
JAVA_CONSUMER = "coordinator.jvm.ChaosConsumer"
# A small client JVM that starts fast (C1 only: a bounced member is back within its session).
JAVA_OPTIONS = ["-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]


def heartbeat_interval_ms(session_timeout_ms: int) -> int:
    """A fifth of the session, at most Kafka's default 3 s (both libraries' default with the default 45 s
    session): a member that misses a couple of heartbeats keeps its session, and learns of a rebalance soon."""
    return min(3_000, max(session_timeout_ms // 5, 100))


def missing_library(library: str) -> str | None:
    """What to install when `library`'s client is missing (librdkafka's is an extra, the Java client needs Java and
    Maven), None when it is there."""
    if library == "confluent" and importlib.util.find_spec("confluent_kafka") is None:
        return ("the librdkafka consumers need confluent-kafka, the `demo` extra: pip install "
                "'spark-group-coordinator[demo]' (`./dev demo` and `./dev test` install it)")
    if library == "java" and (missing := missing_tools()):
        return "the Java consumers need " + "; ".join(missing)
    return None


class Reporter:
    """Prints one JSON event a line, flushed, so that a parent process sees it at once."""

    def __init__(self, instance: str | None) -> None:
        self.instance = instance

    def __call__(self, event: str, **fields: Any) -> None:
        print(json.dumps({"event": event, "t": time.time(), "instance": self.instance, **fields}), flush=True)


def _run_kafka_python(args: argparse.Namespace, report: Reporter, stopping: list[bool]) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka.consumer.subscription_state import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            report("revoked", partitions=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned: Any) -> None:
            report("assigned", partitions=sorted(tp.partition for tp in assigned))

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap_servers, group_id=args.group, group_instance_id=args.instance_id,
        client_id=args.client_id, session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        max_poll_interval_ms=args.rebalance_timeout_ms,
        enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.subscribe([args.topic], listener=Listener())
    try:
        while not stopping[0]:
            batch = consumer.poll(timeout_ms=200)
            records = [(tp.partition, r.offset) for tp, rs in batch.items() for r in rs]
            if not records:
                continue
            report("records", records=records)
            offsets = {tp: OffsetAndMetadata(rs[-1].offset + 1, "", -1) for tp, rs in batch.items() if rs}
            consumer.commit(offsets)
            report("committed", offsets={tp.partition: o.offset for tp, o in offsets.items()})
    finally:
        consumer.close(autocommit=False)


def _run_confluent(args: argparse.Namespace, report: Reporter, stopping: list[bool]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    config = {
        "bootstrap.servers": args.bootstrap_servers, "group.id": args.group, "client.id": args.client_id,
        "session.timeout.ms": args.session_timeout_ms,
        "heartbeat.interval.ms": args.heartbeat_interval_ms,
        "max.poll.interval.ms": args.rebalance_timeout_ms, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "partition.assignment.strategy": "range",
    }
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    consumer = Consumer(config)

    def on_assign(_: Any, partitions: list[Any]) -> None:
        report("assigned", partitions=sorted(tp.partition for tp in partitions))

    def on_revoke(_: Any, partitions: list[Any]) -> None:
        report("revoked", partitions=sorted(tp.partition for tp in partitions))

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    try:
        while not stopping[0]:
            messages = [m for m in consumer.consume(num_messages=500, timeout=0.2) if m.error() is None]
            if not messages:
                continue
            records = [(int(m.partition() or 0), int(m.offset() or 0)) for m in messages]
            report("records", records=records)
            last: dict[int, int] = {}
            for partition, offset in records:
                last[partition] = max(last.get(partition, -1), offset)
            consumer.commit(offsets=[TopicPartition(args.topic, p, o + 1) for p, o in last.items()],
                            asynchronous=False)
            report("committed", offsets={p: o + 1 for p, o in last.items()})
    finally:
        consumer.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos_harness.real_consumer", description=__doc__)
    parser.add_argument("--library", choices=["kafka-python", "confluent"], required=True)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--instance-id", help="group.instance.id (static membership); absent: a dynamic member")
    parser.add_argument("--client-id", default="real-consumer")
    parser.add_argument("--session-timeout-ms", type=int, default=10_000)
    parser.add_argument("--rebalance-timeout-ms", type=int, default=20_000, help="max.poll.interval.ms")
    parser.add_argument("--heartbeat-interval-ms", type=int,
                        help="heartbeat.interval.ms (default: heartbeat_interval_ms of the session)")
    args = parser.parse_args(argv)
    if args.heartbeat_interval_ms is None:
        args.heartbeat_interval_ms = heartbeat_interval_ms(args.session_timeout_ms)
    report = Reporter(args.instance_id)
    stopping = [False]

    def stop(*_: Any) -> None:
        stopping[0] = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    report("started", library=args.library)
    run = _run_kafka_python if args.library == "kafka-python" else _run_confluent
    run(args, report, stopping)
    report("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())


class ConsumerProcess(EventProcess):
    """The parent's handle on one real consumer process (`library` one of LIBRARIES): its events as they come, its
    log, stop, kill."""

    def __init__(self, library: str, bootstrap_servers: str, group: str, topic: str, instance_id: str | None = None,
                 *, session_timeout_ms: int = 10_000, rebalance_timeout_ms: int = 20_000,
                 client_id: str = "real-consumer") -> None:
        if missing := missing_library(library):  # said here: the child's failure would only show as silence
            raise RuntimeError(missing)
        self.library, self.instance_id = library, instance_id
        options = ["--bootstrap-servers", bootstrap_servers, "--group", group, "--topic", topic,
                   "--client-id", client_id, "--session-timeout-ms", str(session_timeout_ms),
                   "--rebalance-timeout-ms", str(rebalance_timeout_ms),
                   "--heartbeat-interval-ms", str(heartbeat_interval_ms(session_timeout_ms))]
        if instance_id is not None:
            options += ["--instance-id", instance_id]
        self.started = time.time()
        self.log: list[str] = []  # stderr, a line each
        if library == "java":
            from kafka_jvm.cluster import run_java  # here: the Python consumer processes import this module

            process = cast("subprocess.Popen[str]", run_java(
                JAVA_CONSUMER, *options, jvm_options=JAVA_OPTIONS, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        else:
            process = subprocess.Popen(
                [sys.executable, "-m", "chaos_harness.real_consumer", "--library", library, *options],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        self._follow(process, f"consumer-{instance_id}")
        self._log_reader = threading.Thread(target=self._read_log, name=f"consumer-log-{instance_id}", daemon=True)
        self._log_reader.start()
        self._readers.append(self._log_reader)

    def _read_log(self) -> None:
        assert self._process.stderr is not None
        for line in self._process.stderr:
            self.log.append(line.rstrip("\n"))

    def assignment(self) -> list[int] | None:
        """The partitions of the latest `assigned` event after the latest `revoked`, None before any."""
        current = None
        for event in list(self.events):
            if event["event"] == "assigned":
                current = list(event["partitions"])
            elif event["event"] == "revoked":
                current = None
        return current

    def records(self) -> list[tuple[int, int]]:
        return [(p, o) for e in list(self.events) if e["event"] == "records" for p, o in e["records"]]
