"""`coordinator record`: a topic as JSON lines (PROTOCOL.md section 4a), to replay or to diff.

One line per record:
- a JSON object is written as it is (re-serialised compactly only if it spans several lines);
- an envelope (an object with an `api` field) without `timestamp_ms` gets the record's timestamp,
  exactly as the live job reads it (section 2), so that the file replays to what the job saw;
- a null value with a key (a snapshot tombstone) is `{"group_id": KEY, "tombstone": true}`;
- anything else (not JSON, not an object, no value) is written as it is and counted as bad: a replay
  dead-letters it, as the live job did.

Several partitions are merged deterministically: the next line is the record with the smallest
(record timestamp, partition, offset) among the partitions' next records. A record is written only
once every partition has one waiting (the rest at the end), so the file is a function of the records
read, never of fetch timing, and each partition's own order (so each group's) is kept.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from kafka import TopicPartition

from coordinator_state import Watermark, to_json, tombstone
from coordinator_state.envelope import API, TIMESTAMP_MS

from .broker import READER_FETCH_MAX_WAIT_MS, Consumer, log_end_offsets, wait_for_broker
from .traffic_file import late_requests_note

Progress = Callable[[Counter[str], int], None]
"""Called about twice a second with the counts so far and the number of records waiting to be merged."""

PROGRESS_INTERVAL_S = 0.5
POLL_TIMEOUT_MS = 200


class Fetched(NamedTuple):
    """One record read from the topic: what the merge orders by, and what is written."""

    timestamp: int
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


class TopicMissing(LookupError):
    """The topic does not exist on the broker."""


def positive_seconds(text: str) -> float:
    """argparse type for a duration in seconds greater than zero."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds greater than 0, got {text!r}")
    return value


def record_line(record: Fetched) -> tuple[bytes, str]:
    """The line for one record (no newline) and its kind: object, filled, tombstone or bad."""
    if record.value is None:
        if record.key is None:
            return b"", "bad"
        return to_json(tombstone(record.key.decode("utf-8", "replace"))).encode(), "tombstone"
    try:
        obj = json.loads(record.value.decode("utf-8"))
    except (ValueError, RecursionError):
        return record.value, "bad"
    if type(obj) is not dict:
        return record.value, "bad"
    if API in obj and TIMESTAMP_MS not in obj and record.timestamp >= 0:
        return to_json({**obj, TIMESTAMP_MS: record.timestamp}).encode(), "filled"
    if b"\n" in record.value:
        return to_json(obj).encode(), "object"
    return record.value, "object"


class PartitionMerge:
    """Merges the partitions' record sequences by (timestamp, partition, offset) of their next records."""

    def __init__(self, partitions: Iterable[int]) -> None:
        self.queues: dict[int, deque[Fetched]] = {p: deque() for p in partitions}

    def add(self, records: Iterable[Fetched]) -> None:
        for record in records:
            self.queues[record.partition].append(record)

    def waiting(self) -> int:
        return sum(map(len, self.queues.values()))

    def ready(self) -> Iterator[Fetched]:
        """The records that no later fetch can precede: while every partition has one waiting."""
        while self.queues and all(self.queues.values()):
            yield self._pop()

    def drain(self) -> Iterator[Fetched]:
        """Every record still waiting, at the end of the recording."""
        while any(self.queues.values()):
            yield self._pop()

    def _pop(self) -> Fetched:
        queue = min((q for q in self.queues.values() if q), key=lambda q: (q[0].timestamp, q[0].partition,
                                                                           q[0].offset))
        return queue.popleft()


