"""A Kafka consumer-group client (classic protocol, KIP-345 static membership), sans I/O, and a chaos harness.

`GroupMember` is one consumer process: drive it with `poll(now_ms)` / `on_response(envelope)` over any
`Transport`. `SimTransport` runs it against the engine in memory on a simulated clock; `run_chaos`
injects faults into a group of them and reports what the coordinator made of it.
"""

from .assignors import ASSIGNORS, MemberSubscription, range_assign, round_robin_assign
from .consumer_protocol import (
    Assignment,
    ProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from .member import GroupMember, MemberConfig, MemberState, new_reply_to
from .transport import SIM_START_MS, SimTransport, Transport

__all__ = [
    "ASSIGNORS",
    "SIM_START_MS",
    "Assignment",
    "GroupMember",
    "MemberConfig",
    "MemberState",
    "MemberSubscription",
    "ProtocolError",
    "SimTransport",
    "Subscription",
    "Transport",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "new_reply_to",
    "range_assign",
    "round_robin_assign",
]
