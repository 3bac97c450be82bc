"""Kafka's consumer protocol (ConsumerProtocol v0): the bytes in JoinGroup metadata and SyncGroup assignments.

Subscription: int16 version, array of topic strings, nullable bytes user_data.
Assignment: int16 version, array of (topic string, array of int32 partitions), nullable bytes user_data.
Arrays carry an int32 length, strings an int16 length (UTF-8), bytes an int32 length (-1 = null), all
big-endian, as Kafka's `ConsumerProtocol` writes them. Later versions only append fields, so a v0 reader
reads any version's prefix and ignores the rest, as Kafka's does. The envelope carries these bytes as base64.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

VERSION = 0
PROTOCOL_TYPE = "consumer"

TopicPartition = tuple[str, int]


class ProtocolError(ValueError):
    """Bytes that are not a consumer-protocol subscription or assignment."""


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a member asks for: its topics, in the order it gave them."""

    topics: tuple[str, ...]
    user_data: bytes | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    """What the leader gives a member: partitions per topic."""

    partitions: frozenset[TopicPartition]
    user_data: bytes | None = None

    @classmethod
    def of(cls, by_topic: Mapping[str, Iterable[int]], user_data: bytes | None = None) -> Assignment:
        """Builds an assignment from {topic: partitions}."""
        return cls(frozenset((t, p) for t, parts in by_topic.items() for p in parts), user_data)

    def by_topic(self) -> dict[str, list[int]]:
        """{topic: sorted partitions}, topics sorted."""
        out: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            out.setdefault(topic, []).append(partition)
        return out


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, value: int) -> None:
        self.parts.append(struct.pack(">h", value))

    def int32(self, value: int) -> None:
        self.parts.append(struct.pack(">i", value))

    def string(self, value: str) -> None:
        raw = value.encode("utf-8")
        if len(raw) > 0x7FFF:
            raise ProtocolError(f"string of {len(raw)} bytes is too long for an int16 length")
        self.int16(len(raw))
        self.parts.append(raw)

    def nullable_bytes(self, value: bytes | None) -> None:
        if value is None:
            self.int32(-1)
        else:
            self.int32(len(value))
            self.parts.append(value)

    def value(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolError(f"truncated: wanted {n} bytes at offset {self.pos} of {len(self.data)}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        value: int = struct.unpack(">h", self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = struct.unpack(">i", self._take(4))[0]
        return value

    def string(self) -> str:
        length = self.int16()
        if length < 0:
            raise ProtocolError("null string where a topic name is required")
        try:
            return self._take(length).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"topic name is not UTF-8: {exc}") from None

    def array_length(self) -> int:
        length = self.int32()
        if length < 0:
            raise ProtocolError("null array where one is required")
        return length

    def nullable_bytes(self) -> bytes | None:
        length = self.int32()
        return None if length == -1 else self._take(length)

    def version(self) -> int:
        version = self.int16()
        if version < 0:
            raise ProtocolError(f"unsupported consumer protocol version {version}")
        return version


def encode_subscription(subscription: Subscription) -> bytes:
    """Serializes a subscription as ConsumerProtocol v0."""
    w = _Writer()
    w.int16(VERSION)
    w.int32(len(subscription.topics))
    for topic in subscription.topics:
        w.string(topic)
    w.nullable_bytes(subscription.user_data)
    return w.value()


def decode_subscription(data: bytes, *, any_version: bool = False) -> Subscription:
    """Reads the v0 fields of a subscription of any version.

    A negative version is refused, as the Java client refuses it, unless `any_version`: Kafka's
    coordinator reads every member's metadata as v0 whatever its version field says when it collects a
    group's subscribed topics (ClassicGroup.computeSubscribedTopics).
    """
    r = _Reader(data)
    if any_version:
        r.int16()
    else:
        r.version()
    topics = tuple(r.string() for _ in range(r.array_length()))
    return Subscription(topics, r.nullable_bytes())


def encode_assignment(assignment: Assignment) -> bytes:
    """Serializes an assignment as ConsumerProtocol v0, topics and partitions sorted."""
    w = _Writer()
    w.int16(VERSION)
    by_topic = assignment.by_topic()
    w.int32(len(by_topic))
    for topic, partitions in by_topic.items():
        w.string(topic)
        w.int32(len(partitions))
        for partition in partitions:
            w.int32(partition)
    w.nullable_bytes(assignment.user_data)
    return w.value()


def decode_assignment(data: bytes) -> Assignment:
    """Reads the v0 fields of an assignment of any version; empty bytes (none given) read as empty."""
    if not data:
        return Assignment(frozenset())
    r = _Reader(data)
    r.version()
    partitions: set[TopicPartition] = set()
    for _ in range(r.array_length()):
        topic = r.string()
        partitions.update((topic, r.int32()) for _ in range(r.array_length()))
    return Assignment(frozenset(partitions), r.nullable_bytes())


def to_base64(data: bytes) -> str:
    """Bytes as the envelope carries them."""
    return base64.b64encode(data).decode("ascii")


def from_base64(text: str) -> bytes:
    """Envelope base64 back to bytes."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ProtocolError(f"not valid base64: {exc}") from None
