"""The parse stage's packs (no Spark session): what the operator gets must be every record, under its group's state
key, each in its group's log order, with the event times and counts the watermark and the metrics are computed
from."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_job.job import invalid_letters, make_parser, records_by_group, unpacked
from coordinator_job.state_buckets import bucket_keys, state_key
from coordinator_lab.traffic_gen import heartbeat_request
from coordinator_state import SIMULATION_EPOCH_MS as EPOCH_MS
from coordinator_state import tick_envelope, to_json

# (kind, group, partition, time): a heartbeat of a group, a tick, or a record that is not JSON.
Record = tuple[str, str, int, int]
RECORDS = st.lists(st.tuples(st.sampled_from(["request", "request", "request", "tick", "invalid"]),
                             st.sampled_from(["a", "b", "c"]), st.integers(0, 2), st.integers(0, 10_000)),
                   max_size=40)


def raw(kind: str, group: str, t: int, correlation_id: int) -> bytes:
    if kind == "tick":
        return to_json(tick_envelope(EPOCH_MS + t)).encode()
    if kind == "invalid":
        return b"not json " + group.encode()
    return to_json(heartbeat_request(group, 0, "m", 1, EPOCH_MS + t, correlation_id, dynamic=True)).encode()


def parse_stage(records: list[Record], arrow_batch_rows: int, buckets: int = 0) -> list[dict[str, Any]]:
    """The records, offsets per partition in order, through the parse stage in Arrow batches of a given size."""
    next_offset = [0, 0, 0]
    columns: dict[str, list[Any]] = {"value": [], "partition": [], "offset": [], "record_ts": []}
    for number, (kind, group, partition, t) in enumerate(records):
        columns["value"].append(raw(kind, group, t, number))
        columns["partition"].append(partition)
        columns["offset"].append(next_offset[partition])
        columns["record_ts"].append(None)
        next_offset[partition] += 1
    batch = pa.RecordBatch.from_pydict(columns, schema=pa.schema([
        ("value", pa.binary()), ("partition", pa.int32()), ("offset", pa.int64()), ("record_ts", pa.int64())]))
    slices = [batch.slice(start, arrow_batch_rows) for start in range(0, max(len(records), 1), arrow_batch_rows)]
    return [row for out in make_parser(None, "file", bucket_keys(buckets, 2))(iter(slices)) for row in out.to_pylist()]


@settings(max_examples=150, deadline=None)
@given(RECORDS, st.integers(1, 15), st.sampled_from([0, 1, 2]))
def test_packs_hold_every_record_in_its_groups_log_order(records: list[Record], arrow_batch_rows: int,
                                                         buckets: int) -> None:
    rows = parse_stage(records, arrow_batch_rows, buckets)
    assert sum(row["count"] for row in rows) == len(records)
    for row in (r for r in rows if r["kind"] == "request"):
        (_, _, group_ids, values, times), = unpacked([row["pack"]])
        assert {state_key(group_id, bucket_keys(buckets, 2)) for group_id in group_ids} == {row["state_key"]}
        assert row["count"] == len(group_ids) == len(values) == len(times)
        assert row["event_ms"] == max(json.loads(value)["timestamp_ms"] for value in values)
    for group in "abc":
        # What both operators do: the key's packs in (partition, first offset) order, by group.
        expected_by_position = [raw(k, g, t, n) for n, (k, g, p, t) in sorted(
            enumerate(records), key=lambda item: item[1][2]) if k == "request" and g == group]
        key = state_key(group, bucket_keys(buckets, 2))
        key_rows = [r for r in rows if r["kind"] == "request" and r["state_key"] == key]
        records_of_group = records_by_group(unpacked(r["pack"] for r in key_rows)).get(group, [])
        assert [value for value, _ in records_of_group] == expected_by_position
    invalid = [r for r in rows if r["kind"] == "invalid"]
    assert all(r["state_key"] is None and r["event_ms"] is None for r in invalid)
    letters = list(invalid_letters(unpacked(r["pack"] for r in invalid)))
    assert len(letters) == sum(r["count"] for r in invalid) == sum(k == "invalid" for k, *_ in records)
    ticks = [r["event_ms"] for r in rows if r["kind"] == "tick"]
    assert sorted(ticks) == sorted(EPOCH_MS + t for k, _, _, t in records if k == "tick")
    # The watermark is computed from the packs' event times: their maximum is the records' maximum.
    request_times = [EPOCH_MS + t for k, _, _, t in records if k == "request"]
    pack_times = [r["event_ms"] for r in rows if r["kind"] == "request"]
    assert max(pack_times, default=None) == max(request_times, default=None)


def test_one_arrow_batch_of_one_partition_gives_one_pack_per_group() -> None:
    records: list[Record] = [("request", "a", 0, 5), ("request", "b", 0, 7), ("invalid", "a", 0, 0),
                             ("request", "a", 0, 3), ("tick", "a", 0, 9), ("invalid", "b", 0, 0)]
    rows = parse_stage(records, 100)
    by_kind = {(r["kind"], r["state_key"]): r for r in rows}
    assert len(rows) == 4
    a = by_kind[("request", "a")]
    (partition, offset, group_ids, values, _), = unpacked([a["pack"]])
    assert group_ids == ["a", "a"]
    assert (partition, offset, a["count"], a["event_ms"]) == (0, 0, 2, EPOCH_MS + 5)
    assert values == [raw("request", "a", 5, 0), raw("request", "a", 3, 3)]
    invalid = by_kind[("invalid", None)]
    (_, offset, letters, _, _), = unpacked([invalid["pack"]])
    assert (offset, invalid["count"], len(letters)) == (2, 2, 2)
    assert by_kind[("tick", None)]["event_ms"] == EPOCH_MS + 9


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50)), unique=True, max_size=12), st.randoms())
def test_a_keys_packs_are_unpacked_in_log_order_whatever_order_they_arrive_in(
        positions: list[tuple[int, int]], shuffler: Any) -> None:
    packs = [pickle.dumps((partition, offset, ["g"], [b"%d/%d" % (partition, offset)], [None]))
             for partition, offset in positions]
    shuffler.shuffle(packs)
    records = records_by_group(unpacked(packs)).get("g", [])
    assert [value for value, _ in records] == [b"%d/%d" % position for position in sorted(positions)]


def test_a_bucket_gets_one_pack_per_arrow_batch_and_partition_holding_all_its_groups() -> None:
    records: list[Record] = [("request", "a", 0, 5), ("request", "b", 0, 7), ("request", "a", 0, 3),
                             ("request", "c", 1, 4)]
    rows = parse_stage(records, 100, buckets=1)
    assert [(r["state_key"], r["count"]) for r in rows] == [(bucket_keys(1, 2)[0], 3), (bucket_keys(1, 2)[0], 1)]
    by_group = records_by_group(unpacked(r["pack"] for r in rows))
    assert {group: [value for value, _ in values] for group, values in by_group.items()} == {
        "a": [raw("request", "a", 5, 0), raw("request", "a", 3, 2)], "b": [raw("request", "b", 7, 1)],
        "c": [raw("request", "c", 4, 3)]}
