"""`coordinator groups --describe` of a streams group over a replay's output: kafka-streams-groups.sh's views.

The traffic is played by three Kafka Streams instances (`StreamsMember`: two static, one dynamic, one standby
replica per task) against a LocalCoordinator, replayed by `coordinator replay` with the same settings, and read
back by `coordinator groups`. The running-job source asks the job StreamsGroupDescribe instead.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from coordinator_cli.main import main
from coordinator_state import LocalCoordinator, to_json
from coordinator_state.envelope import SIMULATION_EPOCH_MS as T
from group_client import StreamsMember, StreamsMemberConfig, StreamsMemberState, Subtopology

SETTINGS = {"group.streams.initial.rebalance.delay.ms": 0, "group.streams.num.standby.replicas": 1}
TOPOLOGY = (Subtopology("0", ("events",), ("app-store-changelog",)),)


def played_traffic() -> list[dict[str, Any]]:
    """Group "app": instances a (i-a), b (i-b) and dynamic c, each process p-*, 6 tasks, Stable."""
    coordinator = LocalCoordinator(SETTINGS)
    members = [StreamsMember(StreamsMemberConfig("app", f"client-{name}", f"p-{name}", TOPOLOGY,
                                                 {"events": 6, "app-store-changelog": 6},
                                                 instance_id=None if name == "c" else f"i-{name}"),
                             f"member-{name}", name) for name in "abc"]
    traffic: list[dict[str, Any]] = []
    for t in range(T, T + 20000, 500):
        for _ in range(10):
            requests = [r for m in members for r in m.poll(t)]
            for request in requests:
                traffic.append(request)
                for response in coordinator.handle(request):
                    next(m for m in members if m.reply_to == response["reply_to"]).on_response(response)
    snapshot = coordinator.describe("app")
    assert snapshot is not None and snapshot["state"] == "Stable"
    return traffic


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("replay")
    traffic = folder / "traffic.jsonl"
    traffic.write_text("".join(to_json(r) + "\n" for r in played_traffic()))
    out = folder / "snapshots.jsonl"
    assert main(["replay", "--input", str(traffic), "--output", str(folder / "responses.jsonl"),
                 "--snapshots", str(out), *[f"--set={k}={v}" for k, v in SETTINGS.items()]]) == 0
    return out


def groups(snapshots: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["groups", *args, "--snapshots", str(snapshots)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_members_view(snapshots: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = groups(snapshots, capsys, "--describe", "--group", "app")
    assert status == 0 and err == ""
    lines = out.strip().splitlines()
    assert lines[0].split() == ["GROUP", "MEMBER", "INSTANCE-ID", "PROCESS", "CLIENT-ID", "ASSIGNMENTS"]
    rows = {line.split()[1]: line for line in lines[1:]}
    assert set(rows) == {"member-a", "member-b", "member-c"}
    assert rows["member-a"].split()[:5] == ["app", "member-a", "i-a", "p-a", "client-a"]
    assert rows["member-c"].split()[2] == "-"  # dynamic: no instance id
    # Two tasks active and two standby each, none both: "ACTIVE: 0:[x,y]; STANDBY: 0:[u,v];"
    active = [rows[m].split("ACTIVE: 0:[")[1].split("]")[0] for m in sorted(rows)]
    assert sorted(p for ps in active for p in ps.split(",")) == [str(p) for p in range(6)]
    assert all("; STANDBY: 0:[" in row for row in rows.values())


def test_members_view_verbose_shows_epochs_and_targets(snapshots: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = groups(snapshots, capsys, "--describe", "--group", "app", "--members", "--verbose")
    lines = out.strip().splitlines()
    assert status == 0
    assert lines[0].split() == ["GROUP", "TARGET-ASSIGNMENT-EPOCH", "TOPOLOGY-EPOCH", "MEMBER", "INSTANCE-ID",
                                "MEMBER-PROTOCOL", "MEMBER-EPOCH", "PROCESS", "CLIENT-ID", "ASSIGNMENTS"]
    for line in lines[1:]:
        cells = line.split()
        assert cells[1] == cells[6] and int(cells[1]) >= 1  # every member at the target assignment epoch
        assert cells[2] == "0" and cells[5] == "streams"
        assert "TARGET-ACTIVE: 0:[" in line


def test_state_view_and_json(snapshots: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = groups(snapshots, capsys, "--describe", "--group", "app", "--state", "--verbose")
    header, row = out.strip().splitlines()
    assert status == 0 and header.split()[-4:] == ["STATE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
    assert row.split()[-4] == "Stable" and row.split()[-1] == "3"
    status, out, _ = groups(snapshots, capsys, "--describe", "--group", "app", "--json")
    described = json.loads(out)
    assert status == 0 and described["type"] == "streams" and described["state"] == "Stable"
    members = {m["member_id"]: m for m in described["members"]}
    assert {m: v["instance_id"] for m, v in members.items()} == {
        "member-a": "i-a", "member-b": "i-b", "member-c": None}
    assert {m["process_id"] for m in members.values()} == {"p-a", "p-b", "p-c"}
    active = sorted(tuple(t) for m in members.values() for t in m["active_tasks"])
    assert active == [("0", p) for p in range(6)]
    assert all(m["member_epoch"] == described["target_assignment_epoch"] for m in members.values())
    for m in members.values():
        assert not {tuple(t) for t in m["active_tasks"]} & {tuple(t) for t in m["standby_tasks"]}
        assert m["target"]["active_tasks"] == m["active_tasks"]


def test_the_offsets_view_is_refused_with_the_views_that_work(snapshots: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = groups(snapshots, capsys, "--describe", "--group", "app", "--offsets")
    assert status == 2 and "--members or --state" in err


@pytest.mark.spark
@pytest.mark.kafka
def test_the_running_job_describes_a_streams_group(spark: Any, kafka_bootstrap: str, unique_topic: Any,
                                                   tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Streams instance joins the job over its Kafka topics; the CLI asks the job StreamsGroupDescribe."""
    from coordinator_job.live_job import ensure_topics, start_query
    from coordinator_job.settings import load_settings
    from group_client.kafka_transport import KafkaTransport
    from group_client.realtime import run_member

    keys = [f"coordinator.{name}.topic" for name in ("requests", "responses", "snapshots", "dead.letters", "offsets")]
    topics = {key: unique_topic(key.split(".")[1]) for key in keys}
    settings = load_settings(overrides=[f"bootstrap.servers={kafka_bootstrap}",
                                        *(f"{k}={v}" for k, v in SETTINGS.items()),
                                        *(f"{k}={v}" for k, v in topics.items())])
    ensure_topics(settings)
    query = start_query(spark, settings, tmp_path / "checkpoint")
    # A join retried after a timeout would meet its own instance (UNRELEASED_INSTANCE_ID, fatal as in Kafka):
    # the first answer waits for the query's start, which a loaded machine makes longer than Kafka's 30 s.
    member = StreamsMember(StreamsMemberConfig("app", "client-a", "p-a", TOPOLOGY,
                                               {"events": 6, "app-store-changelog": 6}, instance_id="i-a",
                                               request_timeout_ms=180000),
                           "member-a", "client-a-reply")
    transport = KafkaTransport(kafka_bootstrap, request_topic=topics["coordinator.requests.topic"],
                               response_topic=topics["coordinator.responses.topic"])
    deadline = time.monotonic() + 240
    try:
        owned: list[int] = []

        def settled() -> bool:  # every task acknowledged (then the member leaves with -2, keeping them)
            owned.append(len(member.owned.active) if member.state is StreamsMemberState.STABLE else 0)
            return owned[-1] == 6 or time.monotonic() > deadline

        run_member(member, transport, should_stop=settled)
        assert owned[-1] == 6, member.stats.errors
        status = main(["groups", "--describe", "--group", "app", "--json", "--bootstrap-servers", kafka_bootstrap,
                       *(arg for k, v in topics.items() for arg in ("--set", f"{k}={v}"))])
        described = json.loads(capsys.readouterr().out)
        assert status == 0 and described["type"] == "streams"
        [row] = described["members"]
        assert (row["member_id"], row["instance_id"], row["process_id"]) == ("member-a", "i-a", "p-a")
        assert row["member_epoch"] in (-2, described["target_assignment_epoch"])  # its -2 leave may be in already
        assert sorted(tuple(t) for t in row["active_tasks"]) == [("0", p) for p in range(6)]
    finally:
        transport.close()
        query.stop()
