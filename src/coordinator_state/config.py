"""The engine's configuration: Kafka's group.* keys and the coordinator's own (PROTOCOL.md section 6)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULTS: dict[str, int] = {
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000,
    "group.initial.rebalance.delay.ms": 3000,
    "group.max.size": 2147483647,
    "coordinator.lateness.ms": 2000,
    "coordinator.max.clock.skew.ms": 5000,
    "coordinator.tick.interval.ms": 1000,
    "coordinator.empty.group.retention.ms": 604800000,
    # Offsets (PROTOCOL.md section 8). Kafka expires offsets at a check every
    # offsets.retention.check.interval.ms; the engine expires them at their deadline, so it accepts
    # the key and does not use it.
    "offsets.retention.minutes": 10080,
    "offsets.retention.check.interval.ms": 600000,
    "offset.metadata.max.bytes": 4096,
    # Streams groups (PROTOCOL.md section 10): StreamsConfig.
    "group.streams.session.timeout.ms": 45000,
    "group.streams.heartbeat.interval.ms": 5000,
    "group.streams.max.size": 2147483647,
    "group.streams.num.standby.replicas": 0,
    "group.streams.num.warmup.replicas": 0,
    "group.streams.initial.rebalance.delay.ms": 3000,
    "group.streams.assignment.interval.ms": 1000,
    "group.streams.task.offset.interval.ms": 60000,
    "group.streams.acceptable.recovery.lag": 10000,
}


class ConfigError(ValueError):
    """A configuration value the engine cannot run with."""


def config_int(config: Mapping[str, Any] | None, key: str) -> int:
    """One integer setting of PROTOCOL.md section 6, its default when absent."""
    return _as_int(key, (config or {}).get(key, DEFAULTS[key]))


def _as_int(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{key} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ConfigError(f"{key} must be an integer, got {value!r}")


@dataclass(frozen=True, slots=True)
class StreamsConfig:
    session_timeout_ms: int
    heartbeat_interval_ms: int
    max_size: int
    num_standby_replicas: int
    initial_rebalance_delay_ms: int
    assignment_interval_ms: int
    task_offset_interval_ms: int

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any] | None) -> StreamsConfig:
        """Reads the keys; warm-up replicas are out of scope, so any value but 0 is refused."""
        if config_int(config, "group.streams.num.warmup.replicas") != 0:
            raise ConfigError("group.streams.num.warmup.replicas must be 0: warm-up tasks are not supported")
        built = cls(*(config_int(config, f"group.streams.{key}") for key in (
            "session.timeout.ms", "heartbeat.interval.ms", "max.size", "num.standby.replicas",
            "initial.rebalance.delay.ms", "assignment.interval.ms", "task.offset.interval.ms")))
        for name in ("session_timeout_ms", "heartbeat_interval_ms", "num_standby_replicas",
                     "initial_rebalance_delay_ms", "assignment_interval_ms", "task_offset_interval_ms"):
            if getattr(built, name) < 0:
                raise ConfigError(f"group.streams.{name.replace('_', '.')} must be >= 0")
        if built.max_size < 1:
            raise ConfigError("group.streams.max.size must be >= 1")
        return built


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """The settings that change what the engine answers (all durations in milliseconds)."""

    min_session_timeout_ms: int = DEFAULTS["group.min.session.timeout.ms"]
    max_session_timeout_ms: int = DEFAULTS["group.max.session.timeout.ms"]
    initial_rebalance_delay_ms: int = DEFAULTS["group.initial.rebalance.delay.ms"]
    max_size: int = DEFAULTS["group.max.size"]
    empty_group_retention_ms: int = DEFAULTS["coordinator.empty.group.retention.ms"]
    offsets_retention_ms: int = DEFAULTS["offsets.retention.minutes"] * 60000
    offset_metadata_max_bytes: int = DEFAULTS["offset.metadata.max.bytes"]
    streams: StreamsConfig = field(default_factory=lambda: StreamsConfig.from_mapping(None))

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any] | None) -> EngineConfig:
        """Builds the engine's settings from PROTOCOL.md keys; other keys are not the engine's business."""
        values = dict(DEFAULTS)
        for key, value in (config or {}).items():
            if key in DEFAULTS:
                values[key] = _as_int(key, value)
        built = cls(
            min_session_timeout_ms=values["group.min.session.timeout.ms"],
            max_session_timeout_ms=values["group.max.session.timeout.ms"],
            initial_rebalance_delay_ms=values["group.initial.rebalance.delay.ms"],
            max_size=values["group.max.size"],
            empty_group_retention_ms=values["coordinator.empty.group.retention.ms"],
            offsets_retention_ms=values["offsets.retention.minutes"] * 60000,
            offset_metadata_max_bytes=values["offset.metadata.max.bytes"],
            streams=StreamsConfig.from_mapping(config),
        )
        for name in ("initial_rebalance_delay_ms", "empty_group_retention_ms", "offsets_retention_ms",
                     "offset_metadata_max_bytes"):
            if getattr(built, name) < 0:
                raise ConfigError(f"{name} must be >= 0")
        if built.max_size < 1:
            raise ConfigError("group.max.size must be >= 1")
        return built
