"""`coordinator record`: the line of each record, the partition merge, where it starts, its exit codes."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from coordinator_cli import main
from coordinator_job.broker import create_topics, free_loopback_port
from coordinator_job.record import Fetched, PartitionMerge, TopicRecorder, record_line
from coordinator_state import SIMULATION_EPOCH_MS
from tests.kafka_threads import kafka_network_threads_since
from tests.replay.builder import TrafficRecord, produce


def fetched(value: bytes | None, key: bytes | None = b"orders", timestamp: int = SIMULATION_EPOCH_MS,
            partition: int = 0, offset: int = 0) -> Fetched:
    return Fetched(timestamp, partition, offset, key, value)


@pytest.mark.parametrize(("value", "key", "line", "kind"), [
    (b'{"api":"Tick", "timestamp_ms":5}', None, b'{"api":"Tick", "timestamp_ms":5}', "object"),
    (b'{"api":"Tick"}', None, b'{"api":"Tick","timestamp_ms":1700000000000}', "filled"),
    (b'{"source":"x"}', None, b'{"source":"x"}', "object"),  # not an envelope: nothing to fill
    (b'{"api":\n"Tick","timestamp_ms":5}', None, b'{"api":"Tick","timestamp_ms":5}', "object"),
    (None, b"orders", b'{"group_id":"orders","tombstone":true}', "tombstone"),
    (None, None, b"", "bad"),
    (b"[1, 2]", None, b"[1, 2]", "bad"),
    (b"\xff not utf-8", None, b"\xff not utf-8", "bad"),
    (b'{"api": "Tick"', None, b'{"api": "Tick"', "bad"),
])
def test_the_line_of_a_record(value: bytes | None, key: bytes | None, line: bytes, kind: str) -> None:
    assert record_line(fetched(value, key)) == (line, kind)


def test_an_envelope_keeps_the_timestamp_it_has_and_a_record_without_one_fills_nothing() -> None:
    assert record_line(fetched(b'{"api":"Tick"}', timestamp=-1)) == (b'{"api":"Tick"}', "object")


def test_the_merge_orders_by_timestamp_then_partition_and_keeps_each_partition_in_order() -> None:
    merge = PartitionMerge([0, 1])
    p0 = [fetched(b"a", timestamp=5, offset=0), fetched(b"b", timestamp=3, offset=1)]  # a producer's clock went back
    p1 = [fetched(b"c", timestamp=4, partition=1), fetched(b"d", timestamp=5, partition=1, offset=1)]
    merge.add(p0)
    assert list(merge.ready()) == []  # partition 1 may still bring an earlier record
    merge.add(p1)
    assert [r.value for r in merge.ready()] == [b"c", b"a", b"b"]  # 1 is empty again: d waits
    assert [r.value for r in merge.drain()] == [b"d"]
    assert list(PartitionMerge([]).ready()) == []  # a topic whose partitions are not known yet


@pytest.mark.kafka
def test_without_from_beginning_only_new_records_are_written(kafka_bootstrap: str,
                                                             unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("snapshots")
    create_topics(kafka_bootstrap, [(topic, 2, False)])
    old = TrafficRecord(b"old", b'{"group_id":"old","state":"Empty"}', SIMULATION_EPOCH_MS, 0, b"")
    produce(kafka_bootstrap, topic, [old])
    out = io.BytesIO()
    with TopicRecorder(kafka_bootstrap, topic, from_beginning=False, lateness_ms=0) as recorder:
        produce(kafka_bootstrap, topic, [
            TrafficRecord(b"g", b'{"group_id":"g","state":"Stable"}', 1_700_000_000_300, 1, b""),
            TrafficRecord(b"g", None, 1_700_000_000_200, 0, b""),  # a tombstone
        ])
        counts = recorder.run(out, until_idle_s=1.0, stop=threading.Event())
    assert out.getvalue().splitlines() == [b'{"group_id":"g","tombstone":true}', b'{"group_id":"g","state":"Stable"}']
    assert (counts["records"], counts["tombstone"]) == (2, 1)


def test_bad_flags_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["record", "--output", str(tmp_path / "r.jsonl")],
                 ["record", "--topic", "t", "--output", str(tmp_path / "r.jsonl"), "--until-idle", "0"]):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
    assert "--until-idle: expected a number of seconds greater than 0" in capsys.readouterr().err


def test_an_unwritable_output_exits_1_before_any_broker_is_asked(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "no-such-dir" / "r.jsonl"
    assert main(["record", "--topic", "t", "--output", str(output), "--bootstrap-servers", "127.0.0.1:1"]) == 1
    assert f"cannot write {output}: No such file or directory" in capsys.readouterr().err


def test_an_unreachable_broker_exits_1_saying_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    address = f"127.0.0.1:{free_loopback_port()}"
    threads_before = set(threading.enumerate())
    assert main(["record", "--topic", "t", "--output", str(tmp_path / "r.jsonl"), "--bootstrap-servers", address,
                 "--connect-timeout", "0.5"]) == 1
    err = capsys.readouterr().err
    assert f"cannot reach a Kafka broker at {address} within 0.5 s" in err
    assert "--bootstrap-servers" in err
    # No kafka-python client was built to find that out: a failed one would leave its network thread running.
    assert kafka_network_threads_since(threads_before) == []


@pytest.mark.kafka
def test_a_missing_topic_exits_1(kafka_bootstrap: str, unique_topic: Callable[[str], str], tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    topic = unique_topic("absent")
    assert main(["record", "--topic", topic, "--output", str(tmp_path / "r.jsonl"),
                 "--bootstrap-servers", kafka_bootstrap, "--until-idle", "1"]) == 1
    assert f"cannot record: topic {topic!r} does not exist" in capsys.readouterr().err


@pytest.mark.kafka
def test_bad_records_are_written_counted_and_exit_0(kafka_bootstrap: str, unique_topic: Callable[[str], str],
                                                    tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topic = unique_topic("requests")
    create_topics(kafka_bootstrap, [(topic, 1, False)])
    produce(kafka_bootstrap, topic, [TrafficRecord(None, raw, SIMULATION_EPOCH_MS + i, 0, b"")
                                     for i, raw in enumerate([b"not json", b"two\nlines", b'{"api":"Tick"}'])])
    output = tmp_path / "r.jsonl"
    assert main(["record", "--topic", topic, "--output", str(output), "--bootstrap-servers", kafka_bootstrap,
                 "--from-beginning", "--until-idle", "1"]) == 0
    assert output.read_bytes() == b'not json\ntwo\nlines\n{"api":"Tick","timestamp_ms":1700000000002}\n'
    captured = capsys.readouterr()
    assert "2 bad records (not a JSON object), 1 of them spanning several lines" in captured.err
    summary = json.loads(captured.out.splitlines()[-1])
    assert (summary["records"], summary["bad_records"], summary["timestamps_filled"]) == (3, 2, 1)


@pytest.mark.kafka
def test_a_late_request_is_recorded_as_it_is_and_counted(kafka_bootstrap: str, unique_topic: Callable[[str], str],
                                                         tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topic = unique_topic("requests")
    create_topics(kafka_bootstrap, [(topic, 1, False)])
    tick = b'{"api":"Tick","timestamp_ms":1700000009000}'
    heartbeat = (b'{"api":"Heartbeat","version":4,"correlation_id":1,"reply_to":"c","timestamp_ms":1700000006000,'
                 b'"body":{"group_id":"g","generation_id":1,"member_id":"m"}}')  # older than 9000 - 2000
    produce(kafka_bootstrap, topic, [TrafficRecord(None, tick, SIMULATION_EPOCH_MS, 0, b""),
                                     TrafficRecord(b"g", heartbeat, SIMULATION_EPOCH_MS + 1, 0, b"")])
    output = tmp_path / "r.jsonl"
    assert main(["record", "--topic", topic, "--output", str(output), "--bootstrap-servers", kafka_bootstrap,
                 "--from-beginning", "--until-idle", "1", "--set", "coordinator.lateness.ms=2000"]) == 0
    assert output.read_bytes() == tick + b"\n" + heartbeat + b"\n"
    captured = capsys.readouterr()
    assert json.loads(captured.out.splitlines()[-1])["late_requests"] == 1
    assert "1 late requests" in captured.err and "depend on its micro-batch boundaries" in captured.err
