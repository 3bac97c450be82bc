"""The live job under a steady load, measured as a user feels it: the one code path of `coordinator soak` and
`coordinator bench --live`.

Static groups of `members` join and sync, then every member heartbeats every 3 s, written straight to the request
topic with kafka-python at `rate` requests per second, each answer timed from its request's send to its read. First
the job runs idle for `idle_s` (ticks only: what an almost empty micro-batch costs). A status line shows every
second the requests sent and unanswered (and how old the oldest is), the job's lag (request records not yet read by
a finished micro-batch), the last micro-batch's time and the latency of the last second. At the end the load stops,
the job gets `drain_s` to answer the rest and read every record written so far. The figures: latency p50/p90/p99/max,
unanswered, lag, batch times and the per-batch breakdown (coordinator_job.task_metrics) idle and under load.

`warm_up_s` runs the job on ticks alone, unmeasured, before anything else: the JVM compiles Spark's code paths for
a minute or two after it starts (its JIT compiler took half a core and idle batches ~490 ms in the first minute, 15%
and ~300 ms after 90 s), so a long-running deployment's figures need it.

`prefill_batches` N starts the job on a request log that already holds N one-record batches per partition (as after
a long run; the job starts at the log end), to see a long run's fetch costs without waiting for them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coordinator_job.broker import EmbeddedBroker
from coordinator_state.envelope import API, Api, ResponseKey, response_key, routing_group_id
from kafka_jvm.embedded import BROKER_KINDS, embedded_broker

from .fetch_cost import fill
from .measuring import ProgressLog, log, percentile, tree_cpu_seconds
from .traffic_gen import HEARTBEAT_INTERVAL_MS, heartbeat_request, join_request, sync_request

# Heartbeats from this correlation id on are the measured ones (those sent during the set-up are not).
MEASURED_CORRELATION = 100_000
# Live members' session and rebalance timeouts: generous, so that a slow set-up on a loaded machine expires no one
# (a member that has not synced within the rebalance timeout after its join answer is removed).
LIVE_SESSION_TIMEOUT_MS = 120_000
# The first micro-batches start the Python workers and warm the JVM: not what a batch costs.
WARM_UP_BATCHES = 3
# A job that finished no micro-batch for this long while requests wait is reported as stalled.
STALL_S = 30.0
# How long the load's producer batches requests by default: Kafka's producer default since 4.0 (KIP-1030).
PRODUCER_LINGER_MS = 5


class LiveLoad:
    """Static members on the embedded broker: join, sync, then heartbeats at `rate` per second; answers timed.

    Static only: a dynamic member's second join waits for its first answer, so on a slow job it arrives after
    the initial rebalance and starts another, which this simple client would have to follow."""

    def __init__(self, settings: Mapping[str, Any], groups: int, members: int,
                 linger_ms: int = PRODUCER_LINGER_MS) -> None:
        # Imported here: the CLI imports this module for every command.
        from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

        from coordinator_job.kafka_source import produce_queued

        self.settings = settings
        self.groups = groups
        self.members = members
        bootstrap = settings["bootstrap.servers"]
        self.requests_topic = str(settings["coordinator.requests.topic"])
        # The load's clients are librdkafka's (the C client under confluent-kafka and most non-Java clients): the
        # machine's cores are the job's to use; kafka-python's pure-Python clients cost the load several times more
        # CPU per request. Keys are placed as the Java client and kafka-python place them (murmur2).
        # Batched for `linger_ms` (LoadPlan): on Tansu every batch is one more object its fetches list (broker.py).
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "acks": 1,
                                  "partitioner": "murmur2_random", "client.id": "bench-load"})
        self._produce = produce_queued
        # A short wait: Tansu checks for new records at the log end after half the wait, then half the rest, ...
        # so the wait bounds how late an answer is seen; it is also the time Tansu's fetch may take to list the
        # response log's batches (coordinator_lab.fetch_cost), which the sink writes few and large.
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-answers",
                                  "enable.auto.commit": False, "fetch.wait.max.ms": 50, "client.id": "bench-answers"})
        topic = str(settings["coordinator.responses.topic"])
        partitions = sorted(self.consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        # From each partition's end: answers written before the load are not its.
        self.consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in partitions])
        self.sent: dict[ResponseKey, float] = {}
        self.written: dict[str, int] = {}  # partition -> offset after the load's last acknowledged record
        self.latencies_ms: list[float] = []
        self.heartbeat_errors: dict[str, int] = {}  # error code -> measured heartbeats answered with it
        self.answers: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read, name="bench-answers", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            messages = self.consumer.consume(num_messages=1000, timeout=0.05)
            now = time.monotonic()
            for message in messages:
                value = message.value()
                if message.error() is not None or value is None:
                    continue
                answer = json.loads(value)
                key = response_key(answer)
                with self.lock:
                    sent = None if key is None else self.sent.pop(key, None)
                    if (sent is not None and key is not None and answer.get(API) == Api.HEARTBEAT
                            and key[1] >= MEASURED_CORRELATION):
                        self.latencies_ms.append((now - sent) * 1000)
                        error = answer["body"].get("error_code", 0)
                        if error:  # a session lost or a rebalance: a static member's bounce-free run has none
                            self.heartbeat_errors[str(error)] = self.heartbeat_errors.get(str(error), 0) + 1
                    self.answers.append(answer)

    def send(self, request: dict[str, Any]) -> None:
        key = response_key(request)
        if key is not None:
            with self.lock:
                self.sent[key] = time.monotonic()
        group = routing_group_id(request) or ""
        self._produce(self.producer, self.requests_topic, json.dumps(request).encode(), group.encode(),
                      on_delivery=self._acknowledged)
        self.producer.poll(0)  # delivery callbacks

    def _acknowledged(self, error: Any, message: Any) -> None:
        if error is not None:
            raise RuntimeError(f"the load's request was not written: {error}")
        partition = str(message.partition())
        with self.lock:
            self.written[partition] = max(self.written.get(partition, 0), message.offset() + 1)

    def written_ends(self) -> dict[str, int]:
        """Per request partition, the offset after the load's last acknowledged record."""
        with self.lock:
            return dict(self.written)

    def take_answers(self) -> list[dict[str, Any]]:
        with self.lock:
            answers, self.answers = self.answers, []
        return answers

    def set_up(self, timeout_s: float) -> dict[str, dict[int, dict[str, Any]]]:
        """Joins every member (dynamic ones twice), syncs each group once all its members joined, and keeps the
        synced members heartbeating meanwhile (as clients do); returns group -> member -> join answer."""
        names = [f"group-{g}" for g in range(self.groups)]
        for group in names:
            for member in range(self.members):
                self.send(join_request(group, member, "", None, 1, dynamic=False,
                                       session_timeout_ms=LIVE_SESSION_TIMEOUT_MS,
                                       rebalance_timeout_ms=LIVE_SESSION_TIMEOUT_MS))
        self.producer.flush()
        joined: dict[str, dict[int, dict[str, Any]]] = {}
        synced: dict[str, int] = {}
        deadline = time.monotonic() + timeout_s
        last_beat = time.monotonic()
        correlation = 1000
        last_log = time.monotonic()
        while sum(synced.values()) < self.groups * self.members:
            if time.monotonic() - last_log > 5:
                last_log = time.monotonic()
                log(f"live set-up: {sum(map(len, joined.values()))} joined, {sum(synced.values())} synced")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{sum(map(len, joined.values()))} joined, {sum(synced.values())} synced of "
                                   f"{self.groups * self.members} members within {timeout_s:.0f} s")
            time.sleep(0.05)
            for answer in self.take_answers():
                body, client = answer["body"], str(answer["reply_to"])
                group, member = str(answer["group_id"]), int(client.rsplit("-c", 1)[1])
                if answer["api"] == "Heartbeat":
                    continue
                if answer["api"] == "SyncGroup":
                    if body["error_code"] != 0:
                        raise RuntimeError(f"sync refused: {answer}")
                    synced[group] = synced.get(group, 0) + 1
                elif body["error_code"] == 0:
                    joined.setdefault(group, {})[member] = body
                    if len(joined[group]) == self.members:
                        self._sync(group, joined[group])
                else:
                    raise RuntimeError(f"join refused: {answer}")
            if time.monotonic() - last_beat > HEARTBEAT_INTERVAL_MS / 1000:
                last_beat = time.monotonic()
                correlation += 1
                for group in synced:
                    for member, body in joined[group].items():
                        self.send(heartbeat_request(group, member, body["member_id"], body["generation_id"], None,
                                                    correlation, dynamic=False))
            self.producer.flush()
        return joined

    def _sync(self, group: str, bodies: dict[int, dict[str, Any]]) -> None:
        leader = next(m for m, b in bodies.items() if b["leader"] == b["member_id"])
        for member in [leader, *[m for m in bodies if m != leader]]:
            body = bodies[member]
            assignments = [b["member_id"] for b in bodies.values()] if member == leader else []
            self.send(sync_request(group, member, body["member_id"], body["generation_id"], assignments, None, 3,
                                   dynamic=False))

    def heartbeats(self, joined: dict[str, dict[int, dict[str, Any]]], rate: float, duration_s: float,
                   report: Callable[[int], None] | None = None) -> int:
        """Sends heartbeats round-robin over the members at `rate` per second for `duration_s`; returns how many.

        `report`, if given, is called with the count sent so far about once a second (else a log line every 5 s)."""
        members = [(g, m, b) for g, bodies in joined.items() for m, b in bodies.items()]
        sent = 0
        correlation = MEASURED_CORRELATION
        started = time.monotonic()
        last_log = 0.0
        while True:
            elapsed = time.monotonic() - started
            if elapsed >= duration_s:
                break
            if report is not None and elapsed - last_log >= 1:
                last_log = elapsed
                report(sent)
            elif report is None and elapsed - last_log > 5:
                last_log = elapsed
                log(f"live load: {sent} heartbeats sent, {len(self.latencies_ms)} answered")
            due = int(elapsed * rate)
            while sent < due:
                group, member, body = members[sent % len(members)]
                if sent % len(members) == 0:
                    correlation += 1
                self.send(heartbeat_request(group, member, body["member_id"], body["generation_id"], None,
                                            correlation, dynamic=False))
                sent += 1
            time.sleep(0.002)
        self.producer.flush()
        return sent

    def close(self) -> None:
        self._stop.set()
        self._reader.join()
        self.producer.flush()
        self.consumer.close()




