"""Kafka's error codes, as the coordinator answers them (PROTOCOL.md section 3)."""

from __future__ import annotations

from enum import IntEnum


class Error(IntEnum):
    """An error a response carries: the name is Kafka's, the value its wire code."""

    NONE = 0
    UNKNOWN_SERVER_ERROR = -1
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_NOT_AVAILABLE = 15
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    STALE_MEMBER_EPOCH = 113
    STREAMS_INVALID_TOPOLOGY = 130


# Error.NONE for the paths every request takes: CPython 3.11 reads an enum member (`Error.NONE`) through
# EnumType's __getattr__ hook, which costs about as much as a function call; a module constant costs nothing.
NO_ERROR = Error.NONE
