"""The replay source without Spark: whatever the batch, partition, chunk and Arrow batch sizes, its batches hold
the file's lines exactly as `split_lines` cuts them, each once, numbered by line, then the end-of-input tick."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator_job import file_source
from coordinator_job.file_source import END_OF_INPUT_TICK, FileStreamReader
from coordinator_job.traffic_file import split_lines

LINES = st.lists(st.sampled_from([b"", b"{}", b"x\r", b'{"api":"Tick","timestamp_ms":5}', b"\xff\xfe", b"a" * 40]),
                 max_size=30)


def read_all(reader: FileStreamReader, max_records: int | None) -> list[tuple[int, bytes]]:
    """Every record of every micro-batch, as Spark would ask for them, with its offset."""
    position = reader.initialOffset()
    out: list[tuple[int, bytes]] = []
    limit = reader.getDefaultReadLimit()
    while position["line"] < reader.total:
        end = reader.latestOffset(position, limit)
        assert end["line"] > position["line"]
        for partition in reader.partitions(position, end):
            for batch in reader.read(partition):
                out += zip(batch.column("offset").to_pylist(), batch.column("value").to_pylist(), strict=True)
        position = end
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(LINES, st.booleans(), st.sampled_from([None, 1, 3, 7]), st.integers(1, 5), st.integers(1, 4),
       st.integers(1, 64))
def test_batches_hold_every_line_once_in_order_then_the_tick(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: list[bytes], final_newline: bool,
        max_records: int | None, lines_per_partition: int, arrow_rows: int, chunk_bytes: int) -> None:
    monkeypatch.setattr(file_source, "LINES_PER_PARTITION", lines_per_partition)
    monkeypatch.setattr(file_source, "ARROW_BATCH_ROWS", arrow_rows)
    monkeypatch.setattr(file_source, "SCAN_CHUNK_BYTES", chunk_bytes)
    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    path = tmp_path / "traffic.jsonl"
    path.write_bytes(data)
    expected = split_lines(data)
    records = read_all(FileStreamReader(str(path), max_records), max_records)
    assert records == [*enumerate(expected), (len(expected), END_OF_INPUT_TICK)]