@dataclass
class Soak:
    """What the status line and the figures are made of, updated once a second."""

    load: LiveLoad
    progress: ProgressLog
    started: float = field(default_factory=time.monotonic)
    lags: list[int] = field(default_factory=list)
    seen_latencies: int = 0
    last_batch_at: float = field(default_factory=time.monotonic)
    batches_seen: int = 0
    longest_gap_s: float = 0.0

    def lag(self, ends: Mapping[str, int] | None = None) -> int:
        """Request records below `ends` (default: the load's last acknowledged ones) not yet read by a finished
        micro-batch. From the producer's acknowledgements, not the broker: on Tansu an offset lookup lists every
        batch of the partition, so probing every second cost the broker as much as the job's own planning."""
        reports = self.progress.since(max(0, self.progress.mark() - 1))
        if not reports:
            return -1
        read = reports[-1]["sources"][0]["endOffset"] or {}
        read = json.loads(read) if isinstance(read, str) else read
        ends = self.load.written_ends() if ends is None else ends
        return sum(max(0, end - int(read.get(p, 0))) for p, end in ends.items())

    def unanswered(self) -> tuple[int, float]:
        """Requests without an answer, and the age of the oldest in seconds."""
        with self.load.lock:
            pending = list(self.load.sent.values())
        return len(pending), (time.monotonic() - min(pending)) if pending else 0.0

    def status(self, sent: int) -> str:
        batches = self.progress.mark()
        now = time.monotonic()
        if batches > self.batches_seen:
            self.batches_seen, self.last_batch_at = batches, now
        self.longest_gap_s = max(self.longest_gap_s, now - self.last_batch_at)
        lag = self.lag()
        self.lags.append(lag)
        with self.load.lock:
            recent = self.load.latencies_ms[self.seen_latencies:]
            self.seen_latencies = len(self.load.latencies_ms)
        pending, oldest_s = self.unanswered()
        last = self.progress.since(max(0, batches - 1))
        batch_ms = last[-1]["durationMs"].get("triggerExecution") if last else None
        p50, p99 = percentile(recent, 50), percentile(recent, 99)
        stalled = "  STALLED" if now - self.last_batch_at > STALL_S and pending else ""
        return (f"sent {sent:,}  unanswered {pending:,} (oldest {oldest_s:.1f} s)  lag {lag:,}  "
                f"batch {batch_ms or 0:,.0f} ms  last 1 s p50/p99 {_seconds(p50)}/{_seconds(p99)}{stalled}")


