"""The streaming query: records in, `applyInPandasWithState` by group id, responses and snapshots out.

A thin adapter over `coordinator_state.run_group`. The pipeline:

1. `mapInArrow(parse)`: every record becomes a request (keyed by its body's group id, with its
   event time), a tick (event time only) or an invalid record (a dead letter, plus an answer when
   it names a `reply_to`). Invalid records carry no event time, so they cannot move the watermark.
2. `withWatermark(event_time, lateness)`: ticks move it too; then ticks are filtered out.
3. `groupBy(invalid, group_id).applyInPandasWithState(EventTimeTimeout)`: per call, `run_group`
   fires the group's timers due by the watermark, processes its rows in log order and returns the
   next deadline; the timeout is set to that deadline minus one, because Spark times a key out
   only once the watermark is strictly past it. Invalid records go through the same operator under
   the `invalid` flag (no state), so the query has one output and one sink.
4. Output rows `(topic, key, value)`: responses keyed by `reply_to`, committed offsets keyed
   `GROUP/TOPIC/PARTITION` (null = gone), snapshots (null = tombstone) keyed by group id, dead
   letters keyed as received. A ListGroups is an invalid record here: no single group holds its answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark import Accumulator
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupState as SparkGroupState
from pyspark.sql.streaming.state import GroupStateTimeout

from coordinator_state import (
    EngineConfig,
    Invalid,
    Request,
    Tick,
    for_one_group,
    parse_raw,
    reject,
    run_group,
    to_json,
)

from .settings import engine_config

PARSED_SCHEMA = ("kind string, invalid boolean, group_id string, event_ms long, partition int, offset long, "
                 "record_ts long, value binary, dead_letter string, response string, reply_to string")
OUTPUT_SCHEMA = "topic string, key string, value string"
STATE_SCHEMA = "group binary"
METRICS_NAME = "coordinator"


def _source_label(source: str, partition: int, offset: int) -> str:
    """Where a dead letter came from: `file:LINE` for a traffic file, `topic:PARTITION:OFFSET` for Kafka."""
    return f"file:{offset + 1}" if source == "file" else f"topic:{partition}:{offset}"


PARSED_ARROW_SCHEMA = pa.schema([
    ("kind", pa.string()), ("invalid", pa.bool_()), ("group_id", pa.string()), ("event_ms", pa.int64()),
    ("partition", pa.int32()), ("offset", pa.int64()), ("record_ts", pa.int64()), ("value", pa.binary()),
    ("dead_letter", pa.string()), ("response", pa.string()), ("reply_to", pa.string())])

Parser = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def make_parser(max_clock_skew_ms: int | None, source: str) -> Parser:
    """The `mapInArrow` function of step 1. `max_clock_skew_ms` is None in a replay."""

    def parse(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows: list[tuple[Any, ...]] = []
            for raw, partition, offset, ts in zip(batch.column("value").to_pylist(),
                                                  batch.column("partition").to_pylist(),
                                                  batch.column("offset").to_pylist(),
                                                  batch.column("record_ts").to_pylist(), strict=True):
                parsed = for_one_group(parse_raw(raw, record_timestamp_ms=ts, max_clock_skew_ms=max_clock_skew_ms))
                if isinstance(parsed, Tick):
                    rows.append(("tick", False, None, parsed.timestamp_ms, partition, offset, ts, None, None, None,
                                 None))
                elif isinstance(parsed, Invalid):
                    letter, response = reject(parsed, _source_label(source, int(partition), int(offset)), raw)
                    # The dead letter already holds the record: the raw value is not shuffled a second time.
                    rows.append(("invalid", True, "", None, partition, offset, ts, None, to_json(letter),
                                 None if response is None else to_json(response),
                                 None if response is None else response["reply_to"]))
                else:
                    rows.append(("request", False, parsed.group_id, parsed.timestamp_ms, partition, offset, ts, raw,
                                 None, None, None))
            columns: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [[]] * len(PARSED_ARROW_SCHEMA)
            yield pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(columns, PARSED_ARROW_SCHEMA,
                                                                                  strict=True)],
                                             schema=PARSED_ARROW_SCHEMA)

    return parse


def make_group_step(settings: Mapping[str, Any], live: bool,
                    late_requests: Accumulator[int] | None = None) -> Callable[..., Iterator[pd.DataFrame]]:
    """The `applyInPandasWithState` function of step 3; `late_requests` counts requests older than the watermark."""
    config = EngineConfig.from_mapping(engine_config(settings))
    skew = int(settings["coordinator.max.clock.skew.ms"]) if live else None
    responses_topic = settings["coordinator.responses.topic"]
    snapshots_topic = settings["coordinator.snapshots.topic"]
    dead_letters_topic = settings["coordinator.dead.letters.topic"]
    offsets_topic = settings["coordinator.offsets.topic"]

    def step(key: tuple[Any, ...], batches: Iterator[pd.DataFrame], state: SparkGroupState) -> Iterator[pd.DataFrame]:
        invalid, group_id = bool(key[0]), str(key[1])
        frames = [pdf for pdf in batches if len(pdf)]
        rows = None if not frames else frames[0] if len(frames) == 1 else pd.concat(frames)
        if rows is not None and not _in_log_order(rows):
            rows = rows.sort_values(["partition", "offset"])
        out: list[tuple[str, str | None, str | None]] = []
        if invalid:
            assert rows is not None
            for letter, response, reply_to in zip(rows["dead_letter"], rows["response"], rows["reply_to"],
                                                  strict=True):
                out.append((dead_letters_topic, None, letter))
                if response is not None:
                    out.append((responses_topic, reply_to, response))
        else:
            requests: list[Request] = []
            if rows is not None:
                for raw, record_ts in zip(rows["value"], rows["record_ts"], strict=True):
                    parsed = for_one_group(parse_raw(
                        raw, record_timestamp_ms=None if pd.isna(record_ts) else int(record_ts),
                        max_clock_skew_ms=skew))
                    assert not isinstance(parsed, Tick | Invalid), "the parse stage routes these elsewhere"
                    requests.append(parsed)
            stored = state.get[0] if state.exists else None
            watermark = state.getCurrentWatermarkMs()
            outcome = run_group(None if stored is None else bytes(stored), watermark, requests, config)
            if late_requests is not None and outcome.late_requests:
                late_requests.add(outcome.late_requests)
            out += [(responses_topic, r["reply_to"], to_json(r)) for r in outcome.responses]
            for change in outcome.offset_changes:
                record = change.record()
                out.append((offsets_topic, change.key, None if record is None else to_json(record)))
            if outcome.snapshot is not None:
                out.append((snapshots_topic, group_id, to_json(outcome.snapshot)))
            if outcome.state is None:
                if state.exists:
                    state.remove()
                if outcome.tombstone:
                    out.append((snapshots_topic, group_id, None))
            else:
                state.update((outcome.state,))
                if outcome.next_deadline is not None:
                    state.setTimeoutTimestamp(max(outcome.next_deadline - 1, watermark, 1))
        yield pd.DataFrame({"topic": [o[0] for o in out], "key": [o[1] for o in out], "value": [o[2] for o in out]})

    return step


def _in_log_order(rows: pd.DataFrame) -> bool:
    """True if the rows already come in (partition, offset) order, as they almost always do. A pandas sort
    of a group's few rows costs more than the engine's work on them; this check costs a fiftieth of it."""
    partitions = rows["partition"].to_numpy()
    offsets = rows["offset"].to_numpy()
    if len(offsets) < 2:
        return True
    ahead = partitions[1:] > partitions[:-1]
    same = partitions[1:] == partitions[:-1]
    return bool((ahead | (same & (offsets[1:] > offsets[:-1]))).all())


def _count(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0))


def _empty_step(key: tuple[Any, ...], batches: Iterator[pd.DataFrame],
                state: SparkGroupState) -> Iterator[pd.DataFrame]:
    """The benchmark's ceiling: the same operator with no coordinator logic (reads its rows, answers nothing)."""
    for _ in batches:
        pass
    yield pd.DataFrame({"topic": [], "key": [], "value": []})


