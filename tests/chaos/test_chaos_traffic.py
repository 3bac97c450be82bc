"""The simulator's traffic is in time order (no record older than one before it: none is late, PROTOCOL.md
section 5), so the streaming job replays it to the local engine's answers at any micro-batch size.

Issue 17, defect 2: a member closed by a fault stamped its last OffsetCommit with its previous poll's time, a
tick earlier than the tick already in the log (seed 424242, 12 mixed members, rolling bounce: a tick at
12,000 ms, then an OffsetCommit at 11,000 ms), and Spark answered 4 of 1,420 requests 1,000 ms off."""

from __future__ import annotations

import heapq
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from chaos_harness import SCENARIOS, run_chaos
from chaos_harness.scenarios import DEFAULT_CONFIG, MEMBERSHIPS
from chaos_harness.spark_backend import job_settings
from coordinator_job.replay import replay_local, replay_spark
from coordinator_state import to_json
from tests.replays import assert_same
from tests.traffic import chaos_lines, write_traffic


def chaos_traffic(path: Path, config: dict[str, Any]) -> dict[str, Any]:
    """A short simulated run's report; its traffic (ticks included) written to `path`."""
    return run_chaos({"settle_ms": 5000, **config}, traffic=path)


@settings(max_examples=40)
@given(seed=st.integers(0, 2**32 - 1), scenario=st.sampled_from(SCENARIOS), membership=st.sampled_from(MEMBERSHIPS),
       members=st.integers(2, 6))
def test_the_simulator_never_writes_a_record_older_than_one_before_it(
        tmp_path_factory: pytest.TempPathFactory, seed: int, scenario: str, membership: str, members: int) -> None:
    if scenario == "duplicate-instance" and membership != "static":
        membership = "static"  # the scenario needs static members
    path = tmp_path_factory.mktemp("chaos") / "traffic.jsonl"
    chaos_traffic(path, {"seed": seed, "scenario": scenario, "membership": membership, "members": members})
    stamps = [json.loads(line)["timestamp_ms"] for line in path.read_text().splitlines()]
    assert len(stamps) > members
    earlier = [(i, stamps[i - 1], stamps[i]) for i in range(1, len(stamps)) if stamps[i] < stamps[i - 1]]
    assert earlier == []  # (line index, previous stamp, its stamp)


@pytest.mark.spark
def test_chaos_traffic_replays_identically_locally_and_with_spark_at_any_batch_size(spark: SparkSession,
                                                                                    tmp_path: Path) -> None:
    """Several seeds' runs in one file (a group each, merged by time, each run's records in its own order, late
    ones included), so that each batch size costs one Spark replay."""
    runs = [chaos_lines(f"chaos-{seed}", "rolling-bounce", "mixed", 3, seed, settle_ms=5000)
            for seed in (424242, 1, 2)]
    lines = [to_json(record).encode() for record in heapq.merge(*runs, key=lambda r: r["timestamp_ms"])]
    path = write_traffic(tmp_path / "traffic.jsonl", lines)
    replay_settings = job_settings(DEFAULT_CONFIG, "-")  # the runs' engine config and lateness (0)
    expected = replay_local(lines, replay_settings)
    assert len(expected.snapshots) == 3 and len(expected.offsets) >= 9  # the members committed
    for records_per_batch in (50, 100_000):
        assert_same(replay_spark(path, replay_settings, records_per_batch, None, None), expected)
    assert expected.counts["late_requests"] == 0
