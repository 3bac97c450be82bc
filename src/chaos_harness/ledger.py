"""What a chaos run observed: who owned which partition when, assignment changes, member states, generations.

Ownership is the clients' view (a member owns partitions from its assignment callback until it revokes,
loses them, crashes or closes), which is what matters to an application: `unassigned_ms` integrates the
partitions nobody owns, `overlap_ms` those owned by more than one process (a zombie before it is fenced).
Only the window from first stability to the end of the run counts. `moves` counts the units (partitions, or a
streams group's active tasks) that an identity took over from another identity, their last owner.

Records: with offsets, every owned partition yields records to its owner, which processes them from its
position (the committed offset it fetched) on; `records_processed_twice` counts the records processed
again after someone had processed them already (a process that died before committing its progress, a
zombie still processing what its successor owns), over the whole run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from coordinator_state.consumer_protocol import TopicPartition

ProcessKey = tuple[int, int]  # (member slot, incarnation)


@dataclass(slots=True)
class Segment:
    """A span of one process's life in one member state (`end_ms` None while it lasts)."""

    process: ProcessKey
    state: str
    start_ms: int
    end_ms: int | None = None


@dataclass(slots=True)
class Ledger:
    """Accumulates the run's observations; times are absolute simulated milliseconds."""

    partitions: tuple[TopicPartition, ...]
    window_start_ms: int | None = None  # first stability
    window_end_ms: int | None = None  # end of the run
    unassigned_ms: int = 0
    overlap_ms: int = 0
    assignment_changes: int = 0
    moves: int = 0
    segments: list[Segment] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # assignment changes, crashes, fencing...
    generations: list[dict[str, Any]] = field(default_factory=list)
    unowned_series: list[tuple[int, int]] = field(default_factory=list)  # (from ms, partitions nobody owns)
    _owners: dict[TopicPartition, set[ProcessKey]] = field(default_factory=dict)
    _held: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)  # identity -> last assignment
    _last_owner: dict[TopicPartition, str] = field(default_factory=dict)  # unit -> the identity that last got it
    _open: dict[ProcessKey, Segment] = field(default_factory=dict)
    _clock_ms: int | None = None
    records_processed: int = 0
    records_processed_twice: int = 0
    _processed_up_to: dict[TopicPartition, int] = field(default_factory=dict)  # highest offset processed + 1

    def advance(self, now_ms: int) -> None:
        """Counts the time since the last call with the ownership as it stood."""
        last, self._clock_ms = self._clock_ms, now_ms
        if last is None or self.window_start_ms is None:
            return
        start = max(last, self.window_start_ms)
        end = now_ms if self.window_end_ms is None else min(now_ms, self.window_end_ms)
        if end <= start:
            return
        counts = [len(self._owners.get(tp, ())) for tp in self.partitions]
        unowned = sum(1 for c in counts if c == 0)
        self.unassigned_ms += (end - start) * unowned
        self.overlap_ms += (end - start) * sum(1 for c in counts if c > 1)
        if not self.unowned_series or self.unowned_series[-1][1] != unowned:
            self.unowned_series.append((start, unowned))

    def counting(self, now_ms: int) -> bool:
        """Whether `now_ms` lies in the measured window."""
        return (self.window_start_ms is not None and now_ms >= self.window_start_ms
                and (self.window_end_ms is None or now_ms < self.window_end_ms))

    def assigned(self, process: ProcessKey, identity: str, partitions: frozenset[TopicPartition],
                 now_ms: int) -> None:
        """A process got an assignment; a change for its identity counts once the group was stable."""
        for tp in partitions:
            self._owners.setdefault(tp, set()).add(process)
        before = self._held.get(identity, frozenset())
        self._held[identity] = partitions
        moved: dict[str, int] = {}
        for tp in sorted(partitions):
            previous = self._last_owner.get(tp)
            self._last_owner[tp] = identity
            if previous is not None and previous != identity:
                moved[previous] = moved.get(previous, 0) + 1
        if moved and self.counting(now_ms):
            self.moves += sum(moved.values())
            self.event(now_ms, process, "moved", identity=identity, moved_from=dict(sorted(moved.items())))
        if partitions != before and self.counting(now_ms):
            self.assignment_changes += 1
            self.event(now_ms, process, "assignment_change",
                       identity=identity, gained=len(partitions - before), lost=len(before - partitions))

    def released(self, process: ProcessKey, partitions: Iterable[TopicPartition] | None = None) -> None:
        """A process no longer owns these partitions (all of them when None: it crashed or stopped)."""
        targets = self._owners.keys() if partitions is None else partitions
        for tp in list(targets):
            self._owners.get(tp, set()).discard(process)

    def state(self, process: ProcessKey, state: str | None, now_ms: int) -> None:
        """Records a process's member state (None: the process is gone)."""
        current = self._open.get(process)
        if current is not None and current.state == state:
            return
        if current is not None:
            current.end_ms = now_ms
            del self._open[process]
        if state is not None:
            segment = Segment(process, state, now_ms)
            self.segments.append(segment)
            self._open[process] = segment

    def event(self, now_ms: int, process: ProcessKey | None, kind: str, **details: Any) -> None:
        """Notes something that happened (for the report's timeline and the plot)."""
        self.events.append({"at_ms": now_ms, "member": None if process is None else list(process),
                            "kind": kind, **details})

    def generation(self, now_ms: int, generation_id: int, state: str, members: int) -> None:
        """Notes the group's generation when it changes."""
        if not self.generations or self.generations[-1]["generation_id"] != generation_id:
            self.generations.append({"at_ms": now_ms, "generation_id": generation_id,
                                     "state": state, "members": members})

    def processed(self, partition: TopicPartition, start: int, end: int) -> None:
        """Records [start, end) of `partition` were processed: those below the highest processed so far again."""
        done = self._processed_up_to.get(partition, 0)
        self.records_processed += end - start
        self.records_processed_twice += max(0, min(end, done) - start)
        self._processed_up_to[partition] = max(done, end)

    def owners(self) -> dict[TopicPartition, set[ProcessKey]]:
        """Current owners of every partition."""
        return {tp: set(self._owners.get(tp, ())) for tp in self.partitions}
