"""Replaying recorded traffic: the local engine record by record, or the production query in Spark.

Both take the same file and settings and give the same responses, final snapshots, final committed
offsets and dead letters (PROTOCOL.md section 5), whatever the micro-batch size, for traffic without
late requests.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from coordinator_state import OffsetChange, ReplayDriver, to_json
from coordinator_state import tombstone as tombstone_record

from .settings import engine_config
from .traffic_file import split_lines

Progress = Callable[[int, int], None]


@dataclass
class ReplayResult:
    """What a replay produced, as the JSON lines it writes."""

    responses: list[str] = field(default_factory=list)
    snapshots: dict[str, str] = field(default_factory=dict)  # group id -> final snapshot or tombstone line
    offsets: dict[str, str] = field(default_factory=dict)  # GROUP/TOPIC/PARTITION -> final value or tombstone
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
    result.offsets = {key: to_json(line) for key, line in finished.offsets.items()}
    result.counts.update(driver.counts)
    result.counts["late_requests"] = driver.late_requests
    return result


@dataclass
class SparkReplayOutput:
    """What a Spark replay wrote to its files, and the figures about it."""

    responses: int = 0
    dead_letters: int = 0
    snapshots: dict[str, str] = field(default_factory=dict)  # group id -> final snapshot or tombstone line
    offsets: dict[str, str] = field(default_factory=dict)  # GROUP/TOPIC/PARTITION -> final value or tombstone
    late_requests: int = 0
    task_metrics: dict[str, float] = field(default_factory=dict)  # what the tasks timed and counted (task_metrics)


PROGRESS_INTERVAL_S = 2


def _lines_done(progress: Mapping[str, Any]) -> int:
    """The file source's end offset in a progress report: lines finished (the final tick counts one more)."""
    end = progress["sources"][0]["endOffset"]
    return int((json.loads(end) if isinstance(end, str) else end)["line"])


def replay_spark_to_files(path: Path, settings: Mapping[str, Any], records_per_batch: int | None,
                          checkpoint: Path | None, master: str | None, responses: BinaryIO,
                          dead_letters: BinaryIO | None,
                          on_progress: Callable[[int], None] | None = None) -> SparkReplayOutput:
    """The production query over the file, with a fresh checkpoint unless one is given, in bounded memory.

    Each micro-batch's output goes to Parquet files written by the executors (a batch Spark runs again
    after a failure overwrites its first attempt); at the end they are read back batch by batch, a
    record batch at a time, into `responses` and `dead_letters`. Only each group's final snapshot and each
    committed offset's final line are held in memory. `on_progress`, if given, is called every few seconds
    with the number of lines the query has finished.
    """
    import pyarrow.parquet as pq

    from .job import build_pipeline
    from .spark_session import build_session, use_checkpoint
    from .task_metrics import task_metrics

    spark = build_session(settings, master, app_name="coordinator-replay")
    records = spark.readStream.format("coordinator_file").option("path", str(path))
    if records_per_batch:
        records = records.option("maxRecordsPerBatch", str(records_per_batch))
    late_requests = spark.sparkContext.accumulator(0)
    metrics = task_metrics(spark.sparkContext)
    output = build_pipeline(records.load(), settings, live=False, source="file", late_requests=late_requests,
                            metrics=metrics)
    result = SparkReplayOutput()
    responses_topic = settings["coordinator.responses.topic"]
    dead_letters_topic = settings["coordinator.dead.letters.topic"]
    offsets_topic = settings["coordinator.offsets.topic"]
    with tempfile.TemporaryDirectory(prefix="replay-") as scratch:
        spool = Path(scratch) / "batches"

        def spill(frame: Any, batch_id: int) -> None:
            frame.write.mode("overwrite").parquet(str(spool / f"{batch_id:012d}"))

        location = str(checkpoint) if checkpoint is not None else str(Path(scratch) / "checkpoint")
        use_checkpoint(spark, location)
        query = (output.writeStream.foreachBatch(spill).option("checkpointLocation", location)
                 .trigger(availableNow=True).start())
        while not query.awaitTermination(PROGRESS_INTERVAL_S):
            if on_progress is not None and query.lastProgress is not None:
                on_progress(_lines_done(query.lastProgress))
        for batch in sorted(spool.iterdir()) if spool.exists() else []:
            for part in sorted(batch.glob("*.parquet")):
                for chunk in pq.ParquetFile(part).iter_batches(columns=["topic", "key", "value"]):
                    for topic, key, value in zip(*(chunk.column(i).to_pylist() for i in range(3)), strict=True):
                        if topic == responses_topic:
                            responses.write(value.encode() + b"\n")
                            result.responses += 1
                        elif topic == dead_letters_topic:
                            if dead_letters is not None:
                                dead_letters.write(value.encode() + b"\n")
                            result.dead_letters += 1
                        elif topic == offsets_topic:
                            result.offsets[key] = offset_tombstone(key) if value is None else str(value)
                        else:
                            result.snapshots[key] = tombstone(key) if value is None else str(value)
    result.task_metrics = dict(metrics.value)
    result.late_requests = int(late_requests.value)
    result.offsets = dict(sorted(result.offsets.items()))
    return result


def replay_spark(path: Path, settings: Mapping[str, Any], records_per_batch: int | None,
                 checkpoint: Path | None, master: str | None) -> ReplayResult:
    """`replay_spark_to_files`, read back into memory: for tests and small files."""
    with tempfile.TemporaryFile() as responses, tempfile.TemporaryFile() as dead_letters:
        written = replay_spark_to_files(path, settings, records_per_batch, checkpoint, master, responses,
                                        dead_letters)
        result = ReplayResult(snapshots=written.snapshots, offsets=written.offsets)
        responses.seek(0)
        result.responses = [line.decode().removesuffix("\n") for line in responses]
        dead_letters.seek(0)
        result.dead_letters = [line.decode().removesuffix("\n") for line in dead_letters]
    result.counts["dead_letters"] = len(result.dead_letters)
    result.counts["late_requests"] = written.late_requests
    return result


def offset_tombstone(key: str) -> str:
    """The file line of an offset gone from the offsets topic, from its key `GROUP/TOPIC/PARTITION`
    (Kafka topic names hold no '/', so the last two separators split it)."""
    group_id, topic, partition = key.rsplit("/", 2)
    return to_json(OffsetChange(group_id, topic, int(partition), None).line())


def write_lines(path: Path, lines: Sequence[str]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(line)
            fh.write("\n")


def write_result(result: ReplayResult, output: Path, snapshots: Path | None, dead_letters: Path | None,
                 offsets: Path | None = None) -> None:
    write_lines(output, result.responses)
    if snapshots is not None:
        write_lines(snapshots, [result.snapshots[g] for g in sorted(result.snapshots)])
    if dead_letters is not None:
        write_lines(dead_letters, result.dead_letters)
    if offsets is not None:
        write_lines(offsets, list(result.offsets.values()))


def report_bad_lines(result: ReplayResult) -> None:
    """Each bad line with its number and reason, on stderr: a replay reports them and goes on."""
    for line in result.dead_letters:
        letter = json.loads(line)
        print(f"{letter['source']}: {letter['reason']}", file=sys.stderr)


def read_traffic(path: Path) -> list[bytes]:
    return split_lines(path.read_bytes())
