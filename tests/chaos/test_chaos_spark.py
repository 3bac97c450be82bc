"""Chaos against the streaming job in real time: the job stopped and restarted mid-run under its members.

A rolling bounce of static members against the live job is the demo's, tested through `coordinator run
--demo` (tests/streaming/test_cli_run.py); the scenarios themselves are tested on the sim backend.

Each run starts the production query on a fresh checkpoint and topics of its own, in the test session's
Spark session, against the test broker. Timings are real-time ones: micro-batches take 1-3 s on a quiet
2-core machine and 10-30 s on one shared by several test suites, and a member has one heartbeat in flight
at a time, so a session shorter than a slow batch expires under load: sessions are Kafka's default 45 s.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from chaos_harness.spark_backend import job_settings, run_chaos_spark
from coordinator_job.replay import replay_local

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

REAL_TIME: dict[str, Any] = {
    "session_timeout_ms": 45000,
    "heartbeat_interval_ms": 3000,
    "settle_ms": 5000,
    "warmup_limit_ms": 90000,
    "drain_limit_ms": 60000,
    "coordinator_config": {"group.initial.rebalance.delay.ms": 1000},
}


def assert_nobody_lost(report: dict[str, Any], members: int) -> None:
    """Every request answered NONE, every member still in one stable group, generations only went forward."""
    assert report["job"]["failures"] == []
    assert report["unanswered"] == 0 and report["requests"] == report["responses"] > 0
    assert set(report["errors"]) == {"NONE"}, report["errors"]
    assert report["final"]["consistent"] and report["final"]["members"] == members, report["final"]
    assert report["fenced"] == 0 and not [e for e in report["events"] if e["kind"] == "failed"]
    generations = [g["generation_id"] for g in report["generations"]]
    assert generations == sorted(generations)
    assert report["rebalances"] == 0


def assert_replays_to_the_same_responses(report: dict[str, Any], traffic: Path) -> None:
    """The local engine, fed the request topic as the job read it, decides exactly the job's responses
    (the report's digest is over the distinct responses sorted by their compact JSON)."""
    replayed = replay_local(traffic.read_bytes().splitlines(), job_settings(report["config"], "-"))
    distinct = sorted({json.dumps(json.loads(r), sort_keys=True, separators=(",", ":"))
                       for r in replayed.responses})
    digest = hashlib.sha256()
    for response in distinct:
        digest.update(response.encode())
    assert len(distinct) == report["responses"]
    assert digest.hexdigest() == report["responses_sha256"]


def test_the_job_stopped_mid_run_and_restarted_on_its_checkpoint_answers_everything(
        spark: SparkSession, kafka_bootstrap: str, tmp_path: Path) -> None:
    traffic = tmp_path / "traffic.jsonl"
    config = {"scenario": "coordinator-restart", "members": 6, "params": {"outage_ms": 8000}, **REAL_TIME}
    report = run_chaos_spark(config, traffic=traffic, bootstrap_servers=kafka_bootstrap, spark=spark)
    assert report["job"]["starts"] == 2
    start_ms = report["config"]["start_ms"]
    down, up = (start_ms + e["at_ms"] for e in report["events"] if e["kind"].endswith("_coordinator"))
    records = [json.loads(line) for line in traffic.read_text().splitlines()]
    assert sum(1 for r in records if r["api"] != "Tick" and down <= r["timestamp_ms"] < up) >= 6
    assert not [r for r in records if r["api"] == "Tick" and down + 1000 < r["timestamp_ms"] < up]
    assert_nobody_lost(report, 6)
    assert_replays_to_the_same_responses(report, traffic)



def test_a_rolling_bounce_of_static_streams_instances_moves_no_task_on_the_job(
        spark: SparkSession, kafka_bootstrap: str, tmp_path: Path) -> None:
    """Each static instance leaves with -2 and comes back under a new member id: the job keeps its tasks for it."""
    traffic = tmp_path / "traffic.jsonl"
    # The last restart's join and acknowledgement take two round trips of a micro-batch each: a longer settle.
    # A static instance's join retried after a timeout meets its own instance (UNRELEASED_INSTANCE_ID, fatal as
    # in Kafka): requests may wait longer than Kafka's 30 s for the first micro-batch on a loaded machine.
    config = {"group_type": "streams", "scenario": "rolling-bounce", "members": 3,
              "params": {"down_ms": 3000, "interval_ms": 5000}, **REAL_TIME, "settle_ms": 20000,
              "request_timeout_ms": 120000,
              "coordinator_config": {"group.streams.initial.rebalance.delay.ms": 1000}}
    report = run_chaos_spark(config, traffic=traffic, bootstrap_servers=kafka_bootstrap, spark=spark)
    assert [e["kind"] for e in report["events"]].count("start") == 3 + 3
    assert (report["group_epoch_bumps"], report["task_movements"]) == (0, 0)
    assert report["overlap_ms"] == 0
    assert_nobody_lost(report, 3)
    assert_replays_to_the_same_responses(report, traffic)
