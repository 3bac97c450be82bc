"""Chaos harness: real `GroupMember`s against a coordinator, with faults injected, measured in a report.

Theory of operation: the run goes from instant to instant on its `Backend`'s clock. At each instant the
harness applies the faults due, then pumps every live process (poll, send, deliver its responses) until
nobody has anything more to say, then moves to the next instant: the earliest member deadline, tick,
fault or pause end. Phases: warm-up (members start within `start_jitter_ms`) until the group is first
stable (Stable, every member in it, every process stable in the current generation); the scenario's
faults, timed from then; `settle_ms` of quiet; the end of the run, where the figures are taken; then a
drain that keeps the members running until every request has been answered (or `drain_limit_ms`).

On the sim backend (`SimBackend`) this is discrete-event simulation: time jumps from instant to instant,
and everything random comes from one RNG seeded with `seed`, so a config gives one report. On a real-time
backend (`LiveBackend`: the streaming job over Kafka) the harness waits for the next instant, or less
if something arrives; requests are in flight whenever members run, so there the drain first closes every
member (without LeaveGroup) and then waits for the last answers.

With offsets (`commit_interval_ms`), every process consumes what it owns: each partition whose position it
knows yields one record every `record_interval_ms`, processed at the instant it is due; the ledger counts
the records processed more than once (crashes between commits, zombies).

Coordinator restart in simulation: nothing is serialized. The same `LocalCoordinator` stands for the
state restored from the checkpoint; the outage is a pause of the backend during which requests wait in the
request log and no ticks are written, and the restarted job re-delivers its last responses.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import random
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from coordinator_state.consumer_protocol import TopicPartition
from group_client import Assignment, GroupMember, MemberConfig, MemberState, StreamsMember, new_reply_to

from .latency import LatencyLog
from .ledger import Ledger, ProcessKey
from .scenarios import Action, ChaosConfigError, build_actions, normalize_config, slot_ids, slot_name
from .sim import SimBackend

# Passes of the pump at one instant before the harness calls it a livelock.
MAX_PASSES = 100


class HarnessError(RuntimeError):
    """The harness itself failed (not a finding about the coordinator)."""


class Backend(Protocol):
    """The coordinator under test as the members reach it, with the clock the run goes by: `SimBackend` (the
    engine in memory, simulated time) or `LiveBackend` (the streaming job over Kafka, real time)."""

    realtime: bool  # time passes on its own: requests are in flight whenever members run
    duplicates_delivered: int  # responses delivered more than once
    latency: LatencyLog  # request-to-response times as the clients see them

    @property
    def responses(self) -> list[dict[str, Any]]:
        """Every response decided, once each, in decision order (or sorted, where there is no one order)."""

    def send(self, request: Mapping[str, Any]) -> None:
        """Hands one request envelope to the coordinator."""

    def receive(self, reply_to: str, timeout_ms: int = 0) -> list[dict[str, Any]]:
        """The responses for `reply_to` that arrived since the last call."""

    def next_event_ms(self) -> int | None:
        """When the backend itself next has something to do (the sim's next tick), if it knows."""

    def wait_until(self, target_ms: int) -> int:
        """Lets time pass towards `target_ms`; returns the time then (earlier in real time if something arrived)."""

    def describe(self, group_id: str) -> dict[str, Any] | None:
        """The coordinator's latest snapshot of the group."""

    def stop_coordinator(self) -> None:
        """The coordinator goes down; requests wait in the log."""

    def start_coordinator(self, redeliver: int = 0) -> None:
        """The coordinator comes back from its checkpoint (the sim re-delivers its last `redeliver` responses)."""

    def request_count(self) -> int:
        """Requests sent so far."""

    def unanswered(self) -> int:
        """Requests sent and not answered yet."""

    def caught_up(self, sent_before_ms: int) -> bool:
        """Whether the coordinator has dealt with every request sent before `sent_before_ms`."""

    def write_traffic(self, path: str | Path) -> None:
        """Saves the request log, ticks included, as JSON lines."""

    def close(self) -> None:
        """Releases what the backend holds."""


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a run stands, for a live status line."""

    phase: str  # joining | stable | bouncing <ids> | not stable
    generation: int
    stable_members: int  # live processes stable in the group's current generation
    members: int
    rebalances: int  # generations since the group was first stable
    restarts: int  # processes started for a member slot after its first
    unanswered: int


@dataclass(slots=True)
class _Process:
    key: ProcessKey
    member: GroupMember | StreamsMember
    paused_until: int | None = None
    consumed_at: int | None = None  # records up to this time are processed (None: nothing to consume yet)


class ChaosRun:
    """One run: the backend, the processes, the fault queue and the ledger.

    `rng` is the run's one source of randomness (`run_chaos` seeds it from the config and draws the sim's own
    seed from it first).
    """

    def __init__(self, config: dict[str, Any], backend: Backend, rng: random.Random) -> None:
        self.config = config
        self.rng = rng
        self.backend = backend
        self.ledger = Ledger(self._units())
        self.now = config["start_ms"]
        self.processes: dict[ProcessKey, _Process] = {}
        self.incarnations: dict[int, int] = {}
        self.retired: list[GroupMember | StreamsMember] = []
        self.queue: list[tuple[int, int, Action]] = []
        self.scheduled = 0
        self.stable_at: int | None = None
        self.end_at: int | None = None
        self.generation_at: dict[str, int] = {}  # "stable" / "end" -> the group's generation then
        self.epochs_at: dict[str, dict[str, int]] = {}  # "stable" / "end" -> the group's epochs then
        self.notes: list[str] = []

    # ------------------------------------------------------------------ the run

    def run(self, should_stop: Callable[[], bool] = lambda: False, *, repeat: bool = False,
            on_instant: Callable[[], None] | None = None) -> dict[str, Any]:
        """Runs the scenario once (or, with `repeat`, round after round until `should_stop()`) and reports.

        `on_instant` is called after every instant, in the run's thread (a live status reads `progress()`).
        """
        config = self.config
        for slot in range(config["members"]):
            self._schedule(config["start_ms"] + self.rng.randrange(config["start_jitter_ms"] or 1),
                           Action(0, "start", slot))
        warmup_deadline = config["start_ms"] + config["warmup_limit_ms"]
        while True:
            self._instant()
            if on_instant is not None:
                on_instant()
            if self.stable_at is None and self._group_stable():
                self._begin_scenario()
            elif self.stable_at is None and self.now >= warmup_deadline:
                self.notes.append(f"not stable within warmup_limit_ms={config['warmup_limit_ms']}")
                self.end_at = self.now
            if should_stop():
                self.end_at = self.now
                self.queue.clear()
            if self.end_at is not None and self.now >= self.end_at:
                if not repeat or should_stop() or self.stable_at is None:
                    break
                self._schedule_round()
            self._step(self.end_at if self.end_at is not None else warmup_deadline)
        self.ledger.window_end_ms = self.end_at
        self._catch_up()
        self.generation_at["end"] = self._generation()
        self.epochs_at["end"] = self._epochs(self._snapshot())
        final = self._final_state()
        self._drain()
        return self._report(final)

    def _begin_scenario(self) -> None:
        self.stable_at = self.now
        self.generation_at["stable"] = self._generation()
        self.epochs_at["stable"] = self._epochs(self._snapshot())
        self.ledger.window_start_ms = self.now
        self.ledger.advance(self.now)
        self._schedule_round()

    def _schedule_round(self) -> None:
        """The scenario's faults, timed from now; the run (or this round) ends `settle_ms` after the last."""
        actions = build_actions(self.config, self.rng)
        for action in actions:
            self._schedule(self.now + action.at_ms, action)
        last = max((a.at_ms + a.duration_ms for a in actions), default=0)
        self.end_at = self.now + last + self.config["settle_ms"]

    def _catch_up(self) -> None:
        """Keeps the members running until the coordinator has dealt with everything sent by the end (at
        most `drain_limit_ms`), so that the final figures are not a real-time coordinator's backlog."""
        assert self.end_at is not None
        limit = self.now + self.config["drain_limit_ms"]
        while not self.backend.caught_up(self.end_at) and self.now < limit:
            self._step(limit)
            self._instant()

    def _drain(self) -> None:
        limit = self.now + self.config["drain_limit_ms"]
        if self.backend.realtime:
            for proc in self.processes.values():
                proc.member.close(leave_group=False)
        self._instant()
        while self.backend.unanswered() and self.now < limit:
            self._step(limit)
            self._instant()

    def _step(self, horizon: int) -> None:
        """Jumps to the next instant something happens (at most `horizon`)."""
        candidates = [horizon]
        backend_next = self.backend.next_event_ms()
        if backend_next is not None:
            candidates.append(backend_next)
        if self.queue:
            candidates.append(self.queue[0][0])
        for proc in self.processes.values():
            deadline = proc.paused_until if proc.paused_until is not None else proc.member.next_deadline()
            if deadline is not None:
                candidates.append(deadline)
        self.now = max(self.now, self.backend.wait_until(max(min(candidates), self.now + 1)))
        self.ledger.advance(self.now)

    def _instant(self) -> None:
        """Everything at `now`: due faults, pause ends, then the members talk until they are done."""
        while self.queue and self.queue[0][0] <= self.now:
            self._apply(heapq.heappop(self.queue)[2])
        for proc in self.processes.values():
            if proc.paused_until is not None and proc.paused_until <= self.now:
                proc.paused_until = None
        for _ in range(MAX_PASSES):
            busy = False
            for key in sorted(self.processes):
                proc = self.processes[key]
                if proc.paused_until is not None:
                    continue
                requests = proc.member.poll(self.now)
                for request in requests:
                    self.backend.send(request)
                responses = self.backend.receive(proc.member.reply_to)
                for response in responses:
                    proc.member.on_response(response)
                busy = busy or bool(requests or responses)
                self.ledger.state(key, proc.member.state.value, self.now)
            if not busy:
                break
        else:
            raise HarnessError(f"members still busy after {MAX_PASSES} passes at {self.now}")
        self._consume()
        for key in [k for k, p in self.processes.items() if p.member.done]:
            self._retire(key)
        snapshot = self.backend.describe(self.config["group_id"])
        if snapshot is not None:
            self.ledger.generation(self.now, self._epoch_of(snapshot), snapshot["state"], len(snapshot["members"]))

    def _consume(self) -> None:
        """Each live process processes the records due since it last did, on every partition it has a
        position for (one per partition every record_interval_ms), and reports them to its member."""
        interval = self.config["record_interval_ms"]
        for proc in self.processes.values():
            member = proc.member
            if proc.paused_until is not None or member.state is not MemberState.STABLE or not member.positions:
                proc.consumed_at = None
                continue
            if proc.consumed_at is None:
                proc.consumed_at = self.now
                continue
            due = self.now // interval - proc.consumed_at // interval
            proc.consumed_at = self.now
            if due <= 0:
                continue
            for partition, position in sorted(member.positions.items()):
                self.ledger.processed(partition, position, position + due)
                member.consumed(partition, position + due)

    # ------------------------------------------------------------------ faults

    def _schedule(self, at: int, action: Action) -> None:
        self.scheduled += 1
        heapq.heappush(self.queue, (at, self.scheduled, action))

    def _apply(self, action: Action) -> None:
        kind, slot = action.kind, action.member
        if kind == "stop_coordinator":
            self.backend.stop_coordinator()
        elif kind == "start_coordinator":
            self.backend.start_coordinator(redeliver=self.config["params"]["redeliver"])
        elif kind in ("start", "start_duplicate"):
            self._spawn(slot)
        key = None if slot < 0 else self._latest(slot)
        self.ledger.event(self.now, key, kind)
        if kind in ("crash", "close", "pause") and key is None:
            self.notes.append(f"{kind} of member {slot} skipped: no live process")
        elif kind == "crash" and key is not None:
            self._retire(key)
        elif kind == "close" and key is not None:
            self.processes[key].member.close()
        elif kind == "pause" and key is not None:
            self.processes[key].paused_until = self.now + action.duration_ms
            self.ledger.state(key, "paused", self.now)

    def _spawn(self, slot: int) -> None:
        incarnation = self.incarnations.get(slot, -1) + 1
        self.incarnations[slot] = incarnation
        key = (slot, incarnation)
        self.processes[key] = _Process(key, self._new_member(slot, incarnation, key))

    def _new_member(self, slot: int, incarnation: int, key: ProcessKey) -> GroupMember | StreamsMember:
        """A new process's member, reporting what it owns to the ledger."""
        config = self._member_config(slot)
        reply_to = new_reply_to(config.client_id, f"{incarnation}-{self.rng.getrandbits(32):08x}")

        def released(assignment: Assignment) -> None:
            self.ledger.released(key, assignment.partitions)

        return GroupMember(config, reply_to, on_assigned=lambda a: self._assigned(key, a),
                           on_revoked=released, on_lost=released)

    def _assigned(self, key: ProcessKey, assignment: Assignment) -> None:
        member = self.processes[key].member
        self.ledger.assigned(key, self._identity(member), assignment.partitions, self.now)

    def _identity(self, member: Any) -> str:
        """Who owns what a member owns: its group.instance.id, else its member id."""
        return str(member.config.group_instance_id or member.member_id)

    def _retire(self, key: ProcessKey) -> None:
        """The process is gone (crashed, closed or failed): it owns nothing any more."""
        member = self.processes.pop(key).member
        self.retired.append(member)
        self.ledger.released(key)
        self.ledger.state(key, None, self.now)
        if member.fatal_error is not None:
            self.ledger.event(self.now, key, "failed", error=member.fatal_error, identity=self._identity(member))

    def _latest(self, slot: int) -> ProcessKey | None:
        keys = [k for k in self.processes if k[0] == slot]
        return max(keys) if keys else None

    def _member_config(self, slot: int) -> MemberConfig:
        c = self.config
        client_id, instance_id = slot_ids(c, slot)
        return MemberConfig(
            group_id=c["group_id"],
            client_id=client_id,
            topics=tuple(sorted(c["topics"])),
            topic_partitions=c["topics"],
            group_instance_id=instance_id,
            session_timeout_ms=c["session_timeout_ms"],
            heartbeat_interval_ms=c["heartbeat_interval_ms"],
            rebalance_timeout_ms=c["rebalance_timeout_ms"],
            request_timeout_ms=c["request_timeout_ms"],
            retry_backoff_ms=c["retry_backoff_ms"],
            assignors=(c["assignor"],),
            commit_interval_ms=c["commit_interval_ms"],
        )

    # ------------------------------------------------------------------ figures

    def _units(self) -> tuple[TopicPartition, ...]:
        """What members own, whose ownership the ledger follows: the topics' partitions."""
        return tuple(sorted((t, p) for t, n in self.config["topics"].items() for p in range(n)))

    def _snapshot(self) -> dict[str, Any]:
        return self.backend.describe(self.config["group_id"]) or {
            "state": None, "members": [], **dict.fromkeys(self._epochs({}), 0)}

    def _epochs(self, snapshot: Mapping[str, Any]) -> dict[str, int]:
        """The group's epochs in a snapshot (0 when it has none): the classic group's generation."""
        return {"generation_id": int(snapshot.get("generation_id", 0))}

    def _epoch_of(self, snapshot: Mapping[str, Any]) -> int:
        """The epoch a run counts rebalances by (and the ledger's `generations` follow)."""
        return int(snapshot["generation_id"])

    def _settled(self, member: Any, snapshot: Mapping[str, Any]) -> bool:
        """Whether a live member is stable in the group's current generation."""
        return bool(member.state is MemberState.STABLE and member.generation_id == snapshot["generation_id"])

    def _clients_agree(self, snapshot: Mapping[str, Any]) -> bool:
        """The group is Stable, its members are exactly the live processes, each settled in it."""
        live = [p.member for p in self.processes.values()]
        return (snapshot["state"] == "Stable"
                and sorted(m.member_id for m in live) == sorted(m["member_id"] for m in snapshot["members"])
                and all(self._settled(m, snapshot) for m in live))

    def _group_stable(self) -> bool:
        return len(self.processes) == self.config["members"] and self._clients_agree(self._snapshot())

    def _generation(self) -> int:
        return self._epoch_of(self._snapshot())

    def progress(self) -> Progress:
        """Where the run stands now (call it from the run's thread, e.g. in `on_instant`)."""
        snapshot = self._snapshot()
        generation = self._epoch_of(snapshot)
        stable = sorted(k[0] for k, p in self.processes.items() if self._settled(p.member, snapshot))
        if self.stable_at is None:
            phase = "not stable" if self.end_at is not None else "joining"
        else:
            unsettled = [s for s in range(self.config["members"]) if s not in stable]
            phase = "bouncing " + ",".join(slot_name(self.config, s) for s in unsettled) if unsettled else "stable"
        return Progress(phase, generation, len(stable), self.config["members"],
                        generation - self.generation_at.get("stable", generation),
                        sum(self.incarnations.values()), self.backend.unanswered())

    def _final_state(self) -> dict[str, Any]:
        """The group at the end of the run, and whether clients and coordinator agree on it."""
        snapshot = self._snapshot()
        owners = self.ledger.owners()
        orphaned = sum(1 for o in owners.values() if not o)
        shared = sum(1 for o in owners.values() if len(o) > 1)
        return {"state": snapshot["state"], **self._epochs(snapshot),
                "members": len(snapshot["members"]), "live_processes": len(self.processes),
                "orphaned_partitions": orphaned, "shared_partitions": shared,
                "consistent": self._clients_agree(snapshot) and orphaned == 0 and shared == 0}

    def _report(self, final: dict[str, Any]) -> dict[str, Any]:
        start = self.config["start_ms"]
        members = self.retired + [p.member for p in self.processes.values()]
        rebalances = self.generation_at["end"] - self.generation_at.get("stable", self.generation_at["end"])
        errors = Counter(r["body"].get("error", "?") for r in self.backend.responses)
        fenced = [e["identity"] for e in self.ledger.events
                  if e["kind"] == "failed" and e["error"] == "FENCED_INSTANCE_ID"]
        digest = hashlib.sha256()
        for response in self.backend.responses:
            digest.update(json.dumps(response, sort_keys=True, separators=(",", ":")).encode())
        return {
            "config": self.config,
            "stable_at_ms": None if self.stable_at is None else self.stable_at - start,
            "end_at_ms": (self.end_at or self.now) - start,
            "rebalances": rebalances,
            "generations": [{**g, "at_ms": g["at_ms"] - start} for g in self.ledger.generations],
            "assignment_changes": self.ledger.assignment_changes,
            "unassigned_ms": self.ledger.unassigned_ms,
            "overlap_ms": self.ledger.overlap_ms,
            "records_processed": self.ledger.records_processed,
            "records_processed_twice": self.ledger.records_processed_twice,
            "fenced": len(fenced),
            "fenced_members": fenced,
            "requests": self.backend.request_count(),
            "responses": len(self.backend.responses),
            "unanswered": self.backend.unanswered(),
            "errors": dict(sorted(errors.items())),
            "duplicates_delivered": self.backend.duplicates_delivered,
            "latency_ms": self.backend.latency.summary(),
            "responses_dropped": sum(m.stats.dropped for m in members),
            "request_timeouts": sum(m.stats.timeouts for m in members),
            "final": final,
            "responses_sha256": digest.hexdigest(),
            "notes": self.notes + _NOTES + _BACKEND_NOTES[self.config["engine"]],
            "events": [{**e, "at_ms": e["at_ms"] - start} for e in self.ledger.events],
            "segments": [[s.process[0], s.process[1], s.state, s.start_ms - start,
                          None if s.end_ms is None else s.end_ms - start] for s in self.ledger.segments],
            "unowned": [[t - start, n] for t, n in self.ledger.unowned_series],
        }


