"""What the job's tasks count and time, summed on the driver through one Spark accumulator; the per-batch breakdown.

Each task adds a few numbers per call (no second pass over the data): the Kafka reader the time it spends reading
its offset range, the stateful operator its calls and the time in them (state load, engine, state write), the sink
the time it spends producing and flushing. The driver reads the sum;
`Breakdown` turns the difference between two readings, with Spark's own `durationMs` of the batches in between,
into the mean time per micro-batch of each stage.

The source and the sink are Python data sources, whose options are strings: they get the accumulator by its id
(`metrics_for_task`); the operator's closure carries the accumulator itself.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark import Accumulator, SparkContext
from pyspark.accumulators import AccumulatorParam, _deserialize_accumulator

Metrics = dict[str, float]
TaskMetrics = Accumulator[Metrics]

# The keys the tasks add to.
SOURCE_READ_MS = "source_read_ms"
SOURCE_TASKS = "source_tasks"
OPERATOR_MS = "operator_ms"
OPERATOR_INPUT_MS = "operator_input_ms"  # a call receiving its rows: Spark's per-group conversion, their unpacking
STATE_LOAD_MS = "state_load_ms"
ENGINE_MS = "engine_ms"
STATE_WRITE_MS = "state_write_ms"
OPERATOR_CALLS = "operator_calls"  # one per state key and micro-batch
GROUPS_STEPPED = "groups_stepped"  # the groups those calls ran through the engine
SINK_UPSTREAM_MS = "sink_upstream_ms"  # the sink task waiting for its rows: shuffle read, stateful operator
SINK_PRODUCE_MS = "sink_produce_ms"
SINK_FLUSH_MS = "sink_flush_ms"
SINK_RECORDS = "sink_records"
# The data sources' option naming the accumulator.
ACCUMULATOR_OPTION = "taskMetricsAccumulator"


class _SumByKey(AccumulatorParam[Metrics]):
    def zero(self, value: Metrics) -> Metrics:
        return {}

    def addInPlace(self, value1: Metrics, value2: Metrics) -> Metrics:
        for key, amount in value2.items():
            value1[key] = value1.get(key, 0) + amount
        return value1


def task_metrics(context: SparkContext) -> TaskMetrics:
    """A new accumulator of the job's task metrics."""
    return context.accumulator({}, _SumByKey())


def local_task_metrics() -> TaskMetrics:
    """An accumulator of task metrics outside Spark, summed in this process: a lab command times a task's code with
    it."""
    return Accumulator(-1, {}, _SumByKey())


def metrics_for_task(accumulator_id: str | None) -> TaskMetrics | None:
    """In a data source's task, the accumulator of this id (the ACCUMULATOR_OPTION's value), if any. Made per task,
    as unpickling the accumulator itself does: a Python worker forgets its accumulators at each task's start and
    sends their sums to the driver at its end (pyspark.worker)."""
    return None if accumulator_id is None else _deserialize_accumulator(int(accumulator_id), {}, _SumByKey())


def since_ms(started: float) -> float:
    """Milliseconds since `started` (a time.perf_counter() reading)."""
    return (time.perf_counter() - started) * 1000


def _mean(total: float, count: int) -> float:
    return round(total / count, 1) if count else 0.0


@dataclass
class Breakdown:
    """Where the micro-batches' time went, as the mean per batch of each stage, over the batches added so far.

    Planning is Spark's latestOffset + getBatch + queryPlanning, commit its walCommit + commitOffsets (the source's
    and the sink's commits included), the batch triggerExecution; the state store's commit is Spark's
    stateOperators.commitTimeMs. The source, operator and sink figures are the tasks' own (`TaskMetrics`); tasks run
    in parallel, so their sum can exceed the batch's time. The stateful stage is the time the sink's tasks wait for
    their rows: the shuffle read, the stateful operator (Python and the JVM's state store) and the Arrow transfers."""

    batches: int = 0
    durations: dict[str, float] = field(default_factory=dict)
    state_commit_ms: float = 0.0
    tasks: Metrics = field(default_factory=dict)

    def add_reports(self, reports: Iterable[Mapping[str, Any]]) -> None:
        for report in reports:
            self.batches += 1
            for key, value in (report.get("durationMs") or {}).items():
                self.durations[key] = self.durations.get(key, 0) + float(value)
            for operator in report.get("stateOperators") or []:
                self.state_commit_ms += float(operator.get("commitTimeMs") or 0)

    def add_tasks(self, before: Metrics, after: Metrics) -> None:
        """The tasks' metrics between two readings of the accumulator."""
        for key, value in after.items():
            self.tasks[key] = self.tasks.get(key, 0) + value - before.get(key, 0)

    def merge(self, other: Breakdown) -> None:
        self.batches += other.batches
        for key, value in other.durations.items():
            self.durations[key] = self.durations.get(key, 0) + value
        self.state_commit_ms += other.state_commit_ms
        self.add_tasks({}, other.tasks)

    def per_batch(self) -> dict[str, float]:
        n, d, t = self.batches, self.durations, self.tasks
        return {
            "batch_ms": _mean(d.get("triggerExecution", 0), n),
            "planning_ms": _mean(d.get("latestOffset", 0) + d.get("getBatch", 0) + d.get("queryPlanning", 0), n),
            "execution_ms": _mean(d.get("addBatch", 0), n),
            "commit_ms": _mean(d.get("walCommit", 0) + d.get("commitOffsets", 0), n),
            "source_read_ms": _mean(t.get(SOURCE_READ_MS, 0), n),
            "operator_ms": _mean(t.get(OPERATOR_MS, 0), n),
            "operator_input_ms": _mean(t.get(OPERATOR_INPUT_MS, 0), n),
            "state_load_ms": _mean(t.get(STATE_LOAD_MS, 0), n),
            "engine_ms": _mean(t.get(ENGINE_MS, 0), n),
            "state_write_ms": _mean(t.get(STATE_WRITE_MS, 0), n),
            "state_store_commit_ms": _mean(self.state_commit_ms, n),
            "stateful_stage_ms": _mean(t.get(SINK_UPSTREAM_MS, 0), n),
            "sink_produce_ms": _mean(t.get(SINK_PRODUCE_MS, 0), n),
            "sink_flush_ms": _mean(t.get(SINK_FLUSH_MS, 0), n),
            "calls_per_batch": _mean(t.get(OPERATOR_CALLS, 0), n),
            "groups_per_batch": _mean(t.get(GROUPS_STEPPED, 0), n),
            "records_out_per_batch": _mean(t.get(SINK_RECORDS, 0), n),
        }

    def line(self) -> str:
        """The breakdown in one short line, for a status line."""
        b = self.per_batch()
        return (f"per batch: plan {b['planning_ms']:.0f}  read {b['source_read_ms']:.0f}  stateful stage "
                f"{b['stateful_stage_ms']:.0f} (operator {b['operator_ms']:.0f}: input {b['operator_input_ms']:.0f}, "
                f"state {b['state_load_ms']:.0f}+"
                f"{b['state_write_ms']:.0f}, engine {b['engine_ms']:.0f}; store commit "
                f"{b['state_store_commit_ms']:.0f})  sink {b['sink_produce_ms']:.0f}+{b['sink_flush_ms']:.0f}  "
                f"commit {b['commit_ms']:.0f} ms")
