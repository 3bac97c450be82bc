"""A Kafka consumer-group client (the classic protocol, KIP-345 static membership) and a Kafka Streams
member (streams groups, KIP-1071, with static membership), sans I/O.

`GroupMember` is one consumer process: drive it with `poll(now_ms)` / `on_response(envelope)` over any
`Transport` (`realtime.run_member` is the real-time loop); `kafka_transport.KafkaTransport` carries the
envelopes over the coordinator's topics. The leader assigns with the `assignors` and the consumer
protocol's encodings (`coordinator_state.consumer_protocol`, shared with the coordinator, which reads
its members' subscriptions). `StreamsMember` (`streams_member`) is one Kafka Streams application instance,
driven the same way over the same transports.

May import kafka-python and the engine's wire vocabulary (coordinator_state, never its coordinator); never
Spark, the job, the gateway, the chaos harness, the lab or the CLI: the chaos harness is built on it, never
the other way round.
"""

from coordinator_state.consumer_protocol import (
    Assignment,
    ProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

from .assignors import ASSIGNORS, MemberSubscription, range_assign, round_robin_assign
from .member import GroupMember, MemberConfig, MemberState, new_reply_to
from .realtime import run_member, wall_clock_ms
from .streams_member import StreamsMember, StreamsMemberConfig, StreamsMemberState, Subtopology, Tasks
from .transport import Transport

__all__ = [
    "ASSIGNORS",
    "Assignment",
    "GroupMember",
    "MemberConfig",
    "MemberState",
    "MemberSubscription",
    "ProtocolError",
    "StreamsMember",
    "StreamsMemberConfig",
    "StreamsMemberState",
    "Subscription",
    "Subtopology",
    "Tasks",
    "Transport",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "new_reply_to",
    "range_assign",
    "round_robin_assign",
    "run_member",
    "wall_clock_ms",
]
