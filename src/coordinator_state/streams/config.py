"""The settings of streams groups: Kafka's `group.streams.*` keys with their defaults (PROTOCOL.md section 10)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config import ConfigError, config_int


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
