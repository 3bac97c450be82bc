"""The streaming query: records in, `applyInPandasWithState` by group id, responses and snapshots out.

A thin adapter over `coordinator_state.run_group`. The pipeline:

1. `mapInArrow(parse)`: every record becomes a request (keyed by its body's group id, with its
   event time), a tick (event time only) or an invalid record (a dead letter, plus an answer when
   it names a `reply_to`). Invalid records carry no event time, so they cannot move the watermark.
   The requests of one state key (the group id, or its bucket: `state_buckets`) from one Arrow batch of one source
   partition travel as one row (a pack, in log order, with their latest event time), and so do the batch's invalid
   records (state key null).
2. `withWatermark(event_time, lateness)`: ticks move it too; then ticks are filtered out.
3. `groupBy(state_key).applyInPandasWithState(EventTimeTimeout)`: per call, `run_group`, for each of the key's
   groups with requests or due, fires the group's timers due by the watermark, processes its rows in log order and
   returns the next deadline; the key's timeout is set to its groups' first deadline minus one, because Spark times
   a key out only once the watermark is strictly past it (`wake_at`). Invalid records go through the same operator
   under the null key (no state), so the query has one output and one sink. With
   `coordinator.stateful.operator = "transformWithState"` the Row-based `transformWithState` runs the same
   `CoordinatorStep` instead; its event-time timers fire once the watermark reaches them, so it arms the
   deadline itself.
4. Output rows `(topic, key, value)`: responses keyed by `reply_to`, committed offsets keyed
   `GROUP/TOPIC/PARTITION` (null = gone), snapshots (null = tombstone) keyed by group id, dead
   letters keyed as received. A ListGroups is an invalid record here: no single group holds its answer.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark import Accumulator
from pyspark.sql import Column, DataFrame, GroupedData, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupState as SparkGroupState
from pyspark.sql.streaming.state import GroupStateTimeout
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from coordinator_metrics import ChangedGroups, census_entry
from coordinator_state import (
    EngineConfig,
    Invalid,
    Tick,
    for_one_group,
    group_requests,
    parse_raw,
    reject,
    run_group,
    to_json,
)
from coordinator_state.envelope import REPLY_TO

from .settings import TRANSFORM_WITH_STATE, engine_config, stateful_operator
from .spark_session import use_state_store
from .state_buckets import StoredGroup, bucket_keys, decode_bucket, encode_bucket, next_wake, state_key
from .task_metrics import (
    ENGINE_MS,
    GROUPS_STEPPED,
    OPERATOR_CALLS,
    OPERATOR_INPUT_MS,
    OPERATOR_MS,
    STATE_LOAD_MS,
    STATE_WRITE_MS,
    TaskMetrics,
)
from .worker_heap import freeze_long_lived_objects

# One row per pack: a state key's requests from one Arrow batch of one source partition (in log order), the
# invalid records of one batch (state key null), or a tick. Packing moves a tenth of the rows through the shuffle and
# into the operator. A pack travels as one pickled tuple: the operators pay per key and per column (PySpark's
# applyInPandasWithState builds a pandas Series per column for every group, the Row-based transformWithState
# converts every cell), so the operator reads two columns (and the watermark's) instead of ten. Only the parse stage
# of the same query writes them (in Spark's shuffle files), so nothing else is ever unpickled.
PARSED_SCHEMA = "kind string, state_key string, event_ms long, count int, pack binary"
# What the stateful operator reads, in this order (the Row-based adapter unpacks by position).
OPERATOR_COLUMNS = ("state_key", "pack")
OUTPUT_SCHEMA = "topic string, key string, value string"
STATE_SCHEMA = "groups binary"  # a state key's groups (state_buckets)
TWS_STATE_SCHEMA = "groups binary, timer long"  # a state key's groups and the timer armed for them
METRICS_NAME = "coordinator"
PICKLE_PROTOCOL = 5
# (partition, offset, group ids, raw records, their broker timestamps) and (partition, offset, dead letters, answers,
# reply_tos).
RequestPack = tuple[int, int, list[str], list[bytes], list[int | None]]
InvalidPack = tuple[int, int, list[str], list[str | None], list[str | None]]


def _source_label(source: str, partition: int, offset: int) -> str:
    """Where a dead letter came from: `file:LINE` for a traffic file, `topic:PARTITION:OFFSET` for Kafka."""
    return f"file:{offset + 1}" if source == "file" else f"topic:{partition}:{offset}"


PARSED_ARROW_SCHEMA = pa.schema([("kind", pa.string()), ("state_key", pa.string()), ("event_ms", pa.int64()),
                                 ("count", pa.int32()), ("pack", pa.binary())])

Parser = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
# Step 3: the packs grouped by state key (null: the invalid records) in, output rows of OUTPUT_SCHEMA out.
StatefulOperator = Callable[[GroupedData], DataFrame]


class _Pack:
    """The requests of one state key's groups, or the invalid records, from one Arrow batch of one source
    partition."""

    __slots__ = ("answers", "event_ms", "group_ids", "letters", "offset", "partition", "record_ts", "records",
                 "reply_tos")

    def __init__(self, partition: int, offset: int) -> None:
        self.partition, self.offset = partition, offset
        self.event_ms: int | None = None
        self.group_ids: list[str] = []
        self.records: list[bytes] = []
        self.record_ts: list[int | None] = []
        self.letters: list[str] = []
        self.answers: list[str | None] = []
        self.reply_tos: list[str | None] = []


def state_keys(settings: Mapping[str, Any]) -> tuple[str, ...]:
    """The buckets' state keys (state_buckets.bucket_keys; none: a key per group), for `coordinator.state.buckets`
    and `coordinator.shuffle.partitions`."""
    return bucket_keys(int(settings["coordinator.state.buckets"]), int(settings["coordinator.shuffle.partitions"]))


def make_parser(max_clock_skew_ms: int | None, source: str, keys: tuple[str, ...]) -> Parser:
    """The `mapInArrow` function of step 1. `max_clock_skew_ms` is None in a replay; `keys` are the buckets' state
    keys (`state_keys`)."""

    def parse(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        freeze_long_lived_objects()
        for batch in batches:
            ticks: list[int] = []  # their event times
            packs: dict[tuple[bool, str, int], _Pack] = {}  # by (invalid, state key, partition), first seen first
            for raw, partition, offset, ts in zip(batch.column("value").to_pylist(),
                                                  batch.column("partition").to_pylist(),
                                                  batch.column("offset").to_pylist(),
                                                  batch.column("record_ts").to_pylist(), strict=True):
                parsed = for_one_group(parse_raw(raw, record_timestamp_ms=ts, max_clock_skew_ms=max_clock_skew_ms))
                if isinstance(parsed, Tick):
                    ticks.append(parsed.timestamp_ms)
                    continue
                key = (True, "", partition) if isinstance(parsed, Invalid) else (
                    False, state_key(parsed.group_id, keys), partition)
                pack = packs.get(key)
                if pack is None:
                    pack = packs[key] = _Pack(partition, offset)
                if isinstance(parsed, Invalid):
                    letter, response = reject(parsed, _source_label(source, int(partition), int(offset)), raw)
                    # The dead letter already holds the record: the raw value is not shuffled a second time.
                    pack.letters.append(to_json(letter))
                    pack.answers.append(None if response is None else to_json(response))
                    pack.reply_tos.append(None if response is None else response[REPLY_TO])
                else:
                    pack.group_ids.append(parsed.group_id)
                    pack.records.append(raw)
                    pack.record_ts.append(ts)
                    if pack.event_ms is None or parsed.timestamp_ms > pack.event_ms:
                        pack.event_ms = parsed.timestamp_ms
            rows: list[tuple[Any, ...]] = [("tick", None, t, 1, None) for t in ticks]
            for (invalid, key_of_state, _), pack in packs.items():
                if invalid:
                    rows.append(("invalid", None, None, len(pack.letters), pickle.dumps(
                        (pack.partition, pack.offset, pack.letters, pack.answers, pack.reply_tos), PICKLE_PROTOCOL)))
                else:
                    rows.append(("request", key_of_state, pack.event_ms, len(pack.records), pickle.dumps(
                        (pack.partition, pack.offset, pack.group_ids, pack.records, pack.record_ts), PICKLE_PROTOCOL)))
            columns: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [[]] * len(PARSED_ARROW_SCHEMA)
            yield pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(columns, PARSED_ARROW_SCHEMA,
                                                                                  strict=True)],
                                             schema=PARSED_ARROW_SCHEMA)

    return parse


OutputRow = tuple[str, str | None, str | None]  # topic, key, value
# A state key's records (raw value, broker timestamp) by group id, each group's in log order.
GroupRecords = dict[str, list[tuple[bytes, int | None]]]


@dataclass(frozen=True)
class StepOutcome:
    """One state key's call, as the operators store it: output rows, its value afterwards, and when to call again."""

    rows: list[OutputRow]
    state: bytes | None  # the key's groups (state_buckets.encode_bucket); None: none is left
    wake_at_ms: int | None  # the first watermark at which the key must be called again, requests or not
    groups_stepped: int


