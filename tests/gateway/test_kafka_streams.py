"""Kafka Streams 4.4 (`group.protocol=streams`, at-least-once, its default) through the gateway in front of the
in-process engine, three instances of a count by key through a repartition topic (jvm/'s StreamsCounter), driven by
`chaos_harness.real_streams`; and, where Kafka's own coordinator is the measure, the same run straight at the
session's Apache Kafka 4.4 broker with the same group settings (session, heartbeat interval, no initial delay).

Group epochs and task movements come from the coordinator's StreamsGroupDescribe (polled; a movement is an active
task going to another instance), the counts from the output topic, record by record."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chaos_harness.real_streams import KEYS, RealStreamsChaos
from kafka_jvm.build import missing_tools

pytestmark = [pytest.mark.kafka,
              pytest.mark.skipif(bool(missing_tools()), reason="Kafka Streams needs Java and Maven: "
                                 + "; ".join(missing_tools()))]
INSTANCES = 3
TASKS_PER_INSTANCE = 2  # one input partition per instance, two subtopologies
# A static instance's restart (a JVM start, then its join) must fit in its session: 5-8 s on a loaded 2-core machine,
# 15 s and more when it is very loaded. Nobody's session is meant to run out there, so a long one costs no time.
STATIC_TIMINGS = {"session_timeout_ms": 30_000, "heartbeat_interval_ms": 500}
# Where nobody needs to be back in time, a short session: a killed instance is noticed soon.
SHORT_TIMINGS = {"session_timeout_ms": 5_000, "heartbeat_interval_ms": 500}


def run(kafka_bootstrap: str, scenario: str, membership: str, timings: dict[str, int],
        coordinator: str = "gateway") -> dict[str, Any]:
    report = RealStreamsChaos(kafka_bootstrap, scenario, INSTANCES, membership=membership, coordinator=coordinator,
                              timings=timings).run()
    print(json.dumps({k: v for k, v in report.items() if k != "timeline"}, indent=1))
    print("timeline:", json.dumps(report["timeline"]))
    assert report["final"]["settled"] and report["final"]["members"] == INSTANCES, report["final"]
    if coordinator == "gateway":  # every request served, the repartition and changelog topics created once each
        assert report["gateway"]["connections_closed_for"] == {}
        assert report["gateway"]["coordinator_timeouts"] == report["gateway"]["internal_topic_errors"] == 0
        assert report["gateway"]["internal_topics_created"] == 2
    return report


def assert_every_count_exact(report: dict[str, Any]) -> None:
    """Each input record yielded one output record carrying its key's next count: 1, 2, ... n for every key."""
    assert report["keys"] == report["keys_exact"] > 0, report
    assert report["output_records"] == report["records_produced"] > 0


def test_static_instances_bounced_one_by_one_keep_their_tasks_and_every_count_is_exact(
        kafka_bootstrap: str) -> None:
    report = run(kafka_bootstrap, "rolling-bounce", "static", STATIC_TIMINGS)
    # Each close() is a temporary leave (-2) and each new incarnation takes its instance id's place (Kafka 4.4's
    # static membership): no epoch bump, no task handed to anybody else.
    assert (report["group_epoch_bumps"], report["task_movements"]) == (0, 0), report["moves"]
    assert report["tasks_after"] == report["tasks_before"]
    assert_every_count_exact(report)


def test_an_instance_killed_for_longer_than_its_session_loses_its_tasks_gets_them_back_once_and_no_record(
        kafka_bootstrap: str) -> None:
    report = run(kafka_bootstrap, "crash", "static", SHORT_TIMINGS)
    # Fenced when its session ran out (+1), back as a new member (+1); its two tasks went to the others, and two
    # came back to it: each survivor kept two of its three (the sticky assignor's quota), none moved between them.
    killed = report["moves"][0][1]
    assert report["group_epoch_bumps"] == 2
    assert [move[1] for move in report["moves"][:TASKS_PER_INSTANCE]] == [killed] * TASKS_PER_INSTANCE
    assert [move[2] for move in report["moves"][TASKS_PER_INSTANCE:]] == [killed] * TASKS_PER_INSTANCE
    assert report["task_movements"] == 2 * TASKS_PER_INSTANCE
    # At-least-once: what the killed instance had processed past its last commit is processed again by the new
    # owner, so a key may count more, but no more than its records past the committed offsets of the killed
    # instance's input and repartition partitions (up to their ends at the kill); never less.
    # A key none of whose records was re-processable counts exactly 1, 2, ..., n (each key's records share an input
    # partition and a repartition partition, so some keys always stay clear of the killed instance's two).
    assert report["keys_lost"] == [] and report["keys_over_counted_beyond_reprocessable"] == []
    clear = set(KEYS) - set(report["reprocessable"])
    assert clear and not clear & set(report["keys_not_exact"]), report["reprocessable"]


def test_dynamic_instances_move_tasks_on_each_bounce_as_they_do_on_a_plain_kafka_broker(
        kafka_bootstrap: str) -> None:
    through_gateway = run(kafka_bootstrap, "rolling-bounce", "dynamic", SHORT_TIMINGS)
    on_kafka = run(kafka_bootstrap, "rolling-bounce", "dynamic", SHORT_TIMINGS, coordinator="broker")
    figures = {name: (r["group_epoch_bumps"], r["task_movements"])
               for name, r in (("gateway", through_gateway), ("kafka", on_kafka))}
    print("group epoch bumps, task movements:", figures)
    # Per bounce, on both: close() of a dynamic member is a leave (-1: the group epoch +1) and its new incarnation a
    # new member (+1). The run waits for the group to settle between the two, so each epoch gets its own target
    # assignment (no timing folds them): the sticky assignor gives the leaver's two tasks to the survivors (3 each),
    # then takes one back from each for the newcomer (quota 2), whose process id is the one it had (its state
    # directory) but which owns nothing yet: 4 movements a bounce.
    assert figures["gateway"] == figures["kafka"] == (2 * INSTANCES, 2 * TASKS_PER_INSTANCE * INSTANCES)
    assert_every_count_exact(through_gateway)
    assert_every_count_exact(on_kafka)