def _seconds(ms: float | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.2f} s"


@contextmanager
def _broker(plan: LoadPlan) -> Iterator[tuple[str | None, EmbeddedBroker | None, str]]:
    """The given broker, else an embedded one (Tansu for a prefill, which writes with Tansu's own producer): its
    address, the Tansu broker to prefill, and which broker it is."""
    if plan.bootstrap_servers:
        yield plan.bootstrap_servers, None, plan.bootstrap_servers
    elif plan.prefill_batches:
        with EmbeddedBroker() as tansu:
            yield tansu.bootstrap_servers, tansu, "Tansu"
    else:
        with embedded_broker(plan.broker) as broker:
            yield broker.bootstrap_servers, None, broker.description


def _load_average() -> list[float]:
    return [round(x, 1) for x in os.getloadavg()]


def add_broker_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--broker", choices=BROKER_KINDS, default=None,
                        help="the embedded broker: kafka (Apache Kafka 4.4) or tansu (the in-memory stand-in); "
                             "default: kafka where Java and Maven are present")


def add_linger_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--linger-ms", type=int, default=PRODUCER_LINGER_MS, metavar="MS",
                        help="how long the load's producer batches requests (its linger.ms; default: "
                             f"{PRODUCER_LINGER_MS}, Kafka's producer default); on the embedded broker fewer, larger "
                             "batches make every fetch cheaper")


