"""Request-to-response latency, per API, as a client sees it: from sending a request to reading its answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class LatencyLog:
    """Send and answer times of requests keyed by (reply_to, correlation_id); a repeated answer is not counted."""

    def __init__(self) -> None:
        self._sent: dict[tuple[str, int], tuple[str, int]] = {}
        self.samples: dict[str, list[int]] = {}

    def sent(self, request: Mapping[str, Any], now_ms: int) -> None:
        self._sent[_key(request)] = (str(request.get("api")), now_ms)

    def answered(self, response: Mapping[str, Any], now_ms: int) -> None:
        sent = self._sent.pop(_key(response), None)
        if sent is not None:
            self.samples.setdefault(sent[0], []).append(now_ms - sent[1])

    def summary(self) -> dict[str, dict[str, int]]:
        """Per API: count, median, 95th percentile and maximum, in milliseconds."""
        out = {}
        for api, values in sorted(self.samples.items()):
            ordered = sorted(values)
            out[api] = {"count": len(ordered), "p50": ordered[len(ordered) // 2],
                        "p95": ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], "max": ordered[-1]}
        return out


def _key(envelope: Mapping[str, Any]) -> tuple[str, int]:
    return (str(envelope.get("reply_to", envelope.get("client_id", ""))), int(envelope.get("correlation_id", 0)))