_NOTES = [
    "times (*at_ms, generations, events, segments) are milliseconds since config.start_ms",
    "the measured window runs from stable_at_ms to end_at_ms; unanswered is counted after the drain",
]
_BACKEND_NOTES = {
    "sim": [
        "coordinator-restart: the same LocalCoordinator stands for the restored checkpoint; the outage queues "
        "requests in the log without ticks, then the job re-delivers its last responses",
        "the simulated network has no latency: a request is answered in the instant it is sent unless parked",
        "responses_sha256: SHA-256 over the responses in decision order, each as compact JSON with sorted keys",
    ],
    "spark": [
        "real time against the streaming job: config.start_ms is the wall clock when the run started; "
        "duplicate_probability is not used (the job's at-least-once sink makes its own duplicates)",
        "generations and the group's state are the job's snapshots read back from the snapshot topic: they lag "
        "the clients by up to a micro-batch",
        "coordinator-restart: the query and its tick writer are stopped mid-run (interrupting the micro-batch in "
        "progress) and started again on the same checkpoint; params.redeliver is not used: what the sink "
        "repeats is counted in duplicates_delivered",
        "unanswered: requests with no response on the response topic once every member was closed (without "
        "LeaveGroup) and the drain ended",
        "responses_sha256: SHA-256 over the distinct responses sorted by their compact JSON with sorted keys "
        "(the response topic's partitions have no one decision order)",
    ],
}


