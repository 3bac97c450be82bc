"""Offsets in the chaos harness: members commit what they process, and the report counts what is processed twice.

A record is processed twice when its owner processed it and then its progress was lost: a crash between two
commits (the next owner, or the restarted static member, resumes from the last commit), or a zombie still
processing what its successor owns. A graceful close commits first, so a rolling bounce repeats nothing.
"""

from __future__ import annotations

from typing import Any

from chaos_harness import run_chaos

MEMBERS = 6


def chaos(scenario: str, membership: str = "static", **config: Any) -> dict[str, Any]:
    return run_chaos({"scenario": scenario, "members": MEMBERS, "membership": membership, "seed": 3, **config})


def test_a_crash_repeats_at_most_what_was_processed_since_the_last_commit() -> None:
    report = chaos("crash")
    interval = report["config"]["commit_interval_ms"] // report["config"]["record_interval_ms"]
    partitions_per_member = report["config"]["topics"]["events"] // MEMBERS
    assert 0 < report["records_processed_twice"] <= partitions_per_member * interval
    assert report["records_processed"] > 10 * report["records_processed_twice"]
    assert report["rebalances"] == 0 and report["final"]["consistent"]


def test_a_rolling_bounce_commits_on_close_and_repeats_nothing() -> None:
    for membership in ("static", "dynamic"):
        report = chaos("rolling-bounce", membership)
        assert report["records_processed"] > 0
        assert report["records_processed_twice"] == 0, membership
        assert report["final"]["consistent"]


def test_a_zombie_processes_what_its_successor_owns() -> None:
    report = chaos("duplicate-instance")
    assert report["fenced"] == 1 and report["records_processed_twice"] > 0


def test_without_offsets_nothing_is_consumed_or_committed() -> None:
    report = chaos("crash", commit_interval_ms=None)
    assert (report["records_processed"], report["records_processed_twice"]) == (0, 0)
    assert report["requests"] == chaos("crash", commit_interval_ms=None)["requests"]
    with_offsets = chaos("crash")
    assert with_offsets["requests"] > report["requests"]  # the fetches and commits
