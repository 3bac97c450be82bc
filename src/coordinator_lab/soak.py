"""`coordinator soak`: the live job under a steady load for a chosen time; figures printed, never asserted.

The load is the live benchmark's (`coordinator_lab.bench_spark.LiveLoad`): static groups of `--members` join and sync,
then every member heartbeats every 3 s, written straight to the request topic with kafka-python at `--rate`
requests per second, each answer timed from its request's send to its read. A status line shows every second
the requests sent and unanswered (and how old the oldest is), the job's lag (request records not yet read by a
finished micro-batch), the micro-batch times and the latency of the last seconds. At the end the load stops, the
job gets `--drain` seconds to answer the rest and read every record written so far, and the figures are the
last line of stdout.

`--prefill-batches N` starts the job on a request log that already holds N one-record batches per partition
(as after a long run; the job starts at the log end), to see a long run's fetch costs without waiting for them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer

from coordinator_job.broker import FETCH_MAX_WAIT_MS, EmbeddedBroker, log_end_offsets

from .bench_spark import WARM_UP_BATCHES, LiveLoad, percentile
from .fetch_cost import fill
from .measuring import ProgressLog, log
from .traffic_gen import HEARTBEAT_INTERVAL_MS

# A job that finished no micro-batch for this long while requests wait is reported as stalled.
STALL_S = 30.0


def add_soak_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=float, default=1000, help="requests offered per second (default: 1000)")
    parser.add_argument("--duration", type=float, default=600, help="seconds of load (default: 600)")
    parser.add_argument("--members", type=int, default=10, help="static members per group (default: 10)")
    parser.add_argument("--drain", type=float, default=60,
                        help="seconds the job gets after the load to answer the rest (default: 60)")
    parser.add_argument("--prefill-batches", type=int, default=0, metavar="N",
                        help="first fill each request partition with N one-record batches (default: 0)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")


@dataclass
class Soak:
    """What the status line and the figures are made of, updated once a second."""

    load: LiveLoad
    progress: ProgressLog
    lag_probe: KafkaConsumer
    topic: str
    started: float = field(default_factory=time.monotonic)
    lags: list[int] = field(default_factory=list)
    seen_latencies: int = 0
    last_batch_at: float = field(default_factory=time.monotonic)
    batches_seen: int = 0
    longest_gap_s: float = 0.0

    def log_end(self) -> dict[str, int]:
        return log_end_offsets(self.lag_probe, self.topic, refresh_metadata=False)

    def lag(self, ends: Mapping[str, int] | None = None) -> int:
        """Request records below `ends` (default: the log end) not yet read by a finished micro-batch."""
        reports = self.progress.since(max(0, self.progress.mark() - 1))
        if not reports:
            return -1
        read = reports[-1]["sources"][0]["endOffset"] or {}
        read = json.loads(read) if isinstance(read, str) else read
        ends = self.log_end() if ends is None else ends
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
def _broker(bootstrap_servers: str | None) -> Iterator[EmbeddedBroker | None]:
    if bootstrap_servers:
        yield None
        return
    with EmbeddedBroker() as broker:
        yield broker


def run_soak(args: argparse.Namespace, settings: Mapping[str, Any], show: Callable[[str], None]) -> dict[str, Any]:
    """Runs the soak of the module docstring; `show` gets the status line once a second. Returns the figures."""
    from coordinator_job.live_job import LiveJob, ensure_topics
    from coordinator_job.spark_session import build_session

    groups = max(1, math.ceil(args.rate * HEARTBEAT_INTERVAL_MS / 1000 / args.members))
    load_before = os.getloadavg()
    with _broker(getattr(args, "bootstrap_servers", None)) as broker, \
            tempfile.TemporaryDirectory(prefix="soak-") as checkpoint:
        live = dict(settings)
        if broker is not None:
            live["bootstrap.servers"] = broker.bootstrap_servers
        topic = str(live["coordinator.requests.topic"])
        if args.prefill_batches:
            if broker is None:
                raise ValueError("--prefill-batches needs the embedded broker (it writes with Tansu's own producer)")
            ensure_topics(live)
            for partition in range(int(live["coordinator.requests.partitions"])):
                log(f"soak: prefilling {topic}-{partition} with {args.prefill_batches:,} batches")
                fill(broker, topic, partition, args.prefill_batches)
            live["coordinator.starting.offsets"] = "latest"
        spark = build_session(live, args.master, app_name="coordinator-soak")
        progress = ProgressLog()
        progress.attach(spark)
        job = LiveJob(spark, live, Path(checkpoint))
        lag_probe = KafkaConsumer(bootstrap_servers=live["bootstrap.servers"], group_id=None,
                                  enable_auto_commit=False, fetch_max_wait_ms=FETCH_MAX_WAIT_MS)
        load: LiveLoad | None = None
        try:
            job.start()
            job.wait_ready(300)
            while progress.mark() < WARM_UP_BATCHES:
                time.sleep(0.2)
            load = LiveLoad(live, groups, args.members)
            log(f"soak: {groups} groups x {args.members} members join and sync")
            joined = load.set_up(timeout_s=300)
            soak = Soak(load, progress, lag_probe, topic)
            mark = progress.mark()
            log(f"soak: {args.rate:,.0f} requests/s for {args.duration:,.0f} s")
            sent = load.heartbeats(joined, args.rate, args.duration, report=lambda n: show(soak.status(n)))
            # Drained: every request answered and every record written until now read by a finished micro-batch
            # (the tick writer goes on writing; its later ticks are not the load's).
            load_end = soak.log_end()
            deadline = time.monotonic() + args.drain
            while time.monotonic() < deadline and (soak.unanswered()[0] or soak.lag(load_end)):
                show(soak.status(sent))
                time.sleep(1)
            under_load = progress.since(mark)
            pending, oldest_s = soak.unanswered()
            final_lag = soak.lag(load_end)
        finally:
            if load is not None:
                load.close()
            lag_probe.close()
            job.close()
            spark.stop()
    batch_ms = [float(r["durationMs"]["triggerExecution"]) for r in under_load]
    latencies = load.latencies_ms
    return {
        "offered_requests_per_s": args.rate, "duration_s": args.duration, "groups": groups,
        "members": groups * args.members, "prefill_batches": args.prefill_batches,
        "heartbeats_sent": sent, "heartbeats_answered": len(latencies), "unanswered": pending,
        "oldest_unanswered_s": round(oldest_s, 1),
        "latency_ms_p50": percentile(latencies, 50), "latency_ms_p90": percentile(latencies, 90),
        "latency_ms_p99": percentile(latencies, 99), "latency_ms_max": max(latencies, default=None),
        "batches": len(batch_ms), "batch_ms_p50": percentile(batch_ms, 50), "batch_ms_p99": percentile(batch_ms, 99),
        "batch_ms_max": max(batch_ms, default=None), "longest_s_without_a_batch": round(soak.longest_gap_s, 1),
        "lag_max": max(soak.lags, default=None), "lag_unread_after_drain": final_lag, "job_failures": job.failures(),
        "fetch_max_wait_ms": live.get("coordinator.source.fetch.max.wait.ms"),
        "load_average_before": [round(x, 1) for x in load_before],
        "load_average_after": [round(x, 1) for x in os.getloadavg()],
    }
