"""Apache Kafka's classic group coordinator (KIP-345, KIP-394) as a pure, deterministic state machine.

No Spark, Kafka, pandas, clock or randomness in here: requests and event times in, responses and
timer deadlines out. `LocalCoordinator` is the whole coordinator in memory; `run_group` is the
per-group step the Spark job calls with a group's serialised state.
"""

from .codec import StateFormatError, decode_group, encode_group
from .config import DEFAULTS, ConfigError, EngineConfig
from .engine import GroupOutcome, handle_in_group, run_group
from .errors import Error
from .group import Group
from .local import LocalCoordinator
from .model import GroupState
from .records import dead_letter, reject, to_json
from .replay_driver import Fed, Finished, ReplayDriver
from .requests import Invalid, Request, Tick, decode_record, parse_raw, parse_request
from .responses import invalid_response
from .wire import (
    SIMULATION_EPOCH_MS,
    SUPPORTED_VERSIONS,
    TICK,
    Api,
    ResponseKey,
    is_tombstone,
    latest_version,
    request_envelope,
    response_key,
    tick_envelope,
    tombstone,
)

__all__ = [
    "DEFAULTS",
    "SIMULATION_EPOCH_MS",
    "SUPPORTED_VERSIONS",
    "TICK",
    "Api",
    "ConfigError",
    "EngineConfig",
    "Error",
    "Fed",
    "Finished",
    "Group",
    "GroupOutcome",
    "GroupState",
    "Invalid",
    "LocalCoordinator",
    "ReplayDriver",
    "Request",
    "ResponseKey",
    "StateFormatError",
    "Tick",
    "dead_letter",
    "decode_group",
    "decode_record",
    "encode_group",
    "handle_in_group",
    "invalid_response",
    "is_tombstone",
    "latest_version",
    "parse_raw",
    "parse_request",
    "reject",
    "request_envelope",
    "response_key",
    "run_group",
    "tick_envelope",
    "to_json",
    "tombstone",
]
