"""Chaos with Kafka Streams instances in a streams group (`group_type` "streams"), on the simulated engine.

A static instance that leaves with epoch -2 keeps its tasks until its session expires and takes them back
under a new member id: a rolling bounce costs no group epoch bump and moves no task. Dynamic instances leave
with -1, so theirs move. The property test drives random groups of static and dynamic instances through the
scenarios and checks the invariants of PROTOCOL.md section 10 from the clients' side.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chaos_harness import SimBackend, normalize_config, run_chaos
from chaos_harness.run import new_chaos_run
from coordinator_cli.chaos import add_chaos_arguments, chaos_main
from coordinator_cli.main import main

MEMBERS = 10


@functools.cache
def _run(scenario: str, membership: str) -> str:
    return json.dumps(run_chaos({"group_type": "streams", "scenario": scenario, "members": MEMBERS,
                                 "membership": membership}))


def chaos(scenario: str, membership: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(_run(scenario, membership))
    return report


def assert_every_request_answered_once(report: dict[str, Any]) -> None:
    assert report["unanswered"] == 0 and report["requests"] == report["responses"] > 0
    assert report["overlap_ms"] == 0  # no active task owned by two instances at once
    assert report["final"]["consistent"] and report["final"]["members"] == MEMBERS, report["final"]


def test_rolling_bounce_of_static_instances_bumps_no_epoch_and_moves_no_task() -> None:
    report = chaos("rolling-bounce", "static")
    assert report["config"]["params"]["down_ms"] < report["config"]["session_timeout_ms"]
    assert (report["group_epoch_bumps"], report["task_movements"], report["rebalances"]) == (0, 0, 0)
    assert set(report["errors"]) == {"NONE"}
    # Each instance's active tasks wait for it while it is down, and nothing else is ever unowned.
    tasks = report["config"]["topics"]["events"]
    assert report["unassigned_ms"] == tasks * report["config"]["params"]["down_ms"]
    assert_every_request_answered_once(report)


def test_rolling_bounce_of_dynamic_instances_moves_tasks() -> None:
    report = chaos("rolling-bounce", "dynamic")
    # Each bounce is a leave (-1: fenced) and a join: two group epoch bumps, and its tasks go elsewhere.
    assert report["group_epoch_bumps"] == 2 * MEMBERS
    assert report["task_movements"] >= MEMBERS
    assert_every_request_answered_once(report)


def test_a_static_instance_down_longer_than_its_session_loses_its_tasks_once() -> None:
    report = chaos("crash-longer-than-session", "static")
    assert report["config"]["params"]["down_ms"] > report["config"]["session_timeout_ms"]
    crash = next(e for e in report["events"] if e["kind"] == "crash")
    victim = f"instance-{crash['member'][0]:02d}"
    # Fenced when its session expires (one bump), back with a new member id later (another).
    assert report["group_epoch_bumps"] == 2 and report["rebalances"] == 2
    taken = [e for e in report["events"] if e["kind"] == "moved" and victim in e["moved_from"]]
    returned = [e for e in report["events"] if e["kind"] == "moved" and e["identity"] == victim]
    # Its 3 tasks went to others once, all in the first of the two target assignments, and came back after.
    assert sum(e["moved_from"][victim] for e in taken) == 3
    assert len({e["identity"] for e in taken}) == 3
    generations = [g["at_ms"] for g in report["generations"] if g["at_ms"] >= report["stable_at_ms"]]
    assert all(generations[0] <= e["at_ms"] < generations[1] for e in taken)
    assert sum(sum(e["moved_from"].values()) for e in returned) == 3
    assert report["task_movements"] == 6
    assert_every_request_answered_once(report)


def cli(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="coordinator chaos")
    add_chaos_arguments(parser)
    return parser.parse_args(list(argv))


def test_cli_runs_streams_groups(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "r.json"
    assert chaos_main(cli("--group-type", "streams", "--members", "3", "--report", str(report))) == 0
    written = json.loads(report.read_text())
    assert written["config"]["group_type"] == "streams"
    assert written["config"]["coordinator_config"]["group.streams.session.timeout.ms"] == 10000
    assert "group_epoch_bumps=0 task_movements=0" in capsys.readouterr().err


# ---------------------------------------------------------------------- property


def _closed_windows(events: list[dict[str, Any]], names: dict[int, str]) -> list[tuple[str, int, int]]:
    """(instance id, close time, restart time) of each static instance closed cleanly (a -2 leave)."""
    windows = []
    for close in (e for e in events if e["kind"] == "close" and e["member"][0] in names):
        slot = close["member"][0]
        start = next((e["at_ms"] for e in events if e["kind"] == "start" and e["member"][0] == slot
                      and e["at_ms"] > close["at_ms"]), None)
        if start is not None:
            windows.append((names[slot], close["at_ms"], start))
    return windows


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(members=st.integers(2, 5), membership=st.sampled_from(["static", "dynamic", "mixed"]),
       scenario=st.sampled_from(["rolling-bounce", "crash", "crash-longer-than-session"]),
       standbys=st.integers(0, 1), seed=st.integers(0, 2**16))
def test_random_streams_groups_keep_the_invariants(members: int, membership: str, scenario: str, standbys: int,
                                                   seed: int) -> None:
    config = normalize_config({"group_type": "streams", "scenario": scenario, "members": members,
                               "membership": membership, "seed": seed,
                               "coordinator_config": {"group.streams.num.standby.replicas": standbys}})
    rng = random.Random(seed)
    backend = SimBackend(config["coordinator_config"], start_ms=config["start_ms"],
                         duplicate_probability=config["duplicate_probability"], seed=rng.getrandbits(32))
    report = new_chaos_run(config, backend, rng).run()
    # Every request gets exactly one answer.
    assert report["unanswered"] == 0 and report["requests"] == report["responses"]
    # No active task is owned by two instances at once (the coordinator withholds it until it is revoked).
    assert report["overlap_ms"] == 0
    # Epochs only grow: the group's, and each member's in its answers (leaves and errors aside).
    assignment_epochs = [g["generation_id"] for g in report["generations"]]
    assert assignment_epochs == sorted(assignment_epochs)
    last: dict[str, int] = {}
    for response in backend.responses:
        body = response["body"]
        if response["api"] == "StreamsGroupHeartbeat" and body["error"] == "NONE" and body["member_epoch"] > 0:
            assert body["member_epoch"] >= last.get(body["member_id"], 0)
            last[body["member_id"]] = body["member_epoch"]
    # A -2 member's tasks go to nobody else while it is down within its session.
    static = {slot: f"instance-{slot:02d}" for slot in range(members)
              if membership == "static" or (membership == "mixed" and slot % 2 == 0)}
    for instance, closed_at, started_at in _closed_windows(report["events"], static):
        assert started_at - closed_at < config["session_timeout_ms"]
        assert not [e for e in report["events"] if e["kind"] == "moved" and instance in e["moved_from"]
                    and closed_at <= e["at_ms"] <= started_at], instance
    assert report["final"]["consistent"], report["final"]


def test_real_consumer_processes_are_refused_for_a_streams_group_and_kafka_streams_for_a_classic_one(
        capsys: pytest.CaptureFixture[str]) -> None:
    for refused in (["--group-type", "streams", "--clients", "kafka-python"], ["--clients", "kafka-streams"],
                    ["--group-type", "streams", "--clients", "kafka-streams", "--scenario", "duplicate-instance"]):
        assert main(["chaos", *refused]) == 2
        assert "coordinator chaos --clients kafka-streams: " in capsys.readouterr().err
