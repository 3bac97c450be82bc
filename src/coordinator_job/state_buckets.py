"""Which state key a group lives under, and the stored value of a key: its groups' encoded states and wake-ups.

Spark's stateful operators pay a fixed cost per key and micro-batch (applyInPandasWithState builds pandas frames for
the key's rows and its state, transformWithState makes a round trip to the JVM per state call): a few CPU-ms, several
times the engine's own work for a group. With `coordinator.state.buckets` = N > 0, the groups share N keys (a
group's key is the CRC-32 of its id modulo N), so a busy micro-batch pays that cost per bucket instead of per group;
N = 0 keeps one key per group. The buckets' keys are chosen so that Spark spreads them evenly over its shuffle
partitions (`bucket_keys`). A bucket's value holds each of its groups' states, encoded by the engine, and the
watermark at which the group must be called again; a call decodes only the groups it steps.

The value's format (`FORMAT` first, then per group, by id): group id length (u32), UTF-8 group id, wake-up
(i64, -1: none), state length (u32), the engine's encoded state. A checkpoint keeps the bucket count and the shuffle
partitions it was started with: the keys depend on both.
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
_U32 = 0xFFFFFFFF


class StoredGroup(NamedTuple):
    state: bytes  # the engine's encoded group (coordinator_state's versioned codec)
    wake_at_ms: int | None  # the first watermark at which the group must be called again, requests or not


class BucketFormatError(ValueError):
    """A stored value this version cannot read: a checkpoint written by another version of the job."""


def spark_partition(key: str, partitions: int) -> int:
    """The shuffle partition Spark gives a string key: pmod(Murmur3_x86_32(its UTF-8 bytes, seed 42), partitions), as
    its HashPartitioning computes it (Murmur3Hash, hashUnsafeBytes: a tail byte mixed alone, sign-extended). A stateful
    operator's keys are placed so in every Spark version: a checkpoint's state depends on it."""
    data = key.encode("utf-8")
    aligned = len(data) - len(data) % 4
    h = 42
    for at in range(0, aligned, 4):
        h = _mix_h1(h, _mix_k1(int.from_bytes(data[at:at + 4], "little")))
    for byte in data[aligned:]:
        h = _mix_h1(h, _mix_k1((byte - 256 if byte > 127 else byte) & _U32))
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _U32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _U32
    h ^= h >> 16
    return (h - (1 << 32) if h >> 31 else h) % partitions


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _U32


def _mix_k1(k: int) -> int:
    return (_rotl((k * 0xCC9E2D51) & _U32, 15) * 0x1B873593) & _U32


def _mix_h1(h: int, k: int) -> int:
    return (_rotl(h ^ k, 13) * 5 + 0xE6546B64) & _U32


def bucket_keys(buckets: int, partitions: int) -> tuple[str, ...]:
    """The state key of each bucket: its number, or if Spark would place that in another shuffle partition than
    bucket % partitions, the first of "B.1", "B.2", ... it places there. So each of the `partitions` stateful tasks
    gets as many buckets as the others (by their numbers alone, 64 buckets fell 22 / 42 into 2 partitions: one task
    had twice the other's groups to step)."""
    keys = []
    for bucket in range(buckets):
        key, suffix = str(bucket), 0
        while spark_partition(key, partitions) != bucket % partitions:
            suffix += 1
            key = f"{bucket}.{suffix}"
        keys.append(key)
    return tuple(keys)


def state_key(group_id: str, keys: tuple[str, ...]) -> str:
    """The state key of a group: its id itself with no buckets (`keys` empty), else its bucket's key (bucket_keys),
    the bucket being the CRC-32 of its id modulo their number."""
    if not keys:
        return group_id
    return keys[zlib.crc32(group_id.encode("utf-8")) % len(keys)]


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
