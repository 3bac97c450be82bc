"""Request-to-response latency, per API, as a client sees it: from sending a request to reading its answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coordinator_state import ResponseKey, response_key


class LatencyLog:
    """Send and answer times of requests keyed by (reply_to, correlation_id); a repeated answer is not counted."""

    def __init__(self) -> None:
        self._sent: dict[ResponseKey, tuple[str, int]] = {}
        self.samples: dict[str, list[int]] = {}

    def sent(self, request: Mapping[str, Any], now_ms: int) -> None:
        key = response_key(request)
        if key is not None:  # else it is never answered
            self._sent[key] = (str(request.get("api")), now_ms)

    def answered(self, response: Mapping[str, Any], now_ms: int) -> None:
        key = response_key(response)
        sent = None if key is None else self._sent.pop(key, None)
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

