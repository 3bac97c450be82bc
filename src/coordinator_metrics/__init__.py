"""What the job's and the gateway's Prometheus metrics share (PROTOCOL.md section 11): the endpoint on
`coordinator.metrics.listen` (`MetricsEndpoint`), the duration buckets, and the group series.

`GroupCensus` folds group snapshots (PROTOCOL.md section 4) into `coordinator_groups{state}` and
`coordinator_rebalances_total` (generation increments: a classic group's `generation_id`, a streams group's
`group_epoch`); the gateway feeds it from its engine or the snapshot topic, the job from the snapshots its
operator writes. Each shell keeps its own series in its own module (`coordinator_job.metrics`,
`kafka_gateway.metrics`); only these modules import prometheus_client.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from coordinator_state import ClassicGroupState

# Section 11's buckets, shared by the gateway's request durations and the job's batch durations.
BUCKETS = (.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60)
# The groups whose snapshot the job's operator wrote, each with its latest (state, generation) (None: removed).
ChangedGroups = dict[str, tuple[str, int] | None]
# Every state a group can be in, so that each state's series exists (at 0) before any group reaches it.
CLASSIC_STATES = tuple(state.value for state in ClassicGroupState)


def epoch_of(snapshot: Mapping[str, Any]) -> int:
    """The generation a snapshot names: a classic group's `generation_id`, a streams group's `group_epoch`."""
    value = snapshot.get("generation_id", snapshot.get("group_epoch", 0))
    return value if isinstance(value, int) else 0


class GroupCensus:
    """Groups by state and generation increments, from the groups' latest (state, generation). Generations only
    grow within a group's life, so the increments seen between two looks are the rebalances in between (a group
    removed and created again between two looks loses its earlier ones)."""

    def __init__(self) -> None:
        self._groups: dict[str, tuple[str, int]] = {}
        self._lock = threading.Lock()
        self.rebalances = 0

    def update(self, changed: ChangedGroups, count: bool = True) -> None:
        """Groups that changed: their (state, generation), None for a removed group; without `count`, their
        generations so far are not counted as rebalances (groups as they were when the counting began)."""
        with self._lock:
            for group_id, now in changed.items():
                before = self._groups.pop(group_id, None)
                if now is None:
                    continue
                self._groups[group_id] = now
                if count:
                    self.rebalances += max(0, now[1] - (before[1] if before is not None else 0))

    def replace(self, groups: Mapping[str, tuple[str, int]]) -> None:
        """Every group there is now (those absent are gone)."""
        with self._lock:
            gone = {group_id: None for group_id in self._groups if group_id not in groups}
        self.update({**gone, **groups})

    def families(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        with self._lock:
            states = Counter(state for state, _ in self._groups.values())
            rebalances = self.rebalances
        groups = GaugeMetricFamily("coordinator_groups", "Groups by state", labels=["state"])
        for state in sorted({*CLASSIC_STATES, *states}):
            groups.add_metric([state], states[state])
        yield groups
        yield CounterMetricFamily("coordinator_rebalances", "Generation increments of every group", rebalances)


def census_entry(snapshot: Mapping[str, Any] | None) -> tuple[str, int] | None:
    """A snapshot (None: a tombstone) as the census keeps it."""
    return None if snapshot is None else (str(snapshot.get("state")), epoch_of(snapshot))


LISTEN_KEY = "coordinator.metrics.listen"


def metrics_address(text: str) -> tuple[str, int]:
    """`coordinator.metrics.listen`'s `HOST:PORT` (`[IPv6]:PORT`; port 0: any free port) as a pair; ValueError
    naming the key when it is not one."""
    host, _, port = text.strip().rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{LISTEN_KEY}: expected HOST:PORT, got {text.strip()!r}")
    return host.strip("[]"), int(port)


class MetricsEndpoint:
    """`GET /metrics` of a registry on a daemon thread (prometheus_client's server) until `close`."""

    def __init__(self, registry: CollectorRegistry, listen: tuple[str, int]) -> None:
        self._server, self._thread = start_http_server(listen[1], listen[0], registry=registry)
        self.host, self.port = listen[0], int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
