"""Traffic produced to a request topic, recorded back and replayed gives what the traffic itself gives."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from coordinator_cli import main
from coordinator_job.broker import create_topics
from tests.replay.builder import produce, stable_group_traffic

pytestmark = pytest.mark.kafka


def test_record_then_replay_equals_the_replay_of_the_traffic(kafka_bootstrap: str, unique_topic: Callable[[str], str],
                                                             tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    traffic = stable_group_traffic()
    original = traffic.write(tmp_path / "traffic.jsonl")
    topic = unique_topic("requests")
    create_topics(kafka_bootstrap, [(topic, traffic.partitions, False)])
    produce(kafka_bootstrap, topic, traffic.records)

    recording = tmp_path / "recording.jsonl"
    assert main(["record", "--topic", topic, "--output", str(recording), "--from-beginning", "--until-idle", "2",
                 "--bootstrap-servers", kafka_bootstrap]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert (summary["records"], summary["bad_records"], summary["timestamps_filled"]) == (len(traffic.records), 1, 1)
    assert main(["diff", str(original), str(recording)]) == 0  # the same lines, in the same order

    outputs = {}
    for name, source in (("original", original), ("recorded", recording)):
        outputs[name] = [tmp_path / f"{name}.{kind}.jsonl" for kind in ("responses", "snapshots", "dead-letters")]
        responses, snapshots, dead_letters = map(str, outputs[name])
        assert main(["replay", "--engine", "local", "--input", str(source), "--output", responses,
                     "--snapshots", snapshots, "--dead-letters", dead_letters]) == 0
    for ours, theirs in zip(outputs["original"], outputs["recorded"], strict=True):
        assert main(["diff", str(ours), str(theirs)]) == 0, capsys.readouterr().out

    responses = [json.loads(line) for line in outputs["recorded"][0].read_text().splitlines()]
    heartbeats = [r["body"]["error"] for r in responses if r["api"] == "Heartbeat"]
    assert heartbeats == ["NONE", "NONE"]  # the unstamped heartbeat was read at its record's timestamp
    [snapshot] = map(json.loads, outputs["recorded"][1].read_text().splitlines())
    assert (snapshot["state"], len(snapshot["members"])) == ("Stable", 2)
    assert len(outputs["recorded"][2].read_text().splitlines()) == 1  # the hostile record