def wake_at(next_deadline: int, watermark_ms: int) -> int:
    """The timeout rule, for both operators: a group is called again once the watermark reaches its next
    deadline (the engine fires a timer due at or before the watermark), and never in the same micro-batch."""
    return max(next_deadline, watermark_ms + 1)


class CoordinatorStep:
    """The per-key step of step 3, whatever the operator: records in log order and the stored state in,
    output rows, the state to store and the watermark to wake the key at out. The operators' adapters only
    move these in and out."""

    def __init__(self, settings: Mapping[str, Any], live: bool, late_requests: Accumulator[int] | None = None,
                 changed_groups: Accumulator[ChangedGroups] | None = None, metrics: TaskMetrics | None = None) -> None:
        self.config = EngineConfig.from_mapping(engine_config(settings))
        self.skew = int(settings["coordinator.max.clock.skew.ms"]) if live else None
        self.late_requests = late_requests
        self.changed_groups = changed_groups
        self.metrics = metrics
        self.responses_topic = str(settings["coordinator.responses.topic"])
        self.snapshots_topic = str(settings["coordinator.snapshots.topic"])
        self.dead_letters_topic = str(settings["coordinator.dead.letters.topic"])
        self.offsets_topic = str(settings["coordinator.offsets.topic"])

    def invalid(self, letters: Iterable[tuple[str, str | None, str | None]]) -> list[OutputRow]:
        """The `invalid` key's rows, (dead letter, response, reply_to) each: parsed once, stateless."""
        out: list[OutputRow] = []
        for letter, response, reply_to in letters:
            out.append((self.dead_letters_topic, None, letter))
            if response is not None:
                out.append((self.responses_topic, reply_to, response))
        return out

    def step(self, records: GroupRecords, stored: bytes | None, watermark_ms: int) -> StepOutcome:
        """One state key's call: its groups with records, and those whose wake-up the watermark has reached, each
        through `group` (by group id); the others' stored bytes stay as they are, undecoded."""
        groups = {} if stored is None else decode_bucket(stored)
        due = {group_id for group_id, group in groups.items()
               if group.wake_at_ms is not None and group.wake_at_ms <= watermark_ms}
        rows: list[OutputRow] = []
        stepped = sorted(due.union(records))
        for group_id in stepped:
            before = groups.pop(group_id, None)
            group_rows, state, wake = self.group(group_id, records.get(group_id, ()),
                                                 None if before is None else before.state, watermark_ms)
            rows += group_rows
            if state is not None:
                groups[group_id] = StoredGroup(state, wake)
        return StepOutcome(rows, encode_bucket(groups) if groups else None, next_wake(groups), len(stepped))

    def group(self, group_id: str, records: Iterable[tuple[bytes, int | None]], stored: bytes | None,
              watermark_ms: int) -> tuple[list[OutputRow], bytes | None, int | None]:
        """One group's records (raw value, record timestamp), in log order, through `run_group`: its output rows,
        its encoded state afterwards (None: it is gone) and the watermark to wake it at."""
        outcome = run_group(stored, watermark_ms, group_requests(records, self.skew), self.config)
        if self.late_requests is not None and outcome.late_requests:
            self.late_requests.add(outcome.late_requests)
        out: list[OutputRow] = [(self.responses_topic, r[REPLY_TO], to_json(r)) for r in outcome.responses]
        for change in outcome.offset_changes:
            record = change.record()
            out.append((self.offsets_topic, change.key, None if record is None else to_json(record)))
        if outcome.snapshot is not None:
            out.append((self.snapshots_topic, group_id, to_json(outcome.snapshot)))
        removed = outcome.state is None and outcome.tombstone
        if removed:
            out.append((self.snapshots_topic, group_id, None))
        if self.changed_groups is not None and (removed or outcome.snapshot is not None):
            self.changed_groups.add({group_id: census_entry(outcome.snapshot)})
        wake = None
        if outcome.state is not None and outcome.next_deadline is not None:
            wake = wake_at(outcome.next_deadline, watermark_ms)
        return out, outcome.state, wake

    def report(self, outcome: StepOutcome, started: float, received: float, loaded: float, computed: float,
               written: float) -> None:
        """One call's groups and times (time.perf_counter() readings: called, its rows received, state loaded, step
        done, state written), to the task metrics."""
        if self.metrics is not None:
            self.metrics.add({OPERATOR_MS: (written - started) * 1000, OPERATOR_INPUT_MS: (received - started) * 1000,
                              STATE_LOAD_MS: (loaded - received) * 1000, ENGINE_MS: (computed - loaded) * 1000,
                              STATE_WRITE_MS: (written - computed) * 1000, OPERATOR_CALLS: 1,
                              GROUPS_STEPPED: outcome.groups_stepped})


