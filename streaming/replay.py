"""Replaying recorded traffic: the local engine record by record, or the production query in Spark.

Both take the same file and settings and give the same responses, final snapshots and dead letters
(PROTOCOL.md section 5), whatever the micro-batch size, for traffic without late requests.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coordinator_state import ReplayDriver, to_json
from coordinator_state import tombstone as tombstone_record

from .file_source import split_lines
from .settings import engine_config

Progress = Callable[[int, int], None]


@dataclass
class ReplayResult:
    """What a replay produced, as the JSON lines it writes."""

    responses: list[str] = field(default_factory=list)
    snapshots: dict[str, str] = field(default_factory=dict)  # group id -> final snapshot or tombstone line
    dead_letters: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)


def tombstone(group_id: str) -> str:
    return to_json(tombstone_record(group_id))


def replay_local(lines: Sequence[bytes], settings: Mapping[str, Any], progress: Progress | None = None) -> ReplayResult:
    """Record by record through the engine's replay driver (PROTOCOL.md section 5's local clock rule)."""
    driver = ReplayDriver(engine_config(settings))
    result = ReplayResult()
    for number, raw in enumerate(lines, start=1):
        fed = driver.feed(raw, f"file:{number}")
        if fed.dead_letter is not None:
            result.dead_letters.append(to_json(fed.dead_letter))
        result.responses += map(to_json, fed.responses)
        if progress is not None and number % 1000 == 0:
            progress(number, len(lines))
    finished = driver.finish()
    result.responses += map(to_json, finished.responses)
    result.snapshots = {group_id: to_json(snapshot) for group_id, snapshot in finished.snapshots.items()}
    result.counts.update(driver.counts)
    result.counts["late_requests"] = driver.late_requests
    return result


def replay_spark(path: Path, settings: Mapping[str, Any], records_per_batch: int | None,
                 checkpoint: Path | None, master: str | None) -> ReplayResult:
    """The production query over the file, with a fresh checkpoint unless one is given."""
    from .job import build_pipeline
    from .spark_session import build_session

    spark = build_session(settings, master, app_name="coordinator-replay")
    batches: dict[int, list[tuple[str, str | None, str | None]]] = {}

    def collect(frame: Any, batch_id: int) -> None:
        # Keyed by batch id: a batch Spark runs again after a failure replaces its first attempt.
        batches[batch_id] = [(row.topic, row.key, row.value) for row in frame.collect()]

    records = spark.readStream.format("coordinator_file").option("path", str(path))
    if records_per_batch:
        records = records.option("maxRecordsPerBatch", str(records_per_batch))
    late_requests = spark.sparkContext.accumulator(0)
    output = build_pipeline(records.load(), settings, live=False, source="file", late_requests=late_requests)
    with tempfile.TemporaryDirectory(prefix="replay-checkpoint-") as fresh:
        location = str(checkpoint) if checkpoint is not None else fresh
        query = (output.writeStream.foreachBatch(collect).option("checkpointLocation", location)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
    result = ReplayResult()
    topics = {settings[k]: k for k in ("coordinator.responses.topic", "coordinator.snapshots.topic",
                                        "coordinator.dead.letters.topic")}
    for batch_id in sorted(batches):
        for topic, key, value in batches[batch_id]:
            kind = topics[topic]
            if kind == "coordinator.responses.topic":
                result.responses.append(str(value))
            elif kind == "coordinator.dead.letters.topic":
                result.dead_letters.append(str(value))
            else:
                assert key is not None
                result.snapshots[key] = tombstone(key) if value is None else str(value)
    result.counts["dead_letters"] = len(result.dead_letters)
    result.counts["late_requests"] = late_requests.value
    return result


def write_lines(path: Path, lines: Sequence[str]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(line)
            fh.write("\n")


def write_result(result: ReplayResult, output: Path, snapshots: Path | None, dead_letters: Path | None) -> None:
    write_lines(output, result.responses)
    if snapshots is not None:
        write_lines(snapshots, [result.snapshots[g] for g in sorted(result.snapshots)])
    if dead_letters is not None:
        write_lines(dead_letters, result.dead_letters)


def report_bad_lines(result: ReplayResult) -> None:
    """Each bad line with its number and reason, on stderr: a replay reports them and goes on."""
    for line in result.dead_letters:
        letter = json.loads(line)
        print(f"{letter['source']}: {letter['reason']}", file=sys.stderr)


def read_traffic(path: Path) -> list[bytes]:
    return split_lines(path.read_bytes())
