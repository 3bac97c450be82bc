"""A traffic file (JSON lines) as a Spark streaming source named ``coordinator_file``, for replay.

Options: ``path`` (required), ``maxRecordsPerBatch`` (fixes the micro-batch size). Each line is a
record: offset = line number - 1, partition 0, no key, no broker timestamp. After the last line
the source yields one more record in a batch of its own: a Tick at time 0. It moves nothing (a
watermark never goes back) but makes Spark run one more batch, with the final watermark, so every
timer due by then fires, as the local replay's do.
"""

from __future__ import annotations

import itertools
import math
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from coordinator_state import tick_envelope, to_json

from .worker_heap import freeze_long_lived_objects

SOURCE_NAME = "coordinator_file"
SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"


# SCHEMA in Arrow's types, as Spark converts it (a record batch of another schema is refused).
ARROW_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                          ("partition", pa.int32()), ("offset", pa.int64()),
                          ("timestamp", pa.timestamp("us", tz="UTC"))])
ARROW_BATCH_ROWS = 10_000
# Lines a task parses: a batch of 100,000 lines keeps both cores of a small machine busy.
LINES_PER_PARTITION = 50_000
SCAN_CHUNK_BYTES = 8 * 1024 * 1024


def source_batch(keys: Sequence[bytes | None] | None, values: Sequence[bytes | None], topic: str, partition: int,
                 offsets: Iterable[int], timestamps_us: Sequence[int | None] | None) -> pa.RecordBatch:
    """Records of one partition as one Arrow record batch of SCHEMA, as both sources give Spark their rows (it takes
    the batch as it is, with no conversion row by row); keys or timestamps None: all null."""
    n = len(values)
    return pa.RecordBatch.from_arrays([
        pa.nulls(n, pa.binary()) if keys is None else pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
        pa.array([topic] * n, pa.string()), pa.array([partition] * n, pa.int32()), pa.array(offsets, pa.int64()),
        pa.nulls(n, _TIMESTAMP) if timestamps_us is None else pa.array(timestamps_us, _TIMESTAMP)],
        schema=ARROW_SCHEMA)


_TIMESTAMP = ARROW_SCHEMA.field("timestamp").type


# The end-of-input record; at time 0 it cannot move the watermark, so the file need not be parsed to place it.
END_OF_INPUT_TICK = to_json(tick_envelope(0)).encode()


def _read_lines(fh: BinaryIO, size: int | None) -> Iterator[bytes]:
    """The lines of the next `size` bytes of `fh` (all that is left if None) as `traffic_file.split_lines` cuts
    them, but for the "\\r" it leaves; read a chunk at a time, so a file larger than memory can be read."""
    remaining = math.inf if size is None else size
    pending = b""
    while remaining > 0 and (chunk := fh.read(int(min(SCAN_CHUNK_BYTES, remaining)))):
        remaining -= len(chunk)
        *lines, pending = (pending + chunk).split(b"\n")
        yield from lines
    if pending:
        yield pending


def scan_line_starts(path: str) -> array[int]:
    """Where each line starts, and one past the end of the last line: only these (8 bytes a line) are kept."""
    starts = array("q", [0])
    with open(path, "rb") as fh:
        for line in _read_lines(fh, None):
            starts.append(starts[-1] + len(line) + 1)
    return starts


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
        self.line_starts = scan_line_starts(path)
        self.lines = len(self.line_starts) - 1
        self.total = self.lines + 1  # the end-of-input tick

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
        """The batch's lines in ranges of LINES_PER_PARTITION, parsed in parallel; the tick ends the last one."""
        first, last = start["line"], min(end["line"], self.lines)
        tick = END_OF_INPUT_TICK if start["line"] <= self.lines < end["line"] else None
        if last <= first and tick is None:
            return []
        bounds = [*range(first, last, LINES_PER_PARTITION), max(last, first)]
        if len(bounds) == 1:  # the end-of-input tick alone
            bounds.append(bounds[0])
        return [LineRange(self.path, low, self.line_starts[low], self.line_starts[high],
                          tick if high == bounds[-1] else None) for low, high in itertools.pairwise(bounds)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The range's lines in Arrow batches, read a chunk at a time: a batch of any size needs no more memory."""
        assert isinstance(partition, LineRange)
        freeze_long_lived_objects()
        with open(partition.path, "rb") as fh:
            fh.seek(partition.byte_start)
            lines = itertools.chain((line.removesuffix(b"\r") for line in
                                     _read_lines(fh, partition.byte_end - partition.byte_start)),
                                    [] if partition.tick is None else [partition.tick])
            offset = partition.first_line
            while batch := list(itertools.islice(lines, ARROW_BATCH_ROWS)):
                # A line has no key and no broker timestamp.
                yield source_batch(None, batch, SOURCE_NAME, 0, range(offset, offset + len(batch)), None)
                offset += len(batch)


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