def unpacked(packs: Iterable[bytes]) -> list[Any]:
    """One key's packs, unpickled, in log order (partition, offset): they almost always arrive in it, a linear
    pass then."""
    return sorted(map(pickle.loads, packs), key=_log_position)


def _log_position(pack: RequestPack | InvalidPack) -> tuple[int, int]:
    return pack[0], pack[1]


def records_by_group(packs: Iterable[RequestPack]) -> GroupRecords:
    """A state key's records (raw value, broker timestamp) by group id, each group's in log order."""
    by_group: GroupRecords = {}
    for _, _, group_ids, raws, times in packs:
        for group_id, raw, record_ts in zip(group_ids, raws, times, strict=True):
            records = by_group.get(group_id)
            if records is None:
                records = by_group[group_id] = []
            records.append((raw, record_ts))
    return by_group


def invalid_letters(packs: Iterable[InvalidPack]) -> Iterator[tuple[str, str | None, str | None]]:
    """The invalid records' (dead letter, answer, reply_to), in log order."""
    for _, _, letters, answers, reply_tos in packs:
        yield from zip(letters, answers, reply_tos, strict=True)


OUTPUT_COLUMNS = ("topic", "key", "value")


def _frame(rows: list[OutputRow]) -> pd.DataFrame:
    # From the tuples directly: half the time of a frame built from a dict of columns (pandas' per-column checks),
    # paid once per key and micro-batch.
    return pd.DataFrame(rows, columns=OUTPUT_COLUMNS)


