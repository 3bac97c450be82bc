"""Offsets through the real job on a real broker: a static member commits, restarts, resumes; the CLI sees it.

The streaming query runs on Kafka (the embedded broker unless KAFKA_BOOTSTRAP_SERVERS is set); a real
`GroupMember` (commit_interval_ms set) talks to it through `KafkaTransport`, in real time. Its first
process commits what it processed and dies without a word; a second process with the same
group.instance.id, started within the session, gets the same generation back (KIP-345: no rebalance) and
its OffsetFetch returns the first one's last commit. `coordinator groups --describe --members --offsets`
then shows the group, its instance id and the committed offsets, from the running job, which refuses
`--delete` and `--delete-offsets` of the live group.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from coordinator_cli.main import main
from coordinator_job.live_job import ensure_topics, start_query
from coordinator_job.settings import load_settings
from group_client import GroupMember, MemberConfig, MemberState
from group_client.kafka_transport import KafkaTransport

pytestmark = [pytest.mark.spark, pytest.mark.kafka]
TOPICS = ("coordinator.requests.topic", "coordinator.responses.topic", "coordinator.snapshots.topic",
          "coordinator.dead.letters.topic", "coordinator.offsets.topic")


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def run_until(member: GroupMember, transport: KafkaTransport, query: StreamingQuery, done: Callable[[], bool],
              timeout_s: float, what: str, on_turn: Callable[[], None] = lambda: None) -> None:
    """Drives the member in real time until `done()` (or fails after `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            progress = query.lastProgress or {}
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; member {member.state}, "
                                 f"committed {member.committed}, {member.stats}; query active {query.isActive}, "
                                 f"last batch {progress.get('batchId')} ({progress.get('durationMs')}), "
                                 f"exception {query.exception()}")
        for request in member.poll(wall_ms()):
            transport.send(request)
        for response in transport.receive(member.reply_to, timeout_ms=200):
            member.poll(wall_ms())
            member.on_response(response)
        on_turn()


def test_a_static_member_resumes_from_its_commits_and_the_cli_shows_it(
        spark: SparkSession, kafka_bootstrap: str, unique_topic: Any, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    overrides = [f"bootstrap.servers={kafka_bootstrap}", "group.initial.rebalance.delay.ms=0",
                 *(f"{key}={unique_topic(key.split('.')[1])}" for key in TOPICS)]
    settings = load_settings(overrides=overrides)
    ensure_topics(settings)
    query = start_query(spark, settings, tmp_path / "checkpoint")
    config = MemberConfig(group_id="orders", client_id="consumer-1", topics=("events",),
                          topic_partitions={"events": 3}, group_instance_id="instance-1",
                          session_timeout_ms=60000, heartbeat_interval_ms=3000, rebalance_timeout_ms=60000,
                          commit_interval_ms=1000)
    transport = KafkaTransport(kafka_bootstrap, request_topic=settings["coordinator.requests.topic"],
                               response_topic=settings["coordinator.responses.topic"])
    try:
        first = GroupMember(config, "consumer-1-first")
        run_until(first, transport, query, lambda: len(first.positions) == 3, 180, "the first process's positions")

        def process() -> None:  # the application: a few records a turn on every partition
            for partition, position in list(first.positions.items()):
                first.consumed(partition, min(position + 5, 40 + 10 * partition[1]))

        target = {("events", p): 40 + 10 * p for p in range(3)}
        run_until(first, transport, query, lambda: first.committed == target, 180, "the first process's commits",
                  process)
        generation = first.generation_id
        # The first process dies (no LeaveGroup: a static member), the second starts within the session.
        second = GroupMember(config, "consumer-1-second")
        run_until(second, transport, query, lambda: len(second.positions) == 3, 180, "the second process's positions")
        assert second.state is MemberState.STABLE and second.generation_id == generation  # no rebalance
        assert second.positions == target  # it resumes where the first one's last commit left off

        settings_args = [arg for key in TOPICS for arg in ("--set", f"{key}={settings[key]}")]
        status = main(["groups", "--describe", "--group", "orders", "--members", "--offsets",
                       "--bootstrap-servers", kafka_bootstrap, *settings_args])
        out = capsys.readouterr().out
        assert status == 0, out
        members, offsets = out.strip().split("\n\n")
        header, row = members.splitlines()
        assert header.split() == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert row.split()[:3] == ["orders", second.member_id, "instance-1"] and row.split()[-1] == "3"
        lines = offsets.splitlines()
        assert lines[0].split()[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
        current = {int(line.split()[2]): line.split()[3] for line in lines[1:]}
        assert current == {p: str(40 + 10 * p) for p in range(3)}
        assert all(re.fullmatch(r"instance-1-[0-9a-f-]{36}", line.split()[6]) for line in lines[1:])

        status = main(["groups", "--list", "--state", "--bootstrap-servers", kafka_bootstrap, *settings_args])
        assert status == 0 and ["orders", "Stable"] in [line.split() for line in capsys.readouterr().out.splitlines()]

        # The job refuses to delete a group with a member, or the offsets of a topic it subscribes to.
        status = main(["groups", "--delete", "--group", "orders", "--bootstrap-servers", kafka_bootstrap,
                       *settings_args])
        assert status == 1 and "GroupNotEmptyException" in capsys.readouterr().out
        status = main(["groups", "--delete-offsets", "--group", "orders", "--topic", "events:0",
                       "--bootstrap-servers", kafka_bootstrap, *settings_args])
        out = capsys.readouterr().out
        assert status == 1 and "forbidden while the consumer group is actively subscribed" in out
    finally:
        transport.close()
        query.stop()
