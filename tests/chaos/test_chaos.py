"""The chaos harness on the simulated engine: acceptance runs, replay, determinism and the CLI entry point."""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chaos_harness import ChaosConfigError, normalize_config, run_chaos
from coordinator_cli.chaos import add_chaos_arguments, chaos_main
from coordinator_state import ReplayDriver

MEMBERS = 20
PARTITIONS_PER_MEMBER = 3  # the default topic has 3 partitions per member


@functools.cache
def _run(scenario: str, membership: str, seed: int, params: str, lateness_ms: int) -> str:
    config = {"scenario": scenario, "members": MEMBERS, "membership": membership, "seed": seed,
              "params": json.loads(params), "lateness_ms": lateness_ms}
    return json.dumps(run_chaos(config))


def chaos(scenario: str, membership: str = "static", seed: int = 0, lateness_ms: int = 0,
          **params: int) -> dict[str, Any]:
    """One run's report (runs are cached: reports are pure functions of their config)."""
    report: dict[str, Any] = json.loads(_run(scenario, membership, seed, json.dumps(params, sort_keys=True),
                                             lateness_ms))
    return report


def assert_clean_end(report: dict[str, Any]) -> None:
    """Every request answered, and clients and coordinator agree on one stable group at the end."""
    assert report["unanswered"] == 0
    assert report["final"]["consistent"], report["final"]
    assert report["final"]["members"] == MEMBERS


def test_rolling_bounce_of_static_members_costs_no_rebalance() -> None:
    report = chaos("rolling-bounce", "static")
    assert report["config"]["params"]["down_ms"] < report["config"]["session_timeout_ms"]
    assert (report["rebalances"], report["assignment_changes"], report["unanswered"]) == (0, 0, 0)
    # Each member's own partitions are idle while it is down, and nothing else is.
    down_ms = report["config"]["params"]["down_ms"]
    assert report["unassigned_ms"] == MEMBERS * PARTITIONS_PER_MEMBER * down_ms
    assert set(report["errors"]) == {"NONE"}
    assert_clean_end(report)


def test_rolling_bounce_of_dynamic_members_rebalances_at_every_bounce() -> None:
    report = chaos("rolling-bounce", "dynamic")
    assert report["rebalances"] >= MEMBERS
    assert report["assignment_changes"] >= MEMBERS  # every restarted member is a new identity
    assert report["errors"]["MEMBER_ID_REQUIRED"] == 2 * MEMBERS  # first start and restart (KIP-394)
    assert_clean_end(report)


def test_static_member_back_within_the_session_timeout_costs_no_rebalance() -> None:
    report = chaos("crash", "static")
    assert (report["rebalances"], report["assignment_changes"]) == (0, 0)
    assert_clean_end(report)


def test_static_member_down_longer_than_the_session_timeout_rebalances_twice() -> None:
    # Once when its session expires, once when it comes back; it then gets its old partitions back.
    report = chaos("crash-longer-than-session", "static")
    assert report["config"]["params"]["down_ms"] > report["config"]["session_timeout_ms"]
    assert report["rebalances"] == 2
    assert_clean_end(report)


def test_two_processes_with_one_instance_id_fence_the_older() -> None:
    report = chaos("duplicate-instance", "static")
    duplicate = next(e for e in report["events"] if e["kind"] == "start_duplicate")
    failed = [e for e in report["events"] if e["kind"] == "failed"]
    assert report["fenced"] == 1 and report["errors"]["FENCED_INSTANCE_ID"] == 1
    older = [duplicate["member"][0], 0]
    assert [(e["member"], e["error"]) for e in failed] == [(older, "FENCED_INSTANCE_ID")]
    assert report["fenced_members"] == [f"instance-{duplicate['member'][0]:02d}"]
    assert report["rebalances"] == 0
    assert report["overlap_ms"] > 0  # the zombie held its partitions until its next heartbeat was fenced
    assert_clean_end(report)


def test_a_short_stop_the_world_pause_is_harmless_and_a_long_one_is_not() -> None:
    short = chaos("slow-member", "mixed")
    assert short["config"]["params"]["pause_ms"] + short["config"]["heartbeat_interval_ms"] < (
        short["config"]["session_timeout_ms"])
    assert short["rebalances"] == 0
    assert_clean_end(short)
    long = chaos("slow-member", "mixed", pause_ms=15000, pauses=1)
    assert long["rebalances"] >= 2  # session expired, then the member rejoined
    assert_clean_end(long)


def test_a_coordinator_outage_loses_no_session_and_duplicates_are_dropped() -> None:
    report = chaos("coordinator-restart", "mixed")
    assert report["config"]["params"]["outage_ms"] > report["config"]["session_timeout_ms"]
    assert report["rebalances"] == 0
    assert report["duplicates_delivered"] >= report["config"]["params"]["redeliver"]
    assert report["responses_dropped"] == report["duplicates_delivered"]
    assert_clean_end(report)


def response_digest(responses: list[dict[str, Any]]) -> str:
    """The report's responses_sha256: SHA-256 over each response as compact JSON with sorted keys."""
    digest = hashlib.sha256()
    for response in responses:
        digest.update(json.dumps(response, sort_keys=True, separators=(",", ":")).encode())
    return digest.hexdigest()