def make_group_step(settings: Mapping[str, Any], live: bool, late_requests: Accumulator[int] | None = None,
                    changed_groups: Accumulator[ChangedGroups] | None = None,
                    metrics: TaskMetrics | None = None) -> Callable[..., Iterator[pd.DataFrame]]:
    """The `applyInPandasWithState` adapter of `CoordinatorStep`; `late_requests` counts requests older than
    the watermark, `changed_groups` collects the groups' latest states, `metrics` gets the calls' times."""
    core = CoordinatorStep(settings, live, late_requests, changed_groups, metrics)

    def step(key: tuple[Any, ...], batches: Iterator[pd.DataFrame], state: SparkGroupState) -> Iterator[pd.DataFrame]:
        started = time.perf_counter()
        freeze_long_lived_objects()
        packs = unpacked(pack for frame in batches for pack in frame["pack"])
        if key[0] is None:
            yield _frame(core.invalid(invalid_letters(packs)))
            return
        records = records_by_group(packs)
        received = time.perf_counter()
        stored = state.get[0] if state.exists else None
        loaded = time.perf_counter()
        outcome = core.step(records, None if stored is None else bytes(stored), state.getCurrentWatermarkMs())
        computed = time.perf_counter()
        if outcome.state is None:
            if state.exists:
                state.remove()
        else:
            state.update((outcome.state,))
            if outcome.wake_at_ms is not None:
                # EventTimeTimeout fires once the watermark is strictly past the timeout (PySpark's
                # GroupState docs; Spark's FlatMapGroupsWithStateExec: timeout < watermark).
                state.setTimeoutTimestamp(max(outcome.wake_at_ms - 1, 1))  # 0: no timeout
        core.report(outcome, started, received, loaded, computed, time.perf_counter())
        yield _frame(outcome.rows)

    return step


