"""A Kafka consumer-group client (classic protocol, KIP-345 static membership), sans I/O, and a chaos harness.

`GroupMember` is one consumer process: drive it with `poll(now_ms)` / `on_response(envelope)` over any
`Transport` (`run_member` is the real-time loop). `SimTransport` runs it against the engine in memory on
a simulated clock, `kafka_transport.KafkaTransport` over the coordinator's topics; `chaos.run_chaos`
injects faults into a group of members and reports what the coordinator made of it, and
`spark_chaos.run_chaos_spark` does the same in real time against the streaming job (`live.LiveEngine`).
`demo.Demo` keeps a group of static members under rolling bounces for `coordinator run --demo`.
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
from .runner import run_member
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
    "run_member",
]
