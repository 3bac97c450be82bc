"""What a driver needs to reach a coordinator: `Transport`, implemented over Kafka by `KafkaTransport` (and, in
the chaos harness, by the engine in memory on a simulated clock)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class Transport(Protocol):
    """Carries request envelopes to a coordinator and brings back the responses routed to a `reply_to`."""

    def send(self, request: Mapping[str, Any]) -> None:
        """Hands one request envelope to the coordinator (a Kafka transport produces it keyed by group id)."""

    def receive(self, reply_to: str, timeout_ms: int = 0) -> list[dict[str, Any]]:
        """The responses for `reply_to` that arrived since the last call; waits up to `timeout_ms` for one."""

    def close(self) -> None:
        """Releases what the transport holds."""