class CoordinatorProcessor(StatefulProcessor):
    """The `transformWithState` adapter of `CoordinatorStep` (Row-based, event-time timers).

    State: one `ValueState` per state key holding the same groups as the pandas operator's state, plus the
    timer registered for it (so that moving it costs no `listTimers` call). A key's timer is only a
    wake-up for groups without requests, as the pandas operator's timeout is: `run_group` fires whatever
    is due by the watermark itself, so a wake-up earlier than the next deadline changes nothing.
    """

    def __init__(self, settings: Mapping[str, Any], live: bool, late_requests: Accumulator[int] | None = None,
                 changed_groups: Accumulator[ChangedGroups] | None = None, metrics: TaskMetrics | None = None) -> None:
        self.settings = dict(settings)
        self.live = live
        self.late_requests = late_requests
        self.changed_groups = changed_groups
        self.metrics = metrics

    def init(self, handle: StatefulProcessorHandle) -> None:
        freeze_long_lived_objects()
        self.handle = handle
        self.state = handle.getValueState("group", TWS_STATE_SCHEMA)
        self.core = CoordinatorStep(self.settings, self.live, self.late_requests, self.changed_groups, self.metrics)

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: TimerValues) -> Iterator[Row]:
        started = time.perf_counter()
        # By position (OPERATOR_COLUMNS): a Row's lookup by name scans its field names.
        packs = unpacked(row[1] for row in rows)
        if key[0] is None:
            yield from _rows(self.core.invalid(invalid_letters(packs)))
            return
        yield from self._step(records_by_group(packs), timerValues, started)

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,
                           expiredTimerInfo: ExpiredTimerInfo) -> Iterator[Row]:
        # Spark deletes the fired timer after this call; the step arms the next one, always a later one.
        yield from self._step({}, timerValues, time.perf_counter(), fired=expiredTimerInfo.getExpiryTimeInMs())

    def _step(self, records: GroupRecords, timer_values: TimerValues, started: float,
              fired: int | None = None) -> Iterator[Row]:
        received = time.perf_counter()
        stored = self.state.get()
        loaded = time.perf_counter()
        outcome = self.core.step(records, None if stored is None else bytes(stored[0]),
                                 timer_values.getCurrentWatermarkInMs())
        computed = time.perf_counter()
        # The timer still registered for the key: Spark deletes the one that fired after this call.
        timer = None if stored is None or stored[1] == fired else stored[1]
        # An earlier timer than needed stays: it finds nothing due when it fires and arms the later one. Moving
        # it on every heartbeat would cost two calls to the JVM per key and micro-batch.
        if timer is not None and (outcome.wake_at_ms is None or timer > outcome.wake_at_ms):
            self.handle.deleteTimer(timer)
            timer = None
        if timer is None and outcome.wake_at_ms is not None:
            # Unlike EventTimeTimeout, an event-time timer of PySpark 4.3 fires once the watermark REACHES its
            # expiry (TimerStateImpl.getExpiredTimers returns expiry <= watermark), so it is armed at the
            # wake-up itself; always past the watermark, never the timer that fired (Spark deletes that one).
            self.handle.registerTimer(outcome.wake_at_ms)
            timer = outcome.wake_at_ms
        if outcome.state is not None:
            self.state.update((outcome.state, timer))
        elif stored is not None:
            self.state.clear()
        self.core.report(outcome, started, received, loaded, computed, time.perf_counter())
        yield from _rows(outcome.rows)

    def close(self) -> None:
        pass


