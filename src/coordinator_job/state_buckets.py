"""Which state key a group lives under, and the stored value of a key: its groups' encoded states and wake-ups.

Spark's stateful operators pay a fixed cost per key and micro-batch (applyInPandasWithState builds pandas frames for
the key's rows and its state, transformWithState makes a round trip to the JVM per state call): a few CPU-ms, several
times the engine's own work for a group. With `coordinator.state.buckets` = N > 0, the groups share N keys (a
group's key is the CRC-32 of its id modulo N), so a busy micro-batch pays that cost per bucket instead of per group;
N = 0 keeps one key per group. A bucket's value holds each of its groups' states, encoded by the engine, and the
watermark at which the group must be called again; a call decodes only the groups it steps.

The value's format (`FORMAT` first, then per group, by id): group id length (u32), UTF-8 group id, wake-up
(i64, -1: none), state length (u32), the engine's encoded state. A checkpoint keeps the bucket count it was started
with: the keys depend on it.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from typing import NamedTuple

FORMAT = 1
_LENGTH = struct.Struct(">I")
_WAKE = struct.Struct(">q")
_NO_WAKE = -1


class StoredGroup(NamedTuple):
    state: bytes  # the engine's encoded group (coordinator_state's versioned codec)
    wake_at_ms: int | None  # the first watermark at which the group must be called again, requests or not


class BucketFormatError(ValueError):
    """A stored value this version cannot read: a checkpoint written by another version of the job."""


def state_key(group_id: str, buckets: int) -> str:
    """The state key of a group: its id itself (buckets 0), else its bucket's number."""
    if buckets <= 0:
        return group_id
    return str(zlib.crc32(group_id.encode("utf-8")) % buckets)


def encode_bucket(groups: Mapping[str, StoredGroup]) -> bytes:
    parts = [bytes((FORMAT,))]
    for group_id in sorted(groups):
        state, wake = groups[group_id]
        name = group_id.encode("utf-8")
        parts += (_LENGTH.pack(len(name)), name, _WAKE.pack(_NO_WAKE if wake is None else wake),
                  _LENGTH.pack(len(state)), state)
    return b"".join(parts)


def decode_bucket(data: bytes) -> dict[str, StoredGroup]:
    if not data or data[0] != FORMAT:
        found = data[0] if data else "nothing"
        raise BucketFormatError(f"stored state of format {found}, this job reads format {FORMAT}: the checkpoint was "
                                f"written by another version; start this one on a fresh checkpoint")
    groups: dict[str, StoredGroup] = {}
    view, at = memoryview(data), 1
    while at < len(data):
        (size,) = _LENGTH.unpack_from(view, at)
        at += _LENGTH.size
        group_id = str(view[at:at + size], "utf-8")
        at += size
        (wake,) = _WAKE.unpack_from(view, at)
        at += _WAKE.size
        (size,) = _LENGTH.unpack_from(view, at)
        at += _LENGTH.size
        groups[group_id] = StoredGroup(bytes(view[at:at + size]), None if wake == _NO_WAKE else wake)
        at += size
    return groups


def next_wake(groups: Mapping[str, StoredGroup]) -> int | None:
    """The first watermark at which any of the groups must be called again."""
    return min((group.wake_at_ms for group in groups.values() if group.wake_at_ms is not None), default=None)
