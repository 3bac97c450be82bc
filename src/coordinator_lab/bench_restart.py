"""The benchmark's restart figure: how long the live job takes, started again on a checkpoint holding N groups,
to finish its first micro-batch.

1. N groups of one static member join and sync (generated traffic, `traffic_gen`), written to the request topic
   of the embedded broker with each record's Kafka timestamp equal to its event time (so the clock-skew check
   holds for traffic generated in the past) and processed by the production query (`start_query`, AvailableNow)
   into a fresh checkpoint;
2. the Spark session is stopped (its state stores unloaded) and a few heartbeats are written;
3. a new session starts the same query on the same checkpoint: `restart_first_batch_s` runs from the new
   session's creation to the end of its first micro-batch with input, which must load the state it touches.

No tick writer runs: the wall clock would move event time years ahead of the generated traffic and expire every
session. The JVM stays up between the two sessions (PySpark keeps its gateway), so JIT warm-up is not counted.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from coordinator_state.envelope import API, TICK, TIMESTAMP_MS, routing_group_id

from .measuring import ProgressLog, breakdown, log
from .traffic_gen import generate

RESTART_TAIL_HEARTBEATS = 100


def _directory_mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6, 1)


def _produce(settings: Mapping[str, Any], lines: list[bytes]) -> None:
    """Each line to the request topic, keyed by its group id; a tick to every partition, as the tick writer does."""
    from kafka import KafkaProducer

    topic = str(settings["coordinator.requests.topic"])
    producer = KafkaProducer(bootstrap_servers=settings["bootstrap.servers"], linger_ms=20, acks=1,
                             client_id="bench-restart")
    try:
        partitions = sorted(producer.partitions_for(topic))
        for line in lines:
            envelope = json.loads(line)
            stamp = int(envelope[TIMESTAMP_MS])
            if envelope[API] == TICK:
                for partition in partitions:
                    producer.send(topic, value=line, partition=partition, timestamp_ms=stamp)
            else:
                producer.send(topic, key=(routing_group_id(envelope) or "").encode(), value=line, timestamp_ms=stamp)
        producer.flush()
    finally:
        producer.close(timeout=10)


def run_restart(settings: Mapping[str, Any], master: str, groups: int) -> dict[str, Any]:
    from coordinator_job.broker import EmbeddedBroker
    from coordinator_job.live_job import ensure_topics, start_query
    from coordinator_job.spark_session import build_session

    traffic = generate(groups, 1, 1, int(settings["coordinator.lateness.ms"]),
                       int(settings["group.initial.rebalance.delay.ms"]))
    first_heartbeat = next(i for i, line in enumerate(traffic.lines) if b'"Heartbeat"' in line)
    build, tail = traffic.lines[:first_heartbeat], traffic.lines[first_heartbeat:][:RESTART_TAIL_HEARTBEATS]
    figures: dict[str, Any] = {"restart_groups": groups, "restart_build_requests": first_heartbeat}
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory(prefix="bench-restart-") as scratch:
        live_settings = {**settings, "bootstrap.servers": broker.bootstrap_servers}
        checkpoint = Path(scratch) / "checkpoint"
        ensure_topics(live_settings)
        log(f"restart: writing {len(build)} records ({groups} groups join and sync)")
        _produce(live_settings, build)
        spark = build_session(live_settings, master, app_name="coordinator-bench-restart")
        started = time.monotonic()
        log("restart: the job builds the checkpoint")
        start_query(spark, live_settings, checkpoint, available_now=True).awaitTermination()
        figures["restart_build_s"] = round(time.monotonic() - started, 1)
        figures["restart_checkpoint_mb"] = _directory_mb(checkpoint)
        spark.stop()
        _produce(live_settings, tail)
        log(f"restart: a new session on the checkpoint ({figures['restart_checkpoint_mb']} MB), "
            f"{len(tail)} heartbeats waiting")
        started = time.time()
        spark = build_session(live_settings, master, app_name="coordinator-bench-restart")
        progress = ProgressLog()
        progress.attach(spark)
        start_query(spark, live_settings, checkpoint, available_now=True).awaitTermination()
        progress.await_end(0)  # the listener's last report arrives asynchronously
        first = next((r for r in progress.since(0) if int(r.get("numInputRows") or 0) > 0), None)
        if first is not None:
            # A report's timestamp is its batch's start: the batch ended triggerExecution ms later.
            batch_start = datetime.fromisoformat(first["timestamp"].replace("Z", "+00:00")).timestamp()
            batch_end = batch_start + first["durationMs"]["triggerExecution"] / 1000
            figures["restart_first_batch_s"] = round(batch_end - started, 1)
            figures["restart_first_batch_breakdown"] = breakdown([first])
        spark.stop()
    return figures
