"""`coordinator run --demo --demo-clients real`: real Kafka consumers through the gateway, bounced one by one.

Unmodified consumers, kafka-python, librdkafka and (where Java and Maven are present) Java client processes in
turn, each with its group.instance.id, read a topic that a producer keeps filling, through a gateway in front of
the job. Once the group is stable, one member after the other is stopped (SIGTERM: it commits what it read and
closes, without LeaveGroup) and started again at once, well inside its session. With static membership the
coordinator keeps the group as it is: every restarted member gets its partitions back, resumes from its committed
offsets, and nobody else is revoked (0 rebalances). At `stop` the bouncing ends first and the group is
given time to settle (every member assigned, every record read), so the verdict means something.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from kafka_gateway.runner import BackgroundGateway, loopback_gateway

from .real_consumer import LIBRARIES, ConsumerProcess, missing_library

SESSION_TIMEOUT_MS = 20_000  # the job answers timer-decided rebalances seconds late: generous sessions
REBALANCE_TIMEOUT_MS = 30_000
BOUNCE_INTERVAL_S = 8.0
RECORDS_PER_S = 20
STABLE_LIMIT_S = 120.0
SETTLE_LIMIT_S = 40.0


@dataclass
class _Bounce:
    instance: str
    kept: bool
    resumed: bool
    back_after_s: float


@dataclass
class _State:
    members: list[ConsumerProcess] = field(default_factory=list)
    retired: list[ConsumerProcess] = field(default_factory=list)
    bounces: list[_Bounce] = field(default_factory=list)
    stable_at: float | None = None
    produced: int = 0
    phase: str = "starting"
    settled: bool = False  # after the bouncing: every member assigned, partitions covered once, all read
    error: str | None = None


class RealConsumerDemo:
    """A static group of real consumers through a gateway in front of the job `settings` describe."""

    def __init__(self, settings: Mapping[str, Any], members: int = 4, engine: str = "topics",
                 bounce_interval_s: float = BOUNCE_INTERVAL_S, metrics: bool = False) -> None:
        """`metrics`: the gateway serves its metrics on a free loopback port (`metrics_url`)."""
        self.settings = dict(settings)
        self.engine = engine
        self.metrics = metrics
        self.member_count = members
        self.bounce_interval_s = bounce_interval_s
        suffix = secrets.token_hex(4)
        self.group, self.topic = f"demo-real-{suffix}", f"demo-real-{suffix}.data"
        self.partitions = 2 * members
        self.libraries = [library for library in LIBRARIES if missing_library(library) is None]
        self.gateway: BackgroundGateway | None = None
        self._final_counters: dict[str, int] = {}
        self._state = _State()
        self._lock = threading.Lock()
        self._stop_bouncing = threading.Event()
        self._stop_producing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="real-consumer-demo", daemon=True)
        self._producer_thread = threading.Thread(target=self._produce, name="demo-producer", daemon=True)

    # ---- the interface `coordinator run` uses -------------------------------------------------------------

    def start(self) -> RealConsumerDemo:
        self._thread.start()
        return self

    def status(self) -> str:
        with self._lock:
            state = self._state
            error, phase, produced = state.error, state.phase, state.produced
            members, bounces = list(state.members), list(state.bounces)
        if error is not None:
            return f"demo failed: {error}"
        assigned = sum(1 for m in members if m.assignment())
        kept = sum(b.kept for b in bounces)
        return (f"real consumers {self.group}: {phase}, {assigned}/{self.member_count} assigned, "
                f"bounces {len(bounces)} (partitions kept {kept}), rebalances {self._rebalances()}, "
                f"read {len(self._distinct())}/{produced}")

    @property
    def metrics_url(self) -> str | None:
        """Where the gateway's metrics are scraped, once it runs with them."""
        server = self.gateway.server if self.gateway is not None else None
        return None if server is None else server.metrics_url

    def stop(self) -> None:
        """Ends the bouncing, lets the group settle (bounded), then stops consumers, producer and gateway."""
        self._stop_bouncing.set()
        self._thread.join()

    def summary(self) -> dict[str, Any]:
        with self._lock:
            state = self._state
            members, bounces = list(state.members), list(state.bounces)
            produced, error, settled = state.produced, state.error, state.settled
        seen = [record for m in self._all() for record in m.records()]
        duplicates = sum(n - 1 for n in Counter(seen).values() if n > 1)
        counters = self._gateway_counters()
        return {
            "group_id": self.group, "members": self.member_count,
            "libraries": dict(Counter(m.library for m in members)), "bounces": len(bounces),
            "partitions_kept": sum(b.kept for b in bounces), "resumed_from_committed": sum(b.resumed for b in bounces),
            "rejoin_s_max": max((round(b.back_after_s, 2) for b in bounces), default=None),
            "rebalances": self._rebalances(), "records_produced": produced,
            "records_read": len(set(seen)), "records_read_twice": duplicates,
            "consistent": settled and error is None,
            "gateway": {k: counters.get(k, 0) for k in ("requests_coordinator", "coordinator_timeouts",
                                                         "late_answers_dropped")},
            **({"error": error} if error else {}),
        }

    # ---- the run ----------------------------------------------------------------------------------------

    def _run(self) -> None:
        bootstrap = str(self.settings["bootstrap.servers"])
        try:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="demo-admin")
            try:
                admin.create_topics([NewTopic(self.topic, self.partitions, 1)])
            finally:
                admin.close()
            self.gateway = loopback_gateway(bootstrap, self.engine, self.settings, metrics=self.metrics).start()
            self._producer_thread.start()
            with self._lock:
                self._state.members = [self._member(i) for i in range(self.member_count)]
                self._state.phase = "forming"
            self._wait(self._settled, STABLE_LIMIT_S, stop_early=True)
            with self._lock:
                self._state.stable_at = time.time()
                self._state.phase = "bouncing"
            index = 0
            while not self._stop_bouncing.wait(self.bounce_interval_s):
                self._bounce(index % self.member_count)
                index += 1
            with self._lock:
                self._state.phase = "settling"
            self._stop_producing.set()
            self._producer_thread.join()
            self._wait(lambda: self._settled() and len(self._distinct()) >= self._state.produced, SETTLE_LIMIT_S,
                       give_up=True)
            settled = self._settled() and len(self._distinct()) == self._state.produced
            with self._lock:
                self._state.settled = settled
                self._state.phase = "ended"
        except Exception as exc:  # shown by status() and summary(): the job it demonstrates keeps running
            with self._lock:
                self._state.error = repr(exc)
        finally:
            self._stop_producing.set()
            for member in self._all():
                member.stop(10)
            if self.gateway is not None:
                self._final_counters = self._gateway_counters()
                self.gateway.stop()

    def _member(self, index: int) -> ConsumerProcess:
        library = self.libraries[index % len(self.libraries)]
        return ConsumerProcess(library, self.gateway.address if self.gateway else "", self.group, self.topic,
                               f"demo-{index}", session_timeout_ms=SESSION_TIMEOUT_MS,
                               rebalance_timeout_ms=REBALANCE_TIMEOUT_MS, client_id=f"demo-{library}-{index}")

    def _bounce(self, index: int) -> None:
        with self._lock:
            old = self._state.members[index]
        before = old.assignment()
        old.stop()
        committed: dict[int, int] = {}
        for event in list(old.events):
            if event["event"] == "committed":
                committed.update({int(p): o for p, o in event["offsets"].items()})
        new = self._member(index)
        with self._lock:
            self._state.members[index] = new
            self._state.retired.append(old)
        back = new.wait_for(lambda events: any(e["event"] == "assigned" for e in events), STABLE_LIMIT_S)
        assigned = [e for e in new.events if e["event"] == "assigned"]
        back_after = assigned[0]["t"] - new.started if back and assigned else float("inf")
        new.wait_for(lambda events: {p for p, _ in new.records()} >= set(committed), 10)
        first_read: dict[int, int] = {}
        for partition, offset in new.records():
            first_read.setdefault(partition, offset)
        resumed = all(first_read.get(p, offset) == offset for p, offset in committed.items())
        with self._lock:
            self._state.bounces.append(_Bounce(new.instance_id or "", new.assignment() == before, resumed, back_after))

    def _produce(self) -> None:
        producer = KafkaProducer(bootstrap_servers=self.settings["bootstrap.servers"], linger_ms=10)
        try:
            while not self._stop_producing.wait(1 / RECORDS_PER_S):
                with self._lock:
                    sequence = self._state.produced
                    self._state.produced += 1
                producer.send(self.topic, str(sequence).encode(), partition=sequence % self.partitions)
            producer.flush(30)
        finally:
            producer.close()

    # ---- judging ----------------------------------------------------------------------------------------

    def _all(self) -> list[ConsumerProcess]:
        with self._lock:
            return self._state.retired + self._state.members

    def _distinct(self) -> set[tuple[int, int]]:
        return {record for m in self._all() for record in m.records()}

    def _settled(self) -> bool:
        with self._lock:
            assignments = [m.assignment() for m in self._state.members]
        return all(a is not None for a in assignments) and \
            sorted(p for a in assignments for p in a or []) == list(range(self.partitions))

    def _rebalances(self) -> int:
        """Revocations or reassignments after the group first stood, other than a restarted member's first
        assignment: each is a rebalance some member lived through."""
        stable_at = self._state.stable_at
        if stable_at is None:
            return 0
        count = 0
        for member in self._all():
            # A member being stopped revokes its own partitions (librdkafka does at close): not a rebalance.
            until = member.stop_requested or float("inf")
            changes = [e for e in member.events
                       if e["event"] in ("assigned", "revoked") and stable_at < e["t"] < until]
            if member.started > stable_at and changes and changes[0]["event"] == "assigned":
                changes = changes[1:]
            # kafka-python reports an empty revocation before every join: nothing was taken away.
            count += sum(1 for e in changes if e["event"] == "revoked" and e["partitions"])
        return count

    def _wait(self, condition: Any, limit_s: float, stop_early: bool = False, give_up: bool = False) -> None:
        """Waits for `condition`; past `limit_s` raises TimeoutError, or returns when `give_up`."""
        deadline = time.monotonic() + limit_s
        while not condition():
            if time.monotonic() > deadline:
                if give_up:
                    return
                raise TimeoutError(f"not settled within {limit_s:.0f} s")
            if stop_early and self._stop_bouncing.is_set():
                return
            time.sleep(0.2)

    def _gateway_counters(self) -> dict[str, int]:
        if self.gateway is None or self.gateway.server is None:
            return self._final_counters
        server = self.gateway.server
        try:
            return dict(self.gateway.call(lambda: dict(server.gateway.counters)))
        except RuntimeError:  # the gateway has stopped: its last counters
            return self._final_counters
