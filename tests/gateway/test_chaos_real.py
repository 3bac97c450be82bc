"""`coordinator chaos --clients`: the chaos scenarios with real consumer processes through the gateway."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chaos_harness.real_chaos import RealChaos
from chaos_harness.real_consumer import heartbeat_interval_ms, missing_library


def run_chaos(kafka_bootstrap: str, tmp_path: Path, *argv: str) -> dict[str, object]:
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "coordinator_cli", "chaos", "--bootstrap-servers", kafka_bootstrap,
               "--report", str(report), "--plot", str(tmp_path / "timeline.png"), *argv]
    result = subprocess.run(command, capture_output=True, text=True, timeout=240,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(["src", "."])})
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "timeline.png").stat().st_size > 0
    return json.loads(report.read_text())  # type: ignore[no-any-return]


@pytest.mark.kafka
def test_a_crash_longer_than_the_session_costs_two_rebalances_and_nothing_else(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    report = run_chaos(kafka_bootstrap, tmp_path, "--clients", "mixed", "--members", "3",
                       "--scenario", "crash-longer-than-session", "--set", "session_timeout_ms=3000")
    # Out after its session, back in when restarted: two generations, the same partitions at the end.
    assert report["rebalances"] == 2 and report["assignment_changes"] == 0, report
    # SIGKILL loses the uncommitted tail, which is read again: nothing is lost.
    assert report["unanswered"] == 0 and report["records_read"] == report["records_produced"]
    final = report["final"]
    assert (final["settled"], final["state"], final["members"]) == (True, "Stable", 3)  # type: ignore[index]
    assert {"JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "OffsetFetch"} <= set(report["latency_ms"])


@pytest.mark.kafka
def test_a_duplicate_instance_fences_the_first_process(kafka_bootstrap: str, tmp_path: Path) -> None:
    report = run_chaos(kafka_bootstrap, tmp_path, "--clients", "kafka-python", "--members", "2",
                       "--scenario", "duplicate-instance", "--set", "session_timeout_ms=3000")
    fenced = sum(codes.get("82", 0) for codes in report["errors"].values())  # type: ignore[attr-defined]
    assert fenced >= 1 and report["rebalances"] == 0, report
    assert report["final"]["settled"] and report["final"]["members"] == 2  # type: ignore[index]


def test_real_client_runs_take_kafkas_default_session_with_the_streaming_job_and_refuse_unknown_timings() -> None:
    spark = RealChaos(None, "rolling-bounce", "mixed", 2, engine="spark")
    local = RealChaos(None, "rolling-bounce", "mixed", 2, timings={"session_timeout_ms": 3_000})
    assert (spark.session_timeout_ms, local.session_timeout_ms) == (45_000, 3_000)
    # Forming and settling may wait for a session to run out and a rebalance after it: bounded beyond both.
    assert spark.settle_limit_s > 2 * 45
    with pytest.raises(ValueError, match="unknown timings"):
        RealChaos(None, "rolling-bounce", "mixed", 2, timings={"settle_ms": 1})
    with pytest.raises(ValueError, match="not a run"):
        RealChaos(None, "rolling-bounce", "mixed", 2, engine="topics")


@pytest.mark.parametrize(("session_ms", "heartbeat_ms"), [(3_000, 600), (10_000, 2_000), (45_000, 3_000)])
def test_real_consumers_heartbeat_a_fifth_of_the_session_at_most_every_3_s(session_ms: int, heartbeat_ms: int) -> None:
    assert heartbeat_interval_ms(session_ms) == heartbeat_ms


def test_java_consumers_say_that_java_and_maven_are_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    missing = missing_library("java")
    assert missing is not None and "Java 17+" in missing and "Maven" in missing, missing
    with pytest.raises(ValueError, match="Java"):
        RealChaos(None, "rolling-bounce", "mixed", 3)