@dataclass(frozen=True)
class LoadPlan:
    """What `run_live_load` offers: see the module docstring."""

    rate: float
    duration_s: float
    members: int = 10
    drain_s: float = 60
    idle_s: float = 0
    warm_up_s: float = 0
    prefill_batches: int = 0
    linger_ms: int = PRODUCER_LINGER_MS
    master: str = "local[2]"
    bootstrap_servers: str | None = None
    broker: str | None = None  # the embedded broker's kind (kafka_jvm.embedded), when no bootstrap_servers


def run_live_load(settings: Mapping[str, Any], plan: LoadPlan, show: Callable[[str], None]) -> dict[str, Any]:
    """Runs the job under the load of the module docstring; `show` gets the status line once a second. Returns the
    figures."""
    from coordinator_job.live_job import LiveJob, ensure_topics
    from coordinator_job.spark_session import build_session

    # Enough members that each heartbeats every HEARTBEAT_INTERVAL_MS at the offered rate, as real consumers do.
    groups = max(1, math.ceil(plan.rate * HEARTBEAT_INTERVAL_MS / 1000 / plan.members))
    figures: dict[str, Any] = {"load_average_before": _load_average()}
    with _broker(plan) as (bootstrap, tansu, broker_name), \
            tempfile.TemporaryDirectory(prefix="live-load-") as checkpoint:
        live = {**settings, "bootstrap.servers": bootstrap}
        figures["broker"] = broker_name
        topic = str(live["coordinator.requests.topic"])
        if plan.prefill_batches:
            if tansu is None:
                raise ValueError("--prefill-batches needs the embedded broker (it writes with Tansu's own producer)")
            ensure_topics(live)
            for partition in range(int(live["coordinator.requests.partitions"])):
                log(f"live load: prefilling {topic}-{partition} with {plan.prefill_batches:,} batches")
                fill(tansu, topic, partition, plan.prefill_batches)
            live["coordinator.starting.offsets"] = "latest"
        spark = build_session(live, plan.master, app_name="coordinator-live-load")
        progress = ProgressLog()
        progress.attach(spark)
        job = LiveJob(spark, live, Path(checkpoint))
        load: LiveLoad | None = None
        try:
            job.start()
            job.wait_ready(300)
            progress.await_reports(WARM_UP_BATCHES, timeout_s=300)
            if plan.warm_up_s > 0:
                log(f"live load: {plan.warm_up_s:.0f} s of ticks to warm the JVM up (not measured)")
                time.sleep(plan.warm_up_s)
            if plan.idle_s > 0:
                log(f"live load: {plan.idle_s:.0f} s idle (ticks only)")
                figures["idle"] = _measured(job, progress, lambda: time.sleep(plan.idle_s))
            load = LiveLoad(live, groups, plan.members, plan.linger_ms)
            log(f"live load: {groups} groups x {plan.members} members join and sync")
            set_up_started = time.monotonic()
            joined = load.set_up(timeout_s=300)
            figures["setup_s"] = round(time.monotonic() - set_up_started, 1)
            soak = Soak(load, progress)
            log(f"live load: {plan.rate:,.0f} requests/s for {plan.duration_s:,.0f} s")
            sent = 0

            def offer() -> None:
                nonlocal sent
                sent = load.heartbeats(joined, plan.rate, plan.duration_s, report=lambda n: show(soak.status(n)))

            figures["under_load"] = _measured(job, progress, offer)
            # Drained: every request answered and every record written until now read by a finished micro-batch
            # (the tick writer goes on writing; its later ticks are not the load's).
            load_end = load.written_ends()
            deadline = time.monotonic() + plan.drain_s
            while time.monotonic() < deadline and (soak.unanswered()[0] or soak.lag(load_end)):
                show(soak.status(sent))
                time.sleep(1)
            pending, oldest_s = soak.unanswered()
            final_lag = soak.lag(load_end)
        finally:
            if load is not None:
                load.close()
            job.close()
            spark.stop()
    latencies = load.latencies_ms
    figures.update({
        "offered_requests_per_s": plan.rate, "duration_s": plan.duration_s, "groups": groups,
        "members": groups * plan.members, "prefill_batches": plan.prefill_batches,
        "heartbeats_sent": sent, "heartbeats_answered": len(latencies), "unanswered": pending,
        "heartbeat_errors": load.heartbeat_errors,
        "oldest_unanswered_s": round(oldest_s, 1),
        "latency_ms_p50": percentile(latencies, 50), "latency_ms_p90": percentile(latencies, 90),
        "latency_ms_p99": percentile(latencies, 99), "latency_ms_max": max(latencies, default=None),
        "longest_s_without_a_batch": round(soak.longest_gap_s, 1), "lag_max": max(soak.lags, default=None),
        "lag_unread_after_drain": final_lag, "job_failures": job.failures(),
        "fetch_max_wait_ms": live.get("coordinator.source.fetch.max.wait.ms"),
        "stateful_operator": live.get("coordinator.stateful.operator"),
        "load_average_after": _load_average(),
    })
    return figures


def _measured(job: Any, progress: ProgressLog, phase: Callable[[], None]) -> dict[str, Any]:
    """Runs `phase`; returns the batches' times, the per-batch breakdown over it, the CPU time per batch (this
    process, the JVM, its Python workers: what a loaded machine stretches least) and the load average after."""
    from coordinator_job.task_metrics import Breakdown

    mark, before, cpu = progress.mark(), dict(job.task_metrics.value), tree_cpu_seconds()
    phase()
    cpu = tree_cpu_seconds() - cpu
    reports = progress.since(mark)
    breakdown = Breakdown()
    breakdown.add_reports(reports)
    breakdown.add_tasks(before, job.task_metrics.value)
    batch_ms = [float(r["durationMs"]["triggerExecution"]) for r in reports if "triggerExecution" in r["durationMs"]]
    return {"batches": len(batch_ms), "batch_ms_p50": percentile(batch_ms, 50),
            "batch_ms_p99": percentile(batch_ms, 99), "batch_ms_max": max(batch_ms, default=None),
            "cpu_ms_per_batch": round(cpu * 1000 / len(reports)) if reports else None,
            "breakdown_per_batch": breakdown.per_batch(), "load_average": _load_average()}