class TopicRecorder:
    """A group-less consumer on every partition of a topic, positioned at its start or at its end."""

    def __init__(self, bootstrap_servers: str, topic: str, *, from_beginning: bool, lateness_ms: int) -> None:
        self.topic = topic
        self.lateness_ms = lateness_ms  # for counting the late requests written (`late_requests`)
        self.consumer = Consumer(bootstrap_servers=bootstrap_servers, client_id="coordinator-record",
                                 group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
                                 fetch_max_wait_ms=READER_FETCH_MAX_WAIT_MS)
        try:
            self._position(from_beginning)
        except BaseException:
            self.consumer.close()
            raise

    def _position(self, from_beginning: bool) -> None:
        topics = self.consumer.topics()
        if self.topic not in topics:
            known = ", ".join(sorted(t for t in topics if not t.startswith("__"))) or "none"
            raise TopicMissing(f"topic {self.topic!r} does not exist (topics there: {known})")
        # log_end_offsets works around brokers that under-report the end.
        ends = log_end_offsets(self.consumer, self.topic)
        partitions = [TopicPartition(self.topic, int(p)) for p in ends]
        self.consumer.assign(partitions)
        starts = self.consumer.beginning_offsets(partitions) if from_beginning else {
            tp: ends[str(tp.partition)] for tp in partitions}
        for tp in partitions:
            self.consumer.seek(tp, starts[tp])
        self.merge = PartitionMerge(tp.partition for tp in partitions)

    def run(self, out: BinaryIO, until_idle_s: float | None, stop: threading.Event,
            progress: Progress | None = None) -> Counter[str]:
        """Writes lines until `stop` is set or, with `until_idle_s`, that long passes without a record."""
        counts: Counter[str] = Counter()
        watermark = Watermark(self.lateness_ms)
        last_record = last_progress = time.monotonic()
        while not stop.is_set():
            fetched = self.consumer.poll(timeout_ms=POLL_TIMEOUT_MS)
            now = time.monotonic()
            for records in fetched.values():
                self.merge.add(Fetched(r.timestamp, r.partition, r.offset, r.key, r.value) for r in records)
                last_record = now
            self._write(out, self.merge.ready(), counts, watermark)
            if progress is not None and now - last_progress >= PROGRESS_INTERVAL_S:
                progress(counts, self.merge.waiting())
                last_progress = now
            if until_idle_s is not None and now - last_record >= until_idle_s:
                break
        self._write(out, self.merge.drain(), counts, watermark)
        counts["late_requests"] = watermark.late_requests
        return counts

    @staticmethod
    def _write(out: BinaryIO, records: Iterator[Fetched], counts: Counter[str], watermark: Watermark) -> None:
        written = counts["records"]
        for record in records:
            line, kind = record_line(record)
            out.write(line + b"\n")
            counts["records"] += 1
            counts[kind] += 1
            if kind in ("object", "filled"):
                watermark.see_raw(line)
            if kind == "bad" and b"\n" in line:
                counts["bad_multiline"] += 1
        if counts["records"] > written:
            out.flush()

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> TopicRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def add_record_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True, help="the topic to record, e.g. coordinator.requests")
    parser.add_argument("--output", required=True, metavar="FILE.jsonl", help="written from scratch")
    parser.add_argument("--from-beginning", action="store_true",
                        help="start at the first record (default: at the end, recording only new records)")
    parser.add_argument("--until-idle", type=positive_seconds, metavar="SECONDS",
                        help="stop after SECONDS without a new record (default: run until Ctrl-C)")
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="the broker (else bootstrap.servers)")
    parser.add_argument("--connect-timeout", type=positive_seconds, default=15, metavar="SECONDS",
                        help="how long to wait for the broker to answer (default: 15)")


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT and SIGTERM set `stop`, so that the recording ends cleanly, until the block exits."""
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def record_main(args: argparse.Namespace, settings: Mapping[str, Any]) -> int:
    """Runs `coordinator record`: 0 when it recorded to the end (bad records included), 1 when it could not run."""
    bootstrap = str(settings["bootstrap.servers"])
    output = Path(args.output)
    try:
        output.open("ab").close()  # writable? Checked before waiting on the broker, without truncating yet.
    except OSError as exc:
        print(f"cannot write {output}: {exc.strerror}", file=sys.stderr)
        return 1
    try:
        wait_for_broker(bootstrap, timeout_s=args.connect_timeout)
    except TimeoutError:
        print(f"cannot reach a Kafka broker at {bootstrap} within {args.connect_timeout:g} s: start one "
              "(`coordinator broker`, or `docker compose up -d kafka`) or point --bootstrap-servers at a running "
              "broker", file=sys.stderr)
        return 1
    try:
        recorder = TopicRecorder(bootstrap, args.topic, from_beginning=args.from_beginning,
                                 lateness_ms=int(settings["coordinator.lateness.ms"]))
    except TopicMissing as exc:
        print(f"cannot record: {exc} on {bootstrap}", file=sys.stderr)
        return 1
    started = time.monotonic()
    last = {"at": started, "records": 0}

    def progress(counts: Counter[str], waiting: int) -> None:
        now = time.monotonic()
        rate = (counts["records"] - last["records"]) / max(now - last["at"], 1e-9)
        last.update(at=now, records=counts["records"])
        print(f"\r{counts['records']} records written, {rate:.0f}/s, {waiting} waiting for the merge, "
              f"{counts['bad']} bad\033[K", end="", file=sys.stderr, flush=True)

    stop = threading.Event()
    until = f"until {args.until_idle:g} s pass without a record" if args.until_idle else "until Ctrl-C"
    print(f"recording {args.topic} from {'its beginning' if args.from_beginning else 'its end'} to {output}, "
          f"{until}", file=sys.stderr)
    with recorder, output.open("wb") as out, stop_on_signals(stop):
        counts = recorder.run(out, args.until_idle, stop, progress)
    progress(counts, 0)
    print(file=sys.stderr)
    if counts["bad"]:
        split = f", {counts['bad_multiline']} of them spanning several lines" if counts["bad_multiline"] else ""
        print(f"{counts['bad']} bad records (not a JSON object){split}: written as they are, a replay "
              "dead-letters them", file=sys.stderr)
    if note := late_requests_note(counts["late_requests"], int(settings["coordinator.lateness.ms"])):
        print(note, file=sys.stderr)
    print(json.dumps({"topic": args.topic, "records": counts["records"], "bad_records": counts["bad"],
                      "timestamps_filled": counts["filled"], "tombstones": counts["tombstone"],
                      "late_requests": counts["late_requests"], "seconds": round(time.monotonic() - started, 3)}))
    return 0
