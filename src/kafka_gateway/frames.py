"""Kafka's framing: every request and response is a big-endian int32 size followed by that many bytes.

A frame's size is checked before any of it is buffered (Kafka's `socket.request.max.bytes`), so a
hostile length costs nothing: the connection is closed as soon as the four size bytes are in.
"""

from __future__ import annotations

import struct

from .errors import MalformedFrame

SIZE_BYTES = 4
# Kafka's socket.request.max.bytes default: 100 MiB.
DEFAULT_MAX_FRAME_BYTES = 104_857_600
_SIZE = struct.Struct(">i")


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """`payload` with its size prefix."""
    return _SIZE.pack(len(payload)) + bytes(payload)


class FrameSplitter:
    """Bytes in, whole frames (without their size prefix) out; refuses sizes outside 1..max_frame_bytes."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, min_frame_bytes: int = 1) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.min_frame_bytes = min_frame_bytes
        self._buffer = bytearray()
        self._needed: int | None = None

    @property
    def buffered(self) -> int:
        """Bytes received that are not yet part of a whole frame."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Appends `data`; returns the frames it completed, in order. Raises MalformedFrame on a bad size."""
        self._buffer += data
        frames: list[bytes] = []
        while True:
            if self._needed is None:
                if len(self._buffer) < SIZE_BYTES:
                    return frames
                (size,) = _SIZE.unpack_from(self._buffer)
                if not self.min_frame_bytes <= size <= self.max_frame_bytes:
                    raise MalformedFrame(
                        f"frame size {size} outside {self.min_frame_bytes}..{self.max_frame_bytes} bytes")
                del self._buffer[:SIZE_BYTES]
                self._needed = size
            if len(self._buffer) < self._needed:
                return frames
            frames.append(bytes(self._buffer[:self._needed]))
            del self._buffer[:self._needed]
            self._needed = None
