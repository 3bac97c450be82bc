"""The gateway's Prometheus metrics (PROTOCOL.md section 11), served on `coordinator.metrics.listen`.

Two kinds of series. Those the shell moves as things happen: every answered request (`response_sent`, called
by `Gateway` as a response leaves, with the API, the answer's error code and when its frame was read), client
and upstream connections. And those read when Prometheus scrapes: the status line's counters (`Gateway.counters`),
authentication and authorization counts (`Security`), groups by state and rebalances (the coordinator's groups,
folded by `GroupCensus`). A scrape runs on the HTTP server's thread: it copies what it reads in one step each.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client import Counter as CounterMetric
from prometheus_client import Gauge as GaugeMetric
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from coordinator_metrics import BUCKETS, GroupCensus

from .security.units import Security

log = logging.getLogger(__name__)
# The status line's counters (Gateway.counters) as series.
_STATUS_COUNTERS = (
    ("coordinator_gateway_coordinator_timeouts", "Group requests answered COORDINATOR_NOT_AVAILABLE at their bound",
     ("coordinator_timeouts",)),
    ("coordinator_gateway_late_answers", "Coordinator answers that came after their request was answered "
     "COORDINATOR_NOT_AVAILABLE (dropped)", ("late_answers_dropped",)),
    ("coordinator_gateway_unmapped_nodes", "Connections closed on an upstream node id outside the gateway's ports",
     ("closed_UnmappedNode",)),
)


class GroupSource(Protocol):
    """Where the gateway's groups are known (its coordinator)."""

    def group_states(self) -> Mapping[str, tuple[str, int]]: ...


class GatewayMetrics:
    """One gateway's series, in a registry of its own (several gateways may run in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = CounterMetric("coordinator_gateway_requests", "Answered requests",
                                      ("listener", "api", "error_code"), registry=self.registry)
        self.request_duration = Histogram("coordinator_gateway_request_duration_seconds",
                                          "From a request's frame read to its answer written",
                                          ("listener", "api"), buckets=BUCKETS, registry=self.registry)
        self.connections = GaugeMetric("coordinator_gateway_connections", "Open client connections", ("listener",),
                                       registry=self.registry)
        self.upstream_connections = GaugeMetric("coordinator_gateway_upstream_connections",
                                                "Open connections to upstream brokers", ("node_id",),
                                                registry=self.registry)
        self.census = GroupCensus()
        self.tls_failures: Counter[str] = Counter()  # failed TLS handshakes per listener
        # Each label set's series, looked up once (prometheus_client's `labels` costs more than the update).
        self._series: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self._collected = _Collected(self)
        self.registry.register(self._collected)

    def watch(self, counters: Mapping[str, int], security: Security | None, groups: GroupSource) -> None:
        """What a scrape reads: the gateway's counters, the security counts, the coordinator's groups."""
        self._collected.counters, self._collected.security, self._collected.groups = counters, security, groups

    def listener(self, name: str) -> None:
        """A listener exists (its series show 0 before its first connection)."""
        self.connections.labels(name)

    def count_tls_failures(self, listener: str, context: ssl.SSLContext) -> None:
        """Failed TLS handshakes on `listener`'s connections (whose TLS is `context`) count as authentication
        failures of mechanism `TLS`: asyncio's server reports them to no one, so the context's TLS objects do."""
        failures = self.tls_failures

        class CountedHandshake(ssl.SSLObject):
            def do_handshake(self) -> None:
                try:
                    super().do_handshake()
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    raise  # more bytes to come: the handshake goes on
                except ssl.SSLError:
                    failures[listener] += 1
                    raise

        context.sslobject_class = CountedHandshake

    def response_sent(self, listener: str, api: str, error_code: str, received_ms: int) -> None:
        """A response left for a client (`Gateway`'s hook); its request's frame was read at `received_ms`."""
        key = (listener, api, error_code)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = (self.requests.labels(*key), self.request_duration.labels(listener, api))
        series[0].inc()
        series[1].observe(max(0.0, time.time() - received_ms / 1000))


class _Collected(Collector):
    """The series read when scraped."""

    def __init__(self, metrics: GatewayMetrics) -> None:
        self.metrics = metrics
        self.counters: Mapping[str, int] = {}
        self.security: Security | None = None
        self.groups: GroupSource | None = None

    def collect(self) -> Iterable[Any]:
        counters = dict(self.counters)  # one step: the gateway's loop adds to it meanwhile
        for name, help_text, keys in _STATUS_COUNTERS:
            yield CounterMetricFamily(name, help_text, sum(counters.get(key, 0) for key in keys))
        yield CounterMetricFamily("coordinator_gateway_bad_connections",
                                  "Connections closed for what they sent or met (a bad frame, a refused request, "
                                  "a unit's decision, an upstream failure)",
                                  sum(value for key, value in counters.items() if key.startswith("closed_")))
        yield from self._security()
        if self.groups is not None:
            try:
                self.metrics.census.replace(self.groups.group_states())
            except Exception:  # a scrape never fails for it: the last figures are shown
                log.exception("reading the coordinator's groups for the metrics failed")
        yield from self.metrics.census.families()

    def _security(self) -> Iterator[CounterMetricFamily]:
        security = self.security
        successes = Counter(dict(security.authentication_successes)) if security is not None else Counter()
        failures = Counter(dict(security.authentication_failures)) if security is not None else Counter()
        failures.update({(listener, "TLS"): count for listener, count in dict(self.metrics.tls_failures).items()})
        denials = dict(security.authorization_denials) if security is not None else {}
        for kind, counts in (("successes", successes), ("failures", failures)):
            family = CounterMetricFamily(f"coordinator_gateway_authentication_{kind}",
                                         f"SASL logins and TLS handshakes: {kind}", labels=["listener", "mechanism"])
            for (listener, mechanism), value in sorted(counts.items()):
                family.add_metric([listener, mechanism], value)
            yield family
        family = CounterMetricFamily("coordinator_gateway_authorization_denials", "Requests or parts of requests "
                                     "denied by the ACLs", labels=["api", "resource_type", "operation"])
        for labels, value in sorted(denials.items()):
            family.add_metric(list(labels), value)
        yield family