def new_chaos_run(config: dict[str, Any], backend: Backend, rng: random.Random) -> ChaosRun:
    """The run for the config's group type: classic consumers, or Kafka Streams instances."""
    if config["group_type"] == "streams":
        from .streams_run import StreamsChaosRun  # imported here: streams_run builds on this module


        return StreamsChaosRun(config, backend, rng)
    return ChaosRun(config, backend, rng)


def run_chaos(config: Mapping[str, Any], *, traffic: str | Path | None = None) -> dict[str, Any]:
    """Runs one chaos scenario on the simulated backend; the same config (seed included) gives the same report.

    `traffic`, if given, is where the request log (ticks included) is saved as JSON lines for replay.
    `spark_backend.run_chaos_spark` runs a config against the streaming job.
    """
    full = normalize_config(config)
    if full["engine"] != "sim":
        raise ChaosConfigError(f"run_chaos drives the sim backend only, not {full['engine']!r}")
    rng = random.Random(full["seed"])
    backend = SimBackend(
        full["coordinator_config"],
        lateness_ms=full["lateness_ms"],
        start_ms=full["start_ms"],
        tick_interval_ms=full["tick_interval_ms"],
        duplicate_probability=full["duplicate_probability"],
        seed=rng.getrandbits(32),
    )
    report = new_chaos_run(full, backend, rng).run()
    if traffic is not None:
        backend.write_traffic(traffic)
    return report