@pytest.mark.parametrize("scenario, membership, lateness_ms", [
    ("rolling-bounce", "mixed", 0),
    ("duplicate-instance", "static", 0),
    ("coordinator-restart", "dynamic", 0),
    ("crash-longer-than-session", "mixed", 2000),
])
def test_the_traffic_file_replays_to_the_same_responses(
    tmp_path: Path, scenario: str, membership: str, lateness_ms: int
) -> None:
    traffic = tmp_path / "traffic.jsonl"
    config = {"scenario": scenario, "members": 8, "membership": membership, "lateness_ms": lateness_ms}
    report = run_chaos(config, traffic=traffic)
    replica = ReplayDriver({**report["config"]["coordinator_config"],
                            "coordinator.lateness.ms": report["config"]["lateness_ms"]})
    responses: list[dict[str, Any]] = []
    for number, line in enumerate(traffic.read_bytes().splitlines(), start=1):
        responses += replica.feed(line, f"file:{number}").responses
    assert len(responses) == report["responses"] > 0
    assert response_digest(responses) == report["responses_sha256"]


def test_a_seed_gives_one_report_and_another_seed_another() -> None:
    config = {"scenario": "crash", "members": 6, "membership": "dynamic", "seed": 7}
    first, again = run_chaos(config), run_chaos(config)
    assert first == again
    assert run_chaos(first["config"]) == first  # the report's config is all a rerun needs
    assert run_chaos({**config, "seed": 8})["responses_sha256"] != first["responses_sha256"]


def test_bad_configs_are_refused() -> None:
    with pytest.raises(ChaosConfigError, match="unknown"):
        normalize_config({"scenario": "crash", "memberz": 3})
    with pytest.raises(ChaosConfigError, match="static members"):
        run_chaos({"scenario": "duplicate-instance", "membership": "dynamic"})
    with pytest.raises(ChaosConfigError, match="no parameters"):
        normalize_config({"scenario": "crash", "params": {"pause_ms": 1}})


def cli(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="coordinator chaos")
    add_chaos_arguments(parser)
    return parser.parse_args(list(argv))


def test_cli_writes_report_plot_and_traffic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report, plot, traffic = tmp_path / "r.json", tmp_path / "p.png", tmp_path / "t.jsonl"
    code = chaos_main(cli("--members", "4", "--mixed", "--scenario", "crash-longer-than-session",
                          "--seed", "3", "--report", str(report), "--plot", str(plot),
                          "--traffic", str(traffic)))
    assert code == 0
    written = json.loads(report.read_text())
    assert written["config"]["membership"] == "mixed" and written["config"]["seed"] == 3
    assert plot.read_bytes().startswith(b"\x89PNG")
    lines = traffic.read_text().splitlines()
    assert sum(json.loads(line)["api"] != "Tick" for line in lines) == written["requests"]
    assert "rebalances=" in capsys.readouterr().err


def test_cli_sets_config_entries(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    assert chaos_main(cli("--members", "3", "--scenario", "crash", "--set", "session_timeout_ms=12000",
                          "--set", "params.down_ms=4000", "--set", "coordinator_config.group.max.size=5",
                          "--report", str(report))) == 0
    config = json.loads(report.read_text())["config"]
    assert config["session_timeout_ms"] == 12000 and config["params"] == {"down_ms": 4000}
    assert config["coordinator_config"] == {"group.initial.rebalance.delay.ms": 3000, "group.max.size": 5}


@pytest.mark.parametrize("argv, message", [
    (("--dynamic", "--scenario", "duplicate-instance"), "static members"),
    (("--set", "sesion_timeout_ms=1"), "unknown chaos config key 'sesion_timeout_ms'"),
    (("--set", "members"), "expected KEY=VALUE"),
    (("--scenario", "crash", "--set", "params.pause_ms=1"), "no parameters"),
])
def test_cli_refuses_impossible_runs(argv: tuple[str, ...], message: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert chaos_main(cli(*argv)) == 2
    assert message in capsys.readouterr().err


def test_plot_without_matplotlib_says_how_to_install_it(tmp_path: Path) -> None:
    """matplotlib is the optional `plot` extra: without it, --plot is refused before the run, with the fix."""
    hide_matplotlib = ("import sys; sys.modules['matplotlib'] = None; from coordinator_cli import main; "
                       "sys.exit(main(sys.argv[1:]))")
    result = subprocess.run([sys.executable, "-c", hide_matplotlib, "chaos", "--members", "2", "--plot",
                             str(tmp_path / "p.png")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "pip install 'spark-group-coordinator[plot]'" in result.stderr
    assert not (tmp_path / "p.png").exists() and result.stdout == ""  # refused before the run


def test_librdkafka_consumers_without_confluent_kafka_say_how_to_install_it() -> None:
    """confluent-kafka is the optional `demo` extra: without it, a run with librdkafka consumers is refused before
    anything starts, with the fix."""
    hide_confluent = ("import sys; sys.modules['confluent_kafka'] = None; from coordinator_cli import main; "
                      "sys.exit(main(sys.argv[1:]))")
    result = subprocess.run([sys.executable, "-c", hide_confluent, "chaos", "--clients", "mixed", "--members", "2"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "pip install 'spark-group-coordinator[demo]'" in result.stderr and result.stdout == ""
