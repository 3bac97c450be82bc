"""The benchmark's ceiling: the job's plan with a stateful operator that reads its rows and answers nothing.

Plugged into `coordinator_job.job.build_pipeline` in place of the coordinator, under the configured operator
(`applyInPandasWithState` or `transformWithState`), so the difference to the full plan is the coordinator's own
cost.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, GroupedData, Row
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle, TimerValues

from coordinator_job.job import OUTPUT_SCHEMA, STATE_SCHEMA, StatefulOperator
from coordinator_job.settings import TRANSFORM_WITH_STATE, stateful_operator


class EmptyProcessor(StatefulProcessor):
    """The ceiling under `transformWithState`: reads its rows, answers nothing, keeps nothing."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        pass

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: TimerValues) -> Iterator[Row]:
        for _ in rows:
            pass
        return iter([])

    def close(self) -> None:
        pass


def _empty_step(key: tuple[Any, ...], batches: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
    """The ceiling under `applyInPandasWithState`: reads its rows, answers nothing."""
    for _ in batches:
        pass
    yield pd.DataFrame({"topic": [], "key": [], "value": []})


def empty_operator(settings: Mapping[str, Any]) -> StatefulOperator:
    """The configured operator kind, with nothing inside."""

    def apply(grouped: GroupedData) -> DataFrame:
        if stateful_operator(settings) == TRANSFORM_WITH_STATE:
            return grouped.transformWithState(EmptyProcessor(), OUTPUT_SCHEMA, "Append", "EventTime")
        return grouped.applyInPandasWithState(_empty_step, OUTPUT_SCHEMA, STATE_SCHEMA, "append",
                                              GroupStateTimeout.EventTimeTimeout)

    return apply
