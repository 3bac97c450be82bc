"""End to end: real consumers of both libraries through the gateway to the streaming job (the request and
response topics), in real time: the chaos harness's rolling bounce (`coordinator chaos --clients mixed
--engine spark`), in the tests' Spark session. Slow (a Spark query), so there is one such test."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from chaos_harness.real_chaos import RealChaos

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_a_rolling_bounce_of_real_static_consumers_through_the_streaming_job_costs_no_rebalance(
        spark: SparkSession, kafka_bootstrap: str) -> None:
    chaos = RealChaos(kafka_bootstrap, "rolling-bounce", "mixed", 2, engine="spark", spark=spark)
    report = chaos.run()
    # Kafka's default session: the job answers a micro-batch or more late.
    assert report["session_timeout_ms"] == 45_000
    # Each member stopped (committing, no LeaveGroup) and started again: the same generation, nobody revoked,
    # every member back with its partitions, nothing unanswered, nothing lost or read twice.
    assert (report["rebalances"], report["revocations"], report["assignment_changes"]) == (0, 0, 0), report
    assert report["unanswered"] == 0, report
    assert report["records_read"] == report["records_produced"] > 0, report
    assert report["records_processed_twice"] == 0, report
    bounced = [e["member"] for e in report["timeline"] if e["kind"] == "stop"]
    assert bounced == [0, 1]
    # Read back through the gateway: ListGroups from the snapshot topic, DescribeGroups through the job.
    final = dict(report["final"])
    assert final.pop("generation_id") >= 1, final
    assert final == {"settled": True, "listed": True, "state": "Stable", "members": 2,
                     "instance_ids": [f"{chaos.group}-0", f"{chaos.group}-1"]}, final
    assert {"JoinGroup", "SyncGroup", "OffsetCommit", "OffsetFetch"} <= set(report["latency_ms"])
    assert report["job"]["failures"] == [] and report["job"]["batches"] > 0
