"""A traffic file (JSON lines) as a Spark streaming source named ``coordinator_file``, for replay.

Options: ``path`` (required), ``maxRecordsPerBatch`` (fixes the micro-batch size). Each line is a
record: offset = line number - 1, partition 0, no key, no broker timestamp. After the last line
the source yields one more record in a batch of its own: a Tick at the largest event time of the
file. It moves nothing (the watermark already trails that time) but makes Spark run one more
batch, with the final watermark, so every timer due by then fires, as the local replay's do.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from coordinator_state import Invalid, parse_raw, to_json

SOURCE_NAME = "coordinator_file"
SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"


def split_lines(data: bytes) -> list[bytes]:
    """The records of a traffic file: one per line; a final newline ends the last line, it adds none."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line.removesuffix(b"\r") for line in lines]


def end_of_input_tick(lines: Sequence[bytes]) -> bytes | None:
    """A Tick at the largest event time among the valid records, or None if there is none."""
    times = [p.timestamp_ms for p in map(parse_raw, lines) if not isinstance(p, Invalid)]
    return to_json({"api": "Tick", "timestamp_ms": max(times)}).encode() if times else None


@dataclass(frozen=True)
class LineRange(InputPartition):
    """Lines [first_line, first_line + count) at bytes [byte_start, byte_end), then maybe the final tick."""

    path: str
    first_line: int
    byte_start: int
    byte_end: int
    tick: bytes | None


class FileStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, path: str, max_records: int | None) -> None:
        self.path = path
        self.max_records = max_records
        data = Path(path).read_bytes()
        lines = split_lines(data)
        # Byte offset where each line starts, and one past the end of the last line.
        self.line_starts = [0]
        for line in data.split(b"\n")[:len(lines)]:
            self.line_starts.append(self.line_starts[-1] + len(line) + 1)
        self.lines = len(lines)
        self.tick = end_of_input_tick(lines)
        self.total = self.lines + (self.tick is not None)

    def initialOffset(self) -> dict[str, int]:
        return {"line": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable() if self.max_records is None else ReadMaxRows(self.max_records)

    def prepareForTriggerAvailableNow(self) -> None:
        """The file does not grow: everything is available from the start."""

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        position = start["line"]
        if position >= self.lines:  # the end-of-input tick always gets a batch of its own
            return {"line": self.total}
        if isinstance(limit, ReadMaxRows):
            return {"line": min(self.lines, position + limit.max_rows)}
        return {"line": self.lines}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        first, last = start["line"], min(end["line"], self.lines)
        tick = self.tick if start["line"] <= self.lines < end["line"] else None
        if last <= first and tick is None:
            return []
        return [LineRange(self.path, first, self.line_starts[first], self.line_starts[max(last, first)], tick)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, LineRange)
        with open(partition.path, "rb") as fh:
            fh.seek(partition.byte_start)
            data = fh.read(partition.byte_end - partition.byte_start)
        offset = partition.first_line
        for line in split_lines(data):
            yield (None, line, SOURCE_NAME, 0, offset, None)
            offset += 1
        if partition.tick is not None:
            yield (None, partition.tick, SOURCE_NAME, 0, offset, None)


class FileDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> FileStreamReader:
        path = self.options.get("path")
        if not path:
            raise ValueError(f"{SOURCE_NAME}: option 'path' is required")
        limit = self.options.get("maxRecordsPerBatch")
        return FileStreamReader(str(Path(path).resolve()), int(limit) if limit else None)


def register(spark: SparkSession) -> None:
    spark.dataSource.register(FileDataSource)