def write_report(report: Mapping[str, Any], path: str | None) -> None:
    """The report as indented JSON, to `path`, or to standard output when no path is given."""
    text = json.dumps(report, indent=2)
    if path:
        Path(path).write_text(text + "\n", encoding="utf-8")
    else:
        print(text)


def summary(report: Mapping[str, Any]) -> str:
    """One line with the run's headline figures."""
    c = report["config"]
    streams = (f"group_epoch_bumps={report['group_epoch_bumps']} task_movements={report['task_movements']} "
               if "task_movements" in report else "")
    return (f"{c['scenario']} {c['members']} {c['membership']} {c['group_type']} seed={c['seed']}: "
            f"rebalances={report['rebalances']} {streams}assignment_changes={report['assignment_changes']} "
            f"unassigned_ms={report['unassigned_ms']} fenced={report['fenced']} "
            f"processed_twice={report['records_processed_twice']} "
            f"requests={report['requests']} responses={report['responses']} "
            f"unanswered={report['unanswered']} consistent={report['final']['consistent']}")


def describe_progress(progress: Progress) -> str:
    """A short status: phase, generation, members stable, rebalances, restarts, unanswered requests."""
    return (f"{progress.phase}  generation {progress.generation}  stable {progress.stable_members}/"
            f"{progress.members}  rebalances {progress.rebalances}  restarts {progress.restarts}  "
            f"unanswered {progress.unanswered}")
