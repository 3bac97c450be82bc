"""Chaos scenarios: the run configuration and, per scenario, the faults to inject and when.

A scenario is a list of `Action`s timed from the moment the group first became stable. Every choice a
scenario makes at random (which member fails, start-up jitter) comes from the run's seeded RNG, so a
(config, seed) pair always gives the same run. Scenario parameters are defaulted here and written back
into the config, so the report's `config` is all a rerun needs.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coordinator_state import SIMULATION_EPOCH_MS

MEMBERSHIPS = ("static", "dynamic", "mixed")
# The group protocol the members speak: classic consumers (JoinGroup/SyncGroup) or Kafka Streams instances
# (StreamsGroupHeartbeat, PROTOCOL.md section 10).
GROUP_TYPES = ("classic", "streams")
# The `engine` config key (the `--engine` flag) names the backend the coordinator runs on.
BACKENDS = ("sim", "spark")
# First fault this long after the group first became stable.
FIRST_FAULT_MS = 5000

DEFAULT_CONFIG: dict[str, Any] = {
    "scenario": "rolling-bounce",
    "group_type": "classic",
    "members": 20,
    "membership": "static",
    "seed": 0,
    "engine": "sim",
    "group_id": "chaos",
    "topics": None,  # {topic: partitions}; None = one topic "events" with 3 partitions per member
    "assignor": "range",
    "session_timeout_ms": 10000,
    "heartbeat_interval_ms": 3000,
    "rebalance_timeout_ms": 30000,
    "request_timeout_ms": 30000,
    "retry_backoff_ms": 100,
    # Offsets: members commit their positions this often (auto.commit.interval.ms; null: no offsets at all),
    # and every owned partition yields one record to its owner every record_interval_ms.
    "commit_interval_ms": 5000,
    "record_interval_ms": 100,
    "coordinator_config": {"group.initial.rebalance.delay.ms": 3000},
    "lateness_ms": 0,
    "tick_interval_ms": 1000,
    "start_ms": SIMULATION_EPOCH_MS,
    "start_jitter_ms": 1000,  # members start at random times within this window
    "duplicate_probability": 0.01,  # chance that the response sink delivers a response twice
    "warmup_limit_ms": 120000,  # give up if the group is not stable by then
    "settle_ms": 30000,  # keep running this long after the last fault
    "drain_limit_ms": 120000,  # after the run, keep going at most this long for the last answers
    "params": {},
}
# Defaults that differ on the streaming job (the spark backend): its own lateness default, and no simulated
# duplicates (its at-least-once sink makes real ones); `start_ms` there is the wall clock when the run starts.
BACKEND_DEFAULTS: dict[str, dict[str, Any]] = {"sim": {}, "spark": {"lateness_ms": 2000, "duplicate_probability": 0.0}}
# Streams runs: the session and heartbeat interval are the group's (the coordinator's group.streams.* keys, set
# from session_timeout_ms and heartbeat_interval_ms unless coordinator_config names them), one standby replica
# per stateful task; Kafka Streams' commits are not modelled (no offsets).
STREAMS_COORDINATOR_DEFAULTS: dict[str, Any] = {"group.streams.initial.rebalance.delay.ms": 3000,
                                                "group.streams.num.standby.replicas": 1}


Config = Mapping[str, Any]
Params = Mapping[str, int]


class ChaosConfigError(ValueError):
    """A chaos configuration that cannot be run."""


@dataclass(frozen=True, slots=True)
class Action:
    """One fault (or recovery) at `at_ms` after first stability, on member slot `member` (-1: none)."""

    at_ms: int
    kind: str  # crash | close | start | start_duplicate | pause | stop_coordinator | start_coordinator
    member: int = -1
    duration_ms: int = 0  # pause length


def slot_ids(config: Config, slot: int) -> tuple[str, str | None]:
    """The client id and group.instance.id (None: dynamic) of member slot `slot`; mixed: even slots are
    static."""
    membership = config["membership"]
    static = membership == "static" or (membership == "mixed" and slot % 2 == 0)
    return f"consumer-{slot:02d}", f"instance-{slot:02d}" if static else None


def slot_name(config: Config, slot: int) -> str:
    """How a member slot is shown: its group.instance.id, else its client id."""
    client_id, instance_id = slot_ids(config, slot)
    return instance_id or client_id


def _rolling_bounce(config: Config, params: Params, rng: random.Random) -> list[Action]:
    actions = []
    for i in range(config["members"]):
        at = FIRST_FAULT_MS + i * params["interval_ms"]
        actions += [Action(at, "close", i), Action(at + params["down_ms"], "start", i)]
    return actions


def _crash(config: Config, params: Params, rng: random.Random) -> list[Action]:
    victim = rng.randrange(config["members"])
    return [Action(FIRST_FAULT_MS, "crash", victim),
            Action(FIRST_FAULT_MS + params["down_ms"], "start", victim)]


def _duplicate_instance(config: Config, params: Params, rng: random.Random) -> list[Action]:
    static = [i for i in range(config["members"]) if slot_ids(config, i)[1] is not None]
    if not static:
        raise ChaosConfigError("duplicate-instance needs static members (--static or --mixed)")
    return [Action(FIRST_FAULT_MS, "start_duplicate", rng.choice(static))]


def _slow_member(config: Config, params: Params, rng: random.Random) -> list[Action]:
    victim = rng.randrange(config["members"])
    return [Action(FIRST_FAULT_MS + k * params["every_ms"], "pause", victim, params["pause_ms"])
            for k in range(params["pauses"])]


def _coordinator_restart(config: Config, params: Params, rng: random.Random) -> list[Action]:
    return [Action(FIRST_FAULT_MS, "stop_coordinator"),
            Action(FIRST_FAULT_MS + params["outage_ms"], "start_coordinator")]


def _scenario_defaults(config: Config) -> dict[str, dict[str, int]]:
    session = int(config["session_timeout_ms"])
    heartbeat = int(config["heartbeat_interval_ms"])
    return {
        # Each member in turn is shut down cleanly and restarted `down_ms` later (less than the session).
        "rolling-bounce": {"down_ms": session // 2, "interval_ms": session},
        # One member dies without a word and restarts before its session runs out...
        "crash": {"down_ms": session // 2},
        # ...or after it has run out.
        "crash-longer-than-session": {"down_ms": session + 5000},
        # A second process starts with the group.instance.id of a running one (a zombie deployment).
        "duplicate-instance": {},
        # One member stalls completely (a stop-the-world pause) a few times; a pause shorter than
        # session - heartbeat interval can never cost it its session.
        "slow-member": {"pause_ms": session - heartbeat - 1000, "pauses": 3, "every_ms": 2 * session},
        # The streaming job is down for longer than the session timeout; requests wait in the log and the
        # restarted job (same state, as from its checkpoint) re-sends its last `redeliver` responses.
        "coordinator-restart": {"outage_ms": session + 5000, "redeliver": 5},
    }


_BUILDERS: dict[str, Callable[[Config, Params, random.Random], list[Action]]] = {
    "rolling-bounce": _rolling_bounce,
    "crash": _crash,
    "crash-longer-than-session": _crash,
    "duplicate-instance": _duplicate_instance,
    "slow-member": _slow_member,
    "coordinator-restart": _coordinator_restart,
}
SCENARIOS = tuple(_BUILDERS)


def config_overrides(items: Sequence[str]) -> dict[str, Any]:
    """Config entries from `KEY=VALUE` strings (the value as JSON, else as a string); `params.NAME` and
    `coordinator_config.KEY` set one entry of those maps."""
    config: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ChaosConfigError(f"expected KEY=VALUE, got {item!r}")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        section, dot, name = key.partition(".")
        if dot and section in ("params", "coordinator_config"):
            config.setdefault(section, {})[name] = value
        elif key in DEFAULT_CONFIG:
            config[key] = value
        else:
            raise ChaosConfigError(f"unknown chaos config key {key!r}")
    return config


def normalize_config(config: Config) -> dict[str, Any]:
    """The full configuration of a run: defaults filled in, checked, scenario parameters included."""
    unknown = set(config) - set(DEFAULT_CONFIG)
    if unknown:
        raise ChaosConfigError(f"unknown chaos config keys: {sorted(unknown)}")
    backend = config.get("engine", DEFAULT_CONFIG["engine"])
    if backend not in BACKENDS:
        raise ChaosConfigError(f"engine must be one of {list(BACKENDS)}, got {backend!r}")
    full = {**DEFAULT_CONFIG, **BACKEND_DEFAULTS[backend], **config}
    if full["scenario"] not in _BUILDERS:
        raise ChaosConfigError(f"scenario must be one of {list(SCENARIOS)}, got {full['scenario']!r}")
    if full["group_type"] not in GROUP_TYPES:
        raise ChaosConfigError(f"group_type must be one of {list(GROUP_TYPES)}, got {full['group_type']!r}")
    if full["membership"] not in MEMBERSHIPS:
        raise ChaosConfigError(f"membership must be one of {list(MEMBERSHIPS)}, got {full['membership']!r}")
    if not isinstance(full["members"], int) or full["members"] < 1:
        raise ChaosConfigError("members must be a positive integer")
    if full["commit_interval_ms"] is not None and (not isinstance(full["commit_interval_ms"], int)
                                                   or full["commit_interval_ms"] < 1):
        raise ChaosConfigError("commit_interval_ms must be a positive integer, or null for no offsets")
    if not isinstance(full["record_interval_ms"], int) or full["record_interval_ms"] < 1:
        raise ChaosConfigError("record_interval_ms must be a positive integer")
    if full["topics"] is None:
        full["topics"] = {"events": 3 * full["members"]}
    if full["group_type"] == "streams":
        full["commit_interval_ms"] = None
        full["coordinator_config"] = {
            **STREAMS_COORDINATOR_DEFAULTS,
            "group.streams.session.timeout.ms": full["session_timeout_ms"],
            "group.streams.heartbeat.interval.ms": full["heartbeat_interval_ms"],
            **full["coordinator_config"]}
    else:
        full["coordinator_config"] = {**DEFAULT_CONFIG["coordinator_config"], **full["coordinator_config"]}
    defaults = _scenario_defaults(full)[full["scenario"]]
    extra = set(full["params"]) - set(defaults)
    if extra:
        raise ChaosConfigError(f"{full['scenario']} takes no parameters {sorted(extra)}")
    full["params"] = {**defaults, **full["params"]}
    return full


def build_actions(config: Config, rng: random.Random) -> list[Action]:
    """The scenario's faults, in time order (ties keep the builder's order)."""
    actions = _BUILDERS[config["scenario"]](config, config["params"], rng)
    return sorted(actions, key=lambda a: a.at_ms)
