"""Kafka 4.4's streams groups (KIP-1071, PROTOCOL.md section 10): the pure pieces of the Streams group type.

Each module is one concept of Kafka's `org.apache.kafka.coordinator.group.streams` package, typed, deterministic
and free of I/O: `tasks` (task sets, Kafka's TasksTuple), `assignor` (StickyTaskAssignor with section 10's
tie-breaks), `reconciliation` (CurrentAssignmentBuilder), `topics` (InternalTopicManager: partition counts,
copartitioning, internal topics to create, status codes), `records` and `parsing` (the StreamsGroupHeartbeat v0
and StreamsGroupDescribe v0 envelopes). docs/STREAMS.md tabulates the rules with the Kafka method each comes from.

This package may import the engine's vocabulary (errors, the envelope and request helpers) and nothing of the
classic group.
"""

from __future__ import annotations

from .group_type import (
    APIS,
    HANDLES,
    NAME,
    absent_group,
    create,
    deadline_lower_bound,
    decode,
    encode,
    fire_due,
    from_other_group,
    handle,
    next_deadline,
    snapshot,
)

__all__ = ["APIS", "HANDLES", "NAME", "absent_group", "create", "deadline_lower_bound", "decode", "encode",
           "fire_due", "from_other_group", "handle", "next_deadline", "snapshot"]
