"""A traffic file: JSON lines, one record each. Apart from the Spark file source, so that a replay with the local
engine needs no Spark."""

from __future__ import annotations

from pathlib import Path

from coordinator_state import Watermark


def split_lines(data: bytes) -> list[bytes]:
    """The records of a traffic file: one per line; a final newline ends the last line, it adds none."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line.removesuffix(b"\r") for line in lines]


def scan_traffic(path: Path, lateness_ms: int) -> tuple[int, int]:
    """A traffic file's records and late requests (`Watermark`), read a line at a time, without a coordinator."""
    watermark = Watermark(lateness_ms)
    records = 0
    with path.open("rb") as fh:
        for line in fh:
            records += 1
            watermark.see_raw(line.removesuffix(b"\n").removesuffix(b"\r"))
    return records, watermark.late_requests


def late_requests_note(late_requests: int, lateness_ms: int) -> str | None:
    """What a replay's or a recording's summary says of late requests; None when there are none."""
    if not late_requests:
        return None
    return (f"{late_requests} late requests (older than the watermark: the largest event time before them minus "
            f"coordinator.lateness.ms = {lateness_ms}; PROTOCOL.md section 5): each is processed at its group's "
            "clock, but they make a replay of this traffic depend on its micro-batch boundaries, so the Spark "
            "replay may answer them differently from the local one")
