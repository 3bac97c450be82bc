"""Apache Kafka's group coordinator, classic groups (KIP-345, KIP-394) and streams groups (KIP-1071), as a pure,
deterministic state machine.

No Spark, Kafka, pandas, clock or randomness in here: requests and event times in, responses and
timer deadlines out. `LocalCoordinator` is the whole coordinator in memory; `run_group` is the
per-group step the Spark job calls with a group's serialised state. Both reach a group through its
type's interface (group_types.py); the classic group is the `classic` subpackage, the streams group the `streams`
one (a request of one type's API for a group of the other meets it through `GroupType.from_other_group`).
`envelope` owns the format every side speaks (the gateway, the client library, the job, the CLI and the lab import
it); `records` are the requests, `parsing` makes them from envelopes.

Imports only the standard library (and orjson, when installed): every other package builds on it.
"""

from .classic import ClassicGroup
from .classic.model import ClassicGroupState, GroupState
from .codec import StateFormatError, decode_group, encode_group
from .config import DEFAULTS, ConfigError, EngineConfig
from .envelope import (
    SIMULATION_EPOCH_MS,
    SUPPORTED_VERSIONS,
    TICK,
    Api,
    ResponseKey,
    answer_list_groups,
    is_tombstone,
    latest_version,
    request_envelope,
    response_key,
    routing_group_id,
    tick_envelope,
    tombstone,
)
from .errors import Error
from .group_step import GroupOutcome, handle_in_group, run_group
from .group_types import GROUP_TYPES, Group, GroupType, snapshot_of, type_of
from .listing import describe_groups_body, described_group
from .local import LocalCoordinator
from .offsets import CommittedOffset, OffsetChange
from .output import dead_letter, reject, to_json
from .parsing import decode_record, for_one_group, group_requests, parse_raw, parse_request
from .records import Invalid, ListGroups, Reply, Request, Tick
from .replay_driver import Fed, Finished, ReplayDriver, Watermark
from .responses import invalid_response

__all__ = [
    "DEFAULTS",
    "GROUP_TYPES",
    "SIMULATION_EPOCH_MS",
    "SUPPORTED_VERSIONS",
    "TICK",
    "Api",
    "ClassicGroup",
    "ClassicGroupState",
    "CommittedOffset",
    "ConfigError",
    "EngineConfig",
    "Error",
    "Fed",
    "Finished",
    "Group",
    "GroupOutcome",
    "GroupState",
    "GroupType",
    "Invalid",
    "ListGroups",
    "LocalCoordinator",
    "OffsetChange",
    "ReplayDriver",
    "Reply",
    "Request",
    "ResponseKey",
    "StateFormatError",
    "Tick",
    "Watermark",
    "answer_list_groups",
    "dead_letter",
    "decode_group",
    "decode_record",
    "describe_groups_body",
    "described_group",
    "encode_group",
    "for_one_group",
    "group_requests",
    "handle_in_group",
    "invalid_response",
    "is_tombstone",
    "latest_version",
    "parse_raw",
    "parse_request",
    "reject",
    "request_envelope",
    "response_key",
    "routing_group_id",
    "run_group",
    "snapshot_of",
    "tick_envelope",
    "to_json",
    "tombstone",
    "type_of",
]
