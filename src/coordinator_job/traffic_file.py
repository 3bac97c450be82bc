"""A traffic file: JSON lines, one record each. Apart from the Spark file source, so that a replay with the local
engine needs no Spark."""

from __future__ import annotations


def split_lines(data: bytes) -> list[bytes]:
    """The records of a traffic file: one per line; a final newline ends the last line, it adds none."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line.removesuffix(b"\r") for line in lines]