def build_pipeline(records: DataFrame, settings: Mapping[str, Any], *, live: bool, source: str = "topic",
                   late_requests: Accumulator[int] | None = None, empty_group_step: bool = False) -> DataFrame:
    """The whole query from a DataFrame of records (value binary, partition, offset, timestamp) to output rows.

    `late_requests`, if given, counts the requests processed after the watermark had passed them;
    `empty_group_step` replaces the coordinator by a function that answers nothing (the benchmark's ceiling).
    """
    lateness = int(settings["coordinator.lateness.ms"])
    skew = int(settings["coordinator.max.clock.skew.ms"]) if live else None
    parsed = (
        records.select("value", "partition", "offset", F.unix_millis("timestamp").alias("record_ts"))
        .mapInArrow(make_parser(skew, source), PARSED_SCHEMA)
        .withColumn("event_time", F.timestamp_millis("event_ms"))
        .withWatermark("event_time", f"{lateness} milliseconds")
        .observe(METRICS_NAME,
                 F.count(F.lit(1)).alias("records"),
                 _count(F.col("kind") == "request").alias("requests"),
                 _count(F.col("kind") == "tick").alias("ticks"),
                 _count(F.col("kind") == "invalid").alias("dead_letters"))
    )
    # With EventTimeTimeout, Spark drops the rows whose watermarked event-time column is older than the
    # watermark (late requests) before the function sees them; they must be answered instead. So the
    # column the operator sees keeps its watermark marker but holds null, which is never late (the
    # filter drops a row only when `event_time <= watermark` is true). The watermark itself was computed
    # upstream from the real event times.
    never_late = F.lit(None).cast("timestamp").alias(
        "event_time", metadata={"spark.watermarkDelayMs": lateness})
    requests = parsed.filter(F.col("kind") != "tick")
    step = _empty_step if empty_group_step else make_group_step(settings, live, late_requests)
    return (
        requests.select(*[c for c in requests.columns if c != "event_time"], never_late)
        .groupBy("invalid", "group_id")
        .applyInPandasWithState(step, OUTPUT_SCHEMA, STATE_SCHEMA, "append",
                                GroupStateTimeout.EventTimeTimeout)
    )