_OutputRow = Row("topic", "key", "value")


def _rows(rows: list[OutputRow]) -> Iterator[Row]:
    return (_OutputRow(topic, key, value) for topic, key, value in rows)


def _records_where(condition: Column) -> Column:
    """How many records the packs meeting `condition` hold."""
    return F.sum(F.when(condition, F.col("count")).otherwise(0))


def coordinator_operator(settings: Mapping[str, Any], live: bool, late_requests: Accumulator[int] | None = None,
                         changed_groups: Accumulator[ChangedGroups] | None = None,
                         metrics: TaskMetrics | None = None) -> StatefulOperator:
    """Step 3: the configured stateful operator running `CoordinatorStep` on every state key's packs."""

    def apply(grouped: GroupedData) -> DataFrame:
        if stateful_operator(settings) == TRANSFORM_WITH_STATE:
            return grouped.transformWithState(CoordinatorProcessor(settings, live, late_requests, changed_groups,
                                                                   metrics),
                                              OUTPUT_SCHEMA, "Append", "EventTime")
        return grouped.applyInPandasWithState(make_group_step(settings, live, late_requests, changed_groups, metrics),
                                              OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.EventTimeTimeout)

    return apply


def build_pipeline(records: DataFrame, settings: Mapping[str, Any], *, live: bool, source: str = "topic",
                   late_requests: Accumulator[int] | None = None,
                   changed_groups: Accumulator[ChangedGroups] | None = None,
                   metrics: TaskMetrics | None = None,
                   operator: StatefulOperator | None = None) -> DataFrame:
    """The whole query from a DataFrame of records (value binary, partition, offset, timestamp) to output rows.

    `late_requests`, if given, counts the requests processed after the watermark had passed them;
    `changed_groups`, if given, collects the latest (state, generation) of every group whose snapshot is written;
    `metrics`, if given, gets the operator's times (task_metrics);
    `operator` replaces step 3 (default: `coordinator_operator`), so a measurement can run the same plan
    around another operator. The query started next on `records`' session keeps its state in the configured store.
    """
    lateness = int(settings["coordinator.lateness.ms"])
    skew = int(settings["coordinator.max.clock.skew.ms"]) if live else None
    parsed = (
        records.select("value", "partition", "offset", F.unix_millis("timestamp").alias("record_ts"))
        .mapInArrow(make_parser(skew, source, state_keys(settings)), PARSED_SCHEMA)
        .withColumn("event_time", F.timestamp_millis("event_ms"))
        .withWatermark("event_time", f"{lateness} milliseconds")
        .observe(METRICS_NAME,
                 F.sum("count").alias("records"),
                 _records_where(F.col("kind") == "request").alias("requests"),
                 _records_where(F.col("kind") == "tick").alias("ticks"),
                 _records_where(F.col("kind") == "invalid").alias("dead_letters"))
    )
    # With event-time timeouts or timers, Spark drops the rows whose watermarked event-time column is older
    # than the watermark (late requests) before the function sees them; they must be answered instead. So the
    # column the operator sees keeps its watermark marker but holds null, which is never late (the
    # filter drops a row only when `event_time <= watermark` is true). The watermark itself was computed
    # upstream from the real event times.
    never_late = F.lit(None).cast("timestamp").alias(
        "event_time", metadata={"spark.watermarkDelayMs": lateness})
    grouped = parsed.filter(F.col("kind") != "tick").select(*OPERATOR_COLUMNS, never_late).groupBy("state_key")
    use_state_store(records.sparkSession, settings)
    return (operator or coordinator_operator(settings, live, late_requests, changed_groups, metrics))(grouped)
